/**
 * The stores a test process opens start their compaction threads from the compiled worker in
 * dist/ while dist/ is not older than any source (built.ts staleSource), else through tsx as
 * before (engine/compactor.ts workerFromBuildForTests). Through tsx a thread compiles its modules
 * at every start: 330–400 ms a pool in a test file's process, 530–690 ms in a child under
 * `node --import tsx`, against ~95 and 160–180 ms. Either way the worker runs the sources as they
 * are. Called by test/setup/worker.ts before every test file, and first by the child processes
 * the tests start (campaign-child, crash-child, retire-child, share-child).
 */
import { workerFromBuildForTests } from "../../engine/compactor.js";
import { staleSource } from "./built.js";

/** Sets workerFromBuildForTests.use from dist/'s freshness (~5 ms: a stat of every source and its twin). */
export function useBuiltWorker(): void {
  workerFromBuildForTests.use = staleSource() === null;
}
