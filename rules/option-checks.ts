/**
 * The checks of OpenOptions fields that both backends share: each refuses a bad value with an
 * InvalidArgumentError naming the option, what it must be, and what it got; an absent field takes
 * its default. Nothing is opened or created before these pass.
 */
import { InvalidArgumentError } from "./errors.js";

/** Throws the InvalidArgumentError of option `name`: it must be `want`, and was `got`. */
export function fail(name: string, want: string, got: unknown): never {
  const shown = typeof got === "string" ? JSON.stringify(got) : String(got);
  throw new InvalidArgumentError(`option ${name} must be ${want}, got ${shown}`);
}

/** A safe integer in [min, max], or `fallback` when absent. */
export function int(name: string, v: unknown, min: number, max: number, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) fail(name, `an integer in [${min}, ${max}]`, v);
  return v;
}

/** One of `allowed`, or `fallback` when absent. */
export function oneOf<T extends string>(name: string, v: unknown, allowed: readonly T[], fallback: T): T {
  if (v === undefined) return fallback;
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) fail(name, allowed.map((a) => JSON.stringify(a)).join(" or "), v);
  return v as T;
}

/** A plain object (not null, not an array), or {} when absent. */
export function object(name: string, v: unknown): Record<string, unknown> {
  if (v === undefined) return {};
  if (v === null || typeof v !== "object" || Array.isArray(v)) fail(name, "an object", v);
  return v as Record<string, unknown>;
}

/** The default largest value: 16 MiB. */
export const VALUE_BYTES_MAX_DEFAULT = 16 * 1024 * 1024;

/**
 * The `valueBytesMax` option, in [0, limit]; `maxValueBytes` is its older name and still accepted.
 * Both given with different values is refused: the caller must say which it means.
 */
export function valueBytesMaxOf(o: Record<string, unknown>, limit: number): number {
  const now = o["valueBytesMax"];
  const old = o["maxValueBytes"];
  if (now !== undefined && old !== undefined && now !== old) fail("maxValueBytes", `the same as valueBytesMax (${String(now)}), or left out: it is the older name of valueBytesMax`, old);
  return now !== undefined ? int("valueBytesMax", now, 0, limit, VALUE_BYTES_MAX_DEFAULT) : int("maxValueBytes", old, 0, limit, VALUE_BYTES_MAX_DEFAULT);
}
