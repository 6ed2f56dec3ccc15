/**
 * TIGER_STYLE assertions: a broken invariant stops the operation at once, loudly, instead of
 * writing or returning wrong data. They check the engine's own state, never user input (bad
 * input is an InvalidArgumentError). Every backend imports this one helper, so that an
 * invariant's check reads the same everywhere and a failure always names the invariant.
 */
import { InternalError } from "./errors.js";

/**
 * Paired checks that cost time on every call (an extra lookup, a decode of what was just encoded):
 * on under tests (vitest) or ENGRAM_DEBUG_CHECKS=1, off otherwise.
 */
export const DEBUG_CHECKS = process.env["VITEST"] !== undefined || process.env["ENGRAM_DEBUG_CHECKS"] === "1";

/** Throws InternalError naming `what` unless `condition` holds. */
export function assert(condition: boolean, what: string): asserts condition {
  if (!condition) fail(what);
}

/**
 * Throws InternalError naming `what`: an assertion whose condition the caller tests itself,
 * `if (!condition) fail(message)`, so that a message built from values (a template string) is
 * built only on failure — on per-record paths, where assert() would build it every time.
 */
export function fail(what: string): never {
  throw new InternalError(`assertion failed: ${what}`);
}

/**
 * A checked indexed read (noUncheckedIndexedAccess): `xs[i]`, which the caller knows exists
 * (`what` says why); throws InternalError when it does not, instead of going on with undefined.
 */
export function elementAt<T>(xs: ArrayLike<T>, i: number, what: string): T {
  const x = xs[i];
  if (x === undefined) throw new InternalError(`assertion failed: ${what} (index ${i} of ${xs.length})`);
  return x;
}
