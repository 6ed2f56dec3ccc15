/**
 * Injected I/O failures (`failAt`) and crashes (`crashAt` at an I/O point): the last IO_CELLS cells
 * of a store's shared fault table (engine/faults.ts lays the table out and leaves them at its end)
 * hold the armed failure — the point, the errno and how many calls are still to fail — the I/O
 * point armed to crash at, and how many arrivals at the crash point still pass (`crashAfter`, which
 * the engine's own crash points count too). Shared memory, so the same armed failure fires on the main thread and
 * in compaction workers, exactly `times` times in all, and a crash point kills from any thread.
 * This file imports nothing from fs-ext: workers load it.
 */
import type { FaultPoint } from "../rules/types.js";

/**
 * The fault points of system calls that change the file system, and of the reads of the bytes a
 * store holds (`io:read`), in a fixed order (codes).
 */
export const IO_FAULT_POINTS: readonly FaultPoint[] = [
  "io:create",
  "io:append",
  "io:sync",
  "io:seal",
  "io:journal",
  "io:rewrite",
  "io:copy",
  "io:rename",
  "io:dir-sync",
  "io:unlink",
  "io:preallocate",
  "io:manifest",
  "io:hint",
  "io:read", // last: codes are indexes, appended points keep the old ones
];

/** The errnos `failAt` can inject. */
export const FAIL_ERRNOS = ["EIO", "ENOSPC"] as const;
/** An errno `failAt` can inject. */
export type FailErrno = (typeof FAIL_ERRNOS)[number];
/** Most failures one `failAt` can arm (a bound on the shared counter). */
export const FAIL_TIMES_MAX = 1_000_000;
/** Most arrivals at a crash point that `crashAfter` can let pass (a bound on the shared counter). */
export const CRASH_AFTER_MAX = 1_000_000;
/** Cells at the end of the fault table that this file reads: the armed failure's three, the crash point's, the crash's passes left. */
export const IO_CELLS = 5;
/** Where, among the IO_CELLS, the I/O point armed to crash at lies (its index in IO_FAULT_POINTS plus one; 0: none). */
const CRASH_AT = 3;
/** Where the arrivals at the armed crash point (engine or I/O) still to pass before the one that kills lie (`crashAfter`). */
const CRASH_PASSES = 4;

/** What `failAt` arms: the point, the errno, how many calls fail. */
export interface FailSpec {
  point: FaultPoint;
  errno: FailErrno;
  times: number;
}

/** The failure cells at the end of a fault table, and where they start. */
function cellsOf(buffer: SharedArrayBuffer): { cells: Int32Array; at: number } {
  const cells = new Int32Array(buffer);
  if (cells.length < IO_CELLS) throw new Error("fault table too small for failure cells");
  return { cells, at: cells.length - IO_CELLS };
}

/** Arms (or, with times 0, disarms) the one injected failure of a fault table. */
export function armFailure(buffer: SharedArrayBuffer, spec: FailSpec): void {
  const point = IO_FAULT_POINTS.indexOf(spec.point);
  if (point < 0) throw new Error(`failAt.point must be one of ${IO_FAULT_POINTS.join(", ")}`);
  const errno = FAIL_ERRNOS.indexOf(spec.errno);
  if (errno < 0) throw new Error(`failAt.errno must be one of ${FAIL_ERRNOS.join(", ")}`);
  if (!Number.isSafeInteger(spec.times) || spec.times < 0 || spec.times > FAIL_TIMES_MAX) throw new Error(`failAt.times must be in [0, ${FAIL_TIMES_MAX}]`);
  const { cells, at } = cellsOf(buffer);
  Atomics.store(cells, at + 2, 0); // disarm first: no call sees a half-written spec
  Atomics.store(cells, at, point + 1);
  Atomics.store(cells, at + 1, errno + 1);
  Atomics.store(cells, at + 2, spec.times);
}

/**
 * Called by every system call at `point` (any thread): when a failure is armed there with
 * failures left, takes one (compare-and-swap: each armed failure fires exactly once) and returns
 * its errno; otherwise null.
 */
export function takeFailure(buffer: SharedArrayBuffer | null, point: FaultPoint): FailErrno | null {
  if (buffer === null) return null;
  const { cells, at } = cellsOf(buffer);
  if (Atomics.load(cells, at) !== IO_FAULT_POINTS.indexOf(point) + 1) return null;
  for (;;) {
    const left = Atomics.load(cells, at + 2);
    if (left <= 0) return null;
    if (Atomics.compareExchange(cells, at + 2, left, left - 1) === left) return FAIL_ERRNOS[Atomics.load(cells, at + 1) - 1] ?? "EIO";
  }
}

/** Arms `crashAt` at I/O point `point`: the first call there, on any thread, kills the process. */
export function armIoCrash(buffer: SharedArrayBuffer, point: FaultPoint): void {
  const index = IO_FAULT_POINTS.indexOf(point);
  if (index < 0) throw new Error(`an I/O crash point must be one of ${IO_FAULT_POINTS.join(", ")}`);
  const { cells, at } = cellsOf(buffer);
  Atomics.store(cells, at + CRASH_AT, index + 1);
}

/**
 * Arms `crashAfter`: the first `passes` arrivals at the armed crash point, engine or I/O, on any
 * thread, go on; the next one kills.
 */
export function armCrashPasses(buffer: SharedArrayBuffer, passes: number): void {
  if (!Number.isSafeInteger(passes) || passes < 0 || passes > CRASH_AFTER_MAX) throw new Error(`crashAfter must be in [0, ${CRASH_AFTER_MAX}]`);
  const { cells, at } = cellsOf(buffer);
  Atomics.store(cells, at + CRASH_PASSES, passes);
}

/**
 * One arrival at the armed crash point (any thread): true when it is the one that kills (no
 * passes left); otherwise takes one pass (compare-and-swap: each pass lets exactly one arrival go).
 */
export function crashArrival(buffer: SharedArrayBuffer): boolean {
  const { cells, at } = cellsOf(buffer);
  for (;;) {
    const left = Atomics.load(cells, at + CRASH_PASSES);
    if (left <= 0) return true;
    if (Atomics.compareExchange(cells, at + CRASH_PASSES, left, left - 1) === left) return false;
  }
}

/**
 * Called by every system call at `point` (any thread) before it is made: SIGKILLs this process
 * when `point` is the armed crash point and its passes are used up (crash tests: a real kill, no
 * cleanup, the call not made).
 */
export function crashIfIoArmed(buffer: SharedArrayBuffer | null, point: FaultPoint): void {
  if (buffer === null) return;
  const { cells, at } = cellsOf(buffer);
  if (Atomics.load(cells, at + CRASH_AT) !== IO_FAULT_POINTS.indexOf(point) + 1) return;
  if (crashArrival(buffer)) process.kill(process.pid, "SIGKILL");
}

/** Arrivals at the armed crash point still to pass before the one that kills (0 with none armed). */
export function crashPassesLeft(buffer: SharedArrayBuffer | null): number {
  if (buffer === null) return 0;
  const { cells, at } = cellsOf(buffer);
  return Math.max(0, Atomics.load(cells, at + CRASH_PASSES));
}

/** Injected failures not yet fired. */
export function failuresLeft(buffer: SharedArrayBuffer | null): number {
  if (buffer === null) return 0;
  const { cells, at } = cellsOf(buffer);
  return Math.max(0, Atomics.load(cells, at + 2));
}
