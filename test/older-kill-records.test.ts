/**
 * An older kill record never outlives the latest one of its slot or scope: a restart reads the
 * latest, as memory does (fifty-fifth session; engine/gc-policy.ts olderKillOnDisk, tombstoneUnder).
 *
 * Method: the keydir points at a slot's latest TOMBSTONE and CLEAR and a scope's latest
 * SCOPE_ERASE only; an older one stays in its segment until that segment is compacted, and a
 * restart replays it. Each case places records in chosen segments — 4 KiB segments, a 5,000-byte
 * write of another key seals one (`rotate`), test/helpers/segment-records.ts reads which record
 * lies where — and compacts single segments (`compact({ segments })`) in the order that lets the
 * latest record's rule run before the older one's segment is touched: values first, then the
 * latest record past the retention window (an injected clock, the default 24 h, no automatic
 * pass). Probe of the slot is taken before a close and after the reopen and must be equal; a read
 * must not bring back a forgotten value; a write made before the restart must be read back after
 * it, with gc() run (phantom write loss); the generation a write gets and safeRewrite's verdict
 * must be the same on either side. Each case's twin sets `unsafeTombstoneForTests.ignoreOlder`
 * (the rule before: the latest went first, the older stayed, and an expired value went while a
 * tombstone of its slot stayed) and must see the restart change what it showed. What the twins
 * found before the fix: a slot absent in memory came back "reclaimed" at its first version with
 * its first tombstone, so safeRewrite wrote before the restart and refused after it; a value
 * written in between got generation 1, at the killed generation of that tombstone, and every
 * compaction plan after the restart threw "I5 violated" (the store could no longer reclaim
 * anything); an expired value over a tombstone in another segment was "reclaimed" at its own
 * version before and tombstoned at the older one after (a plain write refused under
 * require-clear); an older undelete and older erasures (of the same scope, or of a descendant
 * under an ancestor's erasure) rebuilt a slot memory had dropped; and an erasure that listed a
 * slot went while an older tombstone of the slot stayed, which a restart rebuilt the slot from
 * (memory: version 2 not killed; the restart: tombstoned at version 1, a plain write refused).
 * No case found a forgotten value readable again or a written value lost.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram, safeRewrite, type OpenOptions, type ProbeResult } from "../src/index.js";
import { unsafeTombstoneForTests } from "../engine/gc-policy.js";
import { segmentRecords } from "./helpers/segment-records.js";
import { tempDir } from "./helpers/tmp.js";

const RETENTION_MS = 86_400_000;
/** A value past the 4 KiB segment size: written alone in a segment, which it seals. */
const FILLER = "x".repeat(5000);

afterEach(() => {
  unsafeTombstoneForTests.ignoreOlder = false;
});

/** A store with 4 KiB segments under an injected clock, and the moves the cases make on it. */
interface Laid {
  s: Engram;
  dir: string;
  options: OpenOptions;
  /** Seals the active segment: the next record starts a new one. */
  rotate(): Promise<void>;
  /** Moves the clock past the retention window. */
  pass(): void;
  /** Compacts only the segment holding the record labelled `label` ("T s/k 6": segment-records.ts). */
  compactHolding(label: string): Promise<void>;
}

async function laid(name: string, extra: Partial<OpenOptions> = {}): Promise<Laid> {
  const clock = { now: 1_000_000 };
  const options: OpenOptions = { durability: "none", segmentBytes: 4096, clock: () => clock.now, retention: { tombstoneRetentionMs: RETENTION_MS }, compaction: { auto: false, workers: 0 }, ...extra };
  const dir = tempDir(name);
  const s = await Engram.open(dir, options);
  let fillers = 0;
  return {
    s,
    dir,
    options,
    rotate: async () => void (await s.write(`filler${fillers++}`, FILLER)),
    pass: () => void (clock.now += RETENTION_MS + 1),
    compactHolding: async (label) => {
      const found = [...segmentRecords(dir)].find(([, records]) => records.includes(label));
      if (found === undefined) throw new Error(`no segment holds ${label}: ${JSON.stringify([...segmentRecords(dir)])}`);
      await s.compact({ segments: [found[0]] });
    },
  };
}

/** True when some segment holds the record labelled `label`. */
function onDisk(dir: string, label: string): boolean {
  return [...segmentRecords(dir).values()].some((records) => records.includes(label));
}

/** What a case compares across the restart. */
interface Across {
  before: ProbeResult;
  after: ProbeResult;
  reopened: Engram;
}

/** probe(k in `scope`) on `t.s`, then on the store reopened after closing it. */
async function acrossRestart(t: Laid, scope: string): Promise<Across> {
  const before = await t.s.probe("k", { scope });
  await t.s.close();
  const reopened = await Engram.open(t.dir, t.options);
  return { before, after: await reopened.probe("k", { scope }), reopened };
}

