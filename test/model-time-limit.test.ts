/**
 * The conformance suite's model-based test stops at the caller's time limit and fails when it
 * stops: it never passes on fewer runs than it was asked for, and it reports before the runner's
 * own timeout would cut it off.
 *
 * How it works: the model test is taken out of a suite registered through a recording runner
 * (test/helpers/model-register.ts) and run by hand against the embedded engine, with 2,000 runs
 * asked and a time limit of 2 s. fast-check checks the limit before each run, so the stop comes
 * after some runs have passed, and the test must reject naming the interruption. Before the limit
 * was the caller's, fast-check ran with max(90 s, 1.5 s a run), and it reports a stop after one or
 * more passed runs as a pass (`markInterruptAsFailure` unset): with the limit passed through and
 * that flag unset, this test sees the property pass after ~2 s. Bad limits, run counts and seeds
 * are refused when the suite registers. The helper that sets the limit under vitest's timeout
 * (test/helpers/model-timeout.ts) is checked against the timeouts the test files use.
 */
import * as fs from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { modelOpens, modelTestOf } from "./helpers/model-register.js";
import { modelTimeLimitMs, modelTimeoutMs } from "./helpers/model-timeout.js";
import { tempDir } from "./helpers/tmp.js";

const root = tempDir("model-limit");
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe("the model test's time limit", () => {
  it("fails when the limit stops it before the runs asked are done", async () => {
    // 2,000 runs cannot end in 2 s (a run opens a store and checks it after every op), and the
    // first starts well inside it: the stop comes after some runs passed, the case that passed.
    const run = modelTestOf({ root, runs: 2_000, timeLimitMs: 2_000 });
    const opensBefore = modelOpens;
    await expect(Promise.resolve().then(run)).rejects.toThrow(/interrupted after [1-9]/);
    expect(modelOpens - opensBefore).toBeGreaterThan(0);
  });

  it("passes when its runs end inside the limit", async () => {
    const run = modelTestOf({ root, runs: 3, timeLimitMs: 60_000 });
    await expect(Promise.resolve().then(run)).resolves.toBeUndefined();
  });

  it("refuses a limit, a run count or a seed it cannot use, when the suite registers", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => modelTestOf({ root, runs: 3, timeLimitMs: bad })).toThrow(/modelTimeLimitMs must be a positive number/);
    for (const bad of [-1, 1.5, Number.NaN]) expect(() => modelTestOf({ root, runs: bad, timeLimitMs: 1_000 })).toThrow(/whole number of runs/);
    for (const bad of [0.5, Number.NaN]) expect(() => modelTestOf({ root, runs: 3, timeLimitMs: 1_000, seed: bad })).toThrow(/modelSeed .* must be an integer/);
  });

  it("leaves fast-check time to report under the test files' timeouts", () => {
    for (const timeoutMs of [modelTimeoutMs(100, 500), modelTimeoutMs(10, 2_000), modelTimeoutMs(400, 500), modelTimeoutMs(600, 2_000)]) {
      const limitMs = modelTimeLimitMs(timeoutMs);
      expect(limitMs).toBeGreaterThan(0);
      expect(timeoutMs - limitMs).toBeGreaterThanOrEqual(Math.max(20_000, timeoutMs / 10));
    }
    expect(modelTimeLimitMs(120_000)).toBe(100_000);
    expect(() => modelTimeLimitMs(20_000)).toThrow(/no time/);
  });
});
