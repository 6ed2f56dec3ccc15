/**
 * The piscina worker entry: initialises the checksum module, then runs compaction tasks.
 * Imports only worker-safe modules (never fs-ext: STACK.md trap 2).
 * A failure comes back as data (worker-errors.ts) so that its class and code survive the trip.
 *
 * After its first task the thread warms its per-record loops on a synthetic segment in memory
 * (compaction-core.ts warmRound), one round per timer turn and only while no task runs: the
 * store's next pass then runs them optimized instead of cold (a pass runs each loop once per
 * output). A task that arrives meanwhile waits at most one round.
 */
import * as os from "node:os";
import { workerData } from "node:worker_threads";
import { initChecksum } from "../segments/checksum.js";
import { runCompaction, warmDone, warmRound, type CompactionResult, type CompactionTask } from "./compaction-core.js";
import { hitBlocking } from "./faults.js";
import { toWire, type FailedTask } from "./worker-errors.js";

await initChecksum();

/**
 * Lowers this thread's CPU priority by `niceness` (compaction.niceness, passed in the pool's
 * workerData): on Linux setpriority(2) with id 0 changes the calling thread alone, so the thread
 * that serves the store's calls keeps its priority and goes first when the two contend for a
 * core. Elsewhere it would change the whole process: skipped. A refusal (a sandbox) only costs the
 * ordering it buys, so it is a warning. Lowering one's own priority needs no privilege.
 */
function lowerPriority(niceness: unknown): void {
  if (process.platform !== "linux" || typeof niceness !== "number" || !(niceness > 0)) return;
  try {
    os.setPriority(0, Math.min(19, os.getPriority(0) + niceness));
  } catch (err) {
    process.emitWarning(`engram compaction thread kept its priority: ${String(err)}`);
  }
}
lowerPriority((workerData as { niceness?: unknown } | null)?.niceness);

/** Warm-up rounds after the first task (each one pass of the loops over WARM_RECORDS records). */
const WARM_ROUNDS = 8;

/** Tasks running now (piscina may hand a thread several), rounds done, and the pending round's timer. */
let running = 0;
let rounds = 0;
let timer: NodeJS.Timeout | null = null;

/** Runs one warm-up round unless a task runs (its end schedules the next), then schedules the next round. */
function warmStep(): void {
  timer = null;
  if (running > 0 || rounds >= WARM_ROUNDS) return;
  try {
    warmRound(rounds);
    rounds += 1;
  } catch (err) {
    rounds = WARM_ROUNDS; // a warm-up only saves time: one that fails is not retried
    process.emitWarning(`engram compaction warm-up failed: ${String(err)}`);
  }
  if (rounds >= WARM_ROUNDS) warmDone();
  else scheduleWarm();
}

/** Schedules the next warm-up round for a later turn (none once all ran). */
function scheduleWarm(): void {
  if (timer !== null || rounds >= WARM_ROUNDS) return;
  timer = setTimeout(warmStep, 0);
  timer.unref();
}

/** Runs one compaction; worker fault points block on Atomics.wait. */
export default async function compact(task: CompactionTask): Promise<CompactionResult | FailedTask> {
  running += 1;
  try {
    return await runCompaction(task, hitBlocking);
  } catch (err) {
    return { failed: toWire(err) };
  } finally {
    running -= 1;
    scheduleWarm();
  }
}
