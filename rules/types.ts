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
  | "compaction:after-output-rename"
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

/**
 * Fault injection for tests (`faults` at open, API.md "Fault injection"); `{}` is enough to arm
 * failures later with `store.faults.failAt`. Refused on a shared store's client and on PostgreSQL.
 */
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

/** Compaction of sealed segments (`compaction` at open); embedded engine only: PostgreSQL refuses it with INVALID_ARGUMENT. */
export interface CompactionOptions {
  /**
   * How a segment is compacted: "copy-on-write" (default) copies its surviving records into a new
   * segment and swaps it in; "in-place" rewrites the segment's own file under a journal.
   */
  mode?: "copy-on-write" | "in-place";
  /** Piscina worker threads that run compaction and GC (default 1, at most 16; 0 runs them inline on the main thread, for tests). */
  workers?: number;
  /** Compact sealed segments in the background once their dead fraction passes `garbageRatio` (default true). */
  auto?: boolean;
  /** The dead fraction of a sealed segment past which automatic compaction takes it: a number strictly between 0 and 1 (default 0.5). */
  garbageRatio?: number;
  /** How far below the process's CPU priority compaction threads run (0..19, default 10; 0 = the same; Linux only). */
  niceness?: number;
}

/** Expiry and retention rules (`retention` at open), for the whole store and per scope pattern. */
export interface RetentionOptions {
  /** Default TTL in ms of every write that gives no `ttlMs` (default null: values never expire; at most 100 years). */
  ttlMs?: number | null;
  /**
   * How long a slot's retention record is kept after its value is reclaimed, in ms (default 24 h).
   * Counted across reopens after a clean close, and from the reopen after a crash.
   */
  tombstoneRetentionMs?: number;
  /**
   * Per-scope overrides of `ttlMs` and `tombstoneRetentionMs`, keyed by scope pattern: matched
   * component by component against scopes of as many components, `*` standing for any run of
   * characters within one component (`user:*` matches "user:alice"); the first match applies.
   */
  scopes?: Record<string, { ttlMs?: number | null; tombstoneRetentionMs?: number }>;
}

/**
 * Switches that reproduce known failure modes (`unsafe` at open), for tests and studies only: each
 * one breaks a guarantee of API.md. Refused on a shared store's client.
 */
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

/** Options of `Engram.open(dir, options)`; every field is optional, and a bad value fails the open with INVALID_ARGUMENT. */
export interface OpenOptions {
  /**
   * "sync" (default): a write resolves after the fdatasync that makes it durable (group commit).
   * "batch": an fdatasync at least every `syncIntervalMs`. "none": the OS decides; only flush()
   * makes writes durable, and close() syncs nothing.
   */
  durability?: "sync" | "batch" | "none";
  /** With `durability: "batch"`, the longest time between fdatasyncs, in ms (default 50; 1 to 60000). */
  syncIntervalMs?: number;
  /**
   * The active segment is sealed, and a new one started, once it grows past this many bytes
   * (default 64 MiB; 4096 to 1 GiB). Embedded engine only: PostgreSQL refuses it.
   */
  segmentBytes?: number;
  /** Largest value accepted, in bytes (default 16 MiB); larger values are INVALID_ARGUMENT. */
  valueBytesMax?: number;
  /** The older name of `valueBytesMax`, still accepted (giving both with different values is INVALID_ARGUMENT). */
  maxValueBytes?: number;
  /** Budget of the hot-value cache in bytes (default 64 MiB; 0 turns it off). */
  cacheBytes?: number;
  /**
   * Budget of the block cache in bytes: segments' bytes kept in aligned 16 KiB blocks, so a read
   * whose value is not cached costs a copy instead of a pread (default 64 MiB; 0 turns it off;
   * otherwise 65536 – 16 GiB).
   */
  blockCacheBytes?: number;
  /** Compaction of sealed segments: mode, worker threads, automatic compaction and its threshold. */
  compaction?: CompactionOptions;
  /** Default TTL and retention windows, for the store and per scope pattern. */
  retention?: RetentionOptions;
  /**
   * A plain write to a tombstoned slot: "auto-clear" (default) clears the tombstone and bumps the
   * slot's generation in the same record; "require-clear" throws TombstonedSlotError unless the
   * write sets `clearTombstone`.
   */
  tombstoneWrites?: "auto-clear" | "require-clear";
  /** The current time in ms since epoch, for TTLs and retention windows (default Date.now); injectable for tests. */
  clock?: () => number;
  /** Fault injection for tests (API.md "Fault injection"). */
  faults?: FaultOptions;
  /** Switches that reproduce known failure modes in tests and studies; never for data you keep. */
  unsafe?: UnsafeOptions;
  /** Several processes on one directory: the first opener owns, later ones attach (API.md "Sharing"). */
  share?: boolean;
  /**
   * How long a shared client's calls wait for a new owner during a handover, and how long an owner
   * may be silent while a call is in flight before the call rejects with OWNER_LOST (default 10000 ms).
   */
  shareTimeoutMs?: number;
}

