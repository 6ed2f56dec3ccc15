/**
 * The piscina worker entry: initialises the checksum module, then runs compaction tasks.
 * Imports only worker-safe modules (never fs-ext: STACK.md trap 2).
 * A failure comes back as data (worker-errors.ts) so that its class and code survive the trip.
 *
 * After its first task the thread warms its per-record loops on a synthetic segment in memory
 * (compaction-core.ts warmRound), one step per timer turn and only while no task runs: the
 * store's next pass then runs the loops optimized instead of cold (a pass runs each loop once per
 * output). A task that arrives meanwhile waits at most one step. (Until compact-14 it also touched
 * its kept output buffers ahead; a copy-on-write output is now written as it is copied, and
 * touching them ahead no longer moved a pass: ×0.98.)
 */
import * as os from "node:os";
import { workerData } from "node:worker_threads";
import { initChecksum } from "../segments/checksum.js";
import { runCompaction, warmDone, warmInput, warmRound, type CompactionResult, type CompactionTask } from "./compaction-core.js";
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

/** Tasks running now (piscina may hand a thread several), rounds done, and the pending step's timer. */
let running = 0;
let rounds = 0;
let timer: NodeJS.Timeout | null = null;
/** True once the synthetic segment of the rounds is built (warmInput: a step of its own, the longest cold one). */
let built = false;
/**
 * Runs one warm-up step unless a task runs (its end schedules the next), then schedules the
 * next. Each step is one bounded piece, so that a task arriving meanwhile waits for one piece
 * only: the synthetic segment's build first, then one round of the loops (warmRound) per step.
 */
function warmStep(): void {
  timer = null;
  if (running > 0) return;
  try {
    if (!built) {
      warmInput();
      built = true;
    } else {
      warmRound(rounds);
      rounds += 1;
      if (rounds >= WARM_ROUNDS) warmDone();
    }
  } catch (err) {
    rounds = WARM_ROUNDS; // a warm-up only saves time: one that fails is not retried
    warmDone();
    process.emitWarning(`engram compaction warm-up failed: ${String(err)}`);
  }
  scheduleWarm(0);
}

/**
 * How long the thread must have been idle before the warm-up (re)starts after a task: the jobs of
 * one pass follow each other within a few ms (in place, one job per segment, each sent once the
 * one before is published), and a warm-up step between them would delay the pass it is meant to
 * speed up — an in-place pass ran ×0.85–0.90 with steps between its jobs.
 */
const WARM_IDLE_MS = 25;

/** Schedules the next warm-up step `delayMs` from now (none once the rounds ran), replacing one pending. */
function scheduleWarm(delayMs: number): void {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  if (rounds >= WARM_ROUNDS) return;
  timer = setTimeout(warmStep, delayMs);
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
    if (running === 0) scheduleWarm(WARM_IDLE_MS);
  }
}
