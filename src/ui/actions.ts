/**
 * The inspector's state-changing calls: forget a key, forget a scope, gc, compact. Each goes
 * through the store's public API, so it is checked, refused and reported exactly like any other
 * call (a refusal comes back as its EngramError code and message, nothing written).
 */
import * as A from "../../rules/args.js";
import { InvalidArgumentError } from "../../rules/errors.js";
import { ROOT_SCOPE } from "../../rules/limits.js";
import type { Engram } from "../engram.js";

/** The action names the page may POST to /api/<name>. */
export const ACTION_NAMES = ["forget", "forget-scope", "gc", "compact"] as const;
/** One of ACTION_NAMES. */
export type ActionName = (typeof ACTION_NAMES)[number];

/** True when `name` is an action. */
export function isAction(name: string): name is ActionName {
  return (ACTION_NAMES as readonly string[]).includes(name);
}

/** The `mode` of compact: absent (the store's default), or one of the two modes. */
function modeOf(body: Record<string, unknown>): { mode?: "copy-on-write" | "in-place" } {
  const mode = body["mode"];
  if (mode === undefined || mode === null || mode === "") return {};
  if (mode !== "copy-on-write" && mode !== "in-place") throw new InvalidArgumentError(`mode must be "copy-on-write" or "in-place", got ${String(mode)}`);
  return { mode };
}

/**
 * The `scope` of a body: absent means "global"; anything else must be a string (API.md: null or
 * a number is a bad scope; the engine's own check lets null through as "global", and here that
 * would turn a malformed request into a forget in the root scope).
 */
function scopeIn(body: Record<string, unknown>): string {
  const v = body["scope"];
  if (v !== undefined && typeof v !== "string") {
    throw new InvalidArgumentError(`scope must be a string such as "user:alice/session:1", got ${v === null ? "null" : typeof v}`);
  }
  return A.scopeOf(body);
}

/** The scope to erase: any valid scope but "global", refused as the agent tools and the CLI refuse it. */
function eraseScopeOf(body: Record<string, unknown>): string {
  const scope = scopeIn(body);
  if (scope === ROOT_SCOPE) throw new InvalidArgumentError('forget-scope refuses "global" (it would erase every memory): forget the scopes below it, or delete the directory');
  return scope;
}

/** Runs action `name` with the POSTed JSON `body`; resolves to the API call's own result. */
export async function runAction(store: Engram, name: ActionName, raw: unknown): Promise<unknown> {
  const body = A.optsOf(raw, `ui ${name}`, null);
  switch (name) {
    case "forget":
      return store.forget(A.keyOf(body["key"]), { scope: scopeIn(body) });
    case "forget-scope":
      return store.forgetScope(eraseScopeOf(body), { reclaim: A.reclaimOf(body) });
    case "gc":
      return store.gc();
    case "compact":
      return store.compact(modeOf(body));
  }
}
