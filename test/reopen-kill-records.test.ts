/**
 * A restart changes no probe of a slot whose kills are recorded by records of different kinds
 * (tombstone, scope erasure, clear): the fifty-fourth session's three rules.
 *
 * Method: each case is a short deterministic sequence, minimised (by delta debugging over the
 * operations) from a seed of test/reopen-probe-check.test.ts that showed a probe changed by a
 * restart, then written by hand. A store with an injected clock, the default 24 h retention and
 * no automatic pass runs it; probe of the slot is taken before a close and after the reopen, and
 * must be equal, with the values the records on disk carry. Each case's twin turns its rule off
 * (`unsafeTombstoneForTests`, engine/gc-policy.ts) and must see the probe change as it did:
 *
 * - a kill whose TOMBSTONE record went with the value it killed, under an erasure that listed the
 *   slot, stayed in memory and showed as tombstoneSeq after a later write; a restart, finding no
 *   record of it, showed none (tombstoneDropped; twin `keepDroppedKill`; seeds 103–105, 131);
 * - an erasure that lists a slot went while an older erasure of an ancestor scope stayed: when the
 *   older one was made before the slot, memory kept the slot "reclaimed" and a restart found it
 *   absent; when the older one listed an older version, a restart rebuilt the slot at that
 *   version (eraseRecordLive's olderOverlappingErasure; twin `dropOverlapping`; seeds 100, 108,
 *   110, 113, 119, 122, 125, 128);
 * - a slot left with only its CLEAR kept the generation of a PUT and an erasure whose records
 *   went; a restart gave it the CLEAR's (forgetUnnamedKill; twin `keepGeneration`; seed 126).
 *
 * The fifty-sixth session's, from `node scripts/backend-diff.mjs 32 32 150 --reopen` (the engine
 * against PostgreSQL; here engine-only, minimised by hand from the seed's 110 steps): an undelete's
 * CLEAR whose window ended was dropped by the next pass, unless a value was written to its slot
 * first — then that value's record held it (the window stays open while a value record is on disk)
 * for the value's whole life and a window after, the slot "absent" at the CLEAR's older generation
 * once the value went. Whether a pass ran between the window's end and the write decided it; on
 * the engine a reopen's later reclaim time (engine/reclaim-clock.ts) moved that end past the pass
 * PostgreSQL ran, and the two backends answered differently 40 s after the reopen. The cases run
 * the sequence with and without that pass and must end the same (clearSuperseded; twin
 * `keepSupersededClear`).
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram, type OpenOptions, type ProbeResult } from "../src/index.js";
import { unsafeTombstoneForTests } from "../engine/gc-policy.js";
import { segmentRecords } from "./helpers/segment-records.js";
import { tempDir } from "./helpers/tmp.js";

const RETENTION_MS = 86_400_000;

afterEach(() => {
  unsafeTombstoneForTests.keepDroppedKill = false;
  unsafeTombstoneForTests.dropOverlapping = false;
  unsafeTombstoneForTests.keepGeneration = false;
  unsafeTombstoneForTests.keepSupersededClear = false;
});

/** A fresh store under an injected clock; `pass` moves the clock past the retention window. */
async function fresh(name: string): Promise<{ s: Engram; dir: string; options: OpenOptions; pass: () => void }> {
  const clock = { now: 1_000_000 };
  const options: OpenOptions = { durability: "none", clock: () => clock.now, retention: { tombstoneRetentionMs: RETENTION_MS }, compaction: { auto: false, workers: 0 } };
  const dir = tempDir(name);
  const s = await Engram.open(dir, options);
  return { s, dir, options, pass: () => void (clock.now += RETENTION_MS + 1) };
}

/** probe(`key` in `scope`) on `s`, then on the store reopened after closing it; returns the reopened store too. */
async function acrossRestart(s: Engram, dir: string, options: OpenOptions, key: string, scope: string): Promise<{ before: ProbeResult; after: ProbeResult; reopened: Engram }> {
  const before = await s.probe(key, { scope });
  await s.close();
  const reopened = await Engram.open(dir, options);
  const after = await reopened.probe(key, { scope });
  return { before, after, reopened };
}

