/**
 * The append side of one segment file: space is reserved synchronously (so the engine knows each
 * record's offset when it queues it), written with one writev per group, and made durable with
 * one fdatasync per group. The file is preallocated ahead of the cursor with ftruncate so that a
 * durable append rarely also pays a file-size metadata update.
 *
 * ftruncate only makes a hole: the file system still allocates blocks (and journals that) on the
 * first write into each one, so a durable append into a hole costs what an append past the end
 * costs. `zeroAhead` therefore writes real zeros ahead of the cursor, ZERO_STEP_BYTES at a time,
 * before the space is reserved: one fdatasync per step then commits the allocation, and every
 * other durable append is an overwrite of allocated blocks (bench/limits.ts measures both).
 * Zeros read as unwritten space to recovery (record type 0 is never a type), exactly as a hole.
 */
import * as C from "./constants.js";
import * as io from "./io.js";
import { assert } from "../rules/assert.js";
import type { FaultPoint } from "../rules/types.js";

/** Bytes added to the file's size when the cursor reaches the preallocated end. */
export const PREALLOCATE_STEP_BYTES = 8 * 1024 * 1024;
/**
 * Zeros written ahead of the cursor at a time. Small enough that the one fdatasync that carries a
 * step (allocating its blocks) stays a few milliseconds, large enough that it is one put in ~900.
 */
export const ZERO_STEP_BYTES = 256 * 1024;

/** The zeros zeroAhead writes (never written to: shared, read-only by use). */
const ZEROS = Buffer.alloc(ZERO_STEP_BYTES);

/**
 * Writes real zeros over [from, to) of `fd` (no sync), one ZERO_STEP_BYTES piece at a time, under
 * fault point `point`; throws its IoError. What lay there must be unreserved space: nothing of a
 * record may be in the range.
 */
export function writeZeros(point: FaultPoint, fd: number, from: number, to: number): void {
  assert(from >= C.DATA_START && to >= from, "zeros go past the headers, over a range");
  for (let at = from; at < to; at += ZERO_STEP_BYTES) {
    const n = Math.min(ZERO_STEP_BYTES, to - at);
    io.writeAllSync(point, fd, [n === ZERO_STEP_BYTES ? ZEROS : ZEROS.subarray(0, n)], at);
  }
}

/**
 * Sums the byte lengths of buffers. Indexed, as the other loops of a lone put's path: before the
 * JIT optimizes them (most of a short-lived process's puts), a for-of makes an iterator and a
 * result object per step and costs several times an indexed loop.
 */
export function totalBytes(buffers: readonly Uint8Array[]): number {
  let n = 0;
  for (let i = 0; i < buffers.length; i++) n += (buffers[i] as Uint8Array).byteLength; // in bounds: i < length
  return n;
}

/** Appends to one open segment file. Not thread-safe: one owner (the engine's main thread). */
export class SegmentWriter {
  readonly id: number;
  readonly fd: number;
  /** Offset where the next reserved record starts. */
  private cursor: number;
  /** The file's size: preallocated, zeroed space ends here. */
  private allocated: number;
  /**
   * Blocks before this offset are written (records or real zeros), not holes. Never below the
   * data end a writer starts at; what lies past it may be a hole (ftruncate) or unknown (recovery).
   */
  private zeroed: number;

  /**
   * A writer appending at `end` of a file of `allocated` bytes whose blocks are known written up
   * to `zeroed` (createSegmentFile's zeros; the data end when nothing past it is known).
   */
  constructor(id: number, fd: number, end: number, allocated: number, zeroed: number = end) {
    if (end < C.DATA_START || zeroed < end || allocated < zeroed) throw new Error(`segment ${id}: bad writer bounds ${end}/${zeroed}/${allocated}`);
    this.id = id;
    this.fd = fd;
    this.cursor = end;
    this.allocated = allocated;
    this.zeroed = zeroed;
  }

  /** Offset up to which the file's blocks are written (records or zeros), for tests and the bench. */
  get zeroedEnd(): number {
    return this.zeroed;
  }

