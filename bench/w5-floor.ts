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
 * Its log (the file, the chunks, the table file's write) is bench/w5-floor-log.ts;
 * bench/w5-floor-answers.ts is the same store answering as the contract asks (a state lookup
 * before each write and forget); `--answers` runs that one instead. `--mmap` reads the log
 * through a shared mapping (bench/native-mmap.ts, a native addon built on first use) instead of
 * by pread into memory: what a store that maps its files, as lmdb, pays for W5's reads here.
 *
 *   node --import tsx bench/w5-floor.ts [--n 200000] [--rounds 3] [--dir D] [--answers] [--mmap]
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import * as zlib from "node:zlib";
import type { BatchOp } from "./adapters.js";
import { keyOf, nowNs, permutation, sameValue, secondsSince, valueOf } from "./common.js";
import { loadMmap, type Mmap } from "./native-mmap.js";
import { AnsweringFloorStore } from "./w5-floor-answers.js";
import { AT_KEY_BYTES, AT_KIND, AT_LENGTH, FloorLog, hashOf, KIND_COMMIT, keyAt, openFloorFiles } from "./w5-floor-log.js";
import { W5_BATCH_OPS, W5_LOAD_SEED, w5Batches, w5Verify } from "./w5-ops.js";

/** A record: crc32 of the rest (u32), its bytes (u16), its kind (u8), its key's bytes (u8), the key, then a PUT's value. */
const HEADER_BYTES = 8;
const KIND_PUT = 1;
const KIND_DEL = 2;
const COMMIT_BYTES = HEADER_BYTES + 4;
/** The largest record: its length is a u16. */
const RECORD_BYTES_MAX = 0xffff;
const TABLE_MAGIC = 0x57354654; // "TF5W"
/** The table file's header: magic, log end, cells (u32 each), then per cell its name's hash (0: empty) and record offset. */
const TABLE_HEADER_WORDS = 3;

/** A name forgotten since the open (the Map's mark). */
const FORGOTTEN = -1;

/** The floor store (see the file's comment). Synchronous: a batch returns once written and, durable, synced. */
export class FloorStore extends FloorLog {
  /** Names written since the open: a PUT's record offset, or FORGOTTEN. */
  private readonly touched = new Map<string, number>();

  private constructor(
    fd: number,
    dir: string,
    durable: boolean,
    end: number,
    private readonly table: Uint32Array,
  ) {
    super(fd, dir, durable, end);
  }

  /** Opens (or creates) the store in `dir`: reads the table the last close wrote, nothing per key. */
  static open(dir: string, durable: boolean): FloorStore {
    const { fd, words } = openFloorFiles(dir);
    if (words === null) return new FloorStore(fd, dir, durable, 0, new Uint32Array(0));
    if (words[0] !== TABLE_MAGIC || words.length !== TABLE_HEADER_WORDS + 2 * (words[2] as number)) throw new Error(`${dir}: not a floor table`);
    return new FloorStore(fd, dir, durable, words[1] as number, words.subarray(TABLE_HEADER_WORDS));
  }

  /** Writes `ops` as one atomic batch (one write, and one fdatasync when durable), then makes them visible. */
  batch(ops: readonly BatchOp[]): void {
    let bytes = COMMIT_BYTES;
    for (const op of ops) bytes += HEADER_BYTES + op.key.length + (op.type === "put" ? op.value.byteLength : 0);
    this.checkRoom(bytes);
    const buf = Buffer.allocUnsafe(bytes);
    let at = 0;
    for (const op of ops) at = this.encode(buf, at, op);
    buf.writeUInt16LE(COMMIT_BYTES, at + AT_LENGTH);
    buf[at + AT_KIND] = KIND_COMMIT;
    buf[at + AT_KEY_BYTES] = 0;
    buf.writeUInt32LE(zlib.crc32(buf.subarray(0, at)), at + HEADER_BYTES);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + COMMIT_BYTES)), at);
    const base = this.append(buf);
    at = 0;
    for (const op of ops) {
      this.touched.set(op.key, op.type === "put" ? base + at : FORGOTTEN);
      at += buf.readUInt16LE(at + AT_LENGTH);
    }
  }

  /** Encodes `op` at `at` of `buf` with its crc32; returns the offset after it. */
  private encode(buf: Buffer, at: number, op: BatchOp): number {
    const keyBytes = op.key.length;
    const len = HEADER_BYTES + keyBytes + (op.type === "put" ? op.value.byteLength : 0);
    if (len > RECORD_BYTES_MAX || keyBytes > 0xff) throw new Error("a floor record's key is under 256 bytes and the record under 64 KiB");
    buf.writeUInt16LE(len, at + AT_LENGTH);
    buf[at + AT_KIND] = op.type === "put" ? KIND_PUT : KIND_DEL;
    buf[at + AT_KEY_BYTES] = keyBytes;
    buf.write(op.key, at + HEADER_BYTES, keyBytes, "latin1");
    if (op.type === "put") buf.set(op.value, at + HEADER_BYTES + keyBytes);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + len)), at);
    return at + len;
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
    this.locate(off, HEADER_BYTES);
    const buf = this.recBytes;
    const at = this.recAt;
    const len = buf.readUInt16LE(at + AT_LENGTH);
    if (zlib.crc32(buf.subarray(at + 4, at + len)) !== buf.readUInt32LE(at)) throw new Error(`floor record at ${off}: crc32 mismatch`);
    if (buf[at + AT_KIND] !== KIND_PUT) throw new Error(`floor record at ${off}: not a PUT`);
    const keyBytes = buf[at + AT_KEY_BYTES] as number;
    if (keyBytes !== key.length || !keyAt(buf, at + HEADER_BYTES, key)) return null;
    const value = Buffer.allocUnsafe(len - HEADER_BYTES - keyBytes);
    buf.copy(value, 0, at + HEADER_BYTES + keyBytes, at + len);
    return value;
  }

  /** Writes the table of every live name (a scan of the log: untimed, as it is no part of W5) and closes. */
  close(): void {
    const live = this.scan(this.readAll());
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
    this.finish(words);
  }

  /** Every live name's PUT offset, from the log's committed batches. */
  private scan(log: Buffer): Map<string, number> {
    const live = new Map<string, number>();
    this.scanCommitted(log, HEADER_BYTES, (key, off, kind) => (kind === KIND_PUT ? live.set(key, off) : live.delete(key)));
    return live;
  }
}

