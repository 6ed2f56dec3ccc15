/**
 * W5's floor: the least a store can spend on W5 (bench/w5-ops.ts) on this machine in Node.js
 * while it keeps what issue 11's other goals and the contract ask of engram — measured in the
 * same run as the stores, beside the physical limits (bench/limits.ts), so that W5's goal can be
 * read against what W5 costs at the least rather than against the peers alone.
 *
 * The floor store is the smallest durable log that does W5 and nothing else:
 * - every batch is one write and, durable, one fdatasync, into space zero-filled before the timed
 *   phases (the device's cheapest durable write); each record carries a crc32 (zlib's, native),
 *   and each batch a commit record with the crc32 of the whole batch (atomic batches);
 * - the open reads a hash table of the live names' offsets written at the last close, and holds
 *   only the names written since in a JS Map: as the reopen goal asks (an open is no full scan and
 *   builds no index per key) and as the heap goal asks (nothing per key on the JS heap at open);
 * - a read looks its name up, brings the file's bytes into memory 1 MiB at a time on first need
 *   (off the JS heap, as engram's block cache; batches written since are copied in), checks the
 *   record's crc32 and key, and returns a copy of the value the caller owns.
 * It leaves out everything else engram does per record: scopes, sequence numbers, generations,
 * expiry, retention, undelete, reads that fail closed, concurrency, compaction, space reclaim,
 * hints kept current while writing (its table is written at close, untimed). Its time is
 * therefore below what any store meeting engram's contract can reach here; engram's distance
 * from it is what engram's design costs, and the floor's distance from the goal says whether
 * the goal is reachable at all.
 *
 *   node --import tsx bench/w5-floor.ts [--n 200000] [--rounds 3] [--dir D]
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import * as zlib from "node:zlib";
import type { BatchOp } from "./adapters.js";
import { keyOf, nowNs, permutation, sameValue, secondsSince, valueOf } from "./common.js";
import { W5_BATCH_OPS, W5_LOAD_SEED, w5Batches, w5Verify } from "./w5-ops.js";

/** A record: crc32 of the rest (u32), its bytes (u16), its kind (u8), its key's bytes (u8), the key, then a PUT's value. */
const HEADER_BYTES = 8;
const KIND_PUT = 1;
const KIND_DEL = 2;
/** A batch's last record: its header, then the crc32 of every byte of the batch before it. */
const KIND_COMMIT = 3;
const COMMIT_BYTES = HEADER_BYTES + 4;
/** The largest record: its length is a u16. */
const RECORD_BYTES_MAX = 0xffff;
/** Offsets are small integers in the Map (no boxed number per name): the log stays under 1 GiB. */
const LOG_BYTES_MAX = 1 << 30;
/** The unit the log's bytes are brought into memory in. */
const CHUNK_BYTES = 1 << 20;
/** Zeros written ahead of the end before the timed phases (durable opens): W5 writes ~9 MB at 200k keys. */
const ZERO_AHEAD_BYTES = 32 << 20;
const LOG_FILE = "log";
const TABLE_FILE = "table";
const TABLE_MAGIC = 0x57354654; // "TF5W"
/** The table file's header: magic, log end, cells (u32 each), then per cell its name's hash (0: empty) and record offset. */
const TABLE_HEADER_WORDS = 3;

/** A name forgotten since the open (the Map's mark). */
const FORGOTTEN = -1;

/** FNV-1a over a key's UTF-16 code units, never 0 (0 marks an empty cell). */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0 || 1;
}

/** True when `buf[at, at + key.length)` holds `key`'s code units (keys here are ASCII). */
function keyAt(buf: Buffer, at: number, key: string): boolean {
  for (let i = 0; i < key.length; i++) if (buf[at + i] !== key.charCodeAt(i)) return false;
  return true;
}

/** The floor store (see the file's comment). Synchronous: a batch returns once written and, durable, synced. */
export class FloorStore {
  /** Names written since the open: a PUT's record offset, or FORGOTTEN. */
  private readonly touched = new Map<string, number>();
  /** The log's bytes brought into memory, one entry per CHUNK_BYTES; undefined until first needed. */
  private readonly chunks: Array<Buffer | undefined> = [];