/** The `scope` option that every call takes. */
export interface ScopeOption {
  /** The scope of the call (default "global"): "global", or 1–8 components joined by "/" (API.md "Scopes"). */
  scope?: string;
}

/** Options of `write`, and of a write in `batch`. */
export interface WriteOptions extends ScopeOption {
  /**
   * Compare-and-set: the slot's live version must equal this, and `null` requires that the slot has
   * no live value (absent, forgotten or expired); otherwise VersionConflictError. Absent: no check.
   */
  expectedVersion?: number | null;
  /** Write over a tombstone explicitly: clears it and bumps the slot's generation in the same record (needed under `tombstoneWrites: "require-clear"`). */
  clearTombstone?: boolean;
  /** This value's TTL in ms (at most 100 years); null: it never expires; absent: the scope's or the store's default (`retention`). */
  ttlMs?: number | null;
}

/** What `write` resolves with once the write committed (durable, in "sync" mode). */
export interface WriteResult {
  /** Always true: a failed write throws. */
  ok: true;
  /** The commit sequence number of this write: the slot's new version. */
  version: number;
  /** The slot's generation the value was written at (raised when the write cleared a tombstone). */
  generation: number;
}

/** Options of `read` and `readSync`. */
export interface ReadOptions extends ScopeOption {
  /** Look in the scope's ancestors up to "global" when the scope has no live value (default true); false reads exactly `scope`. */
  inherit?: boolean;
}

/**
 * What `read` returns: the nearest live value, with its version, generation and the scope it was
 * found in, or `{ status: "NOT_FOUND" }`.
 */
export type ReadResult =
  | { status: "OK"; value: Value; version: number; generation: number; scope: string }
  | { status: "NOT_FOUND" };

/** What `forget` resolves with: it confirms the tombstone commit only; reclamation comes later (`probe` tells which). */
export interface ForgetResult {
  /** Always true: a failed forget throws. */
  ok: true;
  /** The commit sequence number of the tombstone; null when there was nothing live to forget (nothing was written). */
  tombstoneSeq: number | null;
  /** The slot's generation, which the tombstone kills; null when the slot does not exist. */
  generation: number | null;
}

/** Options of `forgetScope`. */
export interface ForgetScopeOptions {
  /**
   * "lazy" (default): resolve once the erasure is committed and reclaim later. "eager": resolve
   * only after every value byte of the erased slots is gone from the segment files (the rows, on
   * PostgreSQL), durably.
   */
  reclaim?: "lazy" | "eager";
}

/** What `forgetScope` resolves with. */
export interface ForgetScopeResult {
  /** Always true: a failed erasure throws. */
  ok: true;
  /** The commit sequence number of the erasure; `probe` of an erased slot reports it as its `tombstoneSeq`. */
  tombstoneSeq: number;
  /** Live slots the erasure killed, in the scope and its descendants. */
  slots: number;
  /** With `reclaim: "eager"` only: bytes the reclamation freed (of segment files; of value rows on PostgreSQL). */
  reclaimedBytes?: number;
}

/** What `undelete` resolves with: the slot is empty and writable at `generation`. */
export interface UndeleteResult {
  /** Always true: a failed undelete throws. */
  ok: true;
  /** The slot's generation after the call: above its tombstone when one was cleared, else its current one. */
  generation: number;
}

/**
 * A slot's state as `probe` reports it: "live" (readable), "tombstoned" (forgotten, value bytes
 * still on disk), "reclaimed" (value bytes gone, retention record survives), "expired" (TTL passed,
 * value record still on disk), "absent" (no value and no kill: never written, fully reclaimed, or undeleted).
 */
export type SlotState = "live" | "tombstoned" | "reclaimed" | "expired" | "absent";

