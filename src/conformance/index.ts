/**
 * engram/conformance: the contract-level test suite of engram, exported so that any
 * implementation of the API — the embedded engine, the PostgreSQL backend, an outside backend —
 * proves itself with one call (abstract-level's model):
 *
 * ```ts
 * import { describe, it } from "vitest";            // or node:test, or mocha's globals
 * import { conformance } from "engram/conformance";
 * conformance({ describe, it, open: (o) => MyStore.open(url, o), reopen: (s, o) => MyStore.open(url, o),
 *               supports: { readSync: false, unsafeGc: true } });
 * ```
 *
 * It registers its tests with the caller's runner (nothing here imports a test framework; checks
 * use node:assert), and a test that needs a capability the `supports` manifest does not declare is
 * registered as skipped with the reason in its name, so a backend never passes by omission.
 */
import { harnessOf, type ConformanceOptions, type ConformanceStore } from "./harness.js";
import { apiCases } from "./cases/api.js";
import { backendParityCases } from "./cases/backend-parity.js";
import { badInputCases } from "./cases/bad-input.js";
import { safeRewriteCases } from "./cases/safe-rewrite.js";
import { seedPhantomWriteCases } from "./cases/seed-phantom-write.js";
import { toolCases } from "./cases/tools.js";
import { modelCases } from "./cases/model.js";
import type { FastCheck } from "./model/ops.js";

export type { ConformanceOptions, ConformanceStore, Runner, Supports, TestFn } from "./harness.js";
export { assertionCount, expect } from "./expect.js";

/** Registers the whole suite with the caller's runner. */
export function conformance<S extends ConformanceStore>(options: ConformanceOptions<S>): void {
  const h = harnessOf(options as unknown as ConformanceOptions);
  h.describe(options.name ?? "engram conformance", () => {
    apiCases(h);
    backendParityCases(h);
    badInputCases(h);
    seedPhantomWriteCases(h);
    safeRewriteCases(h);
    toolCases(h);
    modelCases(h, options.fastCheck as FastCheck | undefined);
  });
}
