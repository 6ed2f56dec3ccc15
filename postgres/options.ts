/**
 * OpenOptions for the PostgreSQL backend, checked and filled with defaults. The options that mean
 * something only to the embedded engine's files and threads are refused with INVALID_ARGUMENT
 * (API.md "Scale-out"), so that a caller never believes a setting took effect when it cannot.
 */
import { InvalidArgumentError } from "../rules/errors.js";
import { TTL_MS_MAX, VALUE_BYTES_MAX } from "../rules/limits.js";
import { checkTtl } from "../rules/args.js";
import type { OpenOptions } from "../rules/types.js";

/** One retention rule for the scopes matching `pattern` (component by component, `*` a wildcard). */
export interface ScopeRule {
  pattern: string;
  components: RegExp[];
  ttlMs: number | null | undefined;
  tombstoneRetentionMs: number | undefined;
}

/** The options the backend acts on. */
export interface PgOptions {
  durability: "sync" | "batch" | "none";
  maxValueBytes: number;
  ttlMs: number | null;
  tombstoneRetentionMs: number;
  scopeRules: ScopeRule[];
  tombstoneWrites: "auto-clear" | "require-clear";
  clock: () => number;
  unsafeGcBySeq: boolean;
}

/** Options that exist only for the embedded engine (its segment files, threads, cache, faults). */
export const ENGINE_ONLY_OPTIONS = ["segmentBytes", "compaction", "cacheBytes", "faults"] as const;
const SCOPE_RULES_MAX = 1024;
const PATTERN = /^(\*|[A-Za-z0-9*][A-Za-z0-9._:@*-]{0,63})(\/(\*|[A-Za-z0-9*][A-Za-z0-9._:@*-]{0,63})){0,7}$/;

function fail(name: string, want: string, got: unknown): never {
  throw new InvalidArgumentError(`option ${name} must be ${want}, got ${typeof got === "string" ? JSON.stringify(got) : String(got)}`);
}

function object(name: string, v: unknown): Record<string, unknown> {
  if (v === undefined) return {};
  if (v === null || typeof v !== "object" || Array.isArray(v)) fail(name, "an object", v);
  return v as Record<string, unknown>;
}

function int(name: string, v: unknown, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) fail(name, `an integer in [${min}, ${max}]`, v);
  return v;
}

function oneOf<T extends string>(name: string, v: unknown, allowed: readonly T[], dflt: T): T {
  if (v === undefined) return dflt;
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) fail(name, allowed.map((a) => JSON.stringify(a)).join(" or "), v);
  return v as T;
}

function scopeRules(v: unknown): ScopeRule[] {
  const rules = object("retention.scopes", v);
  const names = Object.keys(rules);
  if (names.length > SCOPE_RULES_MAX) fail("retention.scopes", `at most ${SCOPE_RULES_MAX} patterns`, names.length);
  return names.map((pattern) => {
    if (!PATTERN.test(pattern)) fail("retention.scopes key", 'a scope pattern such as "user:*/session:*"', pattern);
    const rule = object(`retention.scopes[${pattern}]`, rules[pattern]);
    const window = rule["tombstoneRetentionMs"];
    return {
      pattern,
      components: pattern.split("/").map((part) => new RegExp(`^${part.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`)),
      ttlMs: checkTtl(`retention.scopes[${pattern}].ttlMs`, rule["ttlMs"]),
      tombstoneRetentionMs: window === undefined ? undefined : int(`retention.scopes[${pattern}].tombstoneRetentionMs`, window, 0, TTL_MS_MAX, 0),
    };
  });
}

/** The first rule whose pattern matches `scope` component by component, or null. */
export function matchScopeRule(rules: readonly ScopeRule[], scope: string): ScopeRule | null {
  if (rules.length === 0) return null;
  const parts = scope.split("/");
  for (const rule of rules) {
    if (rule.components.length === parts.length && rule.components.every((re, i) => re.test(parts[i] as string))) return rule;
  }
  return null;
}

/** Validates OpenOptions for PostgreSQL; throws InvalidArgumentError for bad or engine-only ones. */
export function resolvePgOptions(input: OpenOptions | undefined): PgOptions {
  const o = object("options", input);
  for (const name of ENGINE_ONLY_OPTIONS) {
    if (o[name] !== undefined) {
      throw new InvalidArgumentError(`option ${name} applies only to the embedded engine (a directory); drop it when opening a PostgreSQL URL`);
    }
  }
  const r = object("retention", o["retention"]);
  const u = object("unsafe", o["unsafe"]);
  if (u["skipReadValidation"] !== undefined) {
    throw new InvalidArgumentError("option unsafe.skipReadValidation applies only to the embedded engine: PostgreSQL reads have no segment offsets to tear");
  }
  if (u["gcKeyedBy"] !== undefined && u["gcKeyedBy"] !== "tombstone-seq") fail("unsafe.gcKeyedBy", '"tombstone-seq"', u["gcKeyedBy"]);
  if (o["clock"] !== undefined && typeof o["clock"] !== "function") fail("clock", "a function returning ms since epoch", o["clock"]);
  if (o["share"] !== undefined && typeof o["share"] !== "boolean") fail("share", "a boolean", o["share"]);
  int("syncIntervalMs", o["syncIntervalMs"], 1, 60_000, 50);
  int("shareTimeoutMs", o["shareTimeoutMs"], 1, 3_600_000, 10_000);
  return {
    durability: oneOf("durability", o["durability"], ["sync", "batch", "none"] as const, "sync"),
    maxValueBytes: int("maxValueBytes", o["maxValueBytes"], 0, VALUE_BYTES_MAX, 16 * 1024 * 1024),
    ttlMs: checkTtl("retention.ttlMs", r["ttlMs"]) ?? null,
    tombstoneRetentionMs: int("retention.tombstoneRetentionMs", r["tombstoneRetentionMs"], 0, TTL_MS_MAX, 24 * 3600 * 1000),
    scopeRules: scopeRules(r["scopes"]),
    tombstoneWrites: oneOf("tombstoneWrites", o["tombstoneWrites"], ["auto-clear", "require-clear"] as const, "auto-clear"),
    clock: (o["clock"] as (() => number) | undefined) ?? Date.now,
    unsafeGcBySeq: u["gcKeyedBy"] === "tombstone-seq",
  };
}
