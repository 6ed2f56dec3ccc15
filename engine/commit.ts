/**
 * The commit log: every mutation is encoded, given its offsets in the active segment at once
 * (so versions and compare-and-set are decided when the write is queued), and written in groups:
 * one writev and — in `sync` mode — one fdatasync per group. Operations queued while a group is
 * in flight form the next group (group commit).
 *
 * A group's operations become visible (applied to the keydir) only after the group is written
 * and, in `sync` mode, durable (I10). Groups are written strictly in order; a segment is sealed
 * only after its last group is applied, so compaction never sees a record the keydir does not.
 */
import * as C from "../segments/constants.js";
import { writeHeader } from "../segments/file.js";
import { encodeGroupFrame } from "../segments/group.js";
import { assert } from "../rules/assert.js";
import { totalBytes } from "../segments/writer.js";
import { hitAsync, hitCrashOnly } from "./faults.js";
import type { Location } from "./keydir.js";
import type { Segment } from "./segment.js";

/** One queued mutation: its encoded records and what to do once they are committed. */
export interface LogOp {
  records: Buffer[];
  /** The sequence number of each record. */
  seqs: number[];
  /** Applies the op to the visible state; receives each record's location. */
  apply(at: Location[]): void;
}

interface Group {
  seg: Segment;
  /** Offset of the group's frame (its first byte). */
  offset: number;
  /** Bytes of the group, frame included. */
  bytes: number;
  /** buffers[0] is the frame, filled in when the group is written (it checksums the rest). */
  buffers: Buffer[];
  ops: Array<{ op: LogOp; at: Location[]; resolve: () => void; reject: (err: unknown) => void }>;
  /** Called once the group is committed or failed (barriers). */
  after: Array<() => void>;
}

/** What the log needs from the store. */
export interface LogHost {
  durability: "sync" | "batch" | "none";
  segmentBytes: number;
  faults: SharedArrayBuffer | null;
  /** Creates and returns a new, empty, unsealed segment. */
  createSegment(): Segment;
  /** Called after a segment is sealed. */
  onSealed(seg: Segment): void;
}

/** Stands for a group's frame until the group is written (the frame checksums the final body). */
const FRAME_PLACEHOLDER = Buffer.alloc(C.GROUP_FRAME_BYTES);

/**
 * The frame of `group`: its body's length and checksum, its first sequence, and how far its
 * segment was durable when it is written. Paired check: the frame covers exactly the group.
 */
function frameFor(group: Group): Buffer {
  const body = group.buffers.slice(1);
  const first = group.ops[0]?.op.seqs[0];
  assert(first !== undefined && first > 0, "a group holds at least one record with a sequence");
  assert(group.seg.syncedEnd <= group.offset, "a segment is never durable past a group not yet written");
  const frame = encodeGroupFrame(first, group.seg.syncedEnd, body);
  assert(frame.length + totalBytes(body) === group.bytes, "a group frame covers exactly its group's bytes");
  group.seg.coveredEnd = Math.max(group.seg.coveredEnd, group.seg.syncedEnd);
  return frame;
}

/** Queues, writes and syncs record groups into the active segment. */
export class CommitLog {
  private readonly host: LogHost;
  private active: Segment;
  private readonly groups: Group[] = [];
  private draining = false;
  private idleWaiters: Array<() => void> = [];
  private sealWaiters = new Map<Segment, Array<() => void>>();
  private failure: unknown = null;
  private unsynced = new Set<Segment>();
  /** Segments rotated out and not sealed yet. */
  private readonly retiring = new Set<Segment>();
  private inFlight: Group | null = null;

  constructor(host: LogHost, active: Segment) {
    this.host = host;
    this.active = active;
  }

  /** The segment appends go to now. */
  get activeSegment(): Segment {
    return this.active;
  }

