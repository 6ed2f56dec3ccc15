/**
 * Reading a whole segment or journal file into memory (scans, compaction, recovery, verify). Every
 * read goes through segments/io.ts readAt (fault point `io:read`): a read that fails throws an
 * IoError, and is never taken for the end of the file — recovery would cut acknowledged records
 * as a torn tail, and a compaction would drop them (test/read-faults.test.ts, whose twin is
 * `unsafeWholeFileForTests.failedReadEnds`).
 */
import * as fs from "node:fs";
import { assert } from "../rules/assert.js";
import * as io from "./io.js";

/**
 * Test switch, never set by the engine or any option (test/read-faults.test.ts): with
 * `failedReadEnds`, a read that fails ends the file there, as a naive reader's loop does.
 */
export const unsafeWholeFileForTests = { failedReadEnds: false };

/** Reads a whole file into memory (segments are bounded by segmentBytes). */
export function readWholeFile(fd: number): Uint8Array {
  const size = fs.fstatSync(fd).size;
  return readFileRange(fd, Buffer.allocUnsafe(size), 0);
}

/**
 * Fills `buf` with the file's bytes from offset `from` to `buf.length` (offsets in `buf` are file
 * offsets; the bytes before `from` are left as they are). Returns `buf`, or its prefix up to where
 * the file ended if it is shorter than `buf`.
 */
export function readFileRange(fd: number, buf: Buffer, from: number): Uint8Array {
  const done = from + readAtSync(fd, buf.subarray(from), from);
  return done === buf.length ? buf : buf.subarray(0, done);
}

/**
 * Fills all of `buf` with the file's bytes from offset `base` on. Returns the bytes read: fewer
 * than buf.length only where the file ended first.
 */
export function readAtSync(fd: number, buf: Buffer, base: number): number {
  let done = 0;
  while (done < buf.length) {
    let bytesRead: number;
    try {
      bytesRead = io.readAt(fd, buf, done, buf.length - done, base + done);
    } catch (err) {
      if (unsafeWholeFileForTests.failedReadEnds) break;
      throw err;
    }
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** Opens `file` read-only, reads all of it and closes it again (whatever the read did). */
export function readWholePath(file: string): Uint8Array {
  const fd = io.openRead(file);
  try {
    return readWholeFile(fd);
  } finally {
    io.closeQuietly(fd);
  }
}

/**
 * Test switch, never set by the engine or any option (test/read-scratch.test.ts): with
 * `ignoreHeld`, take() hands out a kept buffer even while a job holds it — the reuse that the
 * held flags forbid, which the test's overwritten buffers then show.
 */
export const unsafeScratchForTests = { ignoreHeld: false };

/**
 * Read buffers kept for reuse by sequential jobs, so that each 4 MiB segment read does not
 * allocate — and fault in — fresh memory: on the machines measured a first touch costs ~10 µs per
 * 4 KiB page (docs/performance-history.md, compact-13), so a 16 MiB buffer touched anew costs ~40 ms,
 * while one touched before costs nothing. Up to `buffersMax` buffers are kept (two outputs in
 * flight each take one). While every kept buffer is held (take() until release()), a further
 * taker gets a fresh buffer: jobs that interleave at await points (two stores compacting inline in
 * one process) never share bytes. Buffers over `retainBytesMax` are not kept. With `reserveBytes`,
 * a kept buffer is made at least that large: its pages beyond what a job wrote stay untouched (no
 * memory is used for them), and a later, larger job of up to that size then reuses every page an
 * earlier one touched instead of replacing the buffer with a fresh one.
 */
export class ReadScratch {
  /** The kept buffers (at most buffersMax), and which of them a job holds. */
  private readonly bufs: Buffer[] = [];
  private readonly held: boolean[] = [];
  private readonly retainBytesMax: number;
  private readonly buffersMax: number;
  private readonly reserveBytes: number;

  constructor(retainBytesMax: number, buffersMax = 1, reserveBytes = 0) {
    if (!(Number.isInteger(buffersMax) && buffersMax >= 1 && buffersMax <= 4)) throw new RangeError(`a scratch keeps 1..4 buffers, got ${buffersMax}`);
    if (!(Number.isInteger(reserveBytes) && reserveBytes >= 0 && reserveBytes <= retainBytesMax)) throw new RangeError(`a scratch reserves 0..${retainBytesMax} bytes, got ${reserveBytes}`);
    this.retainBytesMax = retainBytesMax;
    this.buffersMax = buffersMax;
    this.reserveBytes = reserveBytes;
  }

  /**
   * A buffer of exactly `size` bytes (contents undefined): a free kept one large enough, else a
   * free kept one (or a new slot) replaced by a buffer of `size`, else a fresh one not kept.
   */
  take(size: number): Buffer {
    if (size > this.retainBytesMax) return Buffer.allocUnsafeSlow(size);
    let slot = -1;
    for (let i = 0; i < this.bufs.length; i++) {
      if (this.held[i] === true && !unsafeScratchForTests.ignoreHeld) continue;
      if ((this.bufs[i] as Buffer).length >= size) {
        slot = i;
        break;
      }
      if (slot < 0) slot = i; // the first free one too small: replaced if none is large enough
    }
    if (slot < 0 && this.bufs.length < this.buffersMax) slot = this.bufs.length;
    if (slot < 0) return Buffer.allocUnsafeSlow(size);
    if (slot === this.bufs.length || (this.bufs[slot] as Buffer).length < size) this.bufs[slot] = Buffer.allocUnsafeSlow(Math.max(size, this.reserveBytes));
    this.held[slot] = true;
    const buf = this.bufs[slot] as Buffer;
    return buf.subarray(0, size);
  }

  /** Ends the use of what take() returned (`buf`): its kept buffer is free again (a fresh one is simply dropped). */
  release(buf: Uint8Array): void {
    for (let i = 0; i < this.bufs.length; i++) {
      if ((this.bufs[i] as Buffer).buffer === buf.buffer) {
        assert(this.held[i] === true || unsafeScratchForTests.ignoreHeld, "a kept scratch buffer is released once per take");
        this.held[i] = false;
        return;
      }
    }
  }

  /** Reads the whole file behind `fd` into take()'s buffer; release() it when done. */
  readWholeFile(fd: number): Uint8Array {
    return readFileRange(fd, this.take(fs.fstatSync(fd).size), 0);
  }
}
