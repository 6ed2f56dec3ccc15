/**
 * The commit log: every mutation is encoded, given its offsets in the active segment at once
 * (so versions and compare-and-set are decided when the write is queued), and written in groups:
 * one writev and — in `sync` mode — one fdatasync per group. Operations queued while a group is
 * in flight form the next group (group commit).
 *
 * A group's operations become visible (applied to the keydir) only after the group is written
 * and, in `sync` mode, durable (I10). Groups are written strictly in order; a segment is sealed
 * only after its last group is applied, so compaction never sees a record the keydir does not.
 *
 * Failure protocol (docs/ENGINE.md "Failure protocol"): a group whose write or sync fails is
 * rejected with its IoError, and so is every group queued behind it (each was decided against the
 * state the failed one would have left). Their reservations are given back, the host undoes their
 * queued state, and the failed segment's tail is cut back to its last acknowledged byte and made
 * durable before any later append is accepted ("repair"); until a repair succeeds every append
 * throws, synchronously, before anything is queued. A failed seal leaves the segment rotated out
 * and is retried; the drain never rejects, so no unhandled rejection can escape it.
 *
 * The queue is bounded (COMMIT_QUEUE_OPS_MAX, COMMIT_QUEUE_BYTES_MAX): beyond it, callers wait in
 * arrival order for room (`admission`) before deciding anything — backpressure, not memory.
 */
import * as C from "../segments/constants.js";
import { contiguousRuns, encodeGroupFrame } from "../segments/group.js";
import { formatVersionWritten, groupFrameBytes, isLeanFrame } from "../segments/version-written.js";
import { assert } from "../rules/assert.js";
import { totalBytes } from "../segments/writer.js";
import { IoError } from "../rules/errors.js";
import { hitAsync, hitCrashOnly } from "./faults.js";
import type { Location } from "./keydir.js";
import type { Segment } from "./segment.js";
import { noteGroup } from "./hints.js";

/** Most operations of a group that is fdatasynced on the main thread (syncInline). */
const SYNC_INLINE_OPS_MAX = 4;
/** Most bytes of a group that is fdatasynced on the main thread (syncInline). */
const SYNC_INLINE_BYTES_MAX = 64 * 1024;
/**
 * Most groups synced on the main thread that commit one after another with no event-loop turn
 * between them (drainNow): a lone writer's next put then costs no turn (an epoll wait and the
 * loop's phases, ~4 µs here), while timers, I/O callbacks and worker messages still run at least
 * once every this many such groups (~1 ms of fdatasyncs on this disk).
 */
export const INLINE_GROUPS_PER_TURN = 8;

/**
 * Test switches, never set by the engine or any option (test/lone-put-turns.test.ts):
 * `inlineGroupsPerTurn` replaces INLINE_GROUPS_PER_TURN (the twin sets it to Infinity);
 * `viaQueueMicrotask` starts a drain with queueMicrotask, as before (the twin of drain-start).
 */
export const unsafeDrainForTests = { inlineGroupsPerTurn: INLINE_GROUPS_PER_TURN, viaQueueMicrotask: false };

/**
 * Test switches, never set by the engine or any option. `noRetry`
 * (test/compaction-inplace-discard.test.ts) makes whenSealed wait without sealing a rotated-out
 * segment again (the rule before): after a seal that failed in rotate(), a compact() with no write
 * after it waits for ever. `keepWaitersOfBroken` (test/commit-fault-liveness.test.ts) leaves the
 * waiters on a rotated-out segment's seal waiting when its failed group's repair fails too, and
 * whenSealed does not retry that repair (the rule before the fifty-third session): gc(),
 * compact() and close() then wait for a write that may never come.
 */
export const unsafeSealWaitForTests = { noRetry: false, keepWaitersOfBroken: false };

/**
 * Test switch, never set by the engine or any option (test/commit-fault-liveness.test.ts):
 * `allocateLate` leaves enqueue's file extension to each reservation in turn, as before the
 * fifty-third session, so that a failed extension of the op's own bytes leaves its new group
 * queued without it — the twin in which flush() and close() then wait for ever.
 */
export const unsafeEnqueueForTests = { allocateLate: false };

/**
 * A settled promise whose then() starts a drain in a microtask. Node's queueMicrotask wraps each
 * callback in an AsyncResource and a bound function (JS that a short-lived process runs
 * interpreted): one per lone put. A reaction on a settled promise is one microtask, made natively.
 */
const DRAIN_TICK: Promise<void> = Promise.resolve();

