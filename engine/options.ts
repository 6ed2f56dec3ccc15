/**
 * OpenOptions checked and filled with defaults. Every bad option is an InvalidArgumentError that
 * names the option and says what is allowed; nothing is opened or created before this passes.
 */
import { TTL_MS_MAX, VALUE_BYTES_MAX } from "../rules/limits.js";
import { checkTtl } from "../rules/args.js";
import { CRASH_ONLY_POINTS, isFaultPoint } from "./faults.js";
import { CRASH_AFTER_MAX, FAIL_ERRNOS, FAIL_TIMES_MAX, IO_FAULT_POINTS, type FailErrno, type FailSpec } from "../segments/io-faults.js";
import type { FaultPoint, OpenOptions } from "../rules/types.js";
import { fail, int, object, oneOf, valueBytesMaxOf } from "../rules/option-checks.js";
import { refuseMisspeltOpenOptions } from "../rules/option-names.js";
import { parseScopeRules, type ScopeRule } from "../rules/scope-rules.js";

/** OpenOptions with every default applied. */
export interface ResolvedOptions {
  durability: "sync" | "batch" | "none";
  syncIntervalMs: number;
  segmentBytes: number;
  /** Largest value accepted, in bytes (option `valueBytesMax`, formerly `maxValueBytes`). */
  valueBytesMax: number;
  cacheBytes: number;
  /** Budget of the block cache of sealed segments (engine/block-cache.ts); 0 turns it off. */
  blockCacheBytes: number;
  /** `niceness`: the compaction threads' CPU priority below the process's (0: the same; Linux only). */
  compaction: { mode: "copy-on-write" | "in-place"; workers: number; auto: boolean; garbageRatio: number; niceness: number };
  ttlMs: number | null;
  tombstoneRetentionMs: number;
  scopeRules: ScopeRule[];
  tombstoneWrites: "auto-clear" | "require-clear";
  clock: () => number;
  pauseAt: FaultPoint[];
  crashAt: FaultPoint | null;
  /** Arrivals at `crashAt` that pass before the one that kills (`faults.crashAfter`, default 0). */
  crashAfter: number;
  /** The failure `faults.failAt` arms at open, null for none. */
  failAt: FailSpec | null;
  /** A `faults` option was given: the store keeps a fault table (failures can be armed later). */
  faultsOn: boolean;
  unsafeGcBySeq: boolean;
  unsafeSkipReadValidation: boolean;
}

/** Limits on options themselves. */
export const SEGMENT_BYTES_MIN = 4096;
export const SEGMENT_BYTES_MAX = 1024 * 1024 * 1024;
export const WORKERS_MAX = 16;
/**
 * How far below the process's CPU priority compaction threads run by default (`compaction.niceness`:
 * added to their nice value, Linux only). On 2 cores a pass beside a read-heavy main thread took the
 * CPU the reads waited for (W5's read-all queued 222–339 ms behind it, docs/performance-history.md,
 * compact-13); a lower priority lets the thread that serves calls go first when they contend, as
 * RocksDB lowers its compaction threads' priority. A thread may always lower its own priority.
 */
export const NICENESS_DEFAULT = 10;
/** The lowest priority Linux has (nice 19). */
export const NICENESS_MAX = 19;
export const CACHE_BYTES_MAX = 16 * 1024 * 1024 * 1024;
/** The block cache's budget: 0 (off), or at least four blocks (64 KiB of 16 KiB blocks) and at most CACHE_BYTES_MAX. */
export const BLOCK_CACHE_BYTES_MIN = 64 * 1024;

/** `blockCacheBytes`: 0 or an integer in [BLOCK_CACHE_BYTES_MIN, CACHE_BYTES_MAX]; 64 MiB when absent. */
function blockCacheBytes(v: unknown): number {
  if (v === undefined) return 64 * 1024 * 1024;
  if (v === 0) return 0;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < BLOCK_CACHE_BYTES_MIN || v > CACHE_BYTES_MAX) {
    fail("blockCacheBytes", `0 (off) or an integer in [${BLOCK_CACHE_BYTES_MIN}, ${CACHE_BYTES_MAX}]`, v);
  }
  return v;
}

/** A number in (0, 1), or `fallback` when absent. */
function ratio(name: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || v >= 1) fail(name, "a number in (0, 1)", v);
  return v;
}

/** `faults.failAt`: the one I/O failure to arm at open (point, errno, times), or null. */
function failAt(v: unknown): FailSpec | null {
  if (v === undefined) return null;
  const f = object("faults.failAt", v);
  const point = f["point"];
  if (!(IO_FAULT_POINTS as readonly unknown[]).includes(point)) fail("faults.failAt.point", `one of ${IO_FAULT_POINTS.join(", ")}`, point);
  const errno = f["errno"];
  if (!(FAIL_ERRNOS as readonly unknown[]).includes(errno)) fail("faults.failAt.errno", `one of ${FAIL_ERRNOS.join(", ")}`, errno);
  const times = int("faults.failAt.times", f["times"], 1, FAIL_TIMES_MAX, 1);
  return { point: point as FaultPoint, errno: errno as FailErrno, times };
}

