/**
 * The public shapes of engram (API.md). They live in engine/ because the engine implements them;
 * src/types.ts re-exports them and the package entry exports everything here.
 */

/** A value as written and as returned: strings come back as strings, bytes as Uint8Array. */
export type Value = string | Uint8Array;

/** Named points where fault injection can pause or kill an operation. */
export type FaultPoint =
  | "read:after-authorize"
  | "write:after-append"
  | "write:after-sync"
  | "seal:after-truncate"
  | "compaction:after-journal"
  | "compaction:mid-rewrite"
  | "compaction:after-rewrite"
  | "compaction:before-swap"
  | "compaction:after-rename"
  | "compaction:before-unlink";

export interface FaultOptions {
  /** Operations reaching these points pause until `store.faults.release(point)`. */
  pauseAt?: FaultPoint[];
  /** The whole process is killed with SIGKILL when any thread reaches this point. */
  crashAt?: FaultPoint;
}

export interface CompactionOptions {
  mode?: "copy-on-write" | "in-place";
  workers?: number;
  auto?: boolean;
  garbageRatio?: number;
}

export interface RetentionOptions {
  ttlMs?: number | null;
  tombstoneRetentionMs?: number;
  scopes?: Record<string, { ttlMs?: number | null; tombstoneRetentionMs?: number }>;
}

export interface UnsafeOptions {
  /** GC sweeps by tombstone sequence watermark: reproduces phantom write loss. */
  gcKeyedBy?: "tombstone-seq";
  /** Materialize without the generation, scope and key re-checks: reproduces torn reads. */
  skipReadValidation?: boolean;
}

export interface OpenOptions {
  durability?: "sync" | "batch" | "none";
  syncIntervalMs?: number;
  segmentBytes?: number;
  maxValueBytes?: number;
  /** Budget of the hot-value cache in bytes (default 64 MiB; 0 turns it off). */
  cacheBytes?: number;
  compaction?: CompactionOptions;
  retention?: RetentionOptions;
  tombstoneWrites?: "auto-clear" | "require-clear";
  clock?: () => number;
  faults?: FaultOptions;
  unsafe?: UnsafeOptions;
}

export interface ScopeOption {
  scope?: string;
}

export interface WriteOptions extends ScopeOption {
  expectedVersion?: number | null;
  clearTombstone?: boolean;
  ttlMs?: number | null;
}

export interface WriteResult {
  ok: true;
  version: number;
  generation: number;
}

export interface ReadOptions extends ScopeOption {
  inherit?: boolean;
}

export type ReadResult =
  | { status: "OK"; value: Value; version: number; generation: number; scope: string }
  | { status: "NOT_FOUND" };

export interface ForgetResult {
  ok: true;
  tombstoneSeq: number | null;
  generation: number | null;
}

export interface ForgetScopeOptions {
  reclaim?: "lazy" | "eager";
}

export interface ForgetScopeResult {
  ok: true;
  tombstoneSeq: number;
  slots: number;
  reclaimedBytes?: number;
}

export interface UndeleteResult {
  ok: true;
  generation: number;
}

export type SlotState = "live" | "tombstoned" | "reclaimed" | "expired" | "absent";

export interface ProbeResult {
  state: SlotState;
  valuePresent: boolean;
  retentionPresent: boolean;
  physicalRecords: number;
  version: number | null;
  generation: number | null;
  tombstoneSeq: number | null;
  expiresAt: number | null;
}

export interface ListOptions extends ScopeOption {
  prefix?: string;
  inherit?: boolean;
  limit?: number;
}

export interface ListEntry {
  key: string;
  scope: string;
  version: number;
}

export type BatchOp =
  | ({ op: "write"; key: string; value: Value } & WriteOptions)
  | { op: "forget"; key: string; scope?: string };

export type BatchResult = WriteResult | ForgetResult;

export interface CompactOptions {
  mode?: "copy-on-write" | "in-place";
  segments?: number[];
}

export interface CompactionReport {
  segments: number[];
  mode: "copy-on-write" | "in-place";
  bytesBefore: number;
  bytesAfter: number;
  recordsKept: number;
  recordsDropped: number;
  durationMs: number;
}

export interface GcReport extends CompactionReport {
  retentionRecordsDropped: number;
}

export interface SegmentStats {
  id: number;
  generation: number;
  bytes: number;
  liveBytes: number;
  sealed: boolean;
  records: number;
  tombstones: number;
}

export interface StoreStats {
  segments: SegmentStats[];
  liveBytes: number;
  deadBytes: number;
  totalBytes: number;
  slots: number;
  liveSlots: number;
  tombstones: number;
  scopes: number;
  sequence: number;
  pendingGcSegments: number;
  compactions: number;
}

export interface VerifyProblem {
  segment: number;
  offset: number;
  detail: string;
}

export interface VerifyReport {
  ok: boolean;
  segments: number;
  records: number;
  bytes: number;
  problems: VerifyProblem[];
}

/** Progress callback for long operations (verify): bytes done of bytes total. */
export type ProgressFn = (bytesDone: number, bytesTotal: number) => void;
