/**
 * A compaction worker's warm-up steps never start while its store runs a compaction
 * (engine/warm-up.ts, twenty-fourth session): the compactor counts its running compactions in a
 * shared cell (compactor.ts `passes`), and the worker's schedule looks at it before each step, so
 * no step lands during a pass's plan or between two of its jobs — where it would delay the pass.
 *
 * Method: the schedule is driven with vitest's fake timers (no real time passes) and a step that
 * records whether the count said a compaction ran when it started. A pass that spans several
 * tasks (the count held at 1 across their ends, as between two in-place jobs) must see no step
 * until the count drops; then every step runs, at once. Without a shared count, the older rule
 * holds: WARM_IDLE_MS of idleness first. The twin (`unsafeWarmUpForTests.ignorePasses`) runs
 * steps during the pass, and the same check sees them. Then a real store: its count is 1 while a
 * pass runs (seen from the plan's hook) and 0 after a pass that succeeded and one that failed
 * on an injected EIO — a count left at 1 would stop the warm-up for good. Last, the link between
 * the two: every worker answer carries the count its thread read when the task began, which must
 * be at least 1 (compactor.ts checkPassesSeen counts it in `workerPasses`); the twin makes the
 * pool without the count in its workerData (`unsafeWorkerDataForTests.withoutPasses`), and every
 * answer is then counted as missed and warned once — while the pass itself still succeeds.
 */
import * as fs from "node:fs";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Store } from "../engine/store.js";
import { unsafePlanReuseForTests, unsafeWorkerDataForTests, workerPasses } from "../engine/compactor.js";
import { unsafeWarmUpForTests, WARM_AFTER_TASK_MS, WARM_IDLE_MS, WARM_POLL_MS, WarmUp } from "../engine/warm-up.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";

/** A schedule over `stepsMax` recorded steps, and the count it reads. */
function gated(stepsMax: number, shared: boolean): { warm: WarmUp; passes: Int32Array; started: Array<"idle" | "during-pass"> } {
  const passes = new Int32Array(new SharedArrayBuffer(4));
  const started: Array<"idle" | "during-pass"> = [];
  const warm = new WarmUp(() => {
    started.push(Atomics.load(passes, 0) > 0 ? "during-pass" : "idle");
    return started.length < stepsMax;
  }, shared ? passes : null);
  return { warm, passes, started };
}

/** Three tasks of one pass, the count at 1 throughout, then some time between their ends (fake timers). */
function passOfThreeTasks(warm: WarmUp, passes: Int32Array): void {
  Atomics.store(passes, 0, 1);
  for (let job = 0; job < 3; job++) {
    warm.taskStarted();
    vi.advanceTimersByTime(5);
    warm.taskEnded();
    vi.advanceTimersByTime(4 * WARM_POLL_MS); // the main thread publishes and plans the next job
  }
}

describe("warm-up schedule", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    unsafeWarmUpForTests.ignorePasses = false;
  });

  it("starts no step while the store's count says a compaction runs; runs them all once it drops", () => {
    const { warm, passes, started } = gated(5, true);
    passOfThreeTasks(warm, passes);
    expect(started).toEqual([]);
    expect(warm.counts.deferred).toBeGreaterThan(0);
    Atomics.store(passes, 0, 0);
    vi.advanceTimersByTime(WARM_POLL_MS + 5 * WARM_AFTER_TASK_MS);
    expect(started).toEqual(["idle", "idle", "idle", "idle", "idle"]);
    expect(warm.done).toBe(true);
  });

  it("starts WARM_AFTER_TASK_MS after a task with the count shared and at 0; no step while a task runs", () => {
    const { warm, started } = gated(3, true);
    warm.taskStarted();
    vi.advanceTimersByTime(10 * WARM_IDLE_MS);
    expect(started).toEqual([]);
    warm.taskEnded();
    vi.advanceTimersByTime(WARM_AFTER_TASK_MS);
    expect(started.length).toBeGreaterThan(0);
  });

  it("without a shared count: waits WARM_IDLE_MS after a task", () => {
    const { warm, started } = gated(3, false);
    warm.taskStarted();
    warm.taskEnded();
    vi.advanceTimersByTime(WARM_IDLE_MS - 1);
    expect(started).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(started).toEqual(["idle"]);
  });

  it("twin: with the count ignored, steps start during the pass (caught)", () => {
    unsafeWarmUpForTests.ignorePasses = true;
    const { warm, passes, started } = gated(5, true);
    passOfThreeTasks(warm, passes);
    expect(started).toContain("during-pass");
  });

  it("refuses a count that is not a shared cell, and a task ended twice", () => {
    expect(() => new WarmUp(() => false, new Int32Array(1))).toThrow(RangeError);
    const { warm } = gated(1, true);
    expect(() => warm.taskEnded()).toThrow(RangeError);
  });
});

