/** Reading a whole segment or journal file into memory (scans, compaction, recovery, verify). */
import * as fs from "node:fs";
import { promisify } from "node:util";

const readAsync = promisify(fs.read);

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
  const size = buf.length;
  let done = from;
  while (done < size) {
    const n = fs.readSync(fd, buf, done, size - done, done);
    if (n === 0) break;
    done += n;
  }
  return done === size ? buf : buf.subarray(0, done);
}

/** Opens `file` read-only, reads all of it and closes it again (whatever the read did). */
export function readWholePath(file: string): Uint8Array {
  const fd = fs.openSync(file, "r");
  try {
    return readWholeFile(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A read buffer kept for reuse by sequential jobs, so that each 4 MiB segment read does not
 * allocate — and fault in — fresh memory. While one job holds it (take() until release()), a
 * second taker gets a fresh buffer: jobs that interleave at await points (two stores compacting
 * inline in one process) never share bytes. Buffers over `retainBytesMax` are not kept.
 */
export class ReadScratch {
  private buf: Buffer | null = null;
  private held = false;
  private readonly retainBytesMax: number;

  constructor(retainBytesMax: number) {
    this.retainBytesMax = retainBytesMax;
  }

  /** A buffer of exactly `size` bytes (contents undefined), the kept one when it is free and large enough. */
  take(size: number): Buffer {
    if (this.held || size > this.retainBytesMax) return Buffer.allocUnsafeSlow(size);
    if (this.buf === null || this.buf.length < size) this.buf = Buffer.allocUnsafeSlow(size);
    this.held = true;
    return this.buf.subarray(0, size);
  }

  /** Ends the use of what take() returned (`buf`): the kept buffer is free again. */
  release(buf: Uint8Array): void {
    if (this.buf !== null && buf.buffer === this.buf.buffer) this.held = false;
  }

  /** Reads the whole file behind `fd` into take()'s buffer; release() it when done. */
  readWholeFile(fd: number): Uint8Array {
    return readFileRange(fd, this.take(fs.fstatSync(fd).size), 0);
  }

  /**
   * readWholeFile through libuv's pool: the calling thread works on while the bytes arrive.
   * release() what it resolves to; if it rejects, the buffer is released already.
   */
  async readWholeFileAsync(fd: number): Promise<Uint8Array> {
    const buf = this.take(fs.fstatSync(fd).size);
    try {
      let done = 0;
      while (done < buf.length) {
        const { bytesRead } = await readAsync(fd, buf, done, buf.length - done, done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return done === buf.length ? buf : buf.subarray(0, done);
    } catch (err) {
      this.release(buf);
      throw err;
    }
  }
}
