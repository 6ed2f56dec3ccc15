/**
 * A small `expect` over node:assert, so that the conformance suite needs no test framework of its
 * own: the caller's runner (vitest, node:test, mocha) only registers and reports, and every check
 * fails with an AssertionError that any runner understands. It covers exactly the matchers the
 * suite uses, with vitest's meaning: `toEqual` compares recursively, ignores properties whose
 * value is undefined, compares typed arrays by content, and accepts `expect.any(Class)`;
 * `toMatchObject` checks a subset. Every check made is counted (`assertionCount`), so that a run
 * can report how many assertions it made.
 */
import * as assert from "node:assert/strict";
import { inspect } from "node:util";

let count = 0;

/** Assertions made so far in this process. */
export function assertionCount(): number {
  return count;
}

class AnyOf {
  constructor(readonly type: unknown) {}
  matches(v: unknown): boolean {
    if (this.type === Number) return typeof v === "number";
    if (this.type === String) return typeof v === "string";
    if (this.type === Boolean) return typeof v === "boolean";
    if (this.type === Array) return Array.isArray(v);
    if (this.type === Object) return typeof v === "object" && v !== null;
    return typeof this.type === "function" && v instanceof (this.type as new (...a: never[]) => unknown);
  }
  [inspect.custom](): string {
    return `Any<${(this.type as { name?: string }).name ?? "?"}>`;
  }
}

function isPlain(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !ArrayBuffer.isView(v) && !Array.isArray(v);
}

/** vitest's toEqual (subset = false) or toMatchObject (subset = true). */
function equals(a: unknown, b: unknown, subset: boolean): boolean {
  if (b instanceof AnyOf) return b.matches(a);
  if (b instanceof RegExp && typeof a === "string") return subset && b.test(a);
  if (Object.is(a, b)) return true;
  if (ArrayBuffer.isView(a) && ArrayBuffer.isView(b)) {
    const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    return x.length === y.length && x.every((v, i) => v === y[i]);
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => equals(v, b[i], subset));
  }
  if (isPlain(a) && isPlain(b)) {
    const keysB = Object.keys(b).filter((k) => b[k] !== undefined);
    if (!subset) {
      const keysA = Object.keys(a).filter((k) => a[k] !== undefined);
      if (keysA.length !== keysB.length) return false;
    }
    return keysB.every((k) => equals(a[k], b[k], subset));
  }
  return false;
}

function show(v: unknown): string {
  return inspect(v, { depth: 6, breakLength: 120 });
}

function check(ok: boolean, message: string | undefined, what: string): void {
  count += 1;
  if (!ok) assert.fail(message === undefined ? what : `${message}: ${what}`);
}

/** The matchers on a value. */
export interface Matchers {
  /** The value is `want` by Object.is. */
  toBe(want: unknown): void;
  /** The value equals `want` recursively (undefined properties ignored, typed arrays by content, `expect.any` matches a type). */
  toEqual(want: unknown): void;
  /** The value holds `want`'s properties recursively (a subset; a RegExp matches a string). */
  toMatchObject(want: unknown): void;
  /** The value is an instance of `type`. */
  toBeInstanceOf(type: abstract new (...args: never[]) => unknown): void;
  /** The value is a number greater than `n`. */
  toBeGreaterThan(n: number): void;
  /** The value is a number greater than or equal to `n`. */
  toBeGreaterThanOrEqual(n: number): void;
  /** The value is a number less than `n`. */
  toBeLessThan(n: number): void;
  /** The value is null. */
  toBeNull(): void;
  /** The value, a string or an array, includes `item`. */
  toContain(item: unknown): void;
  /** The value is a string that matches `re` (a string: contains it). */
  toMatch(re: RegExp | string): void;
  /** The value, a function, throws when called: an error whose message matches `want` (RegExp or substring) or of class `want`; any throw without `want`. */
  toThrow(want?: RegExp | string | (abstract new (...args: never[]) => unknown)): void;
}

/** Matchers on the reason a promise rejects with. */
export interface AsyncMatchers {
  /** The promise rejects with an instance of `type`. */
  toBeInstanceOf(type: abstract new (...args: never[]) => unknown): Promise<void>;
  /** The promise rejects with a reason that holds `want`'s properties. */
  toMatchObject(want: unknown): Promise<void>;
  /** The promise rejects with an error whose message matches `want` (RegExp or substring) or of class `want`; any rejection without `want`. */
  toThrow(want?: RegExp | string | (abstract new (...args: never[]) => unknown)): Promise<void>;
}

