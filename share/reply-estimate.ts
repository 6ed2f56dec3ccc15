/**
 * A running estimate of how large the replies of one kind of call are (the owner's reads, list
 * pages, export pages): the largest reply of that kind answered in the current window or the one
 * before it, so it rises at once with a larger reply and falls back within two windows after the
 * large replies stop. The owner holds this many reply bytes for a call of that kind before it
 * starts (ShareServer's replyBytesHeldMax), instead of a whole frame: small-value reads keep their
 * concurrency, and a reply larger than its estimate counts its real size once answered.
 */
export class ReplyEstimate {
  /** The estimate before any reply of this kind was seen in the last two windows. */
  private readonly initial: number;
  private readonly windowMs: number;
  private readonly now: () => number;
  /** Largest reply noted in the current window, and in the window before it (-1: none). */
  private current = -1;
  private previous = -1;
  private windowStart: number;

  constructor(initial: number, windowMs: number, now: () => number = Date.now) {
    this.initial = initial;
    this.windowMs = windowMs;
    this.now = now;
    this.windowStart = now();
  }

  /** The estimate now: the largest reply of the last two windows, or `initial` when none was seen. */
  get bytes(): number {
    this.rotate();
    const seen = Math.max(this.current, this.previous);
    return seen < 0 ? this.initial : seen;
  }

  /** Notes a reply of `bytes`: the estimate is at least that much from now for one to two windows. */
  note(bytes: number): void {
    this.rotate();
    if (bytes > this.current) this.current = bytes;
  }

  /** Starts a new window once the current one is over (two at once after a quiet spell: both forgotten). */
  private rotate(): void {
    const at = this.now();
    const elapsed = at - this.windowStart;
    if (elapsed < this.windowMs) return;
    this.previous = elapsed < 2 * this.windowMs ? this.current : -1;
    this.current = -1;
    this.windowStart = at;
  }
}
