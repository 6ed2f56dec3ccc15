/**
 * The append side of one segment file: space is reserved synchronously (so the engine knows each
 * record's offset when it queues it), written with one writev per group, and made durable with
 * one fdatasync per group. The file is preallocated ahead of the cursor with ftruncate so that a
 * durable append rarely also pays a file-size metadata update.
 */
import * as fs from "node:fs";
import { promisify } from "node:util";
import * as C from "./constants.js";

const writevAsync = promisify(fs.writev);
const fdatasyncAsync = promisify(fs.fdatasync);

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

  /** Reserves `bytes` at the end and returns their offset; preallocates when needed. */
  reserve(bytes: number): number {
    const at = this.cursor;
    this.cursor += bytes;
    if (this.cursor > this.allocated) {
      const target = Math.max(this.cursor, this.allocated + PREALLOCATE_STEP_BYTES);
      fs.ftruncateSync(this.fd, target);
      this.allocated = target;
    }
    return at;
  }

  /** Writes buffers contiguously at `offset` with one writev (async, via libuv). */
  async writeAt(buffers: Uint8Array[], offset: number): Promise<void> {
    const want = totalBytes(buffers);
    const { bytesWritten: written } = await writevAsync(this.fd, buffers, offset);
    if (written !== want) await this.finishShortWrite(buffers, offset, written);
  }

  /** Writes buffers contiguously at `offset`, synchronously. */
  writeAtSync(buffers: Uint8Array[], offset: number): void {
    const want = totalBytes(buffers);
    const written = fs.writevSync(this.fd, buffers, offset);
    if (written !== want) this.finishShortWriteSync(buffers, offset, written);
  }

  private async finishShortWrite(buffers: Uint8Array[], offset: number, written: number): Promise<void> {
    const all = Buffer.concat(buffers);
    let done = written;
    while (done < all.length) done += (await writevAsync(this.fd, [all.subarray(done)], offset + done)).bytesWritten;
  }

  private finishShortWriteSync(buffers: Uint8Array[], offset: number, written: number): void {
    const all = Buffer.concat(buffers);
    let done = written;
    while (done < all.length) done += fs.writevSync(this.fd, [all.subarray(done)], offset + done);
  }

  /** fdatasync: everything written before the call is durable when it resolves. */
  sync(): Promise<void> {
    return fdatasyncAsync(this.fd);
  }

  /** fdatasync, synchronously. */
  syncSync(): void {
    fs.fdatasyncSync(this.fd);
  }

  /** Cuts the preallocated space off: the file then ends at its last record. */
  truncateToEnd(): void {
    fs.ftruncateSync(this.fd, this.cursor);
    this.allocated = this.cursor;
  }
}
