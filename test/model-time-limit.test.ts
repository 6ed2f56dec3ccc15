/**
 * The conformance suite's model-based test stops at the caller's time limit and fails when it
 * stops: it never passes on fewer runs than it was asked for, and it reports before the runner's
 * own timeout would cut it off.
 *
 * How it works: `conformance()` is given a runner that records the tests it registers instead of
 * running them; the model test is taken from them and run by hand against the embedded engine,
 * with 2,000 runs asked and a time limit of 2 s. fast-check checks the limit before each run, so
 * the stop comes after some runs have passed, and the test must reject naming the interruption.
 * Before the limit was the caller's, fast-check ran with max(90 s, 1.5 s a run), and it reports a
 * stop after one or more passed runs as a pass (`markInterruptAsFailure` unset): with the limit
 * passed through and that flag unset, this test sees the property pass after ~2 s. The helper that sets the limit under vitest's
 * timeout (test/helpers/model-timeout.ts) is checked against the timeouts the test files use.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { conformance, type TestFn } from "../src/conformance/index.js";
import { Engram } from "../src/index.js";
import { modelTimeLimitMs, modelTimeoutMs } from "./helpers/model-timeout.js";
import { tempDir } from "./helpers/tmp.js";

const root = tempDir("model-limit");
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** Stores the registered tests opened: one or more per model run. */
let opens = 0;

/**
 * The tests `conformance()` registers, by name, with their bodies not yet run. ENGRAM_MODEL_RUNS
 * (a long campaign's) is set aside while the suite registers, so that `runs` is what it reads.
 */
function registered(timeLimitMs: number, runs: number): Map<string, TestFn> {
  const tests = new Map<string, TestFn>();
  const campaignRuns = process.env["ENGRAM_MODEL_RUNS"];
  delete process.env["ENGRAM_MODEL_RUNS"];
  try {
    conformance({
      describe: (_name, fn) => fn(),
      it: (name, fn) => void tests.set(name, fn),
      // The model's options (its clock, compaction mode and workers) over inline compaction, as test/conformance-engine.test.ts.
      open: (options) => Engram.open(path.join(root, `s${++opens}`), { ...options, compaction: { workers: 0, auto: false, ...options?.compaction } }),
      supports: { readSync: true, engineOptions: true },
      fastCheck: fc,
      modelRuns: runs,
      modelTimeLimitMs: timeLimitMs,
    });
  } finally {
    if (campaignRuns !== undefined) process.env["ENGRAM_MODEL_RUNS"] = campaignRuns;
  }
  return tests;
}

/** The one model-based test among `tests`. */
function modelTest(tests: Map<string, TestFn>): TestFn {
  const names = [...tests.keys()].filter((name) => name.startsWith("agrees with the model"));
  expect(names).toHaveLength(1);
  return tests.get(names[0] as string) as TestFn;
}

describe("the model test's time limit", () => {
  it("fails when the limit stops it before the runs asked are done", async () => {
    // 2,000 runs cannot end in 2 s (a run opens a store and checks it after every op), and the
    // first starts well inside it: the stop comes after some runs passed, the case that passed.
    const run = modelTest(registered(2_000, 2_000));
    const opensBefore = opens;
    await expect(Promise.resolve().then(run)).rejects.toThrow(/interrupted after [1-9]/);
    expect(opens - opensBefore).toBeGreaterThan(0);
  });

  it("passes when its runs end inside the limit", async () => {
    const run = modelTest(registered(60_000, 3));
    await expect(Promise.resolve().then(run)).resolves.toBeUndefined();
  });

  it("refuses a limit or a run count that is not a number it can use, registering nothing", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => registered(bad, 3)).toThrow(/modelTimeLimitMs must be a positive number/);
    for (const bad of [-1, 1.5, Number.NaN]) expect(() => registered(1_000, bad)).toThrow(/whole number of runs/);
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
