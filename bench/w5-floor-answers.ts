/**
 * W5's floor store answering as the contract asks (API.md "Operations"): bench/w5-floor.ts's
 * floor, plus what no store that keeps engram's contract can leave out of W5 — the state of each
 * name before each write and forget. A forget of a name with no live value writes nothing (its
 * answer is tombstoneSeq null); a write after a forget takes the next generation (auto-clear),
 * an overwrite keeps it, a new name starts at 1; and what a read returns (version, generation)
 * and undelete restores must survive a restart, so every record carries its sequence number and
 * generation, and a forget's record the offset of the value it killed.
 *
 * The least such a store does per operation, and all this one does: the names written since the
 * open in a JS Map (each one's latest record's offset, generation and kind in one number), the
 * rest in the table the last close wrote, whose cells hold each name's latest record's offset,
 * kind and generation and the key's first KEY_INLINE_BYTES, so that a lookup compares the key in
 * the cell and reads no record. The table stays small enough to read at open within the reopen
 * goal: 1.25 cells a name at least, 24 B a cell (6.3 MB at 200k names; a 16 MB table took ~48 ms
 * to read here, over the goal).
 * Like the blind floor, it leaves out scopes, expiry, retention, undelete itself, reads that fail
 * closed, concurrency, compaction and hints kept current, so its time is below what engram's
 * contract lets any store reach here.
 */
import * as zlib from "node:zlib";
import type { BatchOp } from "./adapters.js";
import { AT_KEY_BYTES, AT_KIND, AT_LENGTH, FloorLog, hashOf, KIND_COMMIT, keyAt, openFloorFiles } from "./w5-floor-log.js";

/**
 * A record: crc32 of the rest (u32), its bytes (u16), its kind (u8), its key's bytes (u8), its
 * sequence number (u32 low, u32 high), its generation (u32), the key, then a PUT's value or a
 * DEL's killed offset (u32: where the value it forgot lies).
 */
const HEADER_BYTES = 20;
const AT_SEQ = 8;
const AT_GENERATION = 16;
const KIND_NONE = 0;
const KIND_PUT = 1;
const KIND_DEL = 2;
/** A commit record (KIND_COMMIT): its header (no key, sequence number or generation), then the batch's crc32. */
const COMMIT_BYTES = HEADER_BYTES + 4;
const KILLED_BYTES = 4;
/** The largest record: its length is a u16. */
const RECORD_BYTES_MAX = 0xffff;
const TABLE_MAGIC = 0x57354641; // "AF5W"
/** The table file's header: magic, log end, cells, the last sequence number (low, high); then the cells. */
const TABLE_HEADER_WORDS = 5;
/**
 * A cell: the name's latest record's offset, its generation, its kind | the key's bytes << 8 (kind
 * KIND_NONE: an empty cell), then the key's first KEY_INLINE_BYTES. No hash: the key compared in
 * the cell rejects as cheaply, in the same cache line.
 */
const CELL_WORDS = 6;
const KEY_INLINE_BYTES = 12;
/** The table's cells per name at least (a power of two above it). */
const CELLS_PER_NAME = 1.25;
/** A touched name's Map value: its latest record's offset + its generation × OFFSET_SPAN, negated minus 1 for a DEL (offsets stay under 2^30). */
const OFFSET_SPAN = 2 ** 30;
/** Generations a Map value holds exactly (OFFSET_SPAN × GENERATIONS_MAX ≤ 2^52). */
const GENERATIONS_MAX = 2 ** 22;

/** A name's state before an operation: its latest record's kind (KIND_NONE: no record), generation and offset. */
interface NameState {
  kind: number;
  generation: number;
  offset: number;
}

/** The answering floor store (see the file's comment). Synchronous: a batch returns once written and, durable, synced. */
export class AnsweringFloorStore extends FloorLog {
  /**
   * Names written since the open: each one's latest record's offset and generation, as
   * `offset + generation × OFFSET_SPAN`, negated minus 1 for a DEL — so that a lookup or a read of
   * a touched name reads no record to learn its kind and generation.
   */
  private readonly touched = new Map<string, number>();
  /** What lookup() found (reused: no object per lookup). */
  private readonly found: NameState = { kind: KIND_NONE, generation: 0, offset: 0 };
  /** The table's bytes, for the keys its cells hold. */
  private readonly tableBytes: Uint8Array;

  private constructor(
    fd: number,
    dir: string,
    durable: boolean,
    end: number,
    private seq: number,
    private readonly table: Uint32Array,
  ) {
    super(fd, dir, durable, end);
    this.tableBytes = new Uint8Array(table.buffer, table.byteOffset, table.byteLength);
  }