/** safeRewrite's verdict: "ok", or the code it threw. */
async function rewriteVerdict(s: Engram, scope: string): Promise<string> {
  return safeRewrite(s, "k", "rewritten", { scope }).then(
    () => "ok",
    (e: unknown) => String((e as { code?: string }).code),
  );
}

/**
 * k in s: v1 (segment of its own), forget T1 (its own), v2 and T2 (one more); v1's segment and
 * v2's are compacted, then, past the window, T2's: T2 is the slot's latest tombstone, with no
 * value left, and T1 lies in a segment no pass touched.
 */
async function olderTombstone(name: string): Promise<Laid> {
  const t = await laid(name);
  await t.s.write("k", "v1", { scope: "s" });
  await t.rotate();
  await t.s.forget("k", { scope: "s" });
  await t.rotate();
  await t.s.write("k", "v2", { scope: "s" });
  await t.s.forget("k", { scope: "s" });
  await t.rotate();
  expect([...segmentRecords(t.dir).values()].filter((r) => r.some((x) => x.includes("s/k")))).toEqual([["P s/k 1"], ["T s/k 3"], ["P s/k 5", "T s/k 6"]]);
  t.pass();
  await t.compactHolding("P s/k 1");
  await t.compactHolding("P s/k 5");
  t.pass();
  await t.compactHolding("T s/k 6");
  return t;
}

describe("an older TOMBSTONE in a segment not compacted", () => {
  it("holds the latest: probe, safeRewrite and a later write's generation are the same across a restart", async () => {
    const t = await olderTombstone("older-tomb");
    expect(onDisk(t.dir, "T s/k 6"), "the latest tombstone stays while the older one is on disk").toBe(true);
    const verdictBefore = await rewriteVerdict(t.s, "s");
    const { before, after, reopened } = await acrossRestart(t, "s");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 5, generation: 2, tombstoneSeq: 6 });
    expect(await rewriteVerdict(reopened, "s")).toBe(verdictBefore);
    expect(verdictBefore).toBe("HALF_RECLAIMED");
    expect(await reopened.read("k", { scope: "s" })).toEqual({ status: "NOT_FOUND" });
    await reopened.close();
  });

  it("a value written before the restart keeps its generation above every kill, and survives gc() after it", async () => {
    const t = await olderTombstone("older-tomb-write");
    const w = await t.s.write("k", "v3", { scope: "s", clearTombstone: true });
    expect(w.generation).toBe(3);
    const { before, after, reopened } = await acrossRestart(t, "s");
    expect(after).toEqual(before);
    t.pass();
    await reopened.gc(); // no "I5 violated": the value's generation is above the kill's
    expect(onDisk(t.dir, "T s/k 3"), "the older tombstone goes at its segment's first pass").toBe(false);
    expect(onDisk(t.dir, "T s/k 6"), "the latest, which held it, at the pass after").toBe(true);
    await reopened.gc();
    expect(onDisk(t.dir, "T s/k 6")).toBe(false);
    expect(await reopened.read("k", { scope: "s" })).toMatchObject({ status: "OK", value: "v3", version: w.version, generation: 3 });
    await reopened.close();
  });

  it("twin: the latest goes first; the slot, absent in memory, comes back at its first kill, and a write in between wedges GC", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const t = await olderTombstone("older-tomb-twin");
    expect(onDisk(t.dir, "T s/k 6")).toBe(false);
    const verdictBefore = await rewriteVerdict(t.s, "s"); // writes "rewritten" at generation 1
    const { before, after, reopened } = await acrossRestart(t, "s");
    expect(verdictBefore).toBe("ok");
    expect(before).toMatchObject({ state: "live", version: 8, generation: 1, tombstoneSeq: null });
    expect(after).toMatchObject({ state: "live", version: 8, generation: 1, tombstoneSeq: 3 });
    t.pass();
    await expect(reopened.gc()).rejects.toThrow(/I5 violated/);
    await reopened.close();
    const fresh = await olderTombstone("older-tomb-twin-probe");
    const again = await acrossRestart(fresh, "s");
    expect(again.before).toMatchObject({ state: "absent", retentionPresent: false });
    expect(again.after).toMatchObject({ state: "reclaimed", version: 1, generation: 1, tombstoneSeq: 3 });
    expect(await rewriteVerdict(again.reopened, "s")).toBe("HALF_RECLAIMED");
    await again.reopened.close();
  });
});

/**
 * k: v1 (own segment), forget T1 (own segment), v2 with a 100 ms TTL (clears T1: generation 2),
 * all under require-clear; v1's segment is compacted, then, past v2's expiry and the window, v2's.
 */
