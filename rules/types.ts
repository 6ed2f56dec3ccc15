/**
 * The public shapes of engram (API.md). They live in rules/ because every backend implements
 * them (the embedded engine, a shared-store client, PostgreSQL); src/types.ts re-exports them and
 * the package entry exports everything here.
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
  | "compaction:before-unlink"
  // System calls that change the file system, and reads of the bytes the store holds (io:read)
  // (segments/io.ts); `failAt` targets these.
  | "io:create"
  | "io:append"
  | "io:sync"
  | "io:seal"
  | "io:journal"
  | "io:rewrite"
  | "io:copy"
  | "io:rename"
  | "io:dir-sync"
  | "io:unlink"
  | "io:preallocate"
  | "io:manifest"
  | "io:hint"
  | "io:read";

export interface FaultOptions {
  /** Operations reaching these points pause until `store.faults.release(point)`. */
  pauseAt?: FaultPoint[];
  /** The whole process is killed with SIGKILL when any thread reaches this point. */
  crashAt?: FaultPoint;
  /**
   * Arrivals at `crashAt`, on any thread, that go on before the one that kills: 0 (the default)
   * kills at the first; N lets a test stop the store in the middle of the work at a point that
   * the open itself meets (a recovery's reads, its seal). Only with `crashAt`; at most 1,000,000.
   */
  crashAfter?: number;
  /** The file operation at `point` fails as the file system would, `times` times (default 1). */
  failAt?: { point: FaultPoint; errno: "EIO" | "ENOSPC"; times?: number };
}

export interface CompactionOptions {
  mode?: "copy-on-write" | "in-place";
  workers?: number;
  auto?: boolean;
  garbageRatio?: number;
  /** How far below the process's CPU priority compaction threads run (0..19, default 10; 0 = the same; Linux only). */
  niceness?: number;
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
  /**
   * A sharing owner answers a client's write as soon as it is queued, before it commits:
   * reproduces the lost-acknowledged-write failure of two processes on one file (owner only).
   */
  shareAckBeforeCommit?: boolean;
}