/** What `probe` reports of one slot in exactly the given scope: its value record and its retention record, separately. */
export interface ProbeResult {
  /** The slot's state (see SlotState). */
  state: SlotState;
  /** A readable value exists. */
  valuePresent: boolean;
  /** The slot's retention record (version, generation, tombstone) exists; true after `undelete` too. */
  retentionPresent: boolean;
  /** Value records of this slot still physically in segment files (value rows on PostgreSQL). */
  physicalRecords: number;
  /** The version of the slot's last write, kept by its retention record after a forget; null when it has none. */
  version: number | null;
  /** The slot's generation; null when the slot does not exist. */
  generation: number | null;
  /** The commit sequence number of the latest kill of the slot (its forget, or a forgetScope over its scope); null when none. */
  tombstoneSeq: number | null;
  /** When the value expires, in ms since epoch by the store's clock; null when it has no TTL or no value record is on disk. */
  expiresAt: number | null;
}

/** Options of `list`. */
export interface ListOptions extends ScopeOption {
  /** Only keys that start with this string (default "": every key). */
  prefix?: string;
  /** Include the live keys of the scope's ancestors up to "global", the nearest scope's entry winning (default true). */
  inherit?: boolean;
  /** The most entries yielded: an integer from 1 to 1,000,000 (default 1,000,000). */
  limit?: number;
}

/** One live key that `list` yields. */
export interface ListEntry {
  /** The key. */
  key: string;
  /** The scope the live value was found in (the nearest on the path when inheriting). */
  scope: string;
  /** The live value's version. */
  version: number;
}

/** One operation of `batch`: a write with its WriteOptions, or a forget of `key` in `scope`. */
export type BatchOp =
  | ({ op: "write"; key: string; value: Value } & WriteOptions)
  | { op: "forget"; key: string; scope?: string };

/** The result of one `batch` operation, in the order of the ops: a WriteResult for a write, a ForgetResult for a forget. */
export type BatchResult = WriteResult | ForgetResult;

/** Options of `compact`. */
export interface CompactOptions {
  /** The compaction mode of this call (default: the store's `compaction.mode`). */
  mode?: "copy-on-write" | "in-place";
  /**
   * Ids of the segments to compact (`stats().segments[].id`; ids that no longer exist are skipped).
   * Absent: seal the active segment if it holds garbage, then compact every segment that holds any.
   */
  segments?: number[];
}

/** What `compact` did, summed over every segment it compacted. */
export interface CompactionReport {
  /** Ids of the segments compacted (always empty on PostgreSQL, which has no segments). */
  segments: number[];
  /** The mode the pass ran in. */
  mode: "copy-on-write" | "in-place";
  /** Bytes of the compacted segments' files before the pass (of the value rows examined, on PostgreSQL). */
  bytesBefore: number;
  /** Bytes of what the pass left in their place (0 when no record survived). */
  bytesAfter: number;
  /** Records that survived the pass. */
  recordsKept: number;
  /** Records the pass dropped: dead or expired values, and retention records past their window. */
  recordsDropped: number;
  /** Wall-clock time of the pass, in ms. */
  durationMs: number;
}

/** What `gc` did: a compaction pass by the generation-keyed GC policy, and the retention records it dropped. */
export interface GcReport extends CompactionReport {
  /** Retention records dropped because their retention window was over; each one removes a slot from `stats().slots`. */
  retentionRecordsDropped: number;
}

/** One segment file, as `stats()` reports it. */
export interface SegmentStats {
  /** The segment's id, as `compact({ segments })` takes it. */
  id: number;
  /** The segment's generation, moved by each in-place compaction of it; reads are authorized against it. */
  generation: number;
  /** Bytes of the file up to its data end, headers included (preallocated space is not counted). */
  bytes: number;
  /** Bytes of its records that a compaction would keep (live values and retention records still needed). */
  liveBytes: number;
  /** True once the segment is sealed and no longer appended to; false for the active segment. */
  sealed: boolean;
  /** Records that a compaction would keep: live values and retention records still needed. */
  records: number;
  /** Of those records, the retention records (tombstones, tombstone clears, scope erasures). */
  tombstones: number;
}

/**
 * What `stats()` reports: exact at the call on an embedded store; a shared store's client answers
 * with the owner's latest snapshot, PostgreSQL with its counts as of open or the last gc, compact or verify.
 */
