/**
 * The piscina worker entry: initialises the checksum module, then runs compaction tasks.
 * Imports only worker-safe modules (never fs-ext: STACK.md trap 2).
 * A failure comes back as data (worker-errors.ts) so that its class and code survive the trip.
 *
 * After its first task the thread warms its per-record loops on a synthetic segment in memory
 * (compaction-core.ts warmOrder and warmRound), one step per timer turn and only while no task runs and the
 * store runs no compaction (warm-up.ts): the store's next pass then runs the loops optimized
 * instead of cold (a pass runs each loop once per output). A task that arrives meanwhile waits
 * at most one step. (Until compact-14 it also touched its kept output buffers ahead; a
 * copy-on-write output is now written as it is copied, and touching them ahead no longer moved
 * a pass: ×0.98.)
 */
import * as os from "node:os";
import { workerData } from "node:worker_threads";
import { initChecksum } from "../segments/checksum.js";
import { runCompaction, warmDone, warmInput, warmOrder, warmRound, type CompactionResult, type CompactionTask, type PassesSeen } from "./compaction-core.js";
import { hitBlocking } from "./faults.js";
import { WarmUp } from "./warm-up.js";
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

/** The store's count of compactions running (compactor.ts `passes`); null when the pool was made without it. */
const passes: Int32Array | null = (() => {
  const given = (workerData as { passes?: unknown } | null)?.passes;
  return given instanceof Int32Array && given.buffer instanceof SharedArrayBuffer ? given : null;
})();

/** Warm-up rounds after the first task (each one pass of the loops over the synthetic segment's records). */
const WARM_ROUNDS = 8;

/**
 * Rounds done, whether the synthetic segment of the rounds is built (warmInput: a step of its
 * own, the longest cold one), and whether its survivors' ordering was warmed (warmOrder).
 */
let rounds = 0;
let built = false;
let ordered = false;

/**
 * One warm-up step, a bounded piece, so that a task arriving meanwhile waits for one piece only:
 * the synthetic segment's build first, then the survivors' ordering (warmOrder: before the
 * rounds, as a pass may begin after a few of them), then one round of the loops (warmRound) per
 * step. Returns whether more steps remain; a failure ends the warm-up (it only saves time: never
 * retried).
 */
function warmStep(): boolean {
  try {
    if (!built) {
      warmInput();
      built = true;
      return true;
    }
    if (!ordered) {
      warmOrder();
      ordered = true;
      return true;
    }
    warmRound(rounds);
    rounds += 1;
  } catch (err) {
    rounds = WARM_ROUNDS;
    process.emitWarning(`engram compaction warm-up failed: ${String(err)}`);
  }
  if (rounds < WARM_ROUNDS) return true;
  warmDone();
  return false;
}

const warmUp = new WarmUp(warmStep, passes);

/**
 * Runs one compaction; worker fault points block on Atomics.wait. The answer carries the store's
 * compaction count as this thread read it when the task began (-1: the pool gave no count): a
 * task runs only within a counted compaction, so the compactor checks that it saw one (PassesSeen).
 */
export default async function compact(task: CompactionTask): Promise<(CompactionResult & PassesSeen) | FailedTask> {
  const passesSeen = passes === null ? -1 : Atomics.load(passes, 0);
  warmUp.taskStarted();
  try {
    return { ...(await runCompaction(task, hitBlocking)), passesSeen };
  } catch (err) {
    return { failed: toWire(err) };
  } finally {
    warmUp.taskEnded();
  }
}