  /** Queues `op`; resolves once it is written (and durable in `sync` mode) and applied. */
  append(op: LogOp): Promise<void> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const bytes = totalBytes(op.records);
    const writer = this.active.writer;
    if (writer === null) throw new Error(`active segment ${this.active.id} has no writer`);
    if (writer.end + bytes + C.GROUP_FRAME_BYTES > this.host.segmentBytes && writer.end > C.DATA_START) this.rotate();
    return this.enqueue(op, bytes);
  }

  /**
   * Reserves `op`'s bytes in the active segment behind the open group, opening a new group (and
   * reserving its frame first) when the last queued group is in flight or in another segment.
   */
  private enqueue(op: LogOp, bytes: number): Promise<void> {
    const seg = this.active;
    const writer = seg.writer as NonNullable<Segment["writer"]>;
    let group = this.groups[this.groups.length - 1];
    if (group === undefined || group.seg !== seg) {
      const frameAt = writer.reserve(C.GROUP_FRAME_BYTES);
      group = { seg, offset: frameAt, bytes: C.GROUP_FRAME_BYTES, buffers: [FRAME_PLACEHOLDER], ops: [], after: [] };
      this.groups.push(group);
    }
    const offset = writer.reserve(bytes);
    const at: Location[] = [];
    let cursor = offset;
    for (const r of op.records) {
      at.push({ seg: seg.id, off: cursor, len: r.length });
      cursor += r.length;
    }
    if (group.offset + group.bytes !== offset) throw new Error(`group not contiguous: ${group.offset}+${group.bytes} != ${offset}`);
    group.bytes += bytes;
    group.buffers.push(...op.records);
    return new Promise<void>((resolve, reject) => {
      group.ops.push({ op, at, resolve, reject });
      if (!this.draining) queueMicrotask(() => void this.drain());
    });
  }

  /** Starts a new active segment; the old one is sealed once its queued groups are applied. */
  rotate(): Segment {
    const old = this.active;
    this.active = this.host.createSegment();
    this.retiring.add(old);
    this.sealRetiring();
    return old;
  }

  /** Resolves once `seg` is sealed (immediately if it is). */
  whenSealed(seg: Segment): Promise<void> {
    if (seg.writer === null) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.sealWaiters.get(seg) ?? [];
      list.push(resolve);
      this.sealWaiters.set(seg, list);
    });
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      for (let group = this.groups.shift(); group !== undefined; group = this.groups.shift()) {
        this.inFlight = group;
        await this.commitGroup(group);
        this.inFlight = null;
        this.sealRetiring();
        for (const f of group.after) f();
      }
    } finally {
      this.draining = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private async commitGroup(group: Group): Promise<void> {
    try {
      if (this.failure !== null) throw this.failure;
      const writer = group.seg.writer as NonNullable<Segment["writer"]>;
      group.buffers[0] = frameFor(group);
      writer.writeAtSync(group.buffers, group.offset);
      await hitAsync(this.host.faults, "write:after-append");
      if (this.host.durability === "sync") {
        await writer.sync();
        group.seg.syncedEnd = group.offset + group.bytes;
      } else this.unsynced.add(group.seg);
      await hitAsync(this.host.faults, "write:after-sync");
    } catch (err) {
      // A failed write or sync leaves the file's tail unknown: refuse every later write too.
      this.failure ??= err;
      for (const o of group.ops) o.reject(err);
      return;
    }
    group.seg.dataEnd = group.offset + group.bytes;
    for (const o of group.ops) {
      for (const seq of o.op.seqs) group.seg.noteSeq(seq);
      o.op.apply(o.at);
      o.resolve();
    }
  }

  /** Seals every rotated-out segment whose groups are all applied. */
  private sealRetiring(): void {
    for (const seg of this.retiring) {
      if (this.inFlight?.seg === seg || this.groups.some((g) => g.seg === seg)) continue;
      this.retiring.delete(seg);
      this.seal(seg);
    }
  }

  /** Makes every written byte durable (the `batch` timer, compaction and close call this). */
  async syncAll(): Promise<void> {
    const segs = [...this.unsynced];
    this.unsynced.clear();
    for (const seg of segs) {
      if (seg.writer === null) continue;
      const upTo = seg.dataEnd; // written before the sync starts, so covered by it
      await seg.writer.sync();
      if (upTo > seg.syncedEnd) seg.syncedEnd = upTo;
    }
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
    if (writer === null || this.failure !== null || this.groups.length > 0 || this.inFlight !== null) return;
    if (seg.dataEnd <= seg.coveredEnd || seg.syncedEnd !== seg.dataEnd) return;
    assert(seg.maxSeq > 0 && writer.end === seg.dataEnd, "a segment with data to mark has records and no reserved tail");
    const at = writer.reserve(C.GROUP_FRAME_BYTES);
    writer.writeAtSync([encodeGroupFrame(seg.maxSeq, at, [])], at);
    writer.syncSync();
    seg.dataEnd = at + C.GROUP_FRAME_BYTES;
    seg.syncedEnd = seg.dataEnd;
    seg.coveredEnd = seg.dataEnd;
  }

  /** Resolves once every group queued before the call is committed (later ones are not waited for). */
  barrier(): Promise<void> {
    const last = this.groups[this.groups.length - 1] ?? this.inFlight;
    if (last === null) return Promise.resolve();
    return new Promise((resolve) => last.after.push(resolve));
  }

  /** Resolves when no group is queued or in flight. */
  idle(): Promise<void> {
    if (!this.draining && this.groups.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Seals `seg`: cut preallocation, fdatasync, header with the sealed flag. */
  private seal(seg: Segment): void {
    const writer = seg.writer;
    if (writer === null) return;
    if (writer.end !== seg.dataEnd) throw new Error(`seal of segment ${seg.id}: written ${seg.dataEnd} != reserved ${writer.end}`);
    writer.truncateToEnd();
    writer.syncSync();
    hitCrashOnly(this.host.faults, "seal:after-truncate");
    seg.header = writeHeader(seg.fd, seg.header, { ...seg.header.header, flags: C.FLAG_SEALED, minSeq: seg.minSeq, maxSeq: seg.maxSeq, sealedBytes: seg.dataEnd });
    seg.writer = null;
    this.unsynced.delete(seg);
    for (const w of this.sealWaiters.get(seg) ?? []) w();
    this.sealWaiters.delete(seg);
    this.host.onSealed(seg);
  }
}
