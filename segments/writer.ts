/**
 * The append side of one segment file: space is reserved synchronously (so the engine knows each
 * record's offset when it queues it), written with one writev per group, and made durable with
 * one fdatasync per group. The file is preallocated ahead of the cursor with ftruncate so that a
 * durable append rarely also pays a file-size metadata update.
 */
import * as C from "./constants.js";
import * as io from "./io.js";

/** Bytes added to the file's size when the cursor reaches the preallocated end. */
export const PREALLOCATE_STEP_BYTES = 8 * 1024 * 1024;

/** Sums the byte lengths of buffers. */
export function totalBytes(buffers: readonly Uint8Array[]): number {
  let n = 0;
  for (const b of buffers) n += b.byteLength;
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

  constructor(id: number, fd: number, end: number, allocated: number) {
    if (end < C.DATA_START || allocated < end) throw new Error(`segment ${id}: bad writer bounds ${end}/${allocated}`);
    this.id = id;
    this.fd = fd;
    this.cursor = end;
    this.allocated = allocated;
  }

  /** Offset just past the last reserved byte: the segment's data end once writes land. */
  get end(): number {
    return this.cursor;
  }

  /**
   * Reserves `bytes` at the end and returns their offset; preallocates when needed. A failed
   * preallocation throws and reserves nothing.
   */
  reserve(bytes: number): number {
    const at = this.cursor;
    const end = at + bytes;
    if (end > this.allocated) {
      const target = Math.max(end, this.allocated + PREALLOCATE_STEP_BYTES);
      io.truncate("io:append", this.fd, target);
      this.allocated = target;
    }
    this.cursor = end;
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
  }

  /**
   * Cuts everything past the cursor (a failed group's bytes, written or not) and makes the cut
   * durable, so that no later recovery finds an unacknowledged record. Preallocation starts over.
   */
  cutTail(): void {
    io.truncate("io:append", this.fd, this.cursor);
    this.allocated = this.cursor;
    io.datasyncSync("io:sync", this.fd);
  }
}
