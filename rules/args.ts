/**
 * Checks of per-call arguments. Each throws InvalidArgumentError naming the argument, before the
 * call touches any state — so a bad call writes nothing and the store stays usable.
 */
import { InvalidArgumentError } from "./errors.js";
import { assertKey, assertScope } from "./names.js";
import { ROOT_SCOPE, SEQ_MAX, TTL_MS_MAX } from "./limits.js";
import { CALL_OPTION_NAMES, misspeltName, throwMisspelt } from "./option-names.js";

/** Most operations one batch() may carry. */
export const BATCH_OPS_MAX = 100_000;
/** Most encoded bytes one batch() may carry. */
export const BATCH_BYTES_MAX = 256 * 1024 * 1024;
/** Most entries one list() returns. */
export const LIST_LIMIT_MAX = 1_000_000;

type Opts = Record<string, unknown>;

/** The options of a call that passed none: shared and frozen, so no call allocates one and none can change it. */
const NO_OPTS: Opts = Object.freeze({});

/**
 * The options object of a call: undefined becomes an empty one, anything but a plain object is
 * refused, and so is a field that is a near miss of a name in `known` (option-names.ts; null: no
 * names to check, for bodies that are not a method's options).
 */
export function optsOf(v: unknown, call: string, known: ReadonlySet<string> | null = CALL_OPTION_NAMES): Opts {
  if (v === undefined || v === null) return NO_OPTS;
  if (typeof v !== "object" || Array.isArray(v)) throw new InvalidArgumentError(`${call}: options must be an object`);
  if (known !== null) {
    const misspelt = misspeltName(v, known);
    if (misspelt !== null) throwMisspelt(misspelt, known, call);
  }
  return v as Opts;
}

/** The `scope` option: "global" when absent (undefined); anything else, null included, must be a valid scope. */
export function scopeOf(o: Opts): string {
  const scope = o["scope"] === undefined ? ROOT_SCOPE : o["scope"];
  assertScope(scope);
  return scope;
}

/**
 * The scope forgetScope erases, checked: required, since a missing one would erase the whole
 * store (scopeOf's default is "global", right for an option and wrong for this argument); pass
 * "global" to erase everything.
 */
export function erasedScopeOf(scope: unknown): string {
  if (scope === undefined) throw new InvalidArgumentError('forgetScope needs the scope to erase as its first argument; pass "global" to erase every scope');
  return scopeOf({ scope });
}

/** A key, checked. */
export function keyOf(key: unknown): string {
  assertKey(key);
  return key;
}

/** An optional boolean option. */
export function boolOf(o: Opts, name: string, fallback: boolean): boolean {
  const v = o[name];
  if (v === undefined) return fallback;
  if (typeof v !== "boolean") throw new InvalidArgumentError(`option ${name} must be a boolean, got ${typeof v}`);
  return v;
}

/** `expectedVersion`: undefined (no check), null (no live value), or a positive integer. */
export function expectedVersionOf(o: Opts): number | null | undefined {
  const v = o["expectedVersion"];
  if (v === undefined || v === null) return v;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > SEQ_MAX) {
    throw new InvalidArgumentError(`expectedVersion must be null or a positive integer version, got ${String(v)}`);
  }
  return v;
}

/** Checks a TTL: undefined (the default applies), null (none), or a positive integer of milliseconds. */
export function checkTtl(name: string, v: unknown): number | null | undefined {
  if (v === undefined || v === null) return v;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > TTL_MS_MAX) {
    throw new InvalidArgumentError(`option ${name} must be null or an integer in [1, ${TTL_MS_MAX}], got ${String(v)}`);
  }
  return v;
}

/** `ttlMs`: undefined (scope or store default), null (never expires), or positive ms. */
export function ttlOf(o: Opts): number | null | undefined {
  return checkTtl("ttlMs", o["ttlMs"]);
}

/** `limit` of list(): a positive integer. */
export function limitOf(o: Opts): number {
  const v = o["limit"];
  if (v === undefined) return LIST_LIMIT_MAX;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > LIST_LIMIT_MAX) {
    throw new InvalidArgumentError(`limit must be an integer in [1, ${LIST_LIMIT_MAX}], got ${String(v)}`);
  }
  return v;
}

/** `prefix` of list(): a string (may be empty). */
export function prefixOf(o: Opts): string {
  const v = o["prefix"] ?? "";
  if (typeof v !== "string") throw new InvalidArgumentError(`prefix must be a string, got ${typeof v}`);
  return v;
}

/** `reclaim` of forgetScope(). */
export function reclaimOf(o: Opts): "lazy" | "eager" {
  const v = o["reclaim"] ?? "lazy";
  if (v !== "lazy" && v !== "eager") throw new InvalidArgumentError(`reclaim must be "lazy" or "eager", got ${String(v)}`);
  return v;
}

/** A value: a string or a Uint8Array (size is checked by the codec against valueBytesMax). */
export function valueOf(v: unknown): string | Uint8Array {
  if (typeof v === "string" || v instanceof Uint8Array) return v;
  throw new InvalidArgumentError(`value must be a string or a Uint8Array, got ${v === null ? "null" : typeof v}`);
}