/** Most operations queued (decided, not yet committed) at once. */
export const COMMIT_QUEUE_OPS_MAX = 16_384;
/** Most record bytes queued at once; one larger operation still goes alone through an empty queue. */
export const COMMIT_QUEUE_BYTES_MAX = 64 * 1024 * 1024;

/** One queued mutation: its encoded records and what to do once they are committed. */
export interface LogOp {
  /**
   * The op's records, laid back to back, as pieces: one record each, or (with `lengths`) runs
   * that each hold several whole records (a sealed batch's arena chunks).
   */
  records: Buffer[];
  /** Each record's length in order, when `records` are runs rather than one piece per record. */
  lengths?: readonly number[];
  /** The sequence number of each record, non-decreasing (the segment notes the first and the last). */
  seqs: number[];
  /** Applies the op to the visible state; receives each record's location. */
  apply(locs: Location[]): void;
  /**
   * When given, called instead of apply() with the segment and the offset of the op's first
   * record (its records lie back to back from there): the op finds each record's location itself,
   * so a batch of 1000 needs no Location object per record.
   */
  applyRun?(seg: number, offset: number): void;
  /**
   * When given, called once the op's records are written and the op applied and resolved: the log
   * holds none of `records` any more, so their memory may be reused (a batch's arena chunks:
   * engine/batch-plan.ts BatchPlan.release). Not called for an op that failed: its records are
   * left to the garbage collector.
   */
  release?(): void;
}

interface Group {
  segment: Segment;
  /** Offset of the group's frame (its first byte). */
  offset: number;
  /** Bytes of the group, frame included. */
  bytes: number;
  /** buffers[0] is the frame, filled in when the group is written (it checksums the rest). */
  buffers: Buffer[];
  /** Each op with where its records start (`at`), or their locations when it has no applyRun. */
  ops: Array<{ op: LogOp; at: number; locs: Location[] | null; value: unknown; resolve: (value: unknown) => void; reject: (err: unknown) => void }>;
  /** Called once the group is committed (null) or failed (its error): barriers. */
  after: Array<(err: unknown) => void>;
  /** Its fdatasync ran on the main thread (syncInline): the drain yields to the event loop after it. */
  inline?: boolean;
}

/** What the log needs from the store. */
export interface LogHost {
  durability: "sync" | "batch" | "none";
  segmentBytes: number;
  faults: SharedArrayBuffer | null;
  /** Creates and returns a new, empty, unsealed segment; throws (leaving nothing behind) when it cannot. */
  createSegment(): Segment;
  /** Called after a segment is sealed, in the sealing turn: starts its hint's write (Segment.hintWriting). */
  onSealed(seg: Segment): void;
  /** Called after failed groups were rejected: every queued, uncommitted state must be undone. */
  onRejected(): void;
}

interface SealWaiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The ops of a group before its first op joins (enqueue replaces it): shared, never written. */
const NO_OPS: Group["ops"] = Object.freeze([]) as unknown as Group["ops"];

/** Stands for a group's frame until the group is written (the frame checksums the final body). */
const FRAME_PLACEHOLDERS = { 2: Buffer.alloc(C.GROUP_FRAME_BYTES), 3: Buffer.alloc(C.GROUP_FRAME_BYTES_V3) };
/** The frame placeholder of the written format (its size is the frame's: the active segment is always in that format). */
function framePlaceholder(): Buffer {
  return isLeanFrame(formatVersionWritten()) ? FRAME_PLACEHOLDERS[3] : FRAME_PLACEHOLDERS[2];
}
/** Bytes of a group frame in the active segment (of the written format; format 3: GROUP_FRAME_BYTES_V3). */
function frameBytes(): number {
  return groupFrameBytes(formatVersionWritten());
}

/**
 * The frame of `group`, whose records are `body` (the group's buffers after the frame, in order,
 * as any pieces): its body's length and checksum, its first sequence, and how far its segment was
 * durable when it is written. Paired check: the frame covers exactly the group.
 */
function frameFor(group: Group, body: readonly Uint8Array[]): Buffer {
  const first = group.ops[0]?.op.seqs[0];
  assert(first !== undefined && first > 0, "a group holds at least one record with a sequence");
  assert(group.segment.syncedEnd <= group.offset, "a segment is never durable past a group not yet written");
  const frame = encodeGroupFrame(first, group.segment.syncedEnd, body);
  assert(frame.length + totalBytes(body) === group.bytes, "a group frame covers exactly its group's bytes");
  group.segment.coveredEnd = Math.max(group.segment.coveredEnd, group.segment.syncedEnd);
  return frame;
}

