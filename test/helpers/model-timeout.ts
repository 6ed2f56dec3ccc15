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
  const runs = Number(process.env["ENGRAM_MODEL_RUNS"] ?? defaultRuns);
  if (!Number.isSafeInteger(runs) || runs < 0) throw new Error(`ENGRAM_MODEL_RUNS must be a whole number of runs, got ${process.env["ENGRAM_MODEL_RUNS"]}`);
  return Math.max(TEST_TIMEOUT_FLOOR_MS, runs * runMsMax);
}
