/**
 * When the compactor's time checks run (docs/ENGINE.md "Time checks"). A value whose TTL runs out
 * and a retention record whose window ends become garbage that no write, forget or pass reports,
 * so the automatic pass learns of it from a recount at the soonest such time. This file keeps the
 * one timer for the soonest death noted, never due before the rate bound, and asks its host to run
 * a check then; what a check does (walk, dead bytes, the pass) is the compactor's.
 */

/**
 * The rate bound: at most one check per TIME_CHECK_GAP_MS_MIN, and the gap after a check at least
 * TIME_CHECK_DUTY times its walk — a stream of writes with staggered TTLs costs the main thread at
 * most ~1 % in walks, not one walk per expiry (without a bound, 1,000 staggered expiries made 330
 * checks in 2.3 s: test/space-time.test.ts).
 */
export const TIME_CHECK_GAP_MS_MIN = 1000;
export const TIME_CHECK_DUTY = 100;
/** setTimeout's longest delay (a longer one fires at once): a check further away is re-armed on the way. */
const TIMER_MS_MAX = 2 ** 31 - 1;

/** What the checks need from the compactor. */
export interface TimeCheckHost {
  /** The store clock (ms since the epoch; injectable). */
  clock(): number;
  /** Whether a check may be scheduled now: automatic compaction on, the store not closing. */
  enabled(): boolean;
  /** Starts one check (in the compactor's chain of passes; its failure is the host's to report). */
  run(): void;
}

/** The timer of the soonest death by time noted, and the rate bound. */
export class TimeChecks {
  private timer: NodeJS.Timeout | null = null;
  /** When the pending check is due (store clock ms; Infinity: none). */
  private dueAt = Infinity;
  /** No check is due before this (store clock ms). */
  private floor: number;
  /** How long the last check's walk took (ms). */
  private walkMs = 0;
  /** Checks run since open, and the dead bytes the last one's walk found (tests). */
  readonly seen = { fired: 0, deadSeen: 0 };

  constructor(private readonly host: TimeCheckHost) {
    // None in the open's first gap: the open stays a read of headers and hints.
    this.floor = host.clock() + TIME_CHECK_GAP_MS_MIN;
  }

  /**
   * Something may die by time alone at `at` (store clock ms): schedules a check then (or keeps an
   * earlier one), never before the rate bound. No-op while the host says checks are off.
   */
  note(at: number): void {
    if (!this.host.enabled() || !(at < Infinity)) return;
    const due = Math.max(at, this.floor);
    if (due >= this.dueAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.dueAt = due;
    const wait = Math.max(0, due - this.host.clock());
    const clamped = wait > TIMER_MS_MAX;
    this.timer = setTimeout(() => this.fire(due, clamped), clamped ? TIMER_MS_MAX : wait);
    this.timer.unref();
  }

  /** The timer of the check due at `due` fired (early when its delay was `clamped`: then re-armed). */
  private fire(due: number, clamped: boolean): void {
    this.timer = null;
    this.dueAt = Infinity;
    if (clamped) return this.note(due);
    // The bound starts now, not when the check runs: a check waiting behind a pass must not let
    // deaths noted meanwhile queue more checks behind it (12 in 2.8 s under load, before).
    this.floor = this.host.clock() + TIME_CHECK_GAP_MS_MIN;
    this.host.run();
  }

  /** A check begins at `now`: the next is due no sooner than the gap, or the duty bound of the last walk. */
  begin(now: number): void {
    this.floor = now + Math.max(TIME_CHECK_GAP_MS_MIN, TIME_CHECK_DUTY * this.walkMs);
  }

  /** A check's walk took `walkMs` and found `deadSeen` dead bytes. */
  end(walkMs: number, deadSeen: number): void {
    this.walkMs = walkMs;
    this.seen.fired += 1;
    this.seen.deadSeen = deadSeen;
  }

  /** Whether a check is scheduled (tests: a store with none pending, no pass queued and nothing chosen starts nothing). */
  get pending(): boolean {
    return this.dueAt < Infinity;
  }

  /** Cancels the pending check (store close). */
  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.dueAt = Infinity;
  }
}
