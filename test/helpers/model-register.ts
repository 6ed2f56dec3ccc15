/**
 * The conformance suite's model-based test, taken out of the suite to be run by hand against the
 * embedded engine (test/model-time-limit.test.ts, test/model-twin.test.ts): `conformance()` is
 * given a runner that records the tests it registers instead of running them. A long campaign's
 * ENGRAM_MODEL_RUNS and ENGRAM_MODEL_SEED are set aside while the suite registers, so the runs,
 * limit and seed given here are the ones the test uses.
 */
import * as path from "node:path";
import fc from "fast-check";
import { expect } from "vitest";
import { conformance, type TestFn } from "../../src/conformance/index.js";
import { Engram, type OpenOptions } from "../../src/index.js";

/** What the recorded model test runs with. */
export interface ModelRun {
  /** Where each run's stores are made (one subdirectory per store). */
  root: string;
  runs: number;
  timeLimitMs: number;
  seed?: number;
  /** Added to every store's options (an `unsafe` switch for a twin). */
  extra?: OpenOptions;
}

/** Stores the recorded model tests opened so far, over every call: one or more per run. */
export let modelOpens = 0;

/** Variables the suite reads at registration that would override a ModelRun's fields. */
const OVERRIDES = ["ENGRAM_MODEL_RUNS", "ENGRAM_MODEL_SEED"] as const;

/**
 * The model test of a suite registered with `run`'s settings, its body not yet run. Every store
 * gets the model's options over inline compaction with no background pass (as
 * test/conformance-engine.test.ts), plus `run.extra`.
 */
export function modelTestOf(run: ModelRun): TestFn {
  const tests = new Map<string, TestFn>();
  const saved = OVERRIDES.map((name) => process.env[name]);
  for (const name of OVERRIDES) delete process.env[name];
  try {
    conformance({
      describe: (_name, fn) => fn(),
      it: (name, fn) => void tests.set(name, fn),
      open: (options) =>
        Engram.open(path.join(run.root, `s${++modelOpens}`), { ...options, ...run.extra, compaction: { workers: 0, auto: false, ...options?.compaction } }),
      supports: { readSync: true, engineOptions: true },
      fastCheck: fc,
      modelRuns: run.runs,
      modelTimeLimitMs: run.timeLimitMs,
      ...(run.seed === undefined ? {} : { modelSeed: run.seed }),
    });
  } finally {
    OVERRIDES.forEach((name, i) => {
      if (saved[i] !== undefined) process.env[name] = saved[i];
    });
  }
  const names = [...tests.keys()].filter((name) => name.startsWith("agrees with the model"));
  expect(names).toHaveLength(1);
  return tests.get(names[0] as string) as TestFn;
}