/** The `faults` option: points to pause at, the point to crash at and the arrivals there that pass first, the failure to arm. */
function faults(v: unknown): { pauseAt: FaultPoint[]; crashAt: FaultPoint | null; crashAfter: number; failAt: FailSpec | null } {
  const f = object("faults", v);
  const pauseAt = f["pauseAt"] ?? [];
  if (!Array.isArray(pauseAt) || !pauseAt.every(isFaultPoint)) fail("faults.pauseAt", "an array of fault point names", pauseAt);
  const crashOnly = (pauseAt as FaultPoint[]).find((p) => CRASH_ONLY_POINTS.includes(p));
  if (crashOnly !== undefined) fail("faults.pauseAt", `points that can pause (${crashOnly} lies in a synchronous turn: use crashAt for it)`, crashOnly);
  // A system call's point is met in synchronous main-thread turns too (a commit's writev, a seal), where nothing can pause.
  const ioPoint = (pauseAt as FaultPoint[]).find((p) => IO_FAULT_POINTS.includes(p));
  if (ioPoint !== undefined) fail("faults.pauseAt", `points that can pause (${ioPoint} is a system call's point: it takes crashAt and failAt; pause at an engine point such as write:after-append)`, ioPoint);
  const crashAt = f["crashAt"] ?? null;
  if (crashAt !== null && !isFaultPoint(crashAt)) fail("faults.crashAt", "a fault point name", crashAt);
  if (crashAt === null && f["crashAfter"] !== undefined) fail("faults.crashAfter", "given with faults.crashAt (the point whose arrivals it counts)", f["crashAfter"]);
  const crashAfter = int("faults.crashAfter", f["crashAfter"], 0, CRASH_AFTER_MAX, 0);
  return { pauseAt: [...pauseAt], crashAt, crashAfter, failAt: failAt(f["failAt"]) };
}

/** Validates OpenOptions and applies the defaults of API.md. */
export function resolveOptions(input: OpenOptions | undefined): ResolvedOptions {
  const o = object("options", input) as OpenOptions & Record<string, unknown>;
  refuseMisspeltOpenOptions(o);
  const c = object("compaction", o.compaction);
  const r = object("retention", o.retention);
  const u = object("unsafe", o.unsafe);
  if (o.clock !== undefined && typeof o.clock !== "function") fail("clock", "a function returning ms since epoch", o.clock);
  const ttl = checkTtl("retention.ttlMs", r["ttlMs"]);
  const f = faults(o.faults);
  if (u["gcKeyedBy"] !== undefined && u["gcKeyedBy"] !== "tombstone-seq") fail("unsafe.gcKeyedBy", '"tombstone-seq"', u["gcKeyedBy"]);
  if (u["skipReadValidation"] !== undefined && typeof u["skipReadValidation"] !== "boolean") fail("unsafe.skipReadValidation", "a boolean", u["skipReadValidation"]);
  if (c["auto"] !== undefined && typeof c["auto"] !== "boolean") fail("compaction.auto", "a boolean", c["auto"]);
  return {
    durability: oneOf("durability", o.durability, ["sync", "batch", "none"] as const, "sync"),
    syncIntervalMs: int("syncIntervalMs", o.syncIntervalMs, 1, 60_000, 50),
    segmentBytes: int("segmentBytes", o.segmentBytes, SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX, 64 * 1024 * 1024),
    valueBytesMax: valueBytesMaxOf(o as Record<string, unknown>, VALUE_BYTES_MAX),
    cacheBytes: int("cacheBytes", o.cacheBytes, 0, CACHE_BYTES_MAX, 64 * 1024 * 1024),
    blockCacheBytes: blockCacheBytes(o.blockCacheBytes),
    compaction: {
      mode: oneOf("compaction.mode", c["mode"], ["copy-on-write", "in-place"] as const, "copy-on-write"),
      workers: int("compaction.workers", c["workers"], 0, WORKERS_MAX, 1),
      auto: (c["auto"] as boolean | undefined) ?? true,
      garbageRatio: ratio("compaction.garbageRatio", c["garbageRatio"], 0.5),
      niceness: int("compaction.niceness", c["niceness"], 0, NICENESS_MAX, NICENESS_DEFAULT),
    },
    ttlMs: ttl ?? null,
    tombstoneRetentionMs: int("retention.tombstoneRetentionMs", r["tombstoneRetentionMs"], 0, TTL_MS_MAX, 24 * 3600 * 1000),
    scopeRules: parseScopeRules(r["scopes"]),
    tombstoneWrites: oneOf("tombstoneWrites", o.tombstoneWrites, ["auto-clear", "require-clear"] as const, "auto-clear"),
    clock: o.clock ?? Date.now,
    pauseAt: f.pauseAt,
    crashAt: f.crashAt,
    crashAfter: f.crashAfter,
    failAt: f.failAt,
    faultsOn: o.faults !== undefined,
    unsafeGcBySeq: u["gcKeyedBy"] === "tombstone-seq",
    unsafeSkipReadValidation: u["skipReadValidation"] === true,
  };
}
