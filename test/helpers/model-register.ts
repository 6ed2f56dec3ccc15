/**
 * The conformance suite's model-based test, taken out of the suite to be run by hand
 * (test/model-time-limit.test.ts, test/model-twin.test.ts, test/conformance-postgres.test.ts):
 * `conformance()` is given a runner that records the tests it registers instead of running them.
 * A long campaign's ENGRAM_MODEL_RUNS and ENGRAM_MODEL_SEED are set aside while the suite
 * registers, so the runs, limit and seed given here are the ones the test uses.
 */
import * as path from "node:path";
import fc from "fast-check";
import { expect, it } from "vitest";
import { conformance, type ConformanceStore, type Supports, type TestFn } from "../../src/conformance/index.js";
import { Engram, type OpenOptions } from "../../src/index.js";

/** What the recorded model test runs with. */
export interface ModelRun {
  runs: number;
  timeLimitMs: number;
  seed?: number;
  /** Added to every store's options (an `unsafe` switch for a twin). */
  extra?: OpenOptions;
  /** Opens a fresh store with the model's options (and `extra`); default: engineStores(root). */
  open?: (options: OpenOptions) => Promise<ConformanceStore>;
  /** What that backend supports (default: the engine's readSync and engine options). */
  supports?: Supports;
  /** Where the default opener makes its stores (one subdirectory per store). */
  root?: string;
}

/** Stores the default opener made so far, over every call: one or more per run. */
export let modelOpens = 0;

/** Fresh engine stores under `root`: the model's options over inline compaction with no background pass (as test/conformance-engine.test.ts). */
export function engineStores(root: string): (options: OpenOptions) => Promise<ConformanceStore> {
  return (options) => Engram.open(path.join(root, `s${++modelOpens}`), { ...options, compaction: { workers: 0, auto: false, ...options.compaction } });
}

/** Variables the suite reads at registration that would override a ModelRun's fields. */
const OVERRIDES = ["ENGRAM_MODEL_RUNS", "ENGRAM_MODEL_SEED"] as const;

/** The model test of a suite registered with `run`'s settings, its body not yet run. */
export function modelTestOf(run: ModelRun): TestFn {
  if (run.open === undefined && run.root === undefined) throw new Error("modelTestOf: give `root` for the engine's stores, or `open`");
  const open = run.open ?? engineStores(run.root as string);
  const tests = new Map<string, TestFn>();
  const saved = OVERRIDES.map((name) => process.env[name]);
  for (const name of OVERRIDES) delete process.env[name];
  try {
    conformance({
      describe: (_name, fn) => fn(),
      it: (name, fn) => void tests.set(name, fn),
      open: (options) => open({ ...options, ...run.extra }),
      supports: run.supports ?? { readSync: true, engineOptions: true },
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

/** The seed the GC twin replays, and its runs at most (every seed tried was caught well within them). */
const TWIN_SEED = 1;
const TWIN_RUNS = 300;

/**
 * Registers the model's GC twin on a backend (`run` without runs, seed or extra): under
 * `unsafe.gcKeyedBy: "tombstone-seq"` the model's runs from seed 1 must fail with a
 * counterexample (not a stop at the time limit) whose trace holds a gc or compact; then the same
 * seed's runs, as many as the twin needed, must pass without the switch.
 */
export function registerGcTwin(label: string, run: Omit<ModelRun, "runs" | "seed" | "extra">, timeoutMs: number): void {
  let runsToCatch = 0;
  it(`twin (${label}): under unsafe.gcKeyedBy 'tombstone-seq' the model finds a write lost after a forget`, async () => {
    const twin = modelTestOf({ ...run, runs: TWIN_RUNS, seed: TWIN_SEED, extra: { unsafe: { gcKeyedBy: "tombstone-seq" } } });
    const error = await Promise.resolve()
      .then(twin)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error, "the model must catch the phantom write loss").toBeInstanceOf(Error);
    const message = (error as Error).message;
    const caught = /Property failed after (\d+) tests/.exec(message);
    expect(caught, message.slice(0, 400)).not.toBeNull();
    runsToCatch = Number(caught?.[1]);
    console.log(`[model-twin] ${label}: caught after ${runsToCatch} runs`);
    expect(runsToCatch).toBeGreaterThan(0);
    expect(runsToCatch).toBeLessThanOrEqual(TWIN_RUNS);
    expect(String(((error as Error).cause as Error | undefined)?.message)).toMatch(/"(t|op)":"(gc|compact)"/);
  }, timeoutMs);

  it(`the same seed's same runs pass with ${label}'s own GC`, async () => {
    expect(runsToCatch, "the twin ran first and was caught").toBeGreaterThan(0);
    await expect(Promise.resolve().then(modelTestOf({ ...run, runs: runsToCatch, seed: TWIN_SEED }))).resolves.toBeUndefined();
  }, timeoutMs);
}