describe("a store's compaction count", () => {
  let dir: string | undefined;
  afterEach(() => {
    unsafePlanReuseForTests.afterPlan = null;
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("is 1 while a pass runs and 0 after one that succeeded and one that failed", async () => {
    dir = tempDir("warm-gate");
    const opts: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { mode: "in-place", auto: false, workers: 1 }, faults: {} };
    const store = await Store.open(dir, opts);
    try {
      for (let i = 0; i < 200; i++) await store.write(`k${i}`, `v${i}-${"x".repeat(120)}`);
      for (let i = 0; i < 200; i += 3) await store.forget(`k${i}`);
      const seen: number[] = [];
      unsafePlanReuseForTests.afterPlan = async () => {
        seen.push(store.compactor.passesRunning());
      };
      await store.compact({ mode: "in-place" });
      expect(seen).toEqual([1]);
      expect(store.compactor.passesRunning()).toBe(0);
      unsafePlanReuseForTests.afterPlan = null;
      for (let i = 1; i < 200; i += 3) await store.forget(`k${i}`);
      const sealed = store.stats().segments.find((s) => s.sealed && s.id !== store.stats().segments.at(-1)?.id);
      expect(sealed).toBeDefined();
      store.faults.failAt?.("io:rewrite", "EIO", 1);
      await expect(store.compact({ mode: "in-place", segments: [(sealed as { id: number }).id] })).rejects.toMatchObject({ code: expect.any(String) });
      expect(store.compactor.passesRunning()).toBe(0);
      await store.compact({ mode: "in-place" });
      expect(store.compactor.passesRunning()).toBe(0);
    } finally {
      await store.close();
    }
  }, 60_000);
});

describe("the pool's threads", () => {
  afterEach(() => {
    unsafeWorkerDataForTests.withoutPasses = false;
  });

  /** Fills a store with a worker, compacts it in both modes, and returns what workerPasses counted meanwhile, the warnings, and the reads that went wrong. */
  async function compacted(): Promise<{ seen: number; missed: number; warnings: string[]; wrong: number }> {
    const dir = tempDir("warm-link");
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on("warning", onWarning);
    const before = { ...workerPasses };
    const store = await Store.open(dir, { durability: "none", segmentBytes: 16 * 1024, compaction: { auto: false, workers: 1 } });
    let wrong = 0;
    try {
      for (let i = 0; i < 300; i++) await store.write(`k${i}`, `v${i}-${"x".repeat(120)}`);
      for (let i = 0; i < 300; i += 3) await store.forget(`k${i}`);
      await store.compact({ mode: "copy-on-write" });
      for (let i = 1; i < 300; i += 3) await store.forget(`k${i}`);
      await store.compact({ mode: "in-place" });
      for (let i = 0; i < 300; i++) {
        const r = store.readSync(`k${i}`);
        const live = i % 3 === 2;
        const text = r.status === "OK" ? Buffer.from(r.value as Uint8Array).toString() : undefined;
        if (text !== (live ? `v${i}-${"x".repeat(120)}` : undefined)) wrong += 1;
      }
    } finally {
      await store.close();
      await new Promise<void>((resolve) => setImmediate(resolve)); // emitWarning delivers on a later tick
      process.off("warning", onWarning);
      fs.rmSync(dir, { recursive: true, force: true });
    }
    return { seen: workerPasses.seen - before.seen, missed: workerPasses.missed - before.missed, warnings: warnings.filter((m) => m.includes("compaction count")), wrong };
  }

  it("read the store's compaction count (workerData) during every task", async () => {
    const r = await compacted();
    expect(r.seen).toBeGreaterThanOrEqual(2);
    expect(r.missed).toBe(0);
    expect(r.warnings).toEqual([]);
    expect(r.wrong).toBe(0);
  }, 60_000);

  it("twin: a pool made without the count is counted and warned once, and the passes still succeed", async () => {
    unsafeWorkerDataForTests.withoutPasses = true;
    const r = await compacted();
    expect(r.seen).toBe(0);
    expect(r.missed).toBeGreaterThanOrEqual(2);
    expect(r.warnings.length).toBe(1);
    expect(r.wrong).toBe(0);
  }, 60_000);
});