async function expiredOverTombstone(name: string): Promise<{ t: Laid; w2: { version: number } }> {
  const t = await laid(name, { tombstoneWrites: "require-clear" });
  await t.s.write("k", "v1");
  await t.rotate();
  await t.s.forget("k");
  await t.rotate();
  const w2 = await t.s.write("k", "v2", { ttlMs: 100, clearTombstone: true });
  await t.rotate();
  t.pass();
  await t.compactHolding("P global/k 1");
  t.pass();
  await t.compactHolding(`P global/k ${w2.version}`);
  return { t, w2 };
}

/** probe, and whether a plain write is allowed, before a restart and after it. */
async function plainWriteAcross(t: Laid): Promise<{ before: ProbeResult; after: ProbeResult; plainAfter: string }> {
  const { before, after, reopened } = await acrossRestart(t, "global");
  const plainAfter = await reopened.write("k", "v3").then(
    () => "ok",
    (e: unknown) => String((e as { code?: string }).code),
  );
  expect(await reopened.read("k")).toMatchObject(plainAfter === "ok" ? { status: "OK", value: "v3" } : { status: "NOT_FOUND" });
  await reopened.close();
  return { before, after, plainAfter };
}

describe("an expired value over a tombstone in another segment", () => {
  it("stays while the tombstone is on disk: the restart finds the same slot, and a plain write is allowed", async () => {
    const { t, w2 } = await expiredOverTombstone("expired-over-tomb");
    expect(onDisk(t.dir, `P global/k ${w2.version}`)).toBe(true);
    const { before, after, plainAfter } = await plainWriteAcross(t);
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "expired", version: w2.version, generation: 2 });
    expect(plainAfter).toBe("ok");
  });

  it("twin: dropped first, it leaves the tombstone as the slot's record: tombstoned at version 1 after the restart", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const { t, w2 } = await expiredOverTombstone("expired-over-tomb-twin");
    const { before, after, plainAfter } = await plainWriteAcross(t);
    expect(before).toMatchObject({ state: "reclaimed", version: w2.version, generation: 2 });
    expect(after).toMatchObject({ state: "reclaimed", version: 1, generation: 1, tombstoneSeq: 3 });
    expect(plainAfter).toBe("TOMBSTONED");
  });
});

/**
 * k in s: v1, forget, undelete C1 (generation 2) — each in a segment of its own — then v2, forget,
 * undelete C2 (generation 3) in one more. v1's and T1's segments are compacted, then v2's; past
 * the window T2 goes, and at the next pass over its segment C2 would.
 */
async function olderClear(name: string): Promise<Laid> {
  const t = await laid(name);
  await t.s.write("k", "v1", { scope: "s" });
  await t.rotate();
  await t.s.forget("k", { scope: "s" });
  await t.rotate();
  await t.s.undelete("k", { scope: "s" });
  await t.rotate();
  await t.s.write("k", "v2", { scope: "s" });
  await t.s.forget("k", { scope: "s" });
  await t.s.undelete("k", { scope: "s" });
  await t.rotate();
  await t.compactHolding("P s/k 1");
  await t.compactHolding("T s/k 3");
  await t.compactHolding("P s/k 7");
  t.pass();
  await t.compactHolding("T s/k 8");
  await t.compactHolding("C s/k 9");
  return t;
}

describe("an older CLEAR in a segment not compacted", () => {
  it("holds the latest: the slot keeps the latest undelete's generation across a restart, and so does a write", async () => {
    const t = await olderClear("older-clear");
    expect(onDisk(t.dir, "C s/k 9")).toBe(true);
    const { before, after, reopened } = await acrossRestart(t, "s");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "absent", retentionPresent: true, generation: 3, tombstoneSeq: null });
    expect((await reopened.write("k", "v3", { scope: "s" })).generation).toBe(3);
    await reopened.close();
  });

  it("twin: the latest goes first; a slot memory dropped comes back with the older undelete's generation", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const t = await olderClear("older-clear-twin");
    const { before, after, reopened } = await acrossRestart(t, "s");
    await reopened.close();
    expect(before).toMatchObject({ state: "absent", retentionPresent: false, generation: null });
    expect(after).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
  });
});

/**
 * Erasures. Same scope: k in s written (v1), s erased (E1), k written again (v2), s erased (E2),
 * each in a segment of its own; the values' segments are compacted, then, past the window, E2's.
 * Nested: k in a/b written, a/b erased twice (E1, E2 — both list k at version 1), "a" erased
 * (E3, which supersedes E2); k's segment is compacted, then, past the window, E2's and E3's.
 */