/** What W5 asks of a floor store (both keep it: FloorStore, AnsweringFloorStore). */
interface W5Store {
  prepare(): void;
  mapLog(mmap: Mmap): void;
  batch(ops: readonly BatchOp[]): void;
  get(key: string): Uint8Array | undefined;
  close(): void;
}

/**
 * W5 on the floor store in a fresh directory under `dir`, as bench/workloads.ts w5 runs it on
 * the stores: n keys loaded untimed (non-durable, atomic batches), reopened durable, the three
 * timed phases; then a reopen and a first read (timed alone: the reopen goal's measure). With
 * `answers`, on the store that answers as the contract asks (bench/w5-floor-answers.ts), its
 * metrics named `limit.w5floor.answers.*` instead of `limit.w5floor.*`. With `mmap`, the timed
 * phases read the log through a shared mapping made untimed before them (FloorLog.mapLog), the
 * metrics' prefix followed by `.mmap`; the reopen after them reads by chunks as without.
 */
export function measureW5Floor(dir: string, n: number, answers = false, mmap: Mmap | null = null): Record<string, number> {
  const work = fs.mkdtempSync(path.join(dir, "w5floor-"));
  const open = (durable: boolean): W5Store => (answers ? AnsweringFloorStore.open(work, durable) : FloorStore.open(work, durable));
  try {
    const loader = open(false);
    const order = permutation(n, W5_LOAD_SEED);
    for (let b = 0; b < n; b += W5_BATCH_OPS) {
      const ops: BatchOp[] = [];
      for (let j = b; j < Math.min(b + W5_BATCH_OPS, n); j++) ops.push({ type: "put", key: keyOf(order[j] as number), value: valueOf(order[j] as number, 1) });
      loader.batch(ops);
    }
    loader.close();
    const s = open(true);
    s.prepare();
    if (mmap !== null) s.mapLog(mmap);
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
    const again = open(true);
    const first = again.get(keyOf(1));
    const openMs = secondsSince(t4) * 1000;
    again.close();
    if (!sameValue(first, 1, 1)) throw new Error("the floor store's first read after its reopen is wrong");
    const prefix = floorPrefix(answers, mmap !== null);
    return {
      [`${prefix}.seconds`]: secondsSince(t0, t3),
      [`${prefix}.delete.seconds`]: secondsSince(t0, t1),
      [`${prefix}.rewrite.seconds`]: secondsSince(t1, t2),
      [`${prefix}.verify.seconds`]: secondsSince(t2, t3),
      [`${prefix}.reopenMs`]: openMs,
    };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** The metrics' prefix of a floor: `limit.w5floor`, then `.answers` for the answering store, then `.mmap` when it reads through a mapping. */
export function floorPrefix(answers: boolean, mapped: boolean): string {
  return `limit.w5floor${answers ? ".answers" : ""}${mapped ? ".mmap" : ""}`;
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
  const answers = args.includes("--answers");
  const mmap = args.includes("--mmap") ? loadMmap() : null;
  if (typeof mmap === "string") throw new Error(mmap);
  const prefix = floorPrefix(answers, mmap !== null);
  for (let r = 0; r < rounds; r++) {
    const m = measureW5Floor(dir, n, answers, mmap);
    const ms = (id: string): string => ((m[`${prefix}.${id}`] as number) * 1000).toFixed(0);
    console.log(
      `round ${r}${answers ? " (answers)" : ""}${mmap !== null ? " (mmap)" : ""}: W5 ${ms("seconds")} ms (delete ${ms("delete.seconds")}, rewrite ${ms("rewrite.seconds")}, ` +
        `read all ${ms("verify.seconds")}); reopen + first read ${(m[`${prefix}.reopenMs`] as number).toFixed(2)} ms`,
    );
  }
}
