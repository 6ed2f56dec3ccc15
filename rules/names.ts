/**
 * The grammar of scope paths and keys (API.md "Scopes"). Pure checks, shared by the codec
 * (which refuses to encode a bad name) and the engine (which refuses before anything is queued).
 * A scope string is never turned into a file path; this grammar is still strict so that names
 * stay printable and unambiguous in logs and tables.
 */
import { InvalidArgumentError } from "./errors.js";
import { KEY_BYTES_MAX, ROOT_SCOPE, SCOPE_COMPONENT_BYTES_MAX, SCOPE_DEPTH_MAX } from "./limits.js";

const COMPONENT = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/;
const encoder = new TextEncoder();
/** Scopes already found valid: the check runs on every call, and most calls reuse a few scopes. */
const validScopes = new Set<string>();
const VALID_SCOPES_CACHED_MAX = 4096;

/** Throws InvalidArgumentError unless `scope` is "global" or 1–8 valid components joined by "/". */
export function assertScope(scope: unknown): asserts scope is string {
  if (typeof scope !== "string") {
    throw new InvalidArgumentError(`scope must be a string such as "global" or "user:alice/session:42", got ${typeof scope}`);
  }
  if (scope === ROOT_SCOPE || validScopes.has(scope)) return;
  const parts = scope.split("/");
  if (parts.length > SCOPE_DEPTH_MAX) {
    throw new InvalidArgumentError(`scope ${JSON.stringify(scope.slice(0, 80))} has ${parts.length} components; at most ${SCOPE_DEPTH_MAX}`);
  }
  for (const part of parts) {
    if (part === ROOT_SCOPE) {
      throw new InvalidArgumentError(`scope ${JSON.stringify(scope)}: "global" is the root and cannot be a component; drop it`);
    }
    if (part.length > SCOPE_COMPONENT_BYTES_MAX || !COMPONENT.test(part)) {
      throw new InvalidArgumentError(
        `scope ${JSON.stringify(scope.slice(0, 80))}: component ${JSON.stringify(part.slice(0, 80))} must match ` +
          `[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}`,
      );
    }
  }
  if (validScopes.size >= VALID_SCOPES_CACHED_MAX) validScopes.clear();
  validScopes.add(scope);
}

/** Throws InvalidArgumentError unless `key` is 1–1024 bytes of UTF-8 without NUL. */
export function assertKey(key: unknown): asserts key is string {
  if (typeof key !== "string") throw new InvalidArgumentError(`key must be a string, got ${typeof key}`);
  if (key.length === 0) throw new InvalidArgumentError("key must not be empty");
  if (key.includes("\u0000")) throw new InvalidArgumentError("key must not contain NUL");
  if (!key.isWellFormed()) throw new InvalidArgumentError("key must be well-formed UTF-16 (no lone surrogates)");
  // UTF-8 takes at most 3 bytes per UTF-16 unit, so short keys need no encoding to be checked.
  if (key.length * 3 > KEY_BYTES_MAX) {
    const bytes = encoder.encode(key).length;
    if (bytes > KEY_BYTES_MAX) throw new InvalidArgumentError(`key is ${bytes} bytes of UTF-8; at most ${KEY_BYTES_MAX}`);
  }
}

/** The parent of a scope: "a/b" -> "a", "a" -> "global", "global" -> null. */
export function parentScope(scope: string): string | null {
  if (scope === ROOT_SCOPE) return null;
  const cut = scope.lastIndexOf("/");
  return cut < 0 ? ROOT_SCOPE : scope.slice(0, cut);
}

/** The scope and its ancestors, nearest first, ending with "global". */
export function scopeLineage(scope: string): string[] {
  const out: string[] = [];
  for (let s: string | null = scope; s !== null; s = parentScope(s)) out.push(s);
  return out;
}

/** The highest `valueOf(s)` over `scope` and each of its ancestors up to "global", 0 for none. */
export function lineageMax(scope: string, valueOf: (s: string) => number): number {
  let max = 0;
  for (let s: string | null = scope; s !== null; s = parentScope(s)) max = Math.max(max, valueOf(s));
  return max;
}

/** True when `scope` is `root` or lies below it ("global" is above everything). */
export function scopeWithin(scope: string, root: string): boolean {
  if (root === ROOT_SCOPE) return true;
  return scope === root || (scope.length > root.length && scope.startsWith(root) && scope[root.length] === "/");
}
