/**
 * Fault injection at named points inside the real engine. Pauses and crash points live in a
 * SharedArrayBuffer so that the same point works on the main thread (an awaited promise) and in
 * a compaction worker (Atomics.wait, so a test can stop a worker at an exact step).
 *
 * Per point, one armed cell and one state cell. The state packs a release epoch (high 16 bits)
 * and the number of operations waiting in that epoch (low 16 bits), updated with compare-and-swap,
 * so that release() atomically lets every waiting operation go *and* resets the count: waitFor()
 * after a release waits for a new arrival, never for one that is already on its way out.
 * `crashAt` kills the whole process with SIGKILL — from any thread, once `crashAfter` arrivals
 * there have passed — so crash tests run the store in a child process and reopen the directory
 * afterwards.
 * This file imports nothing from fs-ext: workers load it.
 */
import { armCrashPasses, armFailure, armIoCrash, crashArrival, IO_CELLS, failuresLeft, IO_FAULT_POINTS, type FailErrno, type FailSpec } from "../segments/io-faults.js";

export { IO_FAULT_POINTS, FAIL_ERRNOS, type FailErrno } from "../segments/io-faults.js";
import type { FaultPoint } from "../rules/types.js";

/** Every fault point, in a fixed order (the order defines the shared-memory layout). */
export const FAULT_POINTS: readonly FaultPoint[] = [
  "read:after-authorize",
  "write:after-append",
  "write:after-sync",
  "seal:after-truncate",
  "compaction:after-journal",
  "compaction:mid-rewrite",
  "compaction:after-rewrite",
  "compaction:before-swap",
  "compaction:after-output-rename",
  "compaction:after-rename",
  "compaction:before-unlink",
  // I/O points (segments/io.ts, listed once in segments/io-faults.ts): `failAt` makes the system call
  // there fail; they can also pause or crash.
  ...IO_FAULT_POINTS,
];


/**
 * The points that lie inside one synchronous main-thread turn (a seal's truncate, a copy-on-write
 * output's publication): a synchronous path cannot pause, so they take `crashAt` only, and
 * `pauseAt` naming one is refused at open (it would never pause, and `waitFor` would never resolve).
 */
export const CRASH_ONLY_POINTS: readonly FaultPoint[] = ["seal:after-truncate", "compaction:after-rename", "compaction:before-unlink"];

const CELLS = 2;
const ARMED = 0;
const STATE = 1;
const WAITING_MASK = 0xffff;
/** The cell after the per-point cells holds the index of the crash point plus one when it is an engine point (0 = none). */
const CRASH_CELL = FAULT_POINTS.length * CELLS;
/** Then the armed failure of `failAt`, the I/O crash point and the crash's passes left (segments/io-faults.ts reads the last IO_CELLS cells). */
const CELLS_TOTAL = CRASH_CELL + 1 + IO_CELLS;

/** The first cell of `point` in the fault table; throws on an unknown point. */
function indexOf(point: FaultPoint): number {
  const i = FAULT_POINTS.indexOf(point);
  if (i < 0) throw new Error(`unknown fault point ${point}`);
  return i * CELLS;
}

/** True when `x` names a fault point. */
export function isFaultPoint(x: unknown): x is FaultPoint {
  return typeof x === "string" && (FAULT_POINTS as readonly string[]).includes(x);
}

/**
 * Creates the shared fault table for `pauseAt` / `crashAt` (its first `crashAfter` arrivals
 * passing) / `failAt`.
 */
export function createFaultBuffer(pauseAt: readonly FaultPoint[], crashAt: FaultPoint | null, failAt: FailSpec | null = null, crashAfter = 0): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(CELLS_TOTAL * 4);
  const cells = new Int32Array(buffer);
  for (const p of pauseAt) cells[indexOf(p) + ARMED] = 1;
  // One cell per kind of point, each read by the code that reaches such points: the engine's here, an I/O point's by segments/io.ts.
  if (crashAt !== null && IO_FAULT_POINTS.includes(crashAt)) armIoCrash(buffer, crashAt);
  else if (crashAt !== null) cells[CRASH_CELL] = FAULT_POINTS.indexOf(crashAt) + 1;
  armCrashPasses(buffer, crashAt === null ? 0 : crashAfter);
  if (failAt !== null) armFailure(buffer, failAt);
  return buffer;
}

