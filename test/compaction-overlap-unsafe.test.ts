/**
 * The unsafe twin of compaction-overlap.test.ts (issue 11): copy-on-write publication moves a
 * keydir pointer onto the output only if it still names the place the plan copied from. The
 * property: with that check, a value overwritten while the pass runs (after its group was
 * planned, before that group is published) keeps its new bytes; with the check switched off
 * (compactor.ts's test switch `unsafeCompactionForTests.relocateUnchecked`), the same script must
 * see some acknowledged overwrite not read back — so the check is what protects.
 *
 * Method: a real store of many 16 KiB segments (more sources than one output takes: several
 * groups, each copy overlapping the previous publication), a real piscina worker. While compact()
 * runs, the test overwrites keys spread over every source segment (only acknowledged writes enter
 * the model). Once the pass resolves it counts the keys that do not read as the model. Safe: none
 * (and none after a reopen). Unsafe: at least one — an acknowledged overwrite that reads an old
 * value, or that the read path's seq check refuses (CorruptionError: its pointer names the old
 * record again) — either way the acknowledged value is not what a read returns.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { unsafeCompactionForTests } from "../engine/compactor.js";
import { tempDir } from "./helpers/tmp.js";
import { within } from "./helpers/io-faults.js";

const DEADLINE = 60_000;
const KEYS = 9000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
const value = (i: number, round: number): string => `v${i}.${round}:`.padEnd(300, "y");

/**
 * Keys that do not read as the model: `stale` read some other value, `failed` threw (the read
 * path's seq check refuses a pointer whose record is not the slot's current version).
 */
async function wrongReads(store: Engram, model: ReadonlyMap<number, number>): Promise<{ wrong: number; stale: number; failed: number }> {
  let stale = 0;
  let failed = 0;
  for (const [i, round] of model) {
    try {
      const r = await store.read(`k${i}`, { scope: "s" });
      if ((r.status === "OK" ? r.value : null) !== value(i, round)) stale += 1;
    } catch {
      failed += 1;
    }
  }
  return { wrong: stale + failed, stale, failed };
}

/** Loads KEYS keys, forgets every third, runs one pass while overwriting keys; returns the store, the model (key → round) and the writes made during the pass. */
async function passWithOverwrites(dir: string): Promise<{ store: Engram; model: Map<number, number>; changed: number }> {
  const store = await Engram.open(dir, OPTS);
  const model = new Map<number, number>();
  for (let i = 0; i < KEYS; i += 100) {
    const ops = [];
    for (let j = i; j < i + 100; j++) {
      ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: value(j, 0) });
      model.set(j, 0);
    }
    await store.batch(ops);
  }
  const forgets = [];
  for (let i = 0; i < KEYS; i += 3) {
    forgets.push({ op: "forget" as const, scope: "s", key: `k${i}` });
    model.delete(i);
  }
  await store.batch(forgets);
  expect(store.stats().segments.filter((s) => s.sealed).length, "more sources than one merged output takes").toBeGreaterThan(64);
  let done = false;
  const pass = store.compact({ mode: "copy-on-write" }).finally(() => {
    done = true;
  });
  let round = 1;
  let changed = 0;
  while (!done && changed < 1200) {
    for (let n = 0; n < 40 && !done; n++) {
      const i = (round * 97 + n * 211) % KEYS;
      if (!model.has(i)) continue; // only keys still live (the forgotten ones stay forgotten)
      await store.write(`k${i}`, value(i, round), { scope: "s" });
      model.set(i, round);
      changed += 1;
    }
    round += 1;
    // Durability "none" acknowledges without a macrotask: yield one so the worker's answer is delivered.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const report = await within(DEADLINE, pass, "compact");
  expect(report.segments.length).toBeGreaterThan(64);
  expect(changed, "the pass overlapped some overwrites").toBeGreaterThan(0);
  return { store, model, changed };
}

describe("copy-on-write publication relocates only what still points at the planned place", () => {
  afterEach(() => {
    unsafeCompactionForTests.relocateUnchecked = false;
  });

  it("with the check: no overwrite made during the pass is undone, before or after a reopen", async () => {
    const dir = tempDir("compaction-overlap-safe");
    const { store, model, changed } = await passWithOverwrites(dir);
    const got = await wrongReads(store, model);
    console.log(`[compaction-overlap-unsafe] safe: ${changed} overwrites during the pass, ${got.wrong} wrong reads`);
    expect(got.wrong).toBe(0);
    expect((await store.verify()).problems).toEqual([]);
    await store.close();
    const again = await within(DEADLINE, Engram.open(dir, OPTS), "reopen");
    try {
      expect((await wrongReads(again, model)).wrong).toBe(0);
    } finally {
      await again.close();
    }
  });

  it("without the check (unsafe twin): some overwrite made during the pass no longer reads back", async () => {
    unsafeCompactionForTests.relocateUnchecked = true;
    const dir = tempDir("compaction-overlap-unsafe");
    const { store, model, changed } = await passWithOverwrites(dir);
    try {
      const got = await wrongReads(store, model);
      console.log(`[compaction-overlap-unsafe] unsafe: ${changed} overwrites during the pass, ${got.wrong} wrong reads (${got.stale} stale values, ${got.failed} refused by the seq check)`);
      expect(got.wrong, "the unchecked relocation moved some overwritten key back to its old bytes").toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });
});
