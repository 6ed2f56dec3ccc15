/**
 * OpenOptions for the PostgreSQL backend, checked and filled with defaults. The options that mean
 * something only to the embedded engine's files and threads are refused with INVALID_ARGUMENT
 * (API.md "Scale-out"), so that a caller never believes a setting took effect when it cannot.
 */
import { InvalidArgumentError } from "../rules/errors.js";
import { TTL_MS_MAX, VALUE_BYTES_MAX } from "../rules/limits.js";
import { checkTtl } from "../rules/args.js";
import type { OpenOptions } from "../rules/types.js";
import { fail, int, object, oneOf, valueBytesMaxOf } from "../rules/option-checks.js";
import { refuseMisspeltOpenOptions } from "../rules/option-names.js";
import { parseScopeRules, type ScopeRule } from "../rules/scope-rules.js";

export { matchScopeRule } from "../rules/scope-rules.js";

/** The options the backend acts on. */
export interface PgOptions {
  durability: "sync" | "batch" | "none";
  /** Largest value accepted, in bytes (option `valueBytesMax`, formerly `maxValueBytes`). */
  valueBytesMax: number;
  ttlMs: number | null;
  tombstoneRetentionMs: number;
  scopeRules: ScopeRule[];
  tombstoneWrites: "auto-clear" | "require-clear";
  clock: () => number;
  unsafeGcBySeq: boolean;
}

/** Options that exist only for the embedded engine (its segment files, threads, cache, faults). */
export const ENGINE_ONLY_OPTIONS = ["segmentBytes", "compaction", "cacheBytes", "blockCacheBytes", "faults"] as const;

/** Validates OpenOptions for PostgreSQL; throws InvalidArgumentError for bad or engine-only ones. */
export function resolvePgOptions(input: OpenOptions | undefined): PgOptions {
  const o = object("options", input);
  refuseMisspeltOpenOptions(o);
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
    valueBytesMax: valueBytesMaxOf(o, VALUE_BYTES_MAX),
    ttlMs: checkTtl("retention.ttlMs", r["ttlMs"]) ?? null,
    tombstoneRetentionMs: int("retention.tombstoneRetentionMs", r["tombstoneRetentionMs"], 0, TTL_MS_MAX, 24 * 3600 * 1000),
    scopeRules: parseScopeRules(r["scopes"]),
    tombstoneWrites: oneOf("tombstoneWrites", o["tombstoneWrites"], ["auto-clear", "require-clear"] as const, "auto-clear"),
    clock: (o["clock"] as (() => number) | undefined) ?? Date.now,
    unsafeGcBySeq: u["gcKeyedBy"] === "tombstone-seq",
  };
}