  private constructor(
    private readonly fd: number,
    private readonly dir: string,
    private readonly durable: boolean,
    private end: number,
    private readonly table: Uint32Array,
  ) {}

  /** Opens (or creates) the store in `dir`: reads the table the last close wrote, nothing per key. */
  static open(dir: string, durable: boolean): FloorStore {
    fs.mkdirSync(dir, { recursive: true });
    const log = path.join(dir, LOG_FILE);
    const tableFile = path.join(dir, TABLE_FILE);
    if (!fs.existsSync(log)) return new FloorStore(fs.openSync(log, "w+"), dir, durable, 0, new Uint32Array(0));
    const bytes = fs.readFileSync(tableFile);
    const words = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2);
    if (words[0] !== TABLE_MAGIC || words.length !== TABLE_HEADER_WORDS + 2 * (words[2] as number)) throw new Error(`${tableFile}: not a floor table`);
    return new FloorStore(fs.openSync(log, "r+"), dir, durable, words[1] as number, words.subarray(TABLE_HEADER_WORDS));
  }

  /** Zero-fills the space the next writes go to and syncs it (untimed: a durable write is then an overwrite). */
  prepare(): void {
    if (!this.durable) return;
    const zeros = Buffer.alloc(CHUNK_BYTES);
    for (let at = 0; at < ZERO_AHEAD_BYTES; at += zeros.length) fs.writeSync(this.fd, zeros, 0, zeros.length, this.end + at);
    fs.fdatasyncSync(this.fd);
  }

  /** Writes `ops` as one atomic batch (one write, and one fdatasync when durable), then makes them visible. */
  batch(ops: readonly BatchOp[]): void {
    let bytes = COMMIT_BYTES;
    for (const op of ops) bytes += HEADER_BYTES + op.key.length + (op.type === "put" ? op.value.byteLength : 0);
    if (this.end + bytes > LOG_BYTES_MAX) throw new Error(`the floor's log stays under ${LOG_BYTES_MAX} bytes`);
    const buf = Buffer.allocUnsafe(bytes);
    let at = 0;
    for (const op of ops) at = this.encode(buf, at, op);
    buf.writeUInt16LE(COMMIT_BYTES, at + 4);
    buf[at + 6] = KIND_COMMIT;
    buf[at + 7] = 0;
    buf.writeUInt32LE(zlib.crc32(buf.subarray(0, at)), at + HEADER_BYTES);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + COMMIT_BYTES)), at);
    const base = this.end;
    fs.writeSync(this.fd, buf, 0, bytes, base);
    if (this.durable) fs.fdatasyncSync(this.fd);
    this.end += bytes;
    at = 0;
    for (const op of ops) {
      this.touched.set(op.key, op.type === "put" ? base + at : FORGOTTEN);
      at += buf.readUInt16LE(at + 4);
    }
    this.copyIntoChunks(buf, base);
  }

  /** Encodes `op` at `at` of `buf` with its crc32; returns the offset after it. */
  private encode(buf: Buffer, at: number, op: BatchOp): number {
    const keyBytes = op.key.length;
    const len = HEADER_BYTES + keyBytes + (op.type === "put" ? op.value.byteLength : 0);
    if (len > RECORD_BYTES_MAX || keyBytes > 0xff) throw new Error("a floor record's key is under 256 bytes and the record under 64 KiB");
    buf.writeUInt16LE(len, at + 4);
    buf[at + 6] = op.type === "put" ? KIND_PUT : KIND_DEL;
    buf[at + 7] = keyBytes;
    buf.write(op.key, at + HEADER_BYTES, keyBytes, "latin1");
    if (op.type === "put") buf.set(op.value, at + HEADER_BYTES + keyBytes);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + len)), at);
    return at + len;
  }

  /** Copies a batch written at `base` into the chunks already in memory (the others read it from the file when needed). */
  private copyIntoChunks(buf: Buffer, base: number): void {
    for (let i = Math.floor(base / CHUNK_BYTES); i * CHUNK_BYTES < base + buf.length; i++) {
      const chunk = this.chunks[i];
      if (chunk === undefined) continue;
      const from = Math.max(base, i * CHUNK_BYTES);
      const to = Math.min(base + buf.length, (i + 1) * CHUNK_BYTES);
      buf.copy(chunk, from - i * CHUNK_BYTES, from - base, to - base);
    }
  }

  /** The value of `key` (a copy the caller owns), or undefined when it has none. */
  get(key: string): Uint8Array | undefined {
    const off = this.touched.get(key);
    if (off === FORGOTTEN) return undefined;
    if (off !== undefined) return this.valueAt(off, key) ?? undefined;
    const t = this.table;
    const mask = (t.length >>> 1) - 1;
    if (mask < 0) return undefined;
    const h = hashOf(key);
    for (let p = h & mask, n = 0; n <= mask; p = (p + 1) & mask, n++) {
      const cellHash = t[2 * p] as number;
      if (cellHash === 0) return undefined;
      if (cellHash !== h) continue;
      const value = this.valueAt(t[2 * p + 1] as number, key);
      if (value !== null) return value;
    }
    return undefined;
  }

  /** The value of the PUT record at `off` when it is `key`'s (a copy), null when it is another name's; throws on a bad crc32. */
  private valueAt(off: number, key: string): Uint8Array | null {
    const i = Math.floor(off / CHUNK_BYTES);
    let buf = this.chunkAt(i);
    let at = off - i * CHUNK_BYTES;
    if (at + HEADER_BYTES > CHUNK_BYTES || at + buf.readUInt16LE(at + 4) > CHUNK_BYTES) {
      buf = this.readRecord(off); // across two chunks: read on its own
      at = 0;
    }
    const len = buf.readUInt16LE(at + 4);
    if (zlib.crc32(buf.subarray(at + 4, at + len)) !== buf.readUInt32LE(at)) throw new Error(`floor record at ${off}: crc32 mismatch`);
    if (buf[at + 6] !== KIND_PUT) throw new Error(`floor record at ${off}: not a PUT`);
    const keyBytes = buf[at + 7] as number;
    if (keyBytes !== key.length || !keyAt(buf, at + HEADER_BYTES, key)) return null;
    const value = Buffer.allocUnsafe(len - HEADER_BYTES - keyBytes);
    buf.copy(value, 0, at + HEADER_BYTES + keyBytes, at + len);
    return value;
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
    const head = Buffer.allocUnsafe(HEADER_BYTES);
    fs.readSync(this.fd, head, 0, HEADER_BYTES, off);
    const rec = Buffer.allocUnsafe(head.readUInt16LE(4));
    fs.readSync(this.fd, rec, 0, rec.length, off);
    return rec;
  }

  /** Writes the table of every live name (a scan of the log: untimed, as it is no part of W5) and closes. */
  close(): void {
    const live = this.scan();
    let cells = 16;
    while (cells < 2 * live.size) cells *= 2;
    const words = new Uint32Array(TABLE_HEADER_WORDS + 2 * cells);
    words[0] = TABLE_MAGIC;
    words[1] = this.end;
    words[2] = cells;
    const t = words.subarray(TABLE_HEADER_WORDS);
    for (const [key, off] of live) {
      let p = hashOf(key) & (cells - 1);
      while (t[2 * p] !== 0) p = (p + 1) & (cells - 1);
      t[2 * p] = hashOf(key);
      t[2 * p + 1] = off;
    }
    const tmp = path.join(this.dir, `${TABLE_FILE}.tmp`);
    fs.writeFileSync(tmp, words);
    const tfd = fs.openSync(tmp, "r");
    fs.fsyncSync(tfd);
    fs.closeSync(tfd);
    fs.renameSync(tmp, path.join(this.dir, TABLE_FILE));
    fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
  }

  /** Every live name's PUT offset, from the log's committed batches. */
  private scan(): Map<string, number> {
    const log = Buffer.allocUnsafe(this.end);
    fs.readSync(this.fd, log, 0, this.end, 0);
    const live = new Map<string, number>();
    const pending: Array<[string, number]> = [];
    for (let at = 0, batchAt = 0; at < this.end; ) {
      const len = log.readUInt16LE(at + 4);
      if (len < HEADER_BYTES || zlib.crc32(log.subarray(at + 4, at + len)) !== log.readUInt32LE(at)) throw new Error(`floor log at ${at}: a bad record`);
      const kind = log[at + 6];
      if (kind === KIND_COMMIT) {
        if (zlib.crc32(log.subarray(batchAt, at)) !== log.readUInt32LE(at + HEADER_BYTES)) throw new Error(`floor log at ${batchAt}: a torn batch`);
        for (const [key, off] of pending) if (off < 0) live.delete(key); else live.set(key, off);
        pending.length = 0;
        batchAt = at + len;
      } else {
        const key = log.toString("latin1", at + HEADER_BYTES, at + HEADER_BYTES + (log[at + 7] as number));
        pending.push([key, kind === KIND_PUT ? at : FORGOTTEN]);
      }
      at += len;
    }
    return live;
  }
}


