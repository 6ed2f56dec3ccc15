/**
 * Before a walk over every name (a compaction's plan, gc(), a time check), the compactor applies
 * the deferred entries of a store opened from its hints in steps, one turn of the event loop each
 * (engine/compactor.ts loadDeferred, engine/hint-index.ts HintSlots.loadStep), instead of in the
 * one synchronous turn of the walk, which held the main thread ~0.75 s at 1M names. The property:
 * between two steps the keydir is partly loaded, and every read, probe and write there answers
 * exactly as in the same store with every entry applied; the steps end with nothing deferred.
 *
 * How it works: a store of 64 KiB segments holds 18,000 names in three scopes, each name's records
 * spread over several hints — a PUT, then for some an overwrite, a forget (its tombstone in a later
 * segment), an undelete (a CLEAR) and a write after it — ~32,000 entries, which a load applies in
 * steps of ~4,096 (loadStepForTests.entries), by ranges of slot hashes. A copy opened with
 * stats() (every entry applied) is the reference. After each step that applied entries a test
 * hook reads an eighth of the names (a different eighth each step) and compares every answer with
 * the reference's; another test writes and forgets names between steps, keeps a model, and
 * compares every name with it after the pass and after a reopen. Another counts the reads a reader
 * in its own turns makes while the pass loads.
 * The twin splits each step by entry numbers instead of slot hashes (loadStepForTests.byEntry):
 * a name's PUT is then applied a step before its tombstone, and the reads between those steps must
 * find forgotten values read back. Three seeds run 150 random writes, forgets, undeletes, reads
 * and (rarely) lazy scope erasures after each applying step, on the store and on a copy opened
 * with every entry applied, and compare every answer, a sixteenth of the names' probes each step,
 * and all reads and probes after both are compacted; their twin (split by entry numbers) must
 * find answers that differ. A hint whose index gives a tombstone another slot hash than its
 * name's (resealed: a writer's bug, not damage) is refused by the load's checks before any step
 * applies anything; its twin (loadStepForTests.trustHashes) applies the name's PUT a step before
 * that tombstone and reads the forgotten value back. A last test closes the store in the middle of
 * a load: the close resolves, and a reopen answers as the reference.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import { Store } from "../engine/store.js";
import { gradualLoadForTests } from "../engine/compactor.js";
import { loadSteps, loadStepForTests, queryHash } from "../engine/hint-index.js";
import { CorruptionError } from "../rules/errors.js";
import { resealHint, sectionsOfV3 } from "./helpers/hint-layout.js";
import type { BatchOp, OpenOptions, ProbeResult, ReadResult } from "../rules/types.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

const SCOPES = ["global", "user:a", "user:a/s"];
const NAMES = 6000;
const NOW = 1_700_000_000_000;
const OPTIONS: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, clock: () => NOW, compaction: { workers: 0, auto: false } };

interface Name {
  scope: string;
  key: string;
  i: number;
}

/** Every (scope, key) of the store. */
function everyName(): Name[] {
  return SCOPES.flatMap((scope) => Array.from({ length: NAMES }, (_, i) => ({ scope, key: `k${i}`, i })));
}

/** Writes the store: the phases of the file's comment, in batches of 100. */
async function build(dir: string): Promise<void> {
  const s = await Store.open(dir, OPTIONS);
  const all = everyName();
  const phase = async (pick: (i: number) => boolean, op: (n: Name) => BatchOp): Promise<void> => {
    const ops = all.filter((n) => pick(n.i)).map(op);
    for (let i = 0; i < ops.length; i += 100) await s.batch(ops.slice(i, i + 100));
  };
  await phase(() => true, (n) => ({ op: "write", key: n.key, value: `v1-${n.scope}-${n.key}`, scope: n.scope }));
  await phase((i) => i % 5 === 1, (n) => ({ op: "write", key: n.key, value: `v2-${n.scope}-${n.key}`, scope: n.scope }));
  await phase((i) => i % 5 === 2 || i % 5 === 3, (n) => ({ op: "forget", key: n.key, scope: n.scope }));
  for (const n of all.filter((x) => x.i % 10 === 3)) await s.undelete(n.key, { scope: n.scope });
  await phase((i) => i % 10 === 8, (n) => ({ op: "write", key: n.key, value: `v3-${n.scope}-${n.key}`, scope: n.scope, clearTombstone: true }));
  expect(s.stats().segments.length).toBeGreaterThan(10);
  await s.close();
}

