/**
 * A running estimate of how large the replies of one kind of call are (the owner's reads, list
 * pages, export pages): the largest reply of that kind answered in the current window or the one
 * before it, so it rises at once with a larger reply and falls back within two windows after the
 * large replies stop. The owner holds this many reply bytes for a call of that kind before it
 * starts (ShareServer's replyBytesHeldMax), instead of a whole frame: small-value reads keep their
 * concurrency, and a reply larger than its estimate counts its real size once answered.
 *
 * Windows end when the owner calls rotate() (a timer, once per window): reading or noting the
 * estimate costs no clock reading, which on the read path cost more than the rest of it.
 */
export class ReplyEstimate {
  /** The estimate when no reply of this kind was seen in the last two windows. */
  private readonly initial: number;
  /** Largest reply noted in the current window, and in the window before it (-1: none). */
  private current = -1;
  private previous = -1;

  constructor(initial: number) {
    this.initial = initial;
  }

  /** The estimate now: the largest reply of the last two windows, or `initial` when none was seen. */
  get bytes(): number {
    const seen = this.current > this.previous ? this.current : this.previous;
    return seen < 0 ? this.initial : seen;
  }

  /** Notes a reply of `bytes`: the estimate is at least that much until the window after this one ends. */
  note(bytes: number): void {
    if (bytes > this.current) this.current = bytes;
  }

  /** Ends the current window: the one before it is forgotten. */
  rotate(): void {
    this.previous = this.current;
    this.current = -1;
  }
}