/**
 * W5 on the floor store in a fresh directory under `dir`, as bench/workloads.ts w5 runs it on
 * the stores: n keys loaded untimed (non-durable, atomic batches), reopened durable, the three
 * timed phases; then a reopen and a first read (timed alone: the reopen goal's measure).
 */
export function measureW5Floor(dir: string, n: number): Record<string, number> {
  const work = fs.mkdtempSync(path.join(dir, "w5floor-"));
  try {
    const loader = FloorStore.open(work, false);
    const order = permutation(n, W5_LOAD_SEED);
    for (let b = 0; b < n; b += W5_BATCH_OPS) {
      const ops: BatchOp[] = [];
      for (let j = b; j < Math.min(b + W5_BATCH_OPS, n); j++) ops.push({ type: "put", key: keyOf(order[j] as number), value: valueOf(order[j] as number, 1) });
      loader.batch(ops);
    }
    loader.close();
    const s = FloorStore.open(work, true);
    s.prepare();
    const { dels, puts } = w5Batches(n);
    const t0 = nowNs();
    for (const b of dels) s.batch(b);
    const t1 = nowNs();
    for (const b of puts) s.batch(b);
    const t2 = nowNs();
    const bad = w5Verify((key) => s.get(key), n);
    const t3 = nowNs();
    s.close();
    if (bad !== 0) throw new Error(`the floor store read ${bad} wrong values in W5`);
    const t4 = nowNs();
    const again = FloorStore.open(work, true);
    const first = again.get(keyOf(1));
    const openMs = secondsSince(t4) * 1000;
    again.close();
    if (!sameValue(first, 1, 1)) throw new Error("the floor store's first read after its reopen is wrong");
    return {
      "limit.w5floor.seconds": secondsSince(t0, t3),
      "limit.w5floor.delete.seconds": secondsSince(t0, t1),
      "limit.w5floor.rewrite.seconds": secondsSince(t1, t2),
      "limit.w5floor.verify.seconds": secondsSince(t2, t3),
      "limit.w5floor.reopenMs": openMs,
    };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback: string): string => {
    const i = args.indexOf(name);
    return i >= 0 && args[i + 1] !== undefined ? (args[i + 1] as string) : fallback;
  };
  const n = Number(flag("--n", "200000"));
  const rounds = Number(flag("--rounds", "3"));
  const dir = flag("--dir", os.tmpdir());
  for (let r = 0; r < rounds; r++) {
    const m = measureW5Floor(dir, n);
    const ms = (id: string): string => ((m[id] as number) * 1000).toFixed(0);
    console.log(
      `round ${r}: W5 ${ms("limit.w5floor.seconds")} ms (delete ${ms("limit.w5floor.delete.seconds")}, rewrite ${ms("limit.w5floor.rewrite.seconds")}, ` +
        `read all ${ms("limit.w5floor.verify.seconds")}); reopen + first read ${(m["limit.w5floor.reopenMs"] as number).toFixed(2)} ms`,
    );
  }
}