/** The location of each record of `op`, laid back to back in segment `seg` from `offset`. */
function locationsOf(seg: number, offset: number, op: LogOp): Location[] {
  const locs: Location[] = [];
  let cursor = offset;
  for (const len of op.lengths ?? op.records.map((r) => r.length)) {
    locs.push({ seg, off: cursor, len });
    cursor += len;
  }
  assert(cursor - offset === totalBytes(op.records), "an op's record lengths tile its pieces");
  return locs;
}


/** Queues, writes and syncs record groups into the active segment. */
export class CommitLog {
  private readonly host: LogHost;
  private active: Segment;
  private readonly groups: Group[] = [];
  private draining = false;
  /** Inline groups committed since the drain last yielded to the event loop (drainNow). */
  private inlineSinceTurn = 0;
  private idleWaiters: Array<() => void> = [];
  private sealWaiters = new Map<Segment, SealWaiter[]>();
  /** A failed group's segment, whose tail past its last acknowledged byte is unknown until repaired. */
  private broken: { segment: Segment; error: unknown } | null = null;
  private unsynced = new Set<Segment>();
  /** The fdatasyncs of syncAll() now in flight: a later flush() waits for them too. */
  private syncing: Promise<void> = Promise.resolve();
  /** A background (batch timer) sync failed: the next flush() reports it. */
  private syncError: unknown = null;
  /** Segments rotated out and not sealed yet. */
  private readonly retiring = new Set<Segment>();
  private inFlight: Group | null = null;
  /** The body of a one-record group as frameFor takes it (writeGroup): one array for every lone put. */
  private readonly loneBody: Buffer[] = [FRAME_PLACEHOLDERS[2]];
  private queuedOps = 0;
  private queuedBytes = 0;
  private roomWaiters: Array<() => void> = [];
  private wakeScheduled = false;
  /**
   * Groups committed since open and the operations they carried: a debug counter only (read by
   * bench/share.ts to compare how full shared and local puts fill the groups); nothing decides on it.
   */
  readonly committed = { groups: 0, ops: 0 };
  /**
   * While set, the next queued group does not start (write, fdatasync) before it resolves: a
   * sharing owner gathers its clients' calls into one group while they are already decided and
   * encoded (share/server.ts). Only the start moves; nothing is acknowledged or applied sooner.
   */
  private startGate: Promise<void> | null = null;

  constructor(host: LogHost, active: Segment) {
    this.host = host;
    this.active = active;
    // Opened from a boot-stamped hint (engine/recovery.ts readyActive): bytes a `none`-mode close
    // left unsynced, which the next flush, close or sync-mode group must make durable.
    if (active.syncedEnd < active.dataEnd) this.unsynced.add(active);
  }

  /** Whether a group is being written or synced now. */
  get writing(): boolean {
    return this.inFlight !== null;
  }

  /**
   * Holds the start of the next queued group until `until` resolves; the caller guarantees it
   * resolves, within a bounded time. One group starts after each resolved gate, even if a new
   * gate was set meanwhile (that one holds the group after it): a gate never starves the log.
   */
  holdStarts(until: Promise<void>): void {
    this.startGate = until;
  }

  /** The segment appends go to now. */
  get activeSegment(): Segment {
    return this.active;
  }

  /** Operations and bytes queued now (for tests of the bound). */
  get queued(): { ops: number; bytes: number } {
    return { ops: this.queuedOps, bytes: this.queuedBytes };
  }