/** SIGKILLs this process when `point` is the armed crash point and its passes are used up (crash tests: a real kill, no cleanup). */
function crashIfArmed(cells: Int32Array, point: FaultPoint): void {
  if (Atomics.load(cells, CRASH_CELL) !== FAULT_POINTS.indexOf(point) + 1) return;
  if (crashArrival(cells.buffer as SharedArrayBuffer)) process.kill(process.pid, "SIGKILL");
}

/** Joins the waiters of the current epoch; returns the epoch to wait out, or null when not armed. */
function arrive(cells: Int32Array, point: FaultPoint): { at: number; epoch: number } | null {
  crashIfArmed(cells, point);
  const at = indexOf(point);
  if (Atomics.load(cells, at + ARMED) !== 1) return null;
  for (;;) {
    const state = Atomics.load(cells, at + STATE);
    if ((state & WAITING_MASK) === WAITING_MASK) throw new Error(`too many operations paused at ${point}`);
    if (Atomics.compareExchange(cells, at + STATE, state, state + 1) === state) {
      Atomics.notify(cells, at + STATE);
      return { at: at + STATE, epoch: state >>> 16 };
    }
  }
}

/** Worker side (blocking): crash or pause at `point` if it is armed. */
export function hitBlocking(buffer: SharedArrayBuffer | null, point: FaultPoint): void {
  if (buffer === null) return;
  const cells = new Int32Array(buffer);
  const joined = arrive(cells, point);
  if (joined === null) return;
  for (let s = Atomics.load(cells, joined.at); s >>> 16 === joined.epoch; s = Atomics.load(cells, joined.at)) {
    Atomics.wait(cells, joined.at, s);
  }
}

/** Main-thread side (non-blocking): crash, or resolve once released if `point` is armed. */
export async function hitAsync(buffer: SharedArrayBuffer | null, point: FaultPoint): Promise<void> {
  if (buffer === null) return;
  const cells = new Int32Array(buffer);
  const joined = arrive(cells, point);
  if (joined === null) return;
  for (let s = Atomics.load(cells, joined.at); s >>> 16 === joined.epoch; s = Atomics.load(cells, joined.at)) {
    const w = Atomics.waitAsync(cells, joined.at, s);
    if (w.async) await w.value;
  }
}

/** Main-thread side, synchronous code paths: crash only (a sync path cannot pause). */
export function hitCrashOnly(buffer: SharedArrayBuffer | null, point: FaultPoint): void {
  if (buffer !== null) crashIfArmed(new Int32Array(buffer), point);
}

/** The test-facing controls: `store.faults`. */
export class FaultController {
  readonly buffer: SharedArrayBuffer | null;
  constructor(buffer: SharedArrayBuffer | null) {
    this.buffer = buffer;
  }

  /** Resolves when some operation is paused at `point` and not yet released (at once if one is). */
  async waitFor(point: FaultPoint): Promise<void> {
    const cells = this.cells(point);
    const at = indexOf(point) + STATE;
    for (;;) {
      const state = Atomics.load(cells, at);
      if ((state & WAITING_MASK) > 0) return;
      const w = Atomics.waitAsync(cells, at, state);
      if (w.async) await w.value;
    }
  }

  /** Lets every operation paused at `point` go on; the point stays armed for later ones. */
  release(point: FaultPoint): void {
    const cells = this.cells(point);
    const at = indexOf(point) + STATE;
    for (;;) {
      const state = Atomics.load(cells, at);
      const next = ((((state >>> 16) + 1) & 0xffff) << 16) | 0;
      if (Atomics.compareExchange(cells, at, state, next) === state) break;
    }
    Atomics.notify(cells, at);
  }

  /**
   * Arms an injected failure now (extension for tests; `faults.failAt` arms one at open): the
   * next `times` system calls at `point` fail with `errno`. `times: 0` disarms.
   */
  failAt(point: FaultPoint, errno: FailErrno, times = 1): void {
    if (this.buffer === null) throw new Error("fault injection is off: open the store with a faults option (faults: {} is enough)");
    armFailure(this.buffer, { point, errno, times });
  }

  /** Injected failures not yet fired. */
  failuresLeft(): number {
    return failuresLeft(this.buffer);
  }

  /** How many operations are paused at `point` now. */
  pausedAt(point: FaultPoint): number {
    return Atomics.load(this.cells(point), indexOf(point) + STATE) & WAITING_MASK;
  }

  /** The fault table as cells; throws naming `point` when the store was opened without one. */
  private cells(point: FaultPoint): Int32Array {
    if (this.buffer === null) throw new Error(`fault point ${point} is not armed: open the store with faults.pauseAt`);
    return new Int32Array(this.buffer);
  }
}
