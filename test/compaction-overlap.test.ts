/**
 * Overlapped copy-on-write compaction (issue 11): with a worker, the worker copies group N+1 while
 * the main thread publishes group N. The property: the overlap changes no decision — a value that
 * dies or changes while any group of the pass is in flight is never moved back to its old bytes,
 * and nothing live is lost.
 *
 * Method: a real store of many 16 KiB segments (more sources than one output takes, so the pass has
 * several groups and each group's copy overlaps the previous one's publication), compaction on a
 * real piscina worker. While compact() runs, the test overwrites and forgets keys (each only
 * acknowledged writes enter the model) and reads every key it touches; once the pass resolves,
 * every key must read exactly the model, a reopen must too, and verify() must be clean. A second
 * compact() afterwards, and another reopen, must keep all of it. The number of outputs the pass
 * wrote is checked (at least two), so that the overlap is known to have happened.
 */
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { within } from "./helpers/io-faults.js";

const DEADLINE = 60_000;
const KEYS = 9000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
const value = (i: number, round: number): string => `v${i}.${round}:`.padEnd(300, "y");

/** Reads every key of the model and checks it (absent keys must read NOT_FOUND). */
async function checkAll(store: Engram, model: ReadonlyMap<string, string | null>, what: string): Promise<void> {
  for (const [k, v] of model) {
    const r = await store.read(k, { scope: "s" });
    if (v === null) expect(r.status, `${what}: ${k} forgotten`).toBe("NOT_FOUND");
    else expect(r, `${what}: ${k}`).toMatchObject({ value: v });
  }
}

describe("copy-on-write compaction with the next group's copy overlapping this group's publication", () => {
  it("writes and forgets during the pass are never undone; reopen and a second pass agree", async () => {
    const dir = tempDir("compaction-overlap");
    const store = await Engram.open(dir, OPTS);
    const model = new Map<string, string | null>();
    for (let i = 0; i < KEYS; i += 100) {
      const ops = [];
      for (let j = i; j < i + 100; j++) {
        ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: value(j, 0) });
        model.set(`k${j}`, value(j, 0));
      }
      await store.batch(ops);
    }
    const forgets = [];
    for (let i = 0; i < KEYS; i += 3) {
      forgets.push({ op: "forget" as const, scope: "s", key: `k${i}` });
      model.set(`k${i}`, null);
    }
    await store.batch(forgets);
    const sealed = store.stats().segments.filter((s) => s.sealed).length;
    expect(sealed, "more sources than one merged output takes").toBeGreaterThan(64);
    const idsBefore = new Set(store.stats().segments.map((s) => s.id));

    let done = false;
    const pass = store.compact({ mode: "copy-on-write" }).finally(() => {
      done = true;
    });
    let round = 1;
    let changed = 0;
    while (!done && changed < 1200) {
      // Touch keys spread over every source segment, so that some die in groups not yet copied,
      // some in the group being copied, some in the group being published.
      for (let n = 0; n < 40 && !done; n++) {
        const i = (round * 97 + n * 211) % KEYS;
        const k = `k${i}`;
        if ((round + n) % 2 === 0) {
          await store.write(k, value(i, round), { scope: "s" });
          model.set(k, value(i, round));
        } else {
          await store.forget(k, { scope: "s" });
          model.set(k, null);
        }
        changed += 1;
        const r = await store.read(k, { scope: "s" });
        const want = model.get(k);
        if (want === null || want === undefined) expect(r.status, `${k} during the pass`).toBe("NOT_FOUND");
        else expect(r, `${k} during the pass`).toMatchObject({ value: want });
      }
      round += 1;
      // Durability "none" acknowledges without a macrotask: yield one, or the worker's completion
      // message is never delivered while this loop runs.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const report = await within(DEADLINE, pass, "compact");
    console.log(`[compaction-overlap] ${report.segments.length} sources, ${changed} writes and forgets during the pass`);
    expect(changed, "the pass overlapped some writes").toBeGreaterThan(0);
    const outputs = store.stats().segments.filter((s) => !idsBefore.has(s.id) && s.sealed);
    expect(report.segments.length).toBeGreaterThan(64);
    expect(outputs.length, "the pass wrote several outputs (so copies overlapped publications)").toBeGreaterThanOrEqual(2);
    await checkAll(store, model, "after the pass");
    expect((await store.verify()).problems).toEqual([]);
    await store.close();

    const again = await within(DEADLINE, Engram.open(dir, OPTS), "reopen");
    try {
      await checkAll(again, model, "after reopen");
      await within(DEADLINE, again.compact({ mode: "copy-on-write" }), "second pass");
      await checkAll(again, model, "after a second pass");
    } finally {
      await again.close();
    }
    const third = await within(DEADLINE, Engram.open(dir, OPTS), "reopen after the second pass");
    try {
      await checkAll(third, model, "after the second reopen");
      expect((await third.verify()).problems).toEqual([]);
    } finally {
      await third.close();
    }
  });
});