export interface OpenOptions {
  /**
   * "sync" (default): a write resolves after the fdatasync that makes it durable (group commit).
   * "batch": an fdatasync at least every `syncIntervalMs`. "none": the OS decides; only flush()
   * makes writes durable, and close() syncs nothing.
   */
  durability?: "sync" | "batch" | "none";
  syncIntervalMs?: number;
  segmentBytes?: number;
  /** Largest value accepted, in bytes (default 16 MiB); larger values are INVALID_ARGUMENT. */
  valueBytesMax?: number;
  /** The older name of `valueBytesMax`, still accepted (giving both with different values is INVALID_ARGUMENT). */
  maxValueBytes?: number;
  /** Budget of the hot-value cache in bytes (default 64 MiB; 0 turns it off). */
  cacheBytes?: number;
  /**
   * Budget of the block cache in bytes: sealed segments' bytes kept in 64 KiB blocks, so a read
   * whose value is not cached costs a copy instead of a pread (default 64 MiB; 0 turns it off;
   * otherwise 65536 – 16 GiB).
   */
  blockCacheBytes?: number;
  compaction?: CompactionOptions;
  retention?: RetentionOptions;
  tombstoneWrites?: "auto-clear" | "require-clear";
  clock?: () => number;
  faults?: FaultOptions;
  unsafe?: UnsafeOptions;
  /** Several processes on one directory: the first opener owns, later ones attach (API.md "Sharing"). */
  share?: boolean;
  /** How long a shared client's calls wait for a new owner during a handover (default 10000 ms). */
  shareTimeoutMs?: number;
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

/** What `store.backup(targetDir)` did (API.md "Integrations"). */
export interface BackupReport {
  /** The new store directory. */
  dir: string;
  /** Segment files in the copy. */
  segments: number;
  /** Sealed segments hard-linked (they are never written again: see docs/ENGINE.md "Backup"). */
  linked: number;
  /** Segments copied: the unsealed ones, and sealed ones where a link was refused (another file system). */
  copied: number;
  /** Bytes in the copy's segment files. */
  bytes: number;
  /** The origin's commit sequence when the copy was taken: the copy holds everything committed up to it. */
  sequence: number;
  /** The copy's verification (every header and record checksum). */
  verify: VerifyReport;
}

/** One slot in an export (`engram export`): its live value, or its retention record without a value. */
export type ExportEntry =
  | { kind: "value"; scope: string; key: string; value: Value; version: number; generation: number; expiresAt: number | null }
  | { kind: "retention"; scope: string; key: string; state: SlotState; version: number | null; generation: number | null; tombstoneSeq: number | null };

/** Which part a handle plays: the process that holds the store, or one attached to it. */
export type Role = "owner" | "client";

/** Test-facing fault controls: pause an operation at a named point, then let it go. */
export interface Faults {
  /** Resolves when some operation is paused at `point`. */
  waitFor(point: FaultPoint): Promise<void>;
  /** Lets the operations paused at `point` go on; the point stays armed. */
  release(point: FaultPoint): void;
  /** Embedded store only: the next `times` system calls at an `io:*` point fail with `errno` (0 disarms). */
  failAt?(point: FaultPoint, errno: "EIO" | "ENOSPC", times?: number): void;
  /** Embedded store only: injected failures armed and not yet fired. */
  failuresLeft?(): number;
}

/**
 * What every backend implements: the embedded engine (engine/store.ts), a client of a shared
 * store, the PostgreSQL backend. The public `Engram` class forwards each call to one of them, so
 * that all three have the same TypeScript type and the same errors. Contracts: API.md.
 */
export interface Backend {
  /** Where the store lives: a directory, or a database URL without its password. */
  readonly dir: string;
  /** "owner" for an embedded store or a shared store's owner, "client" when attached to one. */
  readonly role: Role;
  readonly faults: Faults;
  write(key: string, value: Value, options?: WriteOptions): Promise<WriteResult>;
  read(key: string, options?: ReadOptions): Promise<ReadResult>;
  readSync(key: string, options?: ReadOptions): ReadResult;
  forget(key: string, options?: ScopeOption): Promise<ForgetResult>;
  forgetScope(scope: string, options?: ForgetScopeOptions): Promise<ForgetScopeResult>;
  undelete(key: string, options?: ScopeOption): Promise<UndeleteResult>;
  probe(key: string, options?: ScopeOption): Promise<ProbeResult>;
  list(options?: ListOptions): AsyncIterable<ListEntry>;
  batch(ops: BatchOp[]): Promise<BatchResult[]>;
  compact(options?: CompactOptions): Promise<CompactionReport>;
  gc(): Promise<GcReport>;
  stats(): StoreStats;
  verify(onProgress?: ProgressFn): Promise<VerifyReport>;
  flush(): Promise<void>;
  close(): Promise<void>;
  /** Inspectors (`engram ui`): scopes holding at least one slot, sorted. Optional: NOT_SUPPORTED where absent. */
  listScopes?(): Promise<string[]>;
  /** Inspectors: keys of every slot of exactly `scope` in any state, sorted, at most `limit`. Optional. */
  listSlots?(scope: string, limit: number): Promise<string[]>;
  /** An online, consistent copy into a new directory; absent where it does not apply (Engram.backup then throws NotSupportedError). */
  backup?(targetDir: string): Promise<BackupReport>;
  /** Every slot of `scope` and below (default all), live values and retention records, in scope then key order. */
  exportEntries?(options?: ScopeOption): AsyncIterable<ExportEntry>;
  /** Raises the commit sequence to at least `floor`, durably, so that later versions are above it (import); returns it. */
  raiseSequence?(floor: number): Promise<number>;
}