  /** Opens (or creates) the store in `dir`: reads the table the last close wrote, nothing per key. */
  static open(dir: string, durable: boolean): AnsweringFloorStore {
    const { fd, words } = openFloorFiles(dir);
    if (words === null) return new AnsweringFloorStore(fd, dir, durable, 0, 0, new Uint32Array(0));
    if (words[0] !== TABLE_MAGIC || words.length !== TABLE_HEADER_WORDS + CELL_WORDS * (words[2] as number)) throw new Error(`${dir}: not an answering floor table`);
    const seq = (words[3] as number) + (words[4] as number) * 0x1_0000_0000;
    return new AnsweringFloorStore(fd, dir, durable, words[1] as number, seq, words.subarray(TABLE_HEADER_WORDS));
  }

  /**
   * Writes `ops` as one atomic batch (one write, and one fdatasync when durable), each decided
   * against its name's state before the batch (a batch naming a key twice decides both from that
   * state: W5's never do), then makes them visible. A forget of nothing takes no record.
   */
  batch(ops: readonly BatchOp[]): void {
    const kinds = new Uint8Array(ops.length);
    const generations = new Uint32Array(ops.length);
    const killed = new Uint32Array(ops.length);
    let bytes = COMMIT_BYTES;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as BatchOp;
      const st = this.lookup(op.key);
      if (op.type === "del") {
        if (st.kind !== KIND_PUT) continue; // nothing live: no record (the answer's tombstoneSeq is null)
        kinds[i] = KIND_DEL;
        generations[i] = st.generation;
        killed[i] = st.offset;
      } else {
        kinds[i] = KIND_PUT;
        generations[i] = st.kind === KIND_DEL ? st.generation + 1 : st.kind === KIND_PUT ? st.generation : 1;
        if ((generations[i] as number) >= GENERATIONS_MAX) throw new Error(`the floor's generations stay under ${GENERATIONS_MAX}`);
      }
      bytes += HEADER_BYTES + op.key.length + (op.type === "put" ? op.value.byteLength : KILLED_BYTES);
    }
    this.checkRoom(bytes);
    const buf = Buffer.allocUnsafe(bytes);
    let at = 0;
    for (let i = 0; i < ops.length; i++) if (kinds[i] !== KIND_NONE) at = this.encode(buf, at, ops[i] as BatchOp, generations[i] as number, killed[i] as number);
    buf.writeUInt16LE(COMMIT_BYTES, at + AT_LENGTH);
    buf[at + AT_KIND] = KIND_COMMIT;
    buf.fill(0, at + AT_KEY_BYTES, at + HEADER_BYTES);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(0, at)), at + HEADER_BYTES);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + COMMIT_BYTES)), at);
    const base = this.append(buf);
    at = 0;
    for (let i = 0; i < ops.length; i++) {
      if (kinds[i] === KIND_NONE) continue;
      const state = base + at + (generations[i] as number) * OFFSET_SPAN;
      this.touched.set((ops[i] as BatchOp).key, kinds[i] === KIND_DEL ? -1 - state : state);
      at += buf.readUInt16LE(at + AT_LENGTH);
    }
  }

  /** Encodes `op` at `at` of `buf` with the next sequence number and its crc32; returns the offset after it. */
  private encode(buf: Buffer, at: number, op: BatchOp, generation: number, killedAt: number): number {
    const keyBytes = op.key.length;
    const len = HEADER_BYTES + keyBytes + (op.type === "put" ? op.value.byteLength : KILLED_BYTES);
    if (len > RECORD_BYTES_MAX || keyBytes > 0xff) throw new Error("a floor record's key is under 256 bytes and the record under 64 KiB");
    this.seq += 1;
    buf.writeUInt16LE(len, at + AT_LENGTH);
    buf[at + AT_KIND] = op.type === "put" ? KIND_PUT : KIND_DEL;
    buf[at + AT_KEY_BYTES] = keyBytes;
    buf.writeUInt32LE(this.seq % 0x1_0000_0000, at + AT_SEQ);
    buf.writeUInt32LE(Math.floor(this.seq / 0x1_0000_0000), at + AT_SEQ + 4);
    buf.writeUInt32LE(generation, at + AT_GENERATION);
    buf.write(op.key, at + HEADER_BYTES, keyBytes, "latin1");
    if (op.type === "put") buf.set(op.value, at + HEADER_BYTES + keyBytes);
    else buf.writeUInt32LE(killedAt, at + HEADER_BYTES + keyBytes);
    buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 4, at + len)), at);
    return at + len;
  }

  /**
   * The state of `key`: its latest record's kind, generation and offset (kind KIND_NONE when it
   * has none), from the Map of names written since the open or from the table's cell; no record
   * is read. The answer is this.found, valid until the next lookup.
   */
  private lookup(key: string): NameState {
    const st = this.found;
    const ref = this.touched.get(key);
    if (ref !== undefined) {
      const state = ref < 0 ? -1 - ref : ref;
      st.kind = ref < 0 ? KIND_DEL : KIND_PUT;
      st.generation = Math.floor(state / OFFSET_SPAN);
      st.offset = state % OFFSET_SPAN;
      return st;
    }
    const p = this.cellOf(key);
    st.kind = p < 0 ? KIND_NONE : (this.table[p + 2] as number) & 0xff;
    st.generation = p < 0 ? 0 : (this.table[p + 1] as number);
    st.offset = p < 0 ? 0 : (this.table[p] as number);
    return st;
  }

  /** The first word of `key`'s cell in the table, or -1: the key's bytes compared in the cell (and in its record, past KEY_INLINE_BYTES). */
  private cellOf(key: string): number {
    const t = this.table;
    const cells = t.length / CELL_WORDS;
    if (cells === 0) return -1;
    const inline = Math.min(key.length, KEY_INLINE_BYTES);
    for (let c = hashOf(key) & (cells - 1), n = 0; n < cells; c = (c + 1) & (cells - 1), n++) {
      const p = c * CELL_WORDS;
      const kindKey = t[p + 2] as number;
      if ((kindKey & 0xff) === KIND_NONE) return -1;
      if (kindKey >>> 8 !== key.length || !keyAt(this.tableBytes, 4 * (p + 3), key, inline)) continue;
      if (key.length <= KEY_INLINE_BYTES || this.recordAt(t[p] as number, key)) return p;
    }
    return -1;
  }

  /** The state of `key` as the next write or forget would decide from it (tests): its latest record's kind and generation. */
  state(key: string): { kind: "put" | "del" | "none"; generation: number } {
    const st = this.lookup(key);
    return { kind: st.kind === KIND_PUT ? "put" : st.kind === KIND_DEL ? "del" : "none", generation: st.generation };
  }

  /** The value of `key` (a copy the caller owns), or undefined when it has none. */
  get(key: string): Uint8Array | undefined {
    const ref = this.touched.get(key);
    if (ref !== undefined) return ref < 0 ? undefined : this.valueAt(ref % OFFSET_SPAN, key);
    const p = this.cellOf(key);
    return p < 0 || ((this.table[p + 2] as number) & 0xff) !== KIND_PUT ? undefined : this.valueAt(this.table[p] as number, key);
  }

  /** The value of the record at `off`, which must be `key`'s (a copy), or undefined for a DEL; throws on a bad crc32 or another name's record. */
  private valueAt(off: number, key: string): Uint8Array | undefined {
    if (!this.recordAt(off, key)) throw new Error(`floor record at ${off}: not ${key}'s`);
    const buf = this.recBytes;
    const at = this.recAt;
    if (buf[at + AT_KIND] === KIND_DEL) return undefined;
    if (buf[at + AT_KIND] !== KIND_PUT) throw new Error(`floor record at ${off}: neither a PUT nor a DEL`);
    const len = buf.readUInt16LE(at + AT_LENGTH);
    const value = Buffer.allocUnsafe(len - HEADER_BYTES - key.length);
    buf.copy(value, 0, at + HEADER_BYTES + key.length, at + len);
    return value;
  }

  /** Locates the record at `off` (this.recBytes, this.recAt) and checks its crc32 (throws on a mismatch); true when it is `key`'s. */
  private recordAt(off: number, key: string): boolean {
    this.locate(off, HEADER_BYTES);
    const buf = this.recBytes;
    const at = this.recAt;
    const len = buf.readUInt16LE(at + AT_LENGTH);
    if (zlib.crc32(buf.subarray(at + 4, at + len)) !== buf.readUInt32LE(at)) throw new Error(`floor record at ${off}: crc32 mismatch`);
    return buf[at + AT_KEY_BYTES] === key.length && keyAt(buf, at + HEADER_BYTES, key);
  }

  /** Writes the table of every name's latest record (a scan of the log: untimed, as it is no part of W5) and closes. */
  close(): void {
    const log = this.readAll();
    const latest = this.scan(log);
    let cells = 16;
    while (cells < CELLS_PER_NAME * latest.size) cells *= 2;
    const words = new Uint32Array(TABLE_HEADER_WORDS + CELL_WORDS * cells);
    words.set([TABLE_MAGIC, this.end, cells, this.seq % 0x1_0000_0000, Math.floor(this.seq / 0x1_0000_0000)]);
    const t = words.subarray(TABLE_HEADER_WORDS);
    const keys = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
    for (const [key, off] of latest) {
      let c = hashOf(key) & (cells - 1);
      while ((t[c * CELL_WORDS + 2] as number) !== 0) c = (c + 1) & (cells - 1);
      const p = c * CELL_WORDS;
      t.set([off, log.readUInt32LE(off + AT_GENERATION), (log[off + AT_KIND] as number) | (key.length << 8)], p);
      keys.set(log.subarray(off + HEADER_BYTES, off + HEADER_BYTES + Math.min(key.length, KEY_INLINE_BYTES)), 4 * (p + 3));
    }
    this.finish(words);
  }

  /** Every name's latest record offset (PUT or DEL), from the log's committed batches. */
  private scan(log: Buffer): Map<string, number> {
    const latest = new Map<string, number>();
    this.scanCommitted(log, HEADER_BYTES, (key, off) => latest.set(key, off));
    return latest;
  }
}