function matchers(actual: unknown, message: string | undefined, negate: boolean): Matchers {
  const is = (ok: boolean, what: string): void => check(negate ? !ok : ok, message, (negate ? "not: " : "") + what);
  return {
    toBe: (want) => is(Object.is(actual, want), `expected ${show(actual)} to be ${show(want)}`),
    toEqual: (want) => is(equals(actual, want, false), `expected ${show(actual)} to equal ${show(want)}`),
    toMatchObject: (want) => is(equals(actual, want, true), `expected ${show(actual)} to match ${show(want)}`),
    toBeInstanceOf: (type) => is(actual instanceof type, `expected ${show(actual)} to be an instance of ${type.name}`),
    toBeGreaterThan: (n) => is(typeof actual === "number" && actual > n, `expected ${show(actual)} > ${n}`),
    toBeGreaterThanOrEqual: (n) => is(typeof actual === "number" && actual >= n, `expected ${show(actual)} >= ${n}`),
    toBeLessThan: (n) => is(typeof actual === "number" && actual < n, `expected ${show(actual)} < ${n}`),
    toBeNull: () => is(actual === null, `expected ${show(actual)} to be null`),
    toContain: (item) => is((typeof actual === "string" || Array.isArray(actual)) && actual.includes(item as never), `expected ${show(actual)} to contain ${show(item)}`),
    toMatch: (re) => is(typeof actual === "string" && (typeof re === "string" ? actual.includes(re) : re.test(actual)), `expected ${show(actual)} to match ${String(re)}`),
    toThrow: (want) => {
      let thrown: unknown = undefined;
      let did = false;
      try {
        (actual as () => unknown)();
      } catch (err) {
        thrown = err;
        did = true;
      }
      is(did && thrownMatches(thrown, want), `expected a throw matching ${String(want)}, got ${did ? show(thrown) : "no throw"}`);
    },
  };
}

function thrownMatches(err: unknown, want: RegExp | string | (abstract new (...args: never[]) => unknown) | undefined): boolean {
  if (want === undefined) return true;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof want === "string") return message.includes(want);
  if (want instanceof RegExp) return want.test(message);
  return err instanceof want;
}

/** Awaits `p` and hands its rejection reason to `fn`; a fulfilled promise is a failed check. */
async function rejection(p: unknown, message: string | undefined): Promise<unknown> {
  try {
    const v = await (typeof p === "function" ? (p as () => unknown)() : p);
    check(false, message, `expected a rejection, got ${show(v)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    return err;
  }
  return undefined;
}

/** expect(actual, message?) with vitest's matcher names. */
export interface Expect {
  /** The matchers on `actual`; `message` prefixes every failure. `.not` negates, `.rejects` checks a promise's rejection. */
  (actual: unknown, message?: string): Matchers & { not: Matchers; rejects: AsyncMatchers };
  /** A placeholder for `toEqual`/`toMatchObject` that matches any value of `type` (Number, String, Boolean, Array, Object or a class). */
  any(type: unknown): unknown;
}

/**
 * The suite's `expect(actual, message?)`: vitest's matchers (with `.not` and `.rejects`) over
 * node:assert, failing with an AssertionError and counting every check (`assertionCount`).
 */
export const expect: Expect = Object.assign(
  (actual: unknown, message?: string) => ({
    ...matchers(actual, message, false),
    not: matchers(actual, message, true),
    rejects: {
      toBeInstanceOf: async (type: abstract new (...args: never[]) => unknown) => matchers(await rejection(actual, message), message, false).toBeInstanceOf(type),
      toMatchObject: async (want: unknown) => matchers(await rejection(actual, message), message, false).toMatchObject(want),
      toThrow: async (want?: RegExp | string | (abstract new (...args: never[]) => unknown)) => {
        const err = await rejection(actual, message);
        check(thrownMatches(err, want), message, `expected a rejection matching ${String(want)}, got ${show(err)}`);
      },
    },
  }),
  { any: (type: unknown): unknown => new AnyOf(type) },
);