  /**
   * null when a new operation may be decided now; otherwise a promise that resolves, in arrival
   * order, once the queue has room. Callers await it before deciding anything.
   */
  admission(): Promise<void> | null {
    if (this.roomWaiters.length === 0 && this.hasRoom()) return null;
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** True when the queue may take another op: it is empty (one op of any size goes alone), or under both bounds. */
  private hasRoom(): boolean {
    return this.queuedOps === 0 || (this.queuedOps < COMMIT_QUEUE_OPS_MAX && this.queuedBytes < COMMIT_QUEUE_BYTES_MAX);
  }

  /**
   * Admits waiting callers in arrival order, one per event-loop turn: an admitted caller queues
   * its op (or decides not to) within its turn, so the counts are exact again before the next
   * admission — the bound holds for bytes too, whose sizes are unknown until then.
   */
  private wakeRoomWaiters(): void {
    if (this.wakeScheduled || this.roomWaiters.length === 0 || !this.hasRoom()) return;
    (this.roomWaiters.shift() as () => void)();
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeRoomWaiters();
    });
  }

  /**
   * Queues `op`; the promise resolves once it is written (and durable in `sync` mode) and applied.
   * Throws synchronously — having queued and reserved nothing — when the log cannot take it
   * (an unrepaired failure, or a rotation that failed); the caller then changes no state.
   */
  append(op: LogOp): Promise<void> {
    return this.appendWith(op, undefined);
  }

  /**
   * append(), resolving with `value` (a write's result): the caller's answer then needs no
   * promise layer of its own between the commit and the caller (one microtask turn per layer).
   */
  appendWith<R>(op: LogOp, value: R): Promise<R> {
    this.repair();
    const bytes = totalBytes(op.records);
    const writer = this.active.writer;
    assert(writer !== null, "the active segment has a writer"); // constant messages on the per-put path: a template string is built on every call
    if (writer.end + bytes + frameBytes() > this.host.segmentBytes && writer.end > C.DATA_START) this.rotate();
    // Durable appends overwrite real zeroed blocks instead of filling holes (segments/writer.ts);
    // a failed zero write throws here, before anything is reserved or queued.
    if (this.host.durability === "sync") this.active.writer?.zeroAhead(bytes + frameBytes(), this.host.segmentBytes);
    return this.enqueue(op, bytes, value);
  }

  /**
   * Reserves `op`'s bytes in the active segment behind the open group, opening a new group (and
   * reserving its frame first) when the last queued group is in flight or in another segment.
   */
  private enqueue<R>(op: LogOp, bytes: number, value: R): Promise<R> {
    const seg = this.active;
    const writer = seg.writer as NonNullable<Segment["writer"]>;
    let group = this.groups[this.groups.length - 1];
    const opens = group === undefined || group.segment !== seg;
    // Every byte this op reserves (a new group's frame too) is allocated before anything is
    // queued, so that a failed extension throws with nothing reserved or queued: an opened group
    // left without its op was never drained, and every barrier after it (flush, close, a forget
    // of nothing) waited for it for ever (the fifty-third session's audit).
    if (!unsafeEnqueueForTests.allocateLate) writer.preallocate(opens ? frameBytes() + bytes : bytes);
    if (opens) {
      const frameAt = writer.reserve(frameBytes());
      // A new group's arrays are made at their size for its first op (a lone put's stay so): the
      // first push into an empty array reserves 17 slots, garbage on every put.
      const placeholder = framePlaceholder();
      const buffers = op.records.length === 1 ? [placeholder, op.records[0] as Buffer] : [placeholder, ...op.records];
      group = { segment: seg, offset: frameAt, bytes: frameBytes(), buffers, ops: NO_OPS, after: [] };
      this.groups.push(group);
      this.queuedBytes += frameBytes();
    }
    const g = group as Group;
    const offset = writer.reserve(bytes);
    const locs = op.applyRun === undefined ? locationsOf(seg.id, offset, op) : null;
    assert(g.offset + g.bytes === offset, "a group's records follow its frame and each other back to back");
    g.bytes += bytes;
    if (!opens) for (let i = 0; i < op.records.length; i++) g.buffers.push(op.records[i] as Buffer); // in bounds; indexed loops on this path (segments/writer.ts totalBytes)
    this.queuedOps += 1;
    this.queuedBytes += bytes;
    return new Promise<R>((resolve, reject) => {
      const entry = { op, at: offset, locs, value, resolve: resolve as (value: unknown) => void, reject };
      if (g.ops.length === 0) g.ops = [entry];
      else g.ops.push(entry);
      if (!this.draining) {
        if (unsafeDrainForTests.viaQueueMicrotask) queueMicrotask(this.startDrain);
        else void DRAIN_TICK.then(this.startDrain);
      }
    });
  }

  /**
   * Cuts a failed group's segment back to its last acknowledged byte and makes the cut durable;
   * throws (an IoError) while it cannot, so that nothing is appended after unknown bytes.
   */
  repair(): void {
    const broken = this.broken;
    if (broken === null) return;
    const writer = broken.segment.writer;
    if (writer !== null) {
      assert(writer.end === broken.segment.dataEnd, `segment ${broken.segment.id}: rewound to its data end`);
      writer.cutTail();
      broken.segment.syncedEnd = broken.segment.dataEnd; // cutTail's fdatasync covered everything before the cut
    }
    this.broken = null;
    this.sealRetiring();
  }

  /** Starts a new active segment; the old one is sealed once its queued groups are applied. Throws when it cannot. */
  rotate(): Segment {
    this.repair();
    const old = this.active;
    this.active = this.host.createSegment();
    this.retiring.add(old);
    this.sealRetiring();
    return old;
  }

  /**
   * Resolves once `seg` is sealed (immediately if it is; its hint may still be being written:
   * Segment.hintWriting); rejects with the IoError of a failed seal.
   * A rotated-out segment whose seal failed before this call (rotate's own attempt) is sealed again
   * now, so that the outcome reaches this waiter: until the nineteenth session it waited for the
   * retry of the next write's group, and a compact() with no write after it waited for ever. So is
   * the repair of a segment left broken by a failed group whose repair failed too (failFrom): a
   * repair that fails again rejects this waiter with its IoError (until the fifty-third session
   * the waiter waited for the next append).
   */
  whenSealed(seg: Segment): Promise<void> {
    if (seg.writer === null) return Promise.resolve();
    const sealed = new Promise<void>((resolve, reject) => {
      const list = this.sealWaiters.get(seg) ?? [];
      list.push({ resolve, reject });
      this.sealWaiters.set(seg, list);
    });
    if (unsafeSealWaitForTests.noRetry) return sealed;
    if (this.broken?.segment === seg && !unsafeSealWaitForTests.keepWaitersOfBroken) {
      // Its failed group's repair failed: retried now, since only an append would retry it.
      assert(this.inFlight === null && this.groups.length === 0, "a broken log has nothing queued or in flight (failFrom rejected it; appends repair first)");
      try {
        this.repair(); // seals `seg` (sealRetiring) once it succeeds
      } catch (err) {
        this.rejectSealWaiters(seg, err);
        return sealed;
      }
    }
    this.sealRetiring(); // settles `sealed` unless groups of `seg` are still queued
    return sealed;
  }

  /**
   * Writes queued groups in order: starts the drain (a microtask after the first enqueue) unless
   * one runs. Never throws an I/O error: every failure goes to the calls it affects.
   */
  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    this.drainNow();
  }

  /**
   * The drain's part that waits for nothing: commits queued groups in order in this turn while
   * no start gate holds them and each commitsNow (no promise made per group), and hands the first
   * group that must wait to drainWaiting. After a group whose fdatasync ran inline with nothing
   * queued behind it, the drain ends: the lone writer's next call starts the next one from a
   * microtask, with no event-loop turn between its puts. Back-to-back inline commits would then
   * chain alone and starve timers, I/O and worker messages, so every INLINE_GROUPS_PER_TURN-th of
   * them, or one with groups queued behind it, yields instead: back to the event loop once this
   * group's calls resolved (their acknowledgment waits for no turn); the drain goes on from a
   * setImmediate, still `draining`, so none starts beside it. Ends the drain when the queue is empty.
   */
  private drainNow(): void {
    for (;;) {
      const group = this.groups[0];
      if (group === undefined) return this.drained();
      if (this.startGate !== null || !this.commitsNow(group)) return void this.drainWaiting();
      this.groups.shift();
      this.inFlight = group;
      this.finishGroup(group, this.commitGroupNow(group));
      if (group.inline !== true) continue;
      this.inlineSinceTurn += 1;
      if (this.groups.length === 0 && this.inlineSinceTurn < unsafeDrainForTests.inlineGroupsPerTurn) return this.drained();
      this.inlineSinceTurn = 0;
      return void setImmediate(this.resumeDrain);
    }
  }

  /** drain() as a callback made once (enqueue's microtask). */
  private readonly startDrain = (): void => this.drain();

  /** Goes on with the drain after its yield to the event loop (drainNow). */
  private readonly resumeDrain = (): void => {
    assert(this.draining, "a yielded drain is still draining when it resumes");
    this.drainNow();
  };

  /**
   * The drain's part that awaits: a start gate (one group starts after each resolved gate, even
   * if a new gate was set meanwhile: that one holds the group after it), and a group that syncs in
   * the thread pool or meets fault points. Then back to drainNow. Never rejects.
   */
  private async drainWaiting(): Promise<void> {
    const gate = this.startGate;
    if (gate !== null) {
      await gate.catch(() => undefined); // the caller guarantees it resolves; a rejected one still releases the start
      if (this.startGate === gate) this.startGate = null;
    }
    const group = this.groups.shift();
    if (group === undefined) return this.drained();
    this.inFlight = group;
    const err = this.commitsNow(group) ? this.commitGroupNow(group) : await this.commitGroup(group);
    this.finishGroup(group, err);
    if (group.inline === true) setImmediate(this.resumeDrain);
    else this.drainNow();
  }

  /** After a group committed (err null) or failed: the failure protocol, the seals it held back, its barriers, room for waiting callers. */
  private finishGroup(group: Group, err: unknown): void {
    this.inFlight = null;
    if (err !== null) this.failFrom(group, err);
    this.sealRetiring();
    for (let i = 0; i < group.after.length; i++) (group.after[i] as (err: unknown) => void)(err); // in bounds
    this.wakeRoomWaiters();
  }

  /** The queue is empty: the drain ends and idle() waiters resume. */
  private drained(): void {
    this.draining = false;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * Whether `group` is fdatasynced on the main thread: only a small group with nothing queued
   * behind it (a lone writer). Its fdatasync then costs no thread-pool round trip, which at one
   * write in flight was most of the latency and all of the tail (p50 400 -> 245 µs, p99 3 -> 0.6 ms
   * here). Any other group syncs in the thread pool, so the event loop keeps taking the calls that
   * will form the next group (and reads) while the disk works.
   */
  private syncInline(group: Group): boolean {
    return group.ops.length <= SYNC_INLINE_OPS_MAX && group.bytes <= SYNC_INLINE_BYTES_MAX && this.queuedOps === group.ops.length;
  }

  /**
   * Whether `group` commits without waiting for anything: no fault table (whose points are
   * awaited) and no fdatasync in the thread pool. The drain then commits it in its own turn
   * (commitGroupNow): no promise and no microtask hop between the fdatasync and the acknowledgment.
   */
  private commitsNow(group: Group): boolean {
    return this.host.faults === null && (this.host.durability !== "sync" || this.syncInline(group));
  }

  /** commitGroup for a group that waits for nothing (commitsNow): the same steps in the same order, synchronously. */
  private commitGroupNow(group: Group): unknown {
    assert(this.commitsNow(group), "only a group that waits for nothing commits synchronously");
    // I1 and I10 as in commitGroup: the fdatasync (sync mode) runs before any op is applied or resolved.
    const coveredBefore = group.segment.coveredEnd;
    try {
      const writer = this.writeGroup(group);
      if (this.host.durability === "sync") {
        writer.syncSync();
        group.inline = true; // the drain yields once this group's calls are resolved
        group.segment.syncedEnd = group.offset + group.bytes;
      } else this.unsynced.add(group.segment);
    } catch (err) {
      group.segment.coveredEnd = coveredBefore; // the frame that would have proved it is cut (repair)
      return err;
    }
    this.applyGroup(group);
    return null;
  }

  /** Writes and syncs one group, then applies it; returns the error of a failed write or sync. */
  private async commitGroup(group: Group): Promise<unknown> {
    // I1: in sync mode no op of the group resolves (is acknowledged) before the fdatasync that makes it durable.
    // I10: and none is applied to the visible state before then either: a read never sees what a crash could take back.
    const coveredBefore = group.segment.coveredEnd;
    try {
      const writer = this.writeGroup(group);
      const faults = this.host.faults;
      if (faults !== null) await hitAsync(faults, "write:after-append"); // no fault table: no promise and no microtask hop per group
      if (this.host.durability === "sync") {
        if (this.syncInline(group)) {
          writer.syncSync();
          group.inline = true; // the drain yields once this group's calls are resolved
        } else await writer.sync();
        group.segment.syncedEnd = group.offset + group.bytes;
      } else this.unsynced.add(group.segment);
      if (faults !== null) await hitAsync(faults, "write:after-sync");
    } catch (err) {
      group.segment.coveredEnd = coveredBefore; // the frame that would have proved it is cut (repair)
      return err;
    }
    this.applyGroup(group);
    return null;
  }

  /** Frames `group` and writes it at its offset; returns its segment's writer. Throws the write's IoError. */
  private writeGroup(group: Group): NonNullable<Segment["writer"]> {
    const writer = group.segment.writer as NonNullable<Segment["writer"]>;
    if (group.buffers.length === 2) {
      // A lone record is its own body: no run merging and no copies of the piece list per put.
      this.loneBody[0] = group.buffers[1] as Buffer;
      group.buffers[0] = frameFor(group, this.loneBody);
      this.loneBody[0] = FRAME_PLACEHOLDERS[2]; // holds no record past its group
      writer.writeAtSync(group.buffers, group.offset);
      return writer;
    }
    // A batch's arena-carved records go as a few iovecs, merged once for both the frame's body
    // checksum and the write. The placeholder has a buffer of its own, so it is always runs[0].
    const runs = contiguousRuns(group.buffers);
    assert(runs[0] === framePlaceholder(), "a group's first piece is its frame's placeholder");
    const frame = frameFor(group, runs.slice(1));
    group.buffers[0] = frame;
    runs[0] = frame;
    writer.writeAtSync(runs, group.offset);
    return writer;
  }

  /** After a group is written (and durable in sync mode): notes it, applies its ops and resolves their calls, in order. */
  private applyGroup(group: Group): void {
    group.segment.dataEnd = group.offset + group.bytes;
    if (group.segment.hint !== null) noteGroup(group.segment.hint, group.buffers, group.offset); // the hint written at seal (engine/hints.ts)
    this.dequeued(group);
    this.committed.groups += 1;
    this.committed.ops += group.ops.length;
    const segId = group.segment.id;
    for (let i = 0; i < group.ops.length; i++) {
      const o = group.ops[i] as Group["ops"][number]; // in bounds: i < length
      const seqs = o.op.seqs;
      const first = seqs[0] as number;
      const last = seqs[seqs.length - 1] as number;
      assert(seqs.length > 0 && first <= last, "an op's records have non-decreasing sequences");
      group.segment.noteSeq(first); // the segment keeps only the range: the ends are enough
      group.segment.noteSeq(last);
      try {
        if (o.locs === null) (o.op.applyRun as NonNullable<LogOp["applyRun"]>)(segId, o.at);
        else o.op.apply(o.locs);
        o.resolve(o.value);
      } catch (err) {
        o.reject(err);
      }
      o.op.release?.(); // written (the group's pwritev returned) and applied: nothing reads its records now
    }
  }

  /** Takes a written group out of the queue counts (paired check: they never go negative). */
  private dequeued(group: Group): void {
    this.queuedOps -= group.ops.length;
    this.queuedBytes -= group.bytes;
    assert(this.queuedOps >= 0 && this.queuedBytes >= 0, "commit queue counts stay non-negative");
  }

  /**
   * `failed` could not be written or synced: rejects it and every group queued behind it, gives
   * their reservations back, lets the host undo their queued state, and marks the segment broken.
   */
  private failFrom(failed: Group, err: unknown): void {
    const rejected = [failed, ...this.groups.splice(0)];
    const later = err instanceof IoError ? new IoError(err.errno, "commit", "an earlier write of this store failed; this one was never written") : err;
    const rewound = new Set<Segment>();
    for (const g of rejected) {
      this.dequeued(g);
      if (!rewound.has(g.segment)) {
        rewound.add(g.segment);
        assert(g.offset === g.segment.dataEnd, `segment ${g.segment.id}: first failed group starts at its data end`);
        g.segment.writer?.rewind(g.segment.dataEnd);
      }
      for (const o of g.ops) o.reject(g === failed ? err : later);
      if (g !== failed) for (const f of g.after) f(later);
      if (g !== failed) g.after = [];
    }
    this.broken = { segment: failed.segment, error: err };
    this.host.onRejected();
    try {
      this.repair();
    } catch (repairErr) {
      // Stays broken: the next append retries the repair and reports its error. Nothing else
      // retries it, so whoever waits for this segment's seal (a pass, gc, an eager erasure, close)
      // hears of it now rather than waiting for an append that may never come.
      if (!unsafeSealWaitForTests.keepWaitersOfBroken) this.rejectSealWaiters(failed.segment, repairErr);
    }
  }

  /** Rejects every waiter on `seg`'s seal with `err`; `seg` stays retiring, and a later attempt seals it. */
  private rejectSealWaiters(seg: Segment, err: unknown): void {
    for (const w of this.sealWaiters.get(seg) ?? []) w.reject(err);
    this.sealWaiters.delete(seg);
  }

  /** Seals every rotated-out segment whose groups are all applied; a failed seal is retried later. */
  private sealRetiring(): void {
    if (this.retiring.size === 0) return; // every group calls this: no Set iterator when nothing waits
    for (const seg of this.retiring) {
      if (this.inFlight?.segment === seg || this.groups.some((g) => g.segment === seg)) continue;
      if (this.broken?.segment === seg) continue;
      try {
        this.seal(seg);
        this.retiring.delete(seg);
      } catch (err) {
        this.rejectSealWaiters(seg, err);
      }
    }
  }

  /**
   * Makes every written byte durable (the `batch` timer, compaction, flush and close call this).
   * Resolves only after every fdatasync started for it — and by any earlier caller — completed.
   */
  syncAll(): Promise<void> {
    const segs = [...this.unsynced];
    this.unsynced.clear();
    const earlier = this.syncing;
    const mine = (async () => {
      await earlier.catch(() => undefined);
      let first: unknown = null;
      for (const seg of segs) {
        if (seg.writer === null) continue;
        const upTo = seg.dataEnd; // written before the sync starts, so covered by it
        try {
          await seg.writer.sync();
          if (upTo > seg.syncedEnd) seg.syncedEnd = upTo;
        } catch (err) {
          this.unsynced.add(seg); // not durable: the next sync tries again
          first ??= err;
        }
      }
      if (first !== null) throw first;
    })();
    this.syncing = mine.catch(() => undefined);
    return mine;
  }

  /**
   * The data end of segment `seg` once the syncs now asked for succeed and markDurable() follows
   * them: its data end now, plus the sync mark's frame when markDurable will write one (the
   * active segment with unmarked records). What a hint encoded ahead of those syncs covers (store
   * close); the caller checks the end it finds afterwards before writing that hint.
   */
  endAfterMark(seg: Segment): number {
    return this.marks(seg) ? seg.dataEnd + frameBytes() : seg.dataEnd;
  }

  /** Whether markDurable() appends a sync mark to `seg` once its data is synced to its end: the active segment, idle and whole, with records after its last mark. */
  private marks(seg: Segment): boolean {
    return seg === this.active && seg.writer !== null && this.groups.length === 0 && this.inFlight === null && this.broken === null && seg.dataEnd > seg.coveredEnd;
  }

  /**
   * After a final syncAll (close, with nothing queued): when the frames on disk do not yet prove
   * the active segment durable to its end, appends a sync mark (an empty group recording
   * syncedEnd = its own offset) and fdatasyncs it, so damage to any earlier group is reported as
   * corruption at the next open instead of being cut as an unsynced tail.
   */
  markDurable(): void {
    const seg = this.active;
    const writer = seg.writer;
    if (writer === null || !this.marks(seg) || seg.syncedEnd !== seg.dataEnd) return;
    assert(seg.maxSeq > 0 && writer.end === seg.dataEnd, "a segment with data to mark has records and no reserved tail");
    const at = writer.reserve(frameBytes());
    try {
      writer.writeAtSync([encodeGroupFrame(seg.maxSeq, at, [])], at);
      writer.syncSync();
    } catch (err) {
      writer.rewind(at); // the mark is optional: without it the tail reads as unsynced, which it is not worse than
      throw err;
    }
    seg.dataEnd = at + frameBytes();
    seg.syncedEnd = seg.dataEnd;
    seg.coveredEnd = seg.dataEnd;
  }

  /** The batch timer's sync: a failure is kept for the next flush() to report. */
  backgroundSync(): void {
    this.syncAll().catch((err: unknown) => {
      this.syncError ??= err;
    });
  }

  /** Throws (once) the error of a failed background sync. */
  takeSyncError(): void {
    const err = this.syncError;
    this.syncError = null;
    if (err !== null) throw err;
  }

  /** Resolves once every group queued before the call is committed; rejects if one of them failed. */
  barrier(): Promise<void> {
    const last = this.groups[this.groups.length - 1] ?? this.inFlight;
    if (last === null) return Promise.resolve();
    return new Promise((resolve, reject) => last.after.push((err) => (err === null ? resolve() : reject(err))));
  }

  /** Resolves when no group is queued or in flight. */
  idle(): Promise<void> {
    if (!this.draining && this.groups.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Seals `seg`: cut preallocation, fdatasync, header with the sealed flag. Throws an IoError when a step fails. */
  private seal(seg: Segment): void {
    const writer = seg.writer;
    if (writer === null) return;
    assert(writer.end === seg.dataEnd, `seal of segment ${seg.id}: written ${seg.dataEnd} == reserved ${writer.end}`);
    writer.truncateToEnd();
    writer.syncSync();
    hitCrashOnly(this.host.faults, "seal:after-truncate");
    seg.writeSealHeader();
    seg.writer = null;
    this.unsynced.delete(seg);
    for (const w of this.sealWaiters.get(seg) ?? []) w.resolve();
    this.sealWaiters.delete(seg);
    this.host.onSealed(seg);
  }
}