/** k in a/b written and forgotten, a/b erased eagerly; past the window gc() drops the tombstone; k written again; compact() drops the erasure. */
async function killDroppedThenWritten(name: string): Promise<{ before: ProbeResult; after: ProbeResult }> {
  const { s, dir, options, pass } = await fresh(name);
  await s.write("k", "v1", { scope: "a/b" });
  await s.forget("k", { scope: "a/b" });
  await s.forgetScope("a/b", { reclaim: "eager" });
  pass();
  await s.write("j", "x", { scope: "a/b" });
  await s.write("j", "y", { scope: "a/b" }); // two records of j under the erasure: it stays through the gc
  await s.gc();
  await s.write("k", "v2", { scope: "a/b" });
  await s.compact({ mode: "in-place" });
  const { before, after, reopened } = await acrossRestart(s, dir, options, "k", "a/b");
  await reopened.close();
  return { before, after };
}

describe("a kill whose tombstone record went with the value it killed", () => {
  it("is forgotten with the record: a later write shows no tombstoneSeq, before and after a restart", async () => {
    const { before, after } = await killDroppedThenWritten("kill-dropped");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "live", version: 6, generation: 2, tombstoneSeq: null });
  });

  it("twin: kept in memory, it shows as tombstoneSeq until a restart", async () => {
    unsafeTombstoneForTests.keepDroppedKill = true;
    const { before, after } = await killDroppedThenWritten("kill-dropped-twin");
    expect(before).toMatchObject({ state: "live", version: 6, tombstoneSeq: 2 });
    expect(after).toMatchObject({ state: "live", version: 6, tombstoneSeq: null });
  });
});

/**
 * k in a/c, erased with a/c after "a" was erased (`ancestorFirst`: before k was written, so the
 * older list names nothing of k; else after k's first version, which it names); two records of j
 * in a/b hold a's erasure past the window; gc(). Returns the reopened store, for more passes.
 */
async function newerErasureOverOlder(name: string, ancestorFirst: boolean): Promise<{ before: ProbeResult; after: ProbeResult; reopened: Engram; dir: string; options: OpenOptions }> {
  const { s, dir, options, pass } = await fresh(name);
  if (ancestorFirst) await s.forgetScope("a", { reclaim: "eager" });
  await s.write("k", "v1", { scope: "a/c" });
  if (!ancestorFirst) {
    await s.forgetScope("a");
    await s.write("k", "v2", { scope: "a/c" });
  }
  await s.forgetScope("a/c", { reclaim: "eager" });
  await s.write("j", "x", { scope: "a/b" });
  await s.write("j", "y", { scope: "a/b" });
  pass();
  await s.gc();
  return { ...(await acrossRestart(s, dir, options, "k", "a/c")), dir, options };
}

describe("an erasure that lists a slot, over an older erasure of an ancestor", () => {
  it("stays while the older one does: a slot the older list does not name is the same across a restart, and both go in later passes", async () => {
    const { before, after, reopened, dir, options } = await newerErasureOverOlder("erase-over-older", true);
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 2, generation: 1, tombstoneSeq: 3 });
    // The older erasure goes once j's older record has; the newer one in the pass after it.
    await reopened.gc();
    await reopened.gc();
    await reopened.gc();
    const { before: gone, after: goneAfter, reopened: last } = await acrossRestart(reopened, dir, options, "k", "a/c");
    await last.close();
    expect(goneAfter).toEqual(gone);
    expect(gone).toMatchObject({ state: "absent", retentionPresent: false });
  });

  it("stays while the older one does: a slot the older list names at an older version keeps its own across a restart", async () => {
    const { before, after, reopened } = await newerErasureOverOlder("erase-over-listing", false);
    await reopened.close();
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "reclaimed", version: 3, generation: 2, tombstoneSeq: 4 });
  });

  it("twin: dropped first, a restart finds the slot absent, or at the older list's version", async () => {
    unsafeTombstoneForTests.dropOverlapping = true;
    const first = await newerErasureOverOlder("erase-over-older-twin", true);
    await first.reopened.close();
    expect(first.before).toMatchObject({ state: "reclaimed", version: 2, tombstoneSeq: 1 });
    expect(first.after).toMatchObject({ state: "absent", retentionPresent: false });
    const second = await newerErasureOverOlder("erase-over-listing-twin", false);
    await second.reopened.close();
    expect(second.before).toMatchObject({ state: "reclaimed", version: 3, generation: 2, tombstoneSeq: 2 });
    expect(second.after).toMatchObject({ state: "reclaimed", version: 1, generation: 1, tombstoneSeq: 2 });
  });
});

/**
 * k in a written, forgotten, undeleted (generation 2), erased, written (generation 3), erased
 * again; past the window, gc() twice. Since the fifty-sixth session the later write supersedes the
 * undelete, whose CLEAR then goes with the erasures (the slot is simply absent); `holdClear` keeps
 * it as before (`keepSupersededClear`) to place the slot in the layout forgetUnnamedKill guards:
 * only its CLEAR left, after records of a higher generation went.
 */