/** A read's answer as a comparable string. */
function answer(r: ReadResult): string {
  return r.status === "OK" ? `${String(r.value)} v${r.version}` : r.status;
}

/** Every name's read (exactly in its scope), by "scope key". */
function readAll(s: Store): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of everyName()) out.set(`${n.scope} ${n.key}`, answer(s.readSync(n.key, { scope: n.scope, inherit: false })));
  return out;
}

/** The reference answers: a copy of `dir` opened with every entry applied. */
async function referenceOf(dir: string): Promise<Map<string, string>> {
  const copy = tempDir("gradual-load-reference");
  fs.cpSync(dir, copy, { recursive: true });
  const s = await Store.open(copy, OPTIONS);
  s.stats(); // applies every deferred entry
  expect(s.keydir.isDeferred).toBe(false);
  const out = readAll(s);
  await s.close();
  return out;
}

/** A fresh copy of `dir`, opened from its hints (every name deferred). */
async function openedCopy(dir: string): Promise<{ s: Store; copy: string }> {
  const copy = tempDir("gradual-load");
  fs.cpSync(dir, copy, { recursive: true });
  const s = await Store.open(copy, OPTIONS);
  expect(s.keydir.isDeferred).toBe(true);
  return { s, copy };
}

/** The segment ids of the store at `dir` (from its files: stats() would apply every deferred entry). */
function segmentIds(dir: string): number[] {
  return fs
    .readdirSync(`${dir}/segments`)
    .filter((f) => /^\d{8}\.seg$/.test(f))
    .map((f) => Number(f.slice(0, 8)));
}

/**
 * Runs `pass` on a fresh copy, reading an eighth of the names after each step of its load that
 * applied entries (each such step a different eighth) against `want`; returns those steps, the
 * reads that differed, and whether the store was still deferred at every one.
 */
async function readsBetweenSteps(dir: string, want: Map<string, string>, pass: (s: Store, copy: string) => Promise<unknown>): Promise<{ steps: number; wrong: string[]; deferredAtSteps: boolean }> {
  const { s, copy } = await openedCopy(dir);
  const all = everyName();
  let steps = 0;
  let deferredAtSteps = true;
  const wrong: string[] = [];
  let applies = loadSteps.applies;
  gradualLoadForTests.afterStep = () => {
    if (loadSteps.applies === applies) return; // a step that checked tables: nothing applied yet
    applies = loadSteps.applies;
    deferredAtSteps &&= s.keydir.isDeferred;
    for (const n of all) {
      if ((n.i + steps) % 8 !== 0) continue;
      const got = answer(s.readSync(n.key, { scope: n.scope, inherit: false }));
      if (got !== want.get(`${n.scope} ${n.key}`)) wrong.push(`step ${steps}: ${n.scope} ${n.key} read ${got}, want ${want.get(`${n.scope} ${n.key}`)}`);
    }
    steps += 1;
  };
  await pass(s, copy);
  gradualLoadForTests.afterStep = null;
  expect(s.keydir.isDeferred).toBe(false);
  const after = readAll(s);
  for (const [name, got] of after) if (got !== want.get(name)) wrong.push(`after the pass: ${name} read ${got}, want ${want.get(name)}`);
  await s.close();
  return { steps, wrong, deferredAtSteps };
}

/**
 * In the store at `dir` (closed): a forgotten name of "global" whose slot hash lies in the lower
 * half, its tombstone's hash in the later hint holding it set to 0xffffffff (the last step's range:
 * its PUT's range comes first), the hint resealed. Returns the name.
 */