export interface StoreStats {
  /** Every segment, by ascending id (empty on PostgreSQL). */
  segments: SegmentStats[];
  /** Bytes that a compaction would keep, over all segments (bytes of readable values, on PostgreSQL). */
  liveBytes: number;
  /** Bytes that a compaction would reclaim: `totalBytes` less `liveBytes` and the segment headers. */
  deadBytes: number;
  /** Bytes of all segment files up to their data ends (`liveBytes + deadBytes`, on PostgreSQL). */
  totalBytes: number;
  /** Slots held in any state: each has a value record or a retention record. */
  slots: number;
  /** Slots with a readable value now. */
  liveSlots: number;
  /** Slots that hold a tombstone (forgotten, and not yet dropped by GC). */
  tombstones: number;
  /** Scopes that hold at least one slot. */
  scopes: number;
  /** The store-wide commit sequence: the highest sequence number assigned so far. */
  sequence: number;
  /** Sealed segments past `compaction.garbageRatio`, waiting for a compaction pass (0 on PostgreSQL). */
  pendingGcSegments: number;
  /** Compactions completed since this handle opened (the embedded engine counts one per segment compacted). */
  compactions: number;
}

/** One problem that `verify` found. */
export interface VerifyProblem {
  /** The segment it is in; 0 when it concerns no one segment (the manifest) or on PostgreSQL. */
  segment: number;
  /** The byte offset in that segment's file; 0 when none applies. */
  offset: number;
  /** What is wrong, in words. */
  detail: string;
}

/** What `verify` found: every header and record checksum checked (on PostgreSQL, every row against its retention record). */
export interface VerifyReport {
  /** True when `problems` is empty. */
  ok: boolean;
  /** Segment files checked (0 on PostgreSQL). */
  segments: number;
  /** Records checked (rows, on PostgreSQL). */
  records: number;
  /** Record bytes checked, not preallocated space (value bytes, on PostgreSQL). */
  bytes: number;
  /** Every problem found; empty when `ok`. */
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
  /** Engram.faults: the fault injection controls (API.md "Fault injection"); `failAt` and `failuresLeft` exist on an embedded store only. */
  readonly faults: Faults;
  /** Engram.write: writes `value` under `key`, resolving with its version and generation once committed (durable per `durability`). */
  write(key: string, value: Value, options?: WriteOptions): Promise<WriteResult>;
  /** Engram.read: the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, options?: ReadOptions): Promise<ReadResult>;
  /** Engram.readSync: read(), synchronously; throws NotSupportedError where it does not apply (a shared store's client, PostgreSQL). */
  readSync(key: string, options?: ReadOptions): ReadResult;
  /** Engram.forget: tombstones `key` in exactly `scope`, resolving once the tombstone is committed (not reclaimed). */
  forget(key: string, options?: ScopeOption): Promise<ForgetResult>;
  /** Engram.forgetScope: erases `scope` and every descendant scope; "eager" resolves once their value bytes are gone. */
  forgetScope(scope: string, options?: ForgetScopeOptions): Promise<ForgetScopeResult>;
  /** Engram.undelete: clears the slot's tombstone by raising its generation; the slot is then empty and writable. */
  undelete(key: string, options?: ScopeOption): Promise<UndeleteResult>;
  /** Engram.probe: the value record and the retention record of `key` in exactly `scope`, reported separately. */
  probe(key: string, options?: ScopeOption): Promise<ProbeResult>;
  /** Engram.list: live keys in key order, the nearest scope's entry winning when inheriting. */
  list(options?: ListOptions): AsyncIterable<ListEntry>;
  /** Engram.batch: applies writes and forgets atomically (after a crash all or none are visible), one result per op. */
  batch(ops: BatchOp[]): Promise<BatchResult[]>;
  /** Engram.compact: compacts the given segments, or every segment holding garbage. */
  compact(options?: CompactOptions): Promise<CompactionReport>;
  /** Engram.gc: reclaims by policy now (generation-keyed). */
  gc(): Promise<GcReport>;
  /** Engram.stats: segments, live and dead bytes, slots, tombstones and the commit sequence, synchronously. */
  stats(): StoreStats;
  /** Engram.verify: checks every header and record checksum, calling `onProgress(bytesDone, bytesTotal)` as it goes. */
  verify(onProgress?: ProgressFn): Promise<VerifyReport>;
  /** Engram.flush: makes every write so far durable, whatever the durability mode. */
  flush(): Promise<void>;
  /** Engram.close: waits for in-flight writes, GC and workers, then closes; idempotent. */
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
