/**
 * The per-test timeout for a file that runs the conformance suite's model-based test. That test
 * makes `ENGRAM_MODEL_RUNS` runs (else the file's own default, as src/conformance/harness.ts
 * reads it), all inside one test: a long campaign set by the variable must not die at vitest's
 * 120 s (vitest.config.ts), which 600 runs on PostgreSQL (~0.5 s each here) passed. The timeout
 * is that floor, or `runMsMax` per run when that is longer: a bound on a hung run, never a sleep.
 */
export const TEST_TIMEOUT_FLOOR_MS = 120_000;

/** The timeout for `defaultRuns` runs (or ENGRAM_MODEL_RUNS) at `runMsMax` ms per run at most. */
export function modelTimeoutMs(defaultRuns: number, runMsMax: number): number {
  return runsTimeoutMs("ENGRAM_MODEL_RUNS", defaultRuns, runMsMax);
}

/**
 * The time limit a model test hands fast-check (ConformanceOptions.modelTimeLimitMs) under a
 * per-test timeout of `timeoutMs`: a tenth of it, and at least 20 s, is left for fast-check to
 * report what it found before vitest would cut the test off.
 */
export function modelTimeLimitMs(timeoutMs: number): number {
  const limitMs = timeoutMs - Math.max(REPORT_MS_MIN, timeoutMs / 10);
  if (!(limitMs > 0 && limitMs < timeoutMs)) throw new Error(`a model test's timeout of ${timeoutMs} ms leaves fast-check no time to run`);
  return limitMs;
}

/** The least of a model test's timeout kept for fast-check's report after its time limit stops it. */
const REPORT_MS_MIN = 20_000;

/**
 * The same rule for a test whose runs another variable sets (test/retention-model.test.ts:
 * ENGRAM_RETENTION_MODEL_RUNS): the runs it names, or `defaultRuns`, at `runMsMax` ms each at most.
 */
export function runsTimeoutMs(variable: string, defaultRuns: number, runMsMax: number): number {
  const runs = runsOf(variable, defaultRuns);
  return Math.max(TEST_TIMEOUT_FLOOR_MS, runs * runMsMax);
}

/** The whole number of runs `variable` names, or `defaultRuns` when it is unset; throws on anything else. */
export function runsOf(variable: string, defaultRuns: number): number {
  const runs = Number(process.env[variable] ?? defaultRuns);
  if (!Number.isSafeInteger(runs) || runs < 0) throw new Error(`${variable} must be a whole number of runs, got ${process.env[variable]}`);
  return runs;
}