function misfileTombstone(dir: string): Name {
  const hints = fs
    .readdirSync(`${dir}/segments`)
    .filter((f) => /^\d{8}\.hint$/.test(f))
    .sort();
  for (const n of everyName()) {
    if (n.scope !== "global" || n.i % 5 !== 2) continue; // forgotten, never written again
    const { hash } = queryHash(n.scope, n.key);
    if (hash >= 2 ** 31) continue;
    const holding = hints.filter((h) => hashAt(fs.readFileSync(`${dir}/segments/${h}`), hash) >= 0);
    if (holding.length !== 2) continue; // its PUT's hint, then its tombstone's
    const file = `${dir}/segments/${holding[1] as string}`;
    const buf = fs.readFileSync(file);
    buf.writeUInt32LE(0xffffffff, sectionsOfV3(buf).index + 4 * hashAt(buf, hash));
    resealHint(buf);
    fs.writeFileSync(file, buf);
    return n;
  }
  throw new Error("no forgotten name with its PUT and tombstone in two hints");
}

/** The number of the keyed entry of version-3 hint `buf` whose slot hash is `hash`, or -1. */
function hashAt(buf: Buffer, hash: number): number {
  const x = sectionsOfV3(buf);
  expect([3, 4]).toContain(buf[4]); // version 4: version 3 with a boot stamp (a prefix hint)
  for (let i = 0; i < x.keyed; i++) if (buf.readUInt32LE(x.index + 4 * i) === hash) return i;
  return -1;
}

