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
