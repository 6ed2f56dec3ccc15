/**
 * Retention records after GC and restart (issue 9 defects 5 and 6; I6).
 *
 * Method: real stores with tiny segments, tombstoneRetentionMs 0 and a clock that moves one
 * second per call (so every retention window has passed, with no sleeps); segments are compacted
 * one at a time with compact({segments}) so that a CLEAR and the kill it cancels sit in different
 * segments and only one of them is compacted — the order automatic compaction can produce.
 * Defect 5: an undelete must survive GC + restart; before the fix the CLEAR was dropped while the
 * tombstone (or scope erasure) it cancels survived, and under require-clear a plain write threw
 * TOMBSTONED after reopen though it worked before. Defect 6: after forgetScope and new writes in
 * the same scope, 2000 write+forget pairs and gc must leave as few retention records as the same
 * run without the earlier erasure (the twin), and probe must say `absent`, not `reclaimed`.
 */
import { describe, expect, it } from "vitest";
import { Engram, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

function steppingClock(): () => number {
  let t = Date.now();
  return () => (t += 1000);
}

function opts(mode: "copy-on-write" | "in-place", extra: OpenOptions = {}): OpenOptions {
  return { clock: steppingClock(), retention: { tombstoneRetentionMs: 0 }, segmentBytes: 4096, compaction: { mode, workers: 0, auto: false }, ...extra };
}

const FILL = "f".repeat(3800); // a filler fills a segment alone: any record before or after it rotates

/** The id of the segment that holds the last write (the active one). */
function activeId(store: Engram): number {
  return (store.stats().segments.find((s) => !s.sealed) as { id: number }).id;
}

describe.each(["copy-on-write", "in-place"] as const)("defect 5: an undelete survives GC and restart (%s)", (mode) => {
  it("the CLEAR outlives the tombstone it cancels, compacted first", async () => {
    const dir = tempDir("clear");
    const o = opts(mode, { tombstoneWrites: "require-clear" });
    const store = await Engram.open(dir, o);
    await store.write("k", "v1");
    await store.write("fill1", FILL); // rotates: v1 sits alone in segment 1 with nothing else of k
    const valueSeg = 1;
    await store.forget("k");
    const tombSeg = activeId(store);
    await store.write("fill2", FILL);
    await store.undelete("k");
    const clearSeg = activeId(store);
    await store.write("fill3", FILL); // the CLEAR's segment is sealed now
    expect(new Set([valueSeg, tombSeg, clearSeg]).size).toBe(3);
    await store.compact({ segments: [valueSeg] }); // v1 reclaimed: k has no value record left
    await store.compact({ segments: [clearSeg] }); // the tombstone's segment is not compacted
    const before = await store.probe("k");
    await store.close();
    const reopened = await Engram.open(dir, o);
    expect(await reopened.probe("k")).toMatchObject({ state: before.state });
    const w = await reopened.write("k", "v2"); // worked before the restart; must still work
    expect(w.version).toBeGreaterThan(0);
    expect(await reopened.read("k")).toMatchObject({ status: "OK", value: "v2" });
    await reopened.close();
  });

  it("the CLEAR outlives the scope erasure it cancels", async () => {
    const dir = tempDir("clear-erase");
    const o = opts(mode, { tombstoneWrites: "require-clear" });
    const store = await Engram.open(dir, o);
    await store.write("k", "v1", { scope: "user:eve" });
    await store.write("keep", "kept", { scope: "user:eve/session:1" }); // keeps nothing alive: erased too
    await store.write("fill1", FILL);
    await store.forgetScope("user:eve");
    const eraseSeg = activeId(store);
    await store.write("fill2", FILL);
    await store.undelete("k", { scope: "user:eve" });
    const clearSeg = activeId(store);
    await store.write("fill3", FILL);
    expect(eraseSeg).not.toBe(clearSeg);
    await store.compact({ segments: [1] });
    await store.compact({ segments: [clearSeg] });
    await store.close();
    const reopened = await Engram.open(dir, o);
    await reopened.write("k", "v2", { scope: "user:eve" });
    expect(await reopened.read("k", { scope: "user:eve" })).toMatchObject({ status: "OK", value: "v2" });
    await reopened.close();
  });
});

describe.each(["copy-on-write", "in-place"] as const)("defect 6: an erased and reused scope releases forgotten slots (%s)", (mode) => {
  /** Erase (or not) user:alice, reuse it, then 2000 write+forget pairs, gc twice; returns slots and a probe. */
  async function run(eraseFirst: boolean): Promise<{ slots: number; probe: string; reopenedSlots: number }> {
    const dir = tempDir("reuse");
    const o = opts(mode, { segmentBytes: 64 * 1024 });
    const store = await Engram.open(dir, o);
    for (let i = 0; i < 10; i++) await store.write(`old${i}`, `old-${i}`, { scope: "user:alice" });
    if (eraseFirst) await store.forgetScope("user:alice");
    await store.write("live", "still-here", { scope: "user:alice" }); // the scope is reused
    for (let i = 0; i < 2000; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => store.write(`n${i + j}`, `v${i + j}`, { scope: "user:alice" })));
      await Promise.all(Array.from({ length: 100 }, (_, j) => store.forget(`n${i + j}`, { scope: "user:alice" })));
    }
    await store.gc();
    await store.gc();
    const slots = store.stats().slots;
    const probe = (await store.probe("n7", { scope: "user:alice" })).state;
    expect(await store.read("live", { scope: "user:alice" })).toMatchObject({ status: "OK", value: "still-here" });
    await store.close();
    const reopened = await Engram.open(dir, o);
    const reopenedSlots = reopened.stats().slots;
    expect(await reopened.read("live", { scope: "user:alice" })).toMatchObject({ status: "OK", value: "still-here" });
    if (eraseFirst) expect(await reopened.read("old3", { scope: "user:alice" })).toEqual({ status: "NOT_FOUND" });
    else expect(await reopened.read("old3", { scope: "user:alice" })).toMatchObject({ status: "OK", value: "old-3" });
    await reopened.close();
    return { slots, probe, reopenedSlots };
  }

  it("2000 write+forget pairs and gc leave no more retention records than without the erasure", async () => {
    const twin = await run(false);
    expect(twin.probe).toBe("absent");
    const erased = await run(true);
    expect(erased.probe).toBe("absent");
    expect(erased.slots).toBeLessThanOrEqual(twin.slots + 10); // at most the ten erased slots' retention
    expect(erased.slots).toBeLessThan(20);
    expect(erased.reopenedSlots).toBeLessThan(20);
  });
});
