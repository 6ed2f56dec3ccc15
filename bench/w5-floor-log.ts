/**
 * The log under W5's floor stores (bench/w5-floor.ts's blind one, bench/w5-floor-answers.ts's
 * answering one): one file written by whole batches (one write and, durable, one fdatasync each,
 * into space zero-filled ahead of its end before the timed phases), its bytes brought into memory
 * 1 MiB at a time on first need (off the JS heap, as engram's block cache; batches written since
 * are copied into the chunks already in memory), and the table file its close writes. Every record
 * of either format starts with its crc32 (u32) and its length (u16). With mapLog() the log is read
 * through a read-only shared mapping instead (bench/native-mmap.ts), as lmdb reads its file.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as zlib from "node:zlib";
import type { Mmap } from "./native-mmap.js";

/** Where a record's length (u16), kind (u8) and key's bytes (u8) lie in it, in both formats (after its crc32). */
export const AT_LENGTH = 4;
export const AT_KIND = 6;
export const AT_KEY_BYTES = 7;
/** A batch's last record, in both formats: its header, then the crc32 of every byte of the batch before it. */
export const KIND_COMMIT = 3;
/** The least bytes of a record's header (the blind format's). */
const HEADER_BYTES_MIN = 8;
/** Offsets are small integers in the Maps (no boxed number per name): the log stays under 1 GiB. */
const LOG_BYTES_MAX = 1 << 30;
/** The unit the log's bytes are brought into memory in. */
const CHUNK_BYTES = 1 << 20;
/** Zeros written ahead of the end before the timed phases (durable opens): W5 writes ~9 MB at 200k keys. */
const ZERO_AHEAD_BYTES = 32 << 20;
const LOG_FILE = "log";
const TABLE_FILE = "table";

/** FNV-1a over a key's UTF-16 code units, never 0 (0 marks an empty cell of the blind table). */
export function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0 || 1;
}

/** True when `bytes[at, at + length)` holds `key`'s first `length` code units (keys here are ASCII). */
export function keyAt(bytes: Uint8Array, at: number, key: string, length = key.length): boolean {
  for (let i = 0; i < length; i++) if (bytes[at + i] !== key.charCodeAt(i)) return false;
  return true;
}

/** A directory's log opened: its descriptor, and the words of the table its last close wrote (null for a new log). */
export interface FloorFiles {
  fd: number;
  words: Uint32Array | null;
}

/** Opens (or creates) the log in `dir`, with the table file's words when the log exists (the caller checks their layout). */
export function openFloorFiles(dir: string): FloorFiles {
  fs.mkdirSync(dir, { recursive: true });
  const log = path.join(dir, LOG_FILE);
  if (!fs.existsSync(log)) return { fd: fs.openSync(log, "w+"), words: null };
  const bytes = fs.readFileSync(path.join(dir, TABLE_FILE));
  return { fd: fs.openSync(log, "r+"), words: new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) };
}

/** The log itself (see the file's comment); a store extends it with its record and table formats. */
export class FloorLog {
  /** The log's bytes brought into memory, one entry per CHUNK_BYTES; undefined until first needed. */
  private readonly chunks: Array<Buffer | undefined> = [];
  /** The log's bytes through a shared mapping (mapLog()), which sees every write made since; null when read by chunks. */
  private mapped: Buffer | null = null;
  /** Where locate() found its record: the buffer and the record's start in it. */
  protected recBytes: Buffer = Buffer.alloc(0);
  protected recAt = 0;

  protected constructor(
    private readonly fd: number,
    private readonly dir: string,
    private readonly durable: boolean,
    protected end: number,
  ) {}

  /** Bytes of the log written so far (its end). */
  get logBytes(): number {
    return this.end;
  }

  /** Zero-fills the space the next writes go to and syncs it (untimed: a durable write is then an overwrite). */
  prepare(): void {
    if (!this.durable) return;
    const zeros = Buffer.alloc(CHUNK_BYTES);
    for (let at = 0; at < ZERO_AHEAD_BYTES; at += zeros.length) fs.writeSync(this.fd, zeros, 0, zeros.length, this.end + at);
    fs.fdatasyncSync(this.fd);
  }

  /**
   * Reads the log from now on through a read-only shared mapping of the whole file (its zeros
   * ahead included, so prepare() first when durable): the kernel maps page-cache pages on first
   * touch, several at a time, where a read by chunks copies them into fresh memory. Records past
   * the mapping are still read by chunks (all of them when the file is empty: nothing to map).
   */
  mapLog(mmap: Mmap): void {
    const size = fs.fstatSync(this.fd).size;
    this.mapped = size > 0 ? Buffer.from(mmap.map(this.fd, size)) : null;
  }