async function olderErasure(name: string, nested: boolean): Promise<Laid> {
  const t = await laid(name);
  const scope = nested ? "a/b" : "s";
  await t.s.write("k", "v1", { scope });
  await t.rotate();
  await t.s.forgetScope(scope);
  await t.rotate();
  if (!nested) await t.s.write("k", "v2", { scope });
  await t.rotate();
  await t.s.forgetScope(scope);
  await t.rotate();
  if (nested) {
    await t.s.forgetScope("a");
    await t.rotate();
  }
  await t.compactHolding(`P ${scope}/k 1`);
  if (!nested) await t.compactHolding(`P ${scope}/k 5`);
  t.pass();
  await t.compactHolding(`E ${scope} ${nested ? 6 : 7}`);
  if (nested) await t.compactHolding("E a 8");
  return t;
}

/**
 * k in s: v1, forget T1, v2 (clears T1: generation 2), s erased (E, listing k at v2) — each in a
 * segment of its own, under require-clear; v1's and v2's segments are compacted, then, past the
 * window, E's: T1, older than E, lies in a segment no pass touched.
 */
async function tombstoneUnderErasure(name: string): Promise<Laid> {
  const t = await laid(name, { tombstoneWrites: "require-clear" });
  await t.s.write("k", "v1", { scope: "s" });
  await t.rotate();
  await t.s.forget("k", { scope: "s" });
  await t.rotate();
  await t.s.write("k", "v2", { scope: "s", clearTombstone: true });
  await t.rotate();
  await t.s.forgetScope("s");
  await t.rotate();
  await t.compactHolding("P s/k 1");
  await t.compactHolding("P s/k 5");
  t.pass();
  await t.compactHolding("E s 7");
  return t;
}

/** probe of k in s across a restart, and what a plain write after it does ("ok" or the code). */
async function plainWriteInScope(t: Laid): Promise<{ before: ProbeResult; after: ProbeResult; plainAfter: string }> {
  const { before, after, reopened } = await acrossRestart(t, "s");
  const plainAfter = await reopened.write("k", "v3", { scope: "s" }).then(
    () => "ok",
    (e: unknown) => String((e as { code?: string }).code),
  );
  await reopened.close();
  return { before, after, plainAfter };
}

describe("a tombstone older than an erasure that lists its slot", () => {
  it("holds the erasure: the slot keeps the list's version and the erasure's kill across a restart", async () => {
    const t = await tombstoneUnderErasure("tomb-under-erase");
    expect(onDisk(t.dir, "E s 7") && onDisk(t.dir, "T s/k 3")).toBe(true);
    const { before, after, plainAfter } = await plainWriteInScope(t);
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 5, generation: 2, tombstoneSeq: 7 });
    expect(plainAfter, "the erasure's kill stands: require-clear refuses a plain write, as before the restart").toBe("TOMBSTONED");
  });

  it("twin: the erasure goes first; memory says v2 outlived its kill, a restart rebuilds the slot from the tombstone at version 1", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const t = await tombstoneUnderErasure("tomb-under-erase-twin");
    const { before, after, plainAfter } = await plainWriteInScope(t);
    expect(before).toMatchObject({ state: "reclaimed", version: 5, generation: 2, tombstoneSeq: 3 });
    expect(after).toMatchObject({ state: "reclaimed", version: 1, generation: 1, tombstoneSeq: 3 });
    expect(plainAfter).toBe("TOMBSTONED");
  });
});

describe("an older erasure in a segment not compacted", () => {
  it("of the same scope holds the latest: the slot it lists is the same across a restart and not readable", async () => {
    const t = await olderErasure("older-erase", false);
    expect(onDisk(t.dir, "E s 7")).toBe(true);
    const { before, after, reopened } = await acrossRestart(t, "s");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 5, tombstoneSeq: 7 });
    expect(await reopened.read("k", { scope: "s" })).toEqual({ status: "NOT_FOUND" });
    await reopened.close();
  });

  it("of a descendant holds its newer one, which holds the ancestor's: the slot is the same across a restart", async () => {
    const t = await olderErasure("older-erase-nested", true);
    expect(onDisk(t.dir, "E a/b 6") && onDisk(t.dir, "E a 8")).toBe(true);
    const { before, after, reopened } = await acrossRestart(t, "a/b");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 1, tombstoneSeq: 8 });
    expect(await reopened.read("k", { scope: "a/b" })).toEqual({ status: "NOT_FOUND" });
    await reopened.close();
  });

  it("twin: the latest goes first; a slot memory dropped comes back from the older list", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const same = await olderErasure("older-erase-twin", false);
    const a = await acrossRestart(same, "s");
    await a.reopened.close();
    expect(a.before).toMatchObject({ state: "absent", retentionPresent: false });
    expect(a.after).toMatchObject({ state: "reclaimed", version: 1, tombstoneSeq: 3 });
    const nested = await olderErasure("older-erase-nested-twin", true);
    const b = await acrossRestart(nested, "a/b");
    await b.reopened.close();
    expect(b.before).toMatchObject({ state: "absent", retentionPresent: false });
    expect(b.after).toMatchObject({ state: "reclaimed", version: 1, tombstoneSeq: 3 });
  });
});