async function clearOutlivesGeneration(name: string, holdClear = true): Promise<{ before: ProbeResult; after: ProbeResult }> {
  unsafeTombstoneForTests.keepSupersededClear = holdClear;
  const { s, dir, options, pass } = await fresh(name);
  await s.write("k", "v1", { scope: "a" });
  await s.forget("k", { scope: "a" });
  await s.undelete("k", { scope: "a" });
  await s.forgetScope("a", { reclaim: "eager" });
  const w = await s.write("k", "v2", { scope: "a" });
  expect(w.generation).toBe(3);
  await s.forgetScope("a");
  pass();
  await s.gc();
  await s.gc();
  const { before, after, reopened } = await acrossRestart(s, dir, options, "k", "a");
  await reopened.close();
  return { before, after };
}

describe("a slot left with only its CLEAR", () => {
  it("takes the CLEAR's generation, as a restart does", async () => {
    const { before, after } = await clearOutlivesGeneration("clear-generation");
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "absent", retentionPresent: true, version: null, generation: 2, tombstoneSeq: null });
  });

  it("twin: keeping the generation of the records gone, a restart lowers it", async () => {
    unsafeTombstoneForTests.keepGeneration = true;
    const { before, after } = await clearOutlivesGeneration("clear-generation-twin");
    expect(before).toMatchObject({ state: "absent", generation: 3 });
    expect(after).toMatchObject({ state: "absent", generation: 2 });
  });

  it("is not left at all when the later write superseded its CLEAR: it goes with the erasures", async () => {
    const { before, after } = await clearOutlivesGeneration("clear-generation-superseded", false);
    expect(after).toEqual(before);
    expect(before).toMatchObject({ state: "absent", retentionPresent: false, generation: null });
  });
});

/**
 * k in a written, forgotten and undeleted (its CLEAR, generation 2); past the window gc() drops the
 * value, and the CLEAR's window starts (the tombstone's too); past that window (gc() twice first
 * when `passFirst`: the forget's record, then the CLEAR go) k is written with a 1 s TTL, and past
 * its expiry and a window gc() runs twice. Returns probe of k before and after a restart, and the
 * CLEAR records left on disk.
 */
async function undeleteThenLaterValue(name: string, passFirst: boolean): Promise<{ before: ProbeResult; after: ProbeResult; clears: number }> {
  const { s, dir, options, pass } = await fresh(name);
  await s.write("k", "v1", { scope: "a" });
  await s.forget("k", { scope: "a" });
  await s.undelete("k", { scope: "a" });
  pass();
  await s.gc();
  await s.gc();
  expect(await s.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
  pass();
  if (passFirst) {
    await s.gc(); // the tombstone goes (its window ended too), which held the CLEAR in this pass
    await s.gc(); // the CLEAR goes
    expect(await s.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false });
  }
  await s.write("k", "v2", { scope: "a", ttlMs: 1000 });
  pass();
  pass(); // past the expiry and a window after it
  await s.gc();
  await s.gc();
  const clears = [...segmentRecords(dir).values()].flat().filter((l) => l.startsWith("C a/k ")).length;
  const { before, after, reopened } = await acrossRestart(s, dir, options, "k", "a");
  await reopened.close();
  return { before, after, clears };
}

describe("an undelete whose window ended before a later write (backend-diff --reopen seed 32)", () => {
  it("goes once the later value supersedes it: the slot is gone after the value, whether a pass ran before the write or not", async () => {
    const plain = await undeleteThenLaterValue("clear-superseded", false);
    const passed = await undeleteThenLaterValue("clear-superseded-pass", true);
    expect(plain.after).toEqual(plain.before);
    expect(plain.before).toEqual(passed.before);
    expect(plain.before).toMatchObject({ state: "absent", retentionPresent: false, generation: null });
    expect(plain.clears).toBe(0);
  });

  it("twin: held by the later value, it outlives it by a window: the slot stays absent at the undelete's generation", async () => {
    unsafeTombstoneForTests.keepSupersededClear = true;
    const plain = await undeleteThenLaterValue("clear-superseded-twin", false);
    const passed = await undeleteThenLaterValue("clear-superseded-pass-twin", true);
    expect(passed.before).toMatchObject({ state: "absent", retentionPresent: false });
    expect(plain.before).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
    expect(plain.clears).toBe(1);
  });
});
