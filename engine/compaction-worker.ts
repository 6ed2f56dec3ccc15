/**
 * The piscina worker entry: initialises the checksum module, then runs compaction tasks.
 * Imports only worker-safe modules (never fs-ext: STACK.md trap 2).
 * A failure comes back as data (worker-errors.ts) so that its class and code survive the trip.
 */
import { initChecksum } from "../segments/checksum.js";
import { runCompaction, type CompactionResult, type CompactionTask } from "./compaction-core.js";
import { hitBlocking } from "./faults.js";
import { toWire, type FailedTask } from "./worker-errors.js";

await initChecksum();

/** Runs one compaction; worker fault points block on Atomics.wait. */
export default async function compact(task: CompactionTask): Promise<CompactionResult | FailedTask> {
  try {
    return await runCompaction(task, hitBlocking);
  } catch (err) {
    return { failed: toWire(err) };
  }
}
