/**
 * When a compaction worker runs its warm-up steps (compaction-worker.ts; a step is the synthetic
 * segment's build, the ordering of its survivors (compaction-core.ts warmOrder) or one round of
 * the loops (warmRound)): one step per timer
 * turn, never while a task runs on the thread, and never while the store runs a compaction — the
 * count the compactor shares with its pool (compactor.ts `passes`). So no step lands during a
 * pass's plan or between two of its jobs, where it would delay the pass it is meant to speed up.
 *
 * Before the count was shared (twenty-fourth session), the thread judged that from its own
 * idleness: it waited WARM_IDLE_MS after a task before a step. The warm-up then often started too
 * late to end before the store's next pass, whose jobs ran cold and waited for the steps (the
 * bench's compaction child, whose pass starts ~0.2 s after the pool's first task, 8 alternated
 * pairs each with the count against without: in place ×1.07, copy-on-write ×1.06).
 * Without a count (a pool made without it) that rule still holds.
 */

/**
 * How long the thread must have been idle before the warm-up (re)starts after a task, when the
 * store's pass count is not shared: the jobs of one pass follow each other within a few ms, and a
 * step between them would delay the pass (an in-place pass ran ×0.85–0.90 with steps between).
 */
export const WARM_IDLE_MS = 25;

/** With the pass count shared: how soon after a task the warm-up (re)starts, and how often it looks again while a pass runs. */
export const WARM_AFTER_TASK_MS = 1;
export const WARM_POLL_MS = 10;

/**
 * Test switch, never set by the engine or any option (test/compaction-warm-gate.test.ts): with
 * `ignorePasses`, a step runs while the store's pass count says a compaction runs — the steps
 * between a pass's jobs that the count is there to keep out.
 */
export const unsafeWarmUpForTests = { ignorePasses: false };

/** The warm-up's schedule on one worker thread. */
export class WarmUp {
  private running = 0;
  private timer: NodeJS.Timeout | null = null;
  private finished = false;
  /** Steps run, and turns that found a compaction running and looked again later (tests). */
  readonly counts = { steps: 0, deferred: 0 };

  /**
   * `step` runs one warm-up step and returns whether more remain (it never throws: a failed
   * warm-up simply ends); `passes` is the store's pass count (cell 0), or null when not shared.
   */
  constructor(
    private readonly step: () => boolean,
    private readonly passes: Int32Array | null,
  ) {
    if (passes !== null && !(passes.buffer instanceof SharedArrayBuffer && passes.length >= 1)) throw new RangeError("a warm-up's pass count is a shared Int32Array cell");
  }

  /** A task starts on the thread: no step runs until every task it holds has ended. */
  taskStarted(): void {
    this.running += 1;
  }

  /** A task ended: with none left, the next step is scheduled. */
  taskEnded(): void {
    this.running -= 1;
    if (this.running < 0) throw new RangeError("a warm-up's task ended more often than one started");
    if (this.running === 0) this.schedule(this.passes === null ? WARM_IDLE_MS : WARM_AFTER_TASK_MS);
  }

  /** True once the last step ran. */
  get done(): boolean {
    return this.finished;
  }

  /** True while the store runs a compaction (its plan, its jobs, its publications). */
  private passRunning(): boolean {
    return this.passes !== null && Atomics.load(this.passes, 0) > 0 && !unsafeWarmUpForTests.ignorePasses;
  }

  /** One timer turn: a step unless a task or a pass runs (a pass: looked at again WARM_POLL_MS later), then the next turn. */
  private turn(): void {
    this.timer = null;
    if (this.running > 0 || this.finished) return;
    if (this.passRunning()) {
      this.counts.deferred += 1;
      this.schedule(WARM_POLL_MS);
      return;
    }
    this.counts.steps += 1;
    if (!this.step()) this.finished = true;
    this.schedule(0);
  }

  /** Schedules the next turn `delayMs` from now (none once finished), replacing one pending; the timer never holds the thread open. */
  private schedule(delayMs: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.finished) return;
    this.timer = setTimeout(() => this.turn(), delayMs);
    this.timer.unref();
  }
}
