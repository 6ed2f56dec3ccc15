/**
 * TIGER_STYLE assertions: a broken invariant stops the operation at once, loudly, instead of
 * writing or returning wrong data. They check the engine's own state, never user input (bad
 * input is an InvalidArgumentError). Every backend imports this one helper, so that an
 * invariant's check reads the same everywhere and a failure always names the invariant.
 */
import { InternalError } from "./errors.js";

/** Throws InternalError naming `what` unless `condition` holds. */
export function assert(condition: boolean, what: string): asserts condition {
  if (!condition) throw new InternalError(`assertion failed: ${what}`);
}