  /** Throws unless `bytes` more fit in the log. */
  protected checkRoom(bytes: number): void {
    if (this.end + bytes > LOG_BYTES_MAX) throw new Error(`the floor's log stays under ${LOG_BYTES_MAX} bytes`);
  }

  /** Writes a whole batch at the end (one write, and one fdatasync when durable) and into the chunks in memory; returns its offset. */
  protected append(buf: Buffer): number {
    const base = this.end;
    fs.writeSync(this.fd, buf, 0, buf.length, base);
    if (this.durable) fs.fdatasyncSync(this.fd);
    this.end += buf.length;
    for (let i = Math.floor(base / CHUNK_BYTES); i * CHUNK_BYTES < base + buf.length; i++) {
      const chunk = this.chunks[i];
      if (chunk === undefined) continue;
      const from = Math.max(base, i * CHUNK_BYTES);
      const to = Math.min(base + buf.length, (i + 1) * CHUNK_BYTES);
      buf.copy(chunk, from - i * CHUNK_BYTES, from - base, to - base);
    }
    return base;
  }

  /** Finds the record at `off` in memory (this.recBytes, this.recAt): in the mapping, else in its chunk, or read alone when it crosses into the next one. */
  protected locate(off: number, headerBytes: number): void {
    const mapped = this.mapped;
    if (mapped !== null && off + headerBytes <= mapped.length && off + mapped.readUInt16LE(off + AT_LENGTH) <= mapped.length) {
      this.recBytes = mapped;
      this.recAt = off;
      return;
    }
    const i = Math.floor(off / CHUNK_BYTES);
    let buf = this.chunkAt(i);
    let at = off - i * CHUNK_BYTES;
    if (at + headerBytes > CHUNK_BYTES || at + buf.readUInt16LE(at + AT_LENGTH) > CHUNK_BYTES) {
      buf = this.readRecord(off);
      at = 0;
    }
    this.recBytes = buf;
    this.recAt = at;
  }

  /** Chunk `i` of the log, read from the file on first need (off the JS heap, as engram's block cache). */
  private chunkAt(i: number): Buffer {
    let chunk = this.chunks[i];
    if (chunk === undefined) {
      chunk = Buffer.from(new SharedArrayBuffer(CHUNK_BYTES));
      fs.readSync(this.fd, chunk, 0, CHUNK_BYTES, i * CHUNK_BYTES);
      this.chunks[i] = chunk;
    }
    return chunk;
  }

  /** The record at `off`, read from the file into a buffer of its own. */
  private readRecord(off: number): Buffer {
    const head = Buffer.allocUnsafe(HEADER_BYTES_MIN);
    fs.readSync(this.fd, head, 0, HEADER_BYTES_MIN, off);
    const rec = Buffer.allocUnsafe(head.readUInt16LE(AT_LENGTH));
    fs.readSync(this.fd, rec, 0, rec.length, off);
    return rec;
  }

  /** The whole log, read for a close's scan. */
  protected readAll(): Buffer {
    const log = Buffer.allocUnsafe(this.end);
    fs.readSync(this.fd, log, 0, this.end, 0);
    return log;
  }

  /**
   * Walks the committed batches of `log` (the whole log, readAll), checking every record's crc32
   * and every batch's (throws on a bad one), and calls `visit` for each record of a committed
   * batch in order: its key, offset and kind. `headerBytes` is the format's (the key follows it).
   */
  protected scanCommitted(log: Buffer, headerBytes: number, visit: (key: string, offset: number, kind: number) => void): void {
    const pending: Array<[string, number, number]> = [];
    for (let at = 0, batchAt = 0; at < this.end; ) {
      const len = log.readUInt16LE(at + AT_LENGTH);
      if (len < headerBytes || zlib.crc32(log.subarray(at + 4, at + len)) !== log.readUInt32LE(at)) throw new Error(`floor log at ${at}: a bad record`);
      const kind = log[at + AT_KIND] as number;
      if (kind === KIND_COMMIT) {
        if (zlib.crc32(log.subarray(batchAt, at)) !== log.readUInt32LE(at + headerBytes)) throw new Error(`floor log at ${batchAt}: a torn batch`);
        for (const [key, off, k] of pending) visit(key, off, k);
        pending.length = 0;
        batchAt = at + len;
      } else pending.push([log.toString("latin1", at + headerBytes, at + headerBytes + (log[at + AT_KEY_BYTES] as number)), at, kind]);
      at += len;
    }
  }

  /** Writes `words` as the table file (written, synced, renamed) and closes the log after syncing it. */
  protected finish(words: Uint32Array): void {
    const tmp = path.join(this.dir, `${TABLE_FILE}.tmp`);
    fs.writeFileSync(tmp, words);
    const tfd = fs.openSync(tmp, "r");
    fs.fsyncSync(tfd);
    fs.closeSync(tfd);
    fs.renameSync(tmp, path.join(this.dir, TABLE_FILE));
    fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
  }
}