describe("a pass after a hinted open loads the deferred names in steps", () => {
  const dir = tempDir("gradual-load-source");
  let want = new Map<string, string>();
  beforeAll(async () => {
    await build(dir);
    want = await referenceOf(dir);
    expect([...want.values()].filter((a) => a === "NOT_FOUND").length).toBeGreaterThan(NAMES / 2); // forgotten names are in the reference
  }, 120_000);
  beforeEach(() => {
    loadStepForTests.entries = 4096; // ~8 steps of hash ranges over this store's ~32,000 entries
  });
  afterEach(() => {
    gradualLoadForTests.afterStep = null;
    gradualLoadForTests.atOnce = false;
    loadStepForTests.byEntry = false;
    loadStepForTests.entries = 0;
    loadStepForTests.trustHashes = false;
  });

  it("compact(): every read between steps answers as with every entry applied", async () => {
    const r = await readsBetweenSteps(dir, want, (s) => s.compact());
    expect(r.wrong).toEqual([]);
    expect(r.steps).toBeGreaterThanOrEqual(3); // one table check or more, then the ranges of hashes
    expect(r.deferredAtSteps).toBe(true);
  }, 120_000);

  it("gc() and compact({ segments }) load in steps too", async () => {
    const viaGc = await readsBetweenSteps(dir, want, (s) => s.gc());
    expect(viaGc.wrong).toEqual([]);
    expect(viaGc.steps).toBeGreaterThanOrEqual(3);
    const viaIds = await readsBetweenSteps(dir, want, (s, copy) => s.compact({ segments: segmentIds(copy).slice(0, 3) }));
    expect(viaIds.wrong).toEqual([]);
    expect(viaIds.steps).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it("twin: steps split by entry numbers apply a name's PUT before its tombstone, and reads between them read forgotten values", async () => {
    loadStepForTests.byEntry = true;
    const r = await readsBetweenSteps(dir, want, (s) => s.compact());
    expect(r.steps).toBeGreaterThanOrEqual(3);
    expect(r.wrong.filter((w) => w.startsWith("step ") && w.endsWith("want NOT_FOUND")).length).toBeGreaterThan(0);
  }, 120_000);

  it("writes and forgets between steps land as on a store with every entry applied, and after a reopen", async () => {
    const { s, copy } = await openedCopy(dir);
    const model = new Map(want);
    const all = everyName();
    const r = rng(42);
    let steps = 0;
    let between = 0;
    gradualLoadForTests.afterStep = async () => {
      steps += 1;
      for (let j = 0; j < 200; j++) {
        const n = all[Math.floor(r() * all.length)] as Name;
        const name = `${n.scope} ${n.key}`;
        if (r() < 0.5) {
          const w = await s.write(n.key, `w${steps}-${j}`, { scope: n.scope, clearTombstone: true });
          model.set(name, `w${steps}-${j} v${w.version}`);
        } else {
          await s.forget(n.key, { scope: n.scope });
          model.set(name, "NOT_FOUND");
        }
        between += s.keydir.isDeferred ? 1 : 0;
      }
    };
    await s.compact();
    gradualLoadForTests.afterStep = null;
    expect(steps).toBeGreaterThanOrEqual(3);
    expect(between).toBeGreaterThan(0); // some landed while names were still deferred
    expect(readAll(s)).toEqual(model);
    await s.close();
    const reopened = await Store.open(copy, OPTIONS);
    expect(readAll(reopened)).toEqual(model);
    await reopened.close();
  }, 120_000);

  for (const [seed, split] of [
    [7, false],
    [8, false],
    [9, false],
    [7, true],
  ] as const) {
    it(`seed ${seed}: random writes, forgets, undeletes and scope erasures between steps answer as on a store loaded whole${split ? " (twin: steps split by entry numbers, which must differ)" : ""}`, async () => {
      const { s } = await openedCopy(dir);
      const { s: whole } = await openedCopy(dir);
      whole.stats(); // every entry applied: the reference
      expect(whole.keydir.isDeferred).toBe(false);
      loadStepForTests.byEntry = split;
      const all = everyName();
      const r = rng(seed);
      const differ: string[] = [];
      let steps = 0;
      const both = async <T>(f: (x: Store) => Promise<T>): Promise<void> => {
        const [a, b] = await Promise.all([f(s).then(String, (e: unknown) => `error ${String(e)}`), f(whole).then(String, (e: unknown) => `error ${String(e)}`)]);
        if (JSON.stringify(a) !== JSON.stringify(b)) differ.push(`step ${steps}: ${a} against ${b}`);
      };
      let applies = loadSteps.applies;
      gradualLoadForTests.afterStep = async () => {
        if (loadSteps.applies === applies) return; // a step that checked tables: nothing applied yet
        applies = loadSteps.applies;
        steps += 1;
        for (let j = 0; j < 150; j++) {
          const n = all[Math.floor(r() * all.length)] as Name;
          const o = { scope: n.scope };
          // Every random choice is drawn here, once: both stores get the same call.
          const p = r();
          const flag = r() < 0.5;
          const erased = SCOPES[1 + Math.floor(r() * 2)] as string;
          if (p < 0.4) await both((x) => x.write(n.key, `s${seed}-${steps}-${j}`, { ...o, clearTombstone: flag }).then((w) => JSON.stringify(w)));
          else if (p < 0.7) await both((x) => x.forget(n.key, o).then((f) => JSON.stringify(f)));
          else if (p < 0.85) await both((x) => x.undelete(n.key, o).then((u) => JSON.stringify(u)));
          else if (p < 0.995) await both(async (x) => answer(x.readSync(n.key, { ...o, inherit: flag })));
          else await both((x) => x.forgetScope(erased, { reclaim: "lazy" }).then((f) => JSON.stringify(f)));
        }
        for (const n of all) if ((n.i + steps) % 16 === 0) await both((x) => x.probe(n.key, { scope: n.scope }).then((q) => JSON.stringify(q)));
      };
      const passed = await s.compact().then(
        () => null,
        (err: unknown) => err, // the twin's plan may meet a state its assertions refuse (I5)
      );
      gradualLoadForTests.afterStep = null;
      expect(steps).toBeGreaterThanOrEqual(2); // the names these steps read and write are loaded by their lookups: fewer steps apply
      if (split) {
        expect(differ.length).toBeGreaterThan(0); // found between the steps, before the pass's plan
        await s.close();
        await whole.close();
        return;
      }
      expect(passed).toBeNull();
      expect(differ).toEqual([]);
      await whole.compact(); // reclaimed in both: the states compared below include what a pass drops
      expect(readAll(s)).toEqual(readAll(whole));
      const logical = (q: ProbeResult): string => JSON.stringify({ ...q, physicalRecords: null });
      for (const n of all) expect(logical(await s.probe(n.key, { scope: n.scope }))).toBe(logical(await whole.probe(n.key, { scope: n.scope })));
      await s.close();
      await whole.close();
    }, 120_000);
  }

  it("reads run between the steps: the pass yields the event loop during its load (twin: at once, none does)", async () => {
    for (const atOnce of [false, true]) {
      gradualLoadForTests.atOnce = atOnce;
      const { s } = await openedCopy(dir);
      let loadEnded = false;
      let readsWhileLoading = 0;
      // A reader in its own turns (setImmediate), as a server's requests: it reads while the pass loads.
      const reader = (async () => {
        while (!loadEnded) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          if (!s.keydir.isDeferred) break;
          s.readSync("k1", { scope: "global", inherit: false });
          readsWhileLoading += 1;
        }
      })();
      const compacted = s.compact();
      await compacted;
      loadEnded = true;
      await reader;
      // Untimed: the pass reaches its walk without yielding the event loop (no worker, nothing to
      // flush first), so at once the walk loads everything before the reader's first turn; with
      // steps the reader reads after each (14 here, with steps of 4,096 entries).
      if (atOnce) expect(readsWhileLoading).toBe(0);
      else expect(readsWhileLoading).toBeGreaterThanOrEqual(3);
      await s.close();
    }
  }, 120_000);

  it("a tombstone filed under another slot hash is refused before any step applies (twin: trusted, its name is read back)", async () => {
    for (const trust of [false, true]) {
      loadStepForTests.trustHashes = trust;
      const { s: unopened, copy } = await openedCopy(dir);
      await unopened.close();
      const name = misfileTombstone(copy);
      const s = await Store.open(copy, OPTIONS);
      const readBack: string[] = [];
      let applies = loadSteps.applies;
      gradualLoadForTests.afterStep = () => {
        if (loadSteps.applies === applies) return;
        applies = loadSteps.applies;
        const got = answer(s.readSync(name.key, { scope: name.scope, inherit: false }));
        if (got !== "NOT_FOUND") readBack.push(got);
      };
      const outcome = await s.compact().then(
        () => null,
        (err: unknown) => err,
      );
      gradualLoadForTests.afterStep = null;
      if (!trust) {
        expect(outcome).toBeInstanceOf(CorruptionError);
        expect(String(outcome)).toContain("slot hash");
        expect(readBack).toEqual([]); // refused at the checks: no step applied anything
      } else {
        expect(outcome).toBeNull();
        expect(readBack.length).toBeGreaterThan(0); // the forgotten value, between the PUT's step and the tombstone's
      }
      await s.close().catch(() => undefined);
    }
  }, 120_000);

  it("a close in the middle of a load resolves, and a reopen answers as the reference", async () => {
    const { s, copy } = await openedCopy(dir);
    let closing: Promise<void> | null = null;
    gradualLoadForTests.afterStep = () => {
      closing ??= s.close(); // not awaited here: the close waits for the pass, which waits for this hook
    };
    const pass = s.compact().then(
      () => "resolved",
      (err: unknown) => `rejected: ${String(err)}`,
    );
    await pass;
    expect(closing).not.toBeNull();
    await closing;
    gradualLoadForTests.afterStep = null;
    const reopened = await Store.open(copy, OPTIONS);
    expect(readAll(reopened)).toEqual(want);
    await reopened.close();
  }, 120_000);
});