  /**
   * Makes sure the next `bytes` after the cursor are real zeroed blocks, not a hole: when they
   * reach past the zeroed end, writes zeros from there (never below the cursor: everything from
   * the cursor on is unreserved, so no record can be there) up to at least ZERO_STEP_BYTES
   * further, but not past `limitBytes` (the segment's size) unless the bytes need it. Call it
   * before reserving; a failed write throws an IoError with nothing reserved and the zeroed end
   * unchanged (zeros already written past it are unwritten space, as before).
   */
  zeroAhead(bytes: number, limitBytes: number): void {
    const need = this.cursor + bytes;
    if (need <= this.zeroed) return;
    const from = Math.max(this.zeroed, this.cursor);
    const target = Math.max(need, Math.min(from + ZERO_STEP_BYTES, limitBytes));
    writeZeros("io:preallocate", this.fd, from, target);
    this.zeroed = target;
    if (target > this.allocated) this.allocated = target;
    assert(this.zeroed >= need && this.allocated >= this.zeroed, `segment ${this.id}: zeroed ${this.zeroed} covers ${need} and lies inside ${this.allocated}`);
  }

  /** Offset up to which the file is extended (ftruncate or zeros): reserve() of the bytes up to it cannot fail. For tests and the bench. */
  get allocatedEnd(): number {
    return this.allocated;
  }

  /** Offset just past the last reserved byte: the segment's data end once writes land. */
  get end(): number {
    return this.cursor;
  }

  /**
   * Makes sure the next `bytes` after the cursor lie inside the file's allocated size, extending it
   * when they do not, without reserving them: reservations of at most `bytes` in all then cannot
   * fail. A failed extension throws and changes nothing.
   */
  preallocate(bytes: number): void {
    const end = this.cursor + bytes;
    if (end <= this.allocated) return;
    const target = Math.max(end, this.allocated + PREALLOCATE_STEP_BYTES);
    io.truncate("io:append", this.fd, target);
    this.allocated = target;
  }

  /**
   * Reserves `bytes` at the end and returns their offset; preallocates when needed. A failed
   * preallocation throws and reserves nothing.
   */
  reserve(bytes: number): number {
    this.preallocate(bytes);
    const at = this.cursor;
    this.cursor = at + bytes;
    return at;
  }

  /**
   * Gives back every reservation past `end` (their groups failed and were never acknowledged):
   * the next reservation starts at `end` again.
   */
  rewind(end: number): void {
    if (end < C.DATA_START || end > this.cursor) throw new Error(`segment ${this.id}: rewind to ${end} outside [${C.DATA_START}, ${this.cursor}]`);
    this.cursor = end;
  }

  /** Writes buffers contiguously at `offset` with one writev (async, via libuv). */
  writeAt(buffers: Uint8Array[], offset: number): Promise<void> {
    return io.writeAll("io:append", this.fd, buffers, offset);
  }

  /** Writes buffers contiguously at `offset`, synchronously. */
  writeAtSync(buffers: Uint8Array[], offset: number): void {
    io.writeAllSync("io:append", this.fd, buffers, offset);
  }

  /** fdatasync: everything written before the call is durable when it resolves. */
  sync(): Promise<void> {
    return io.datasync("io:sync", this.fd);
  }

  /** fdatasync, synchronously. */
  syncSync(): void {
    io.datasyncSync("io:sync", this.fd);
  }

  /** Cuts the preallocated space off: the file then ends at its last record. */
  truncateToEnd(): void {
    io.truncate("io:seal", this.fd, this.cursor);
    this.allocated = this.cursor;
    this.zeroed = this.cursor;
  }

  /**
   * Cuts everything past the cursor (a failed group's bytes, written or not) and makes the cut
   * durable, so that no later recovery finds an unacknowledged record. Preallocation starts over.
   */
  cutTail(): void {
    io.truncate("io:append", this.fd, this.cursor);
    this.allocated = this.cursor;
    this.zeroed = this.cursor;
    io.datasyncSync("io:sync", this.fd);
  }
}
