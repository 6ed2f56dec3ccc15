/**
 * The piscina worker entry: initialises the checksum module, then runs compaction tasks.
 * Imports only worker-safe modules (never fs-ext: STACK.md trap 2).
 */
import { initChecksum } from "../segments/checksum.js";
import { runCompaction, type CompactionResult, type CompactionTask } from "./compaction-core.js";
import { hitBlocking } from "./faults.js";

await initChecksum();

/** Runs one compaction; worker fault points block on Atomics.wait. */
export default function compact(task: CompactionTask): Promise<CompactionResult> {
  return runCompaction(task, hitBlocking);
}
