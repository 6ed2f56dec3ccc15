/**
 * Hint files (Bitcask): a checksummed index of one segment, `NNNNNNNN.hint` beside
 * `NNNNNNNN.seg`, holding for every record that a scan of the segment would deliver exactly what
 * recovery takes from it — the record's offset, its fixed fields (length, type, flags, sequence,
 * generation, expiry; docs/FORMAT.md "Records"), its scope and key, and for a SCOPE_ERASE its
 * erase list — in file order, and nothing of the PUT values. Version 2 also carries the slot index
 * that the deferred open needs (engine/hint-index.ts): each keyed entry's offset and slot hash, an
 * open-addressing table, the erase entries' offsets and the PUT scopes, so an open reads the
 * header and a small summary and does no work per entry; the rest is read in checksummed blocks
 * on first use (HintBytes). Version 3 (written now; segments/hint-v3.ts) keeps that index and packs
 * the entries (varints, derived lengths, interned scopes) in blocks decoded on first use into the
 * version-2 entry layout, so everything past this file reads one entry layout. Version 4 is
 * version 3 plus a boot stamp (segments/hint-stamp.ts): the prefix hint a `none`-mode close
 * writes over bytes it never synced, trusted only under the boot that wrote it.
 *
 * A hint is a cache, never trusted: it is used only when it is whole (magic, its own version byte,
 * lengths, xxh64 of header and summary, then of each block as it is read), names its segment, was
 * written for the segment header that is current now (`headerIdentity`: every header write, a
 * seal or an in-place compaction, changes it), and covers exactly the sealed length (or, for the
 * active segment, a prefix of the file). Anything else at open is "no hint" and the segment is
 * scanned; a block found damaged later makes the deferred index rebuild that segment's table from
 * a scan. A hint is written with the durability order (`.hint.tmp`, fdatasync, rename, directory
 * fsync) at fault point `io:hint`, only after the bytes it describes are durable (a version-4
 * hint: unsynced, and stamped instead); a failed hint write is dropped, never reported: nothing
 * depends on it. This file holds the layout only;
 * engine/hints.ts decides when.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as C from "./constants.js";
import { checksum64, checksum64Of } from "./checksum.js";
import { formatOf, type HeaderChoice } from "./header.js";
import { FILE_MODE } from "./file-names.js";
import * as io from "./io.js";
import { readU64, writeU64 } from "./u64.js";
import { recordLengthOf, type DecodedRecord, type RecordLengthOf } from "./record.js";
import { frameAtV3 } from "./record-v3.js";
import { isLeanFrame } from "./version-written.js";
import { longLivedBuffer } from "./long-lived.js";
import { assert, fail } from "../rules/assert.js";
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX } from "../rules/limits.js";
import { HINT_STAMP_BYTES, putStamp, stampAt, type HintStamp } from "./hint-stamp.js";
import { checkRows, decodeScopeList, ENTRY_BLOCK_ROW_BYTES, HINT_V3_HEADER_BYTES, HintBytesV3, layoutV3, packEntries, packRecords, putU32, putU64, RecordPacker, recordAt, runTotals, X3_ENTRY_BLOCKS, X3_PACKED, X3_RESERVED, type HintSourceV3, type LayoutV3, type Packed, type PackedRun, type RecordRun, type RunTotals, type ScopeItem } from "./hint-v3.js";

/** A hint file's bytes as parts in file order: written with one writev, Buffer.concat gives the file. */
export type HintParts = readonly Buffer[];

/**
 * A hint file in two steps: `head` (the header, the packed entries and the slot hashes: the first
 * bytes of the file, known before the table) and `finish()`, the rest (the table is built there), so a
 * writer can send the head to the kernel while the table is computed (writeHintFileOverlapped).
 */
export interface SplitHint {
  readonly head: HintParts;
  finish(): HintParts;
}

/** The whole file of `split`. */
function joinSplit(split: SplitHint): HintParts {
  return [...split.head, ...split.finish()];
}

/** The index a version-3 file is written with; a null table is built from the hashes (tableOf, exactly 2K cells) when the file is finished. */
type IndexToWrite = Pick<HintIndex, "keyed" | "hashes" | "erases"> & { table: Int32Array | null };

/** "ENGH" little-endian: the first four bytes of every hint file. */
export const HINT_MAGIC = 0x48474e45;
/** Version of the hint layout written (independent of the segment FORMAT_VERSION): 3 packs its entries (segments/hint-v3.ts). */
export const HINT_VERSION = 3;
/** The layout with the slot index and verbatim entries: still read (and rewritten as version 3 at open), written only by tests. */
export const HINT_VERSION_2 = 2;
/** Version 3's layout plus a boot stamp (segments/hint-stamp.ts): the prefix hint a `none`-mode close writes over unsynced bytes. */
export const HINT_VERSION_4 = 4;
/** The first layout (entries only; the index is computed at open): still read, never written. */
export const HINT_VERSION_1 = 1;
/** Hint header fields (little-endian); both versions share the first 48 bytes. */
const X_MAGIC = 0; // u32
const X_VERSION = 4; // u8
const X_FLAGS = 5; // u8, HINT_SEALED or 0
const X_RESERVED = 6; // u16, zero
const X_SEGMENT_ID = 8; // u32
const X_COVERS_END = 12; // u32, the segment offset up to which the entries describe every record
const X_IDENTITY = 16; // u64, headerIdentity of the segment header the hint was written for
const X_COUNT = 24; // u32, entries
const X_BODY_BYTES = 28; // u32, bytes of entries
const X_MIN_SEQ = 32; // u64, lowest entry sequence (0 when there are none)
const X_MAX_SEQ = 40; // u64, highest entry sequence (0 when there are none)
const X_KEYED = 48; // u32, v2: keyed entries (PUT, TOMBSTONE, CLEAR), the length of entryAt and hashes
const X_CELLS = 52; // u32, v2: cells of the open-addressing table (a power of two >= 2 * keyed, >= 16)
const X_ERASES = 56; // u32, v2: SCOPE_ERASE entries
const X_SCOPES_BYTES = 60; // u32, v2: bytes of the PUT-scope list
const X_BLOCK_BYTES = 64; // u32, v2: bytes per checksummed block of the indexed region
const X_RESERVED2 = 68; // u32, v2: zero
/** Bytes of the version-2 hint header. */
export const HINT_HEADER_BYTES = 72;
/** Bytes per checksummed block of a version-2 hint's indexed region (header, entries, offsets, hashes, table). */
export const HINT_BLOCK_BYTES = 32 * 1024;
/** Bytes of the version-1 hint header. */
export const HINT_V1_HEADER_BYTES = 48;
/** Bytes of the trailing xxh64 (of every byte before it). */
export const HINT_TRAILER_BYTES = 8;
/** Hint flag: written for a sealed segment (coversEnd is then its sealed length). */
export const HINT_SEALED = 1;
/** Header flag: the file is version 4, stamped with the boot it was written in (never with HINT_SEALED). */
export const HINT_BOOT_STAMPED = 2;
/** An entry: the record's segment offset (u32), then its first RECORD_FIXED_BYTES verbatim, then scope, key, erase list. */
export const ENTRY_FIXED_BYTES = 4 + C.RECORD_FIXED_BYTES;
/** Largest hint file read (a segment holds at most 4 GiB; a hint is never larger than its segment plus overhead). */
export const HINT_BYTES_MAX = 0xffffffff;
/** The version HintBuilder.encode writes: HINT_VERSION, or version 2 under a test's setHintVersionWritten. */
let versionWritten: number = HINT_VERSION;

/** The hint version that encode writes now (recovery rewrites every valid sealed hint of another version). */
export function hintVersionWritten(): number {
  return versionWritten;
}

/** Test only: makes encode write version 2 (the tests of that layout) or version 3 again. Never called outside tests. */
export function setHintVersionWritten(version: 2 | 3): void {
  versionWritten = version;
}

/** Highest high word of a u64 field that holds a safe integer (2^53 - 1 >> 32). */
const U64_HIGH_MAX = 0x1fffff;
/** Fewest cells of a table. */
const CELLS_MIN = 16;

/** "00000042.hint" for segment 42. */
export function hintFileName(id: number): string {
  return `${String(id).padStart(8, "0")}.hint`;
}

/** The segment id of a hint file name, or null. */
export function parseHintFileName(name: string): number | null {
  const m = /^(\d{8,10})\.hint$/.exec(name);
  if (m === null) return null;
  const id = Number(m[1]);
  return id <= 0xffffffff && hintFileName(id) === name ? id : null;
}

/**
 * A fingerprint of a segment header: xxh64 over all its fields and its format version. Two
 * headers share it only when every field is equal, so a hint written before a seal, a reseal or
 * an in-place compaction (which bump headerSeq, generation, sealedBytes) never matches after it.
 */
export function headerIdentity(choice: HeaderChoice): bigint {
  const h = choice.header;
  const buf = Buffer.alloc(80);
  const fields = [h.segmentId, h.generation, h.headerSeq, h.flags, h.createdSeq, h.minSeq, h.maxSeq, h.replacesId, h.sealedBytes, choice.version ?? C.FORMAT_VERSION];
  fields.forEach((v, i) => writeU64(buf, v, 8 * i));
  return checksum64(buf, 0, buf.length);
}

/** When false (a test's reference), builders made from now on keep version-2 entries per record and pack them at encode. */
let incrementalPacking = true;

/** Test only: makes builders made from now on pack records as they are added (true, the default) or keep version-2 entries (false: the general path). */
export function setIncrementalPacking(on: boolean): void {
  incrementalPacking = on;
}

/**
 * Accumulates the entries of one segment's hint as records are written (or scanned). A segment
 * in the version-3 frame packs each record's version-3 entry as it is added (segments/hint-v3.ts
 * RecordPacker: the bytes encode would write, so an encode only closes the last block and writes
 * the index); whatever that cannot pack exactly as a full encode would (a sequence below the
 * first's, a field outside the format, version 2 written, a loaded hint not of version 3) turns
 * the builder, once, into the general one: its packed entries are decoded back into the
 * version-2 entries the general builder would hold, and it goes on from there. The general
 * builder keeps one
 * growable byte buffer off the JS heap, and beside it the slot index of those entries (each keyed
 * entry's body offset and slot hash, the erase entries' offsets, the PUT scopes), computed while
 * each record's bytes are in hand so that encode does not walk the entries again to index them.
 * Entries must be added in file order, each record once. It may start from a loaded hint
 * (addLoaded), whose entries are read only when encoded.
 */
export class HintBuilder {
  private bytes: Buffer;
  private used = 0;
  private entries = 0;
  /** The loaded hint whose entries come before the added ones, or null. */
  private prefix: LoadedHint | null = null;
  /** Segment offset just past the last record added (records are added in file order). */
  private lastEnd: number = C.DATA_START;
  /** Lowest and highest sequence added (0 while empty). */
  private minSeq = 0;
  private maxSeq = 0;
  /** The added keyed entries: body offsets (in the own bytes) and slot hashes, `keyed` of each used. */
  private keyedAt: Uint32Array;
  private keyedHashes: Uint32Array;
  private keyed = 0;
  /** Own-body offsets of the added SCOPE_ERASE entries. */
  private readonly eraseAt: number[] = [];
  /** The distinct scopes of the added PUTs, in order of first appearance. */
  private readonly putScopes = new Set<string>();
  /** Own-body offset and length of the last PUT's scope bytes (-1: none yet): consecutive PUTs mostly share one. */
  private lastPutScopeAt = -1;
  private lastPutScopeLen = -1;

  /** True when the segment's records are in the version-3 frame (its format version, from its header): entries are then laid out from its fields. */
  private readonly lean: boolean;
  private readonly lengthOf: RecordLengthOf;
  /** True while records are packed as they come (the own version-2 state above is then empty). */
  private packable: boolean;
  /** The packed entries added, once the first is (or a loaded version-3 hint starts them); null in the general builder. */
  private packing: RecordPacker | null = null;
  private readonly initialBytes: number;
  /** True when packed entries failed to decode back (a packer bug): encode then writes no hint. */
  private broken = false;

  constructor(version: number, initialBytes = 64 * 1024) {
    this.lean = isLeanFrame(version);
    this.lengthOf = recordLengthOf(version);
    this.packable = this.lean && incrementalPacking;
    this.initialBytes = initialBytes;
    const own = this.packable ? 256 : initialBytes; // the general state grows only if the builder turns general
    this.bytes = Buffer.allocUnsafe(own);
    const slots = Math.max(16, own >>> 6);
    this.keyedAt = new Uint32Array(slots);
    this.keyedHashes = new Uint32Array(slots);
  }

  /** Entries added. */
  get count(): number {
    return this.entries;
  }

  /** Bytes of entries added (the loaded prefix's included). */
  get bodyBytes(): number {
    return (this.prefix?.body.length ?? 0) + (this.packing?.bodyBytes ?? this.used);
  }

  /** Offset just past the last record added. */
  get end(): number {
    return this.lastEnd;
  }

  private reserve(n: number): number {
    if (this.used + n > this.bytes.length) {
      const next = Buffer.allocUnsafe(Math.max(this.bytes.length * 2, this.used + n));
      this.bytes.copy(next, 0, 0, this.used);
      this.bytes = next;
    }
    const at = this.used;
    this.used += n;
    return at;
  }

  /** Notes keyed entry at own-body offset `to` with slot hash `h` (the arrays grow by doubling). */
  private noteKeyed(to: number, h: number): void {
    if (this.keyed === this.keyedAt.length) {
      const at = new Uint32Array(2 * this.keyed);
      at.set(this.keyedAt);
      this.keyedAt = at;
      const hashes = new Uint32Array(2 * this.keyed);
      hashes.set(this.keyedHashes);
      this.keyedHashes = hashes;
    }
    this.keyedAt[this.keyed] = to;
    this.keyedHashes[this.keyed] = h;
    this.keyed += 1;
  }

  /**
   * The hint file (as encode writes it) of the records of `run` — a compaction's output, every
   * record already checked, in file order — exactly the bytes a fresh builder gives after
   * addRecord of each record and encode, but packed straight from the records (segments/hint-v3.ts
   * packRecords: no version-2 entry per record in between, the slot hashes taken on the way).
   * When version 2 is written, or a record's sequence is not a safe integer, or the records are
   * out of order, it is that builder (which then refuses or asserts as it does).
   */
  static ofRecords(records: Omit<RecordRun, "lean">, segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean): Buffer | null {
    const version = formatOf(header); // the records' frame is their segment's
    const run: RecordRun = { ...records, lean: isLeanFrame(version) };
    const totals = versionWritten === HINT_VERSION ? runTotals(run) : null;
    if (totals === null) {
      const b = new HintBuilder(version, Math.max(1024, run.offsets.length * 64));
      for (let i = 0; i < run.offsets.length; i++) b.addRecord(run.rec, recordAt(run, i), run.offsets[i] as number);
      return b.encode(segmentId, header, coversEnd, sealed);
    }
    const packed = packRecords(run, totals);
    if (packed === null) return null; // as encodeV3: entries that do not pack write no hint
    return HintBuilder.ofPacked(totals, packed, segmentId, header, coversEnd, sealed);
  }

  /**
   * The hint file of a run of records already packed (`totals` and `packed`: runTotals' and
   * packRecords' answers, or a RunPacker's) — ofRecords' bytes for those records. Version 3 only.
   */
  static ofPacked(totals: RunTotals, packed: PackedRun, segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean): Buffer {
    return Buffer.concat(HintBuilder.ofPackedParts(totals, packed, segmentId, header, coversEnd, sealed));
  }

  /**
   * ofPacked's file as its parts, not joined (a compaction writes them with one writev: joining
   * them copied the whole hint into fresh memory, 5–6 ms for the bench's sealed segment of 26,500
   * tombstones, the thirty-seventh session).
   */
  static ofPackedParts(totals: RunTotals, packed: PackedRun, segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean): HintParts {
    assert(versionWritten === HINT_VERSION, "packed runs are written as version-3 hints");
    assert(coversEnd >= totals.end, "a hint covers every record it holds");
    const b = new HintBuilder(formatOf(header), 16);
    b.entries = totals.count;
    b.minSeq = totals.minSeq;
    b.maxSeq = totals.maxSeq;
    b.lastEnd = totals.end;
    const rows = Buffer.alloc(ENTRY_BLOCK_ROW_BYTES * (packed.rows.length / 3));
    putRows(rows, 0, packed, 0, 0, 0);
    const index = { keyed: packed.hashes.length, hashes: packed.hashes, table: tableOf(packed.hashes, false), erases: packed.erases };
    return joinSplit(b.writeV3(segmentId, header, coversEnd, sealed, null, totals.bodyBytes, [packed.bytes], rows, index, packed.scopes));
  }

  /**
   * Adds the (already checked) encoded record at rec[at...] that lies at segment offset `offset`.
   * GROUP records are not entries (a scan never delivers them). The fixed fields and names are
   * copied with byte stores (a record's first ~60 bytes: cheaper than a native copy call), and a
   * keyed entry's slot hash is computed in the same pass over its names.
   */
  addRecord(rec: Uint8Array, at: number, offset: number): void {
    if (this.packable) {
      this.addPacked(rec, at, offset);
      return;
    }
    if (this.lean) {
      this.addLean(rec, at, offset);
      return;
    }
    const type = rec[at + C.R_TYPE] as number;
    if (type === C.RecordType.GROUP) return;
    const length = u32At(rec, at + C.R_LENGTH);
    const seqHigh = u32At(rec, at + C.R_SEQ + 4);
    const seq = seqHigh > U64_HIGH_MAX ? -1 : seqHigh * 0x1_0000_0000 + u32At(rec, at + C.R_SEQ);
    if (this.minSeq === 0 || seq < this.minSeq) this.minSeq = seq;
    if (seq > this.maxSeq) this.maxSeq = seq;
    if (offset < this.lastEnd) fail(`hint entries come in file order (${offset} after ${this.lastEnd})`);
    const scopeLen = (rec[at + C.R_SCOPE_LEN] as number) | ((rec[at + C.R_SCOPE_LEN + 1] as number) << 8);
    const keyLen = (rec[at + C.R_KEY_LEN] as number) | ((rec[at + C.R_KEY_LEN + 1] as number) << 8);
    const names = scopeLen + keyLen;
    const value = type === C.RecordType.SCOPE_ERASE ? u32At(rec, at + C.R_VALUE_LEN) : 0;
    const to = this.reserve(ENTRY_FIXED_BYTES + names + value);
    const out = this.bytes;
    out[to] = offset & 0xff;
    out[to + 1] = (offset >>> 8) & 0xff;
    out[to + 2] = (offset >>> 16) & 0xff;
    out[to + 3] = offset >>> 24;
    const fixed = to + 4;
    for (let i = 0; i < C.RECORD_FIXED_BYTES; i++) out[fixed + i] = rec[at + i] as number;
    this.addNames(rec, at + C.RECORD_FIXED_BYTES, to, type, scopeLen, keyLen, value);
    this.lastEnd = offset + length;
  }

  /**
   * addRecord while packing: the record's entry packed at once (its slot hash taken on the way);
   * a record the packer cannot take as a full encode would turns the builder general first.
   */
  private addPacked(rec: Uint8Array, at: number, offset: number): void {
    const f = frameAtV3(rec, at);
    if (f.type === C.RecordType.GROUP) return;
    if (offset < this.lastEnd) fail(`hint entries come in file order (${offset} after ${this.lastEnd})`);
    const packer = this.packing ?? this.startPacking(f.seq);
    const src = Buffer.isBuffer(rec) ? rec : Buffer.from(rec.buffer, rec.byteOffset, rec.byteLength);
    const { seq, length } = f; // read now: the frame object is shared
    if (packer === null || !packer.add(src, f, offset, this.lengthOf(f.scopeLen, f.keyLen, f.valueLen, seq, f.generation, f.expiresAt))) {
      this.unpack();
      this.addLean(rec, at, offset);
      return;
    }
    if (this.minSeq === 0 || seq < this.minSeq) this.minSeq = seq;
    if (seq > this.maxSeq) this.maxSeq = seq;
    this.entries += 1;
    this.lastEnd = offset + length;
  }

  /** The packer of a builder without a prefix, its blocks starting at the first record's sequence `seq`; null when that cannot start them (below 1). */
  private startPacking(seq: number): RecordPacker | null {
    if (seq < 1) return null; // a full encode's minSeq would not be this record's (0 reads as "none yet")
    this.packing = new RecordPacker(seq, [], this.initialBytes >>> 1, this.initialBytes >>> 6);
    return this.packing;
  }

  /**
   * Turns a packing builder into the general one for good: the packed entries decoded into the
   * version-2 entries addRecord would have written, with their slot index (hashes and erase
   * offsets as packed; PUT scopes as buildIndex finds them).
   */
  private unpack(): void {
    this.packable = false;
    const packer = this.packing;
    this.packing = null;
    if (packer === null) return;
    const decoded = packer.entries(this.lengthOf);
    if (decoded === null) {
      this.broken = true;
      return;
    }
    const { hashes, erases } = packer.packed();
    const to = this.reserve(decoded.body.length); // before naming this.bytes: reserve may replace it
    decoded.body.copy(this.bytes, to);
    for (let i = 0; i < hashes.length; i++) this.noteKeyed(decoded.keyedAt[i] as number, hashes[i] as number);
    for (const at of erases) this.eraseAt.push(at);
    for (const sc of buildIndex(decoded.body, false).scopes) this.putScopes.add(sc);
  }

  /**
   * addRecord for a record in the version-3 frame: the entry is the same in-memory layout (the
   * 48-byte frame's first 40 bytes, rebuilt from the record's varint fields), so every reader of
   * entries reads one layout whatever the segment's version.
   */
  private addLean(rec: Uint8Array, at: number, offset: number): void {
    const f = frameAtV3(rec, at);
    if (f.type === C.RecordType.GROUP) return;
    if (this.minSeq === 0 || f.seq < this.minSeq) this.minSeq = f.seq;
    if (f.seq > this.maxSeq) this.maxSeq = f.seq;
    if (offset < this.lastEnd) fail(`hint entries come in file order (${offset} after ${this.lastEnd})`);
    const value = f.type === C.RecordType.SCOPE_ERASE ? f.valueLen : 0;
    const to = this.reserve(ENTRY_FIXED_BYTES + f.scopeLen + f.keyLen + value);
    const out = this.bytes;
    // Byte stores, as addRecord's copy (Buffer's write methods check their arguments per call).
    putU32(out, to, offset);
    const fixed = to + 4;
    putU32(out, fixed + C.R_LENGTH, f.length);
    out[fixed + C.R_TYPE] = f.type;
    out[fixed + C.R_FLAGS] = f.flags;
    out[fixed + C.R_SCOPE_LEN] = f.scopeLen & 0xff;
    out[fixed + C.R_SCOPE_LEN + 1] = f.scopeLen >>> 8;
    out[fixed + C.R_KEY_LEN] = f.keyLen & 0xff;
    out[fixed + C.R_KEY_LEN + 1] = f.keyLen >>> 8;
    out[fixed + C.R_RESERVED] = 0;
    out[fixed + C.R_RESERVED + 1] = 0;
    putU32(out, fixed + C.R_VALUE_LEN, f.valueLen);
    putU64(out, fixed + C.R_SEQ, f.seq);
    putU64(out, fixed + C.R_GENERATION, f.generation);
    putU64(out, fixed + C.R_EXPIRES_AT, f.expiresAt);
    const length = f.length; // read before addNames: the frame object is shared
    this.addNames(rec, f.payloadAt, to, f.type, f.scopeLen, f.keyLen, value);
    this.lastEnd = offset + length;
  }

  /**
   * Copies the names (and an erasure's value) of the record whose scope starts at rec[from] into
   * the entry at own-body offset `to`, and notes the entry in the slot index.
   */
  private addNames(rec: Uint8Array, from: number, to: number, type: number, scopeLen: number, keyLen: number, value: number): void {
    const out = this.bytes;
    const names = scopeLen + keyLen;
    const dst = to + ENTRY_FIXED_BYTES;
    // The names, with FNV-1a over scope, 0xFF, key on the way (slotHash's definition).
    let h = 0x811c9dc5;
    for (let i = 0; i < scopeLen; i++) {
      const b = rec[from + i] as number;
      out[dst + i] = b;
      h = Math.imul(h ^ b, 0x01000193);
    }
    h = Math.imul(h ^ 0xff, 0x01000193);
    for (let i = scopeLen; i < names; i++) {
      const b = rec[from + i] as number;
      out[dst + i] = b;
      h = Math.imul(h ^ b, 0x01000193);
    }
    if (value > 0) out.set(rec.subarray(from + names, from + names + value), dst + names);
    if (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR) this.noteKeyed(to, h >>> 0);
    else if (type === C.RecordType.SCOPE_ERASE) this.eraseAt.push(to);
    if (type === C.RecordType.PUT && !sameBytes(out, this.lastPutScopeAt, this.lastPutScopeLen, dst, scopeLen)) {
      this.putScopes.add(out.toString("utf8", dst, dst + scopeLen));
      this.lastPutScopeAt = dst;
      this.lastPutScopeLen = scopeLen;
    }
    this.entries += 1;
  }

  /**
   * The slot index of every entry (a loaded prefix's first, from its own index), as buildIndex
   * would compute it from entriesBody() — the same arrays, table and scope order — without
   * walking the entries. Call only after entriesBody() answered (a prefix's bytes are then present).
   */
  private indexOf(powerOfTwo: boolean): HintIndex {
    const p = this.prefix?.index ?? null;
    const pBytes = this.prefix?.body.length ?? 0;
    const pKeyed = p?.keyed ?? 0;
    const keyed = pKeyed + this.keyed;
    const entryAt = new Uint32Array(keyed);
    const hashes = new Uint32Array(keyed);
    if (p !== null) {
      entryAt.set(p.entryAt);
      hashes.set(p.hashes);
    }
    for (let i = 0; i < this.keyed; i++) entryAt[pKeyed + i] = pBytes + (this.keyedAt[i] as number);
    hashes.set(this.keyedHashes.subarray(0, this.keyed), pKeyed);
    const erases = new Uint32Array((p?.erases.length ?? 0) + this.eraseAt.length);
    if (p !== null) erases.set(p.erases);
    for (let i = 0; i < this.eraseAt.length; i++) erases[(p?.erases.length ?? 0) + i] = pBytes + (this.eraseAt[i] as number);
    const scopes = p === null ? [...this.putScopes] : [...new Set([...p.scopes, ...this.putScopes])];
    return { keyed, entryAt, hashes, table: tableOf(hashes, powerOfTwo), erases, scopes };
  }

  /**
   * Starts from the entries of a loaded hint covering up to `coversEnd`, without reading them: a
   * version-2 hint's entries are read (and checked block by block) only when this builder encodes.
   */
  addLoaded(hint: LoadedHint): void {
    assert(this.entries === 0 && this.used === 0 && this.prefix === null && this.packing === null, "a loaded hint starts a builder");
    if (this.packable) this.packAfter(hint);
    this.prefix = hint;
    this.entries = hint.count;
    this.lastEnd = hint.coversEnd;
    this.minSeq = hint.minSeq;
    this.maxSeq = hint.maxSeq;
  }

  /**
   * Packing after a loaded version-3 hint with entries: the packer continues its scope list (with
   * the PUT flags its index gives) from its minSeq, as encodeAppended would pack the added
   * entries; any other loaded hint makes the builder general.
   */
  private packAfter(hint: LoadedHint): void {
    const bytes = hint.bytes;
    if (hint.count === 0 || hint.minSeq < 1 || !(bytes instanceof HintBytesV3)) {
      this.packable = false;
      return;
    }
    this.packing = new RecordPacker(hint.minSeq, scopeItemsOf(hint, bytes.scopeList), this.initialBytes >>> 1, this.initialBytes >>> 6);
  }

  /** Every entry in file order; null when the loaded prefix can no longer be read whole. */
  entriesBody(): Buffer | null {
    if (this.packing !== null) this.unpack();
    if (this.broken) return null;
    const own = this.bytes.subarray(0, this.used);
    if (this.prefix === null) return own;
    if (this.prefix.bytes !== null && !this.prefix.bytes.ensureAll()) return null;
    return this.used === 0 ? this.prefix.body : Buffer.concat([this.prefix.body, own]);
  }

  /**
   * The whole hint file (version 3, or 2 under a test's setHintVersionWritten) for a segment
   * whose header is `header`, covering up to `coversEnd`: header, entries, the index an open maps
   * instead of computing (what buildIndex would give, from the arrays kept while adding), then
   * the summary (erase offsets, scopes, block sums) and the trailer (xxh64 of the header and the
   * summary). After a loaded version-3 hint its packed blocks are kept (encodeAppended). With a
   * `stamp` (an unsealed segment's prefix over bytes not yet synced) the file is version 4: the
   * same layout with the stamp before the trailer. Null when the loaded prefix cannot be read
   * (or, versions 3 and 4, its entries cannot be packed).
   */
  encode(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null = null): Buffer | null {
    const parts = this.encodeParts(segmentId, header, coversEnd, sealed, stamp);
    return parts === null ? null : parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
  }

  /** encode's file as its parts (HintParts), without joining them: what the store writes. */
  encodeParts(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null = null): HintParts | null {
    const split = this.encodeSplit(segmentId, header, coversEnd, sealed, stamp);
    return split === null ? null : joinSplit(split);
  }

  /** encode's file in two steps (SplitHint): the index table of a packing builder is built only by finish(). */
  encodeSplit(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null = null): SplitHint | null {
    assert(coversEnd >= this.lastEnd, `a hint covers every record it holds (${coversEnd} >= ${this.lastEnd})`);
    if (this.packing !== null) {
      if (versionWritten === HINT_VERSION && (this.prefix === null || reuseLoadedBlocks)) return this.encodePacked(segmentId, header, coversEnd, sealed, stamp, this.packing);
      this.unpack();
    }
    if (this.broken) return null;
    if (versionWritten === HINT_VERSION && reuseLoadedBlocks && this.prefix !== null && this.prefix.bytes instanceof HintBytesV3) {
      const appended = this.encodeAppended(segmentId, header, coversEnd, sealed, stamp, this.prefix, this.prefix.bytes);
      if (appended !== undefined) return appended;
    }
    const body = this.entriesBody();
    if (body === null) return null;
    assert(stamp === null || versionWritten === HINT_VERSION, "a stamped hint is written in version 4 (version 3's layout) only");
    if (versionWritten === HINT_VERSION) return this.encodeV3(segmentId, header, coversEnd, sealed, stamp, body, this.indexOf(false));
    const index = this.indexOf(true);
    const scopes = encodeScopes(index.scopes);
    const layout = layoutOf(body.length, index.keyed, index.table.length, index.erases.length, scopes.length, HINT_BLOCK_BYTES);
    const out = Buffer.alloc(layout.total);
    this.writeHeaderFields(out, HINT_VERSION_2, segmentId, header, coversEnd, sealed, body.length, { ...index, cells: index.table.length }, scopes.length);
    out.writeUInt32LE(0, X_RESERVED2);
    body.copy(out, HINT_HEADER_BYTES);
    putU32s(out, layout.entryAt, index.entryAt);
    putU32s(out, layout.hashes, index.hashes);
    putU32s(out, layout.table, index.table);
    putU32s(out, layout.summary, index.erases);
    scopes.copy(out, layout.scopes);
    for (let k = 0; k < layout.blocks; k++) {
      const from = k * HINT_BLOCK_BYTES;
      out.writeBigUInt64LE(checksum64(out, from, Math.min(layout.summary, from + HINT_BLOCK_BYTES)), layout.sums + 8 * k);
    }
    out.writeBigUInt64LE(trailerSum(out.subarray(0, HINT_HEADER_BYTES), out.subarray(layout.summary, layout.total - HINT_TRAILER_BYTES)), layout.total - HINT_TRAILER_BYTES);
    return { head: [out], finish: () => [] };
  }

  /**
   * The header fields versions 2 and 3 share, written into a zeroed `out` (the reserved words stay
   * zero): magic, version, flags, segment, coverage, identity, counts, sequences, index sizes.
   */
  private writeHeaderFields(out: Buffer, version: number, segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, bodyBytes: number, index: Pick<HintIndex, "keyed" | "erases"> & { cells: number }, scopesBytes: number): void {
    out.writeUInt32LE(HINT_MAGIC, X_MAGIC);
    out[X_VERSION] = version;
    out[X_FLAGS] = sealed ? HINT_SEALED : 0;
    out.writeUInt16LE(0, X_RESERVED);
    out.writeUInt32LE(segmentId, X_SEGMENT_ID);
    out.writeUInt32LE(coversEnd, X_COVERS_END);
    out.writeBigUInt64LE(headerIdentity(header), X_IDENTITY);
    out.writeUInt32LE(this.entries, X_COUNT);
    out.writeUInt32LE(bodyBytes, X_BODY_BYTES);
    writeU64(out, this.minSeq, X_MIN_SEQ);
    writeU64(out, this.maxSeq, X_MAX_SEQ);
    out.writeUInt32LE(index.keyed, X_KEYED);
    out.writeUInt32LE(index.cells, X_CELLS);
    out.writeUInt32LE(index.erases.length, X_ERASES);
    out.writeUInt32LE(scopesBytes, X_SCOPES_BYTES);
    out.writeUInt32LE(HINT_BLOCK_BYTES, X_BLOCK_BYTES);
  }

  /**
   * The version-3 file of encode: the v2 header fields (version 3) plus packed bytes and entry
   * blocks, the packed entries (segments/hint-v3.ts), the index (hashes, table), then the summary
   * (erase offsets, scope list, entry block rows, index block sums) and the trailer.
   */
  private encodeV3(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null, body: Buffer, index: HintIndex): SplitHint | null {
    const packed = packEntries(body, this.minSeq, this.lengthOf);
    if (packed === null) return null; // a loaded older hint's entries that do not pack: writeHintFile removes it
    const rows = Buffer.alloc(ENTRY_BLOCK_ROW_BYTES * (packed.rows.length / 3));
    putRows(rows, 0, packed, 0, 0, 0);
    return this.writeV3(segmentId, header, coversEnd, sealed, stamp, body.length, [packed.bytes], rows, index, packed.scopes);
  }

  /**
   * encode of a packing builder (version 3 written): its packed entries as they are, the last
   * block closed, after a loaded hint's blocks (writeAppended) when there is one.
   */
  private encodePacked(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null, packer: RecordPacker): SplitHint | null {
    const own = packer.packed();
    const prefix = this.prefix;
    if (prefix !== null) {
      const run = prefix.bytes instanceof HintBytesV3 ? loadedRun(prefix, prefix.bytes) : null; // HintBytesV3 by packAfter
      return run === null ? null : this.writeAppended(segmentId, header, coversEnd, sealed, stamp, prefix, run, own, packer.bodyBytes);
    }
    const rows = Buffer.alloc(ENTRY_BLOCK_ROW_BYTES * (own.rows.length / 3));
    putRows(rows, 0, own, 0, 0, 0);
    const index = { keyed: own.hashes.length, hashes: own.hashes, table: null, erases: own.erases };
    return this.writeV3(segmentId, header, coversEnd, sealed, stamp, packer.bodyBytes, [own.bytes], rows, index, own.scopes);
  }

  /**
   * encodeV3 for entries added after a loaded version-3 hint, without decoding or repacking its
   * entries: its packed blocks, their rows and its scope list are kept verbatim (each block
   * carries its own delta state from the hint's minSeq and its own xxh64, so it decodes the same
   * at the same body offsets in the new file), the added entries are packed into blocks after
   * them with scope numbers continuing the list, and the index is the loaded one's hashes plus
   * the added ones' in a new table. Undefined when that cannot say the same as a full encode
   * (an added sequence below the hint's minSeq would change every block's starting state): the
   * caller then encodes everything; null when the loaded bytes fail (the hint is then removed).
   */
  private encodeAppended(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null, prefix: LoadedHint, bytes: HintBytesV3): SplitHint | null | undefined {
    if ((this.minSeq !== prefix.minSeq && !appendIgnoringMinSeq) || prefix.count === 0) return undefined;
    const run = loadedRun(prefix, bytes);
    if (run === null) return null;
    const packed = packEntries(this.bytes.subarray(0, this.used), this.minSeq, this.lengthOf, scopeItemsOf(prefix, run.scopes));
    if (packed === null) return undefined;
    const own = { ...packed, hashes: this.keyedHashes.subarray(0, this.keyed), erases: Uint32Array.from(this.eraseAt) };
    return this.writeAppended(segmentId, header, coversEnd, sealed, stamp, prefix, run, own, this.used);
  }

  /**
   * The version-3 file of a loaded hint's packed blocks (`run`) followed by the added entries
   * packed in blocks after them (`own`, `ownBody` bytes of version-2 entries; its erase offsets
   * relative to the added entries): the loaded index's hashes then the added ones in a new table.
   */
  private writeAppended(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null, prefix: LoadedHint, run: LoadedRun, own: PackedRun, ownBody: number): SplitHint {
    const p = prefix.index;
    const pBody = prefix.body.length;
    const hashes = new Uint32Array(p.keyed + own.hashes.length);
    hashes.set(p.hashes);
    hashes.set(own.hashes, p.keyed);
    const erases = new Uint32Array(p.erases.length + own.erases.length);
    erases.set(p.erases);
    for (let i = 0; i < own.erases.length; i++) erases[p.erases.length + i] = pBody + (own.erases[i] as number);
    const index = { keyed: hashes.length, hashes, table: null, erases };
    const rows = Buffer.alloc(run.rows.length + ENTRY_BLOCK_ROW_BYTES * (own.rows.length / 3));
    run.rows.copy(rows, 0);
    putRows(rows, run.rows.length, own, run.bytes.length, pBody, p.keyed);
    encodesAppended += 1;
    return this.writeV3(segmentId, header, coversEnd, sealed, stamp, pBody + ownBody, [run.bytes, own.bytes], rows, index, own.scopes);
  }

  /**
   * Writes a version-3 file: the v2 header fields (version 3) plus packed bytes and entry blocks,
   * the packed entries (`packedParts` in order; segments/hint-v3.ts), the index (hashes, table),
   * then the summary (erase offsets, scope list, the entry block `rows`, index block sums) and the trailer.
   */
  private writeV3(segmentId: number, header: HeaderChoice, coversEnd: number, sealed: boolean, stamp: HintStamp | null, bodyBytes: number, packedParts: readonly Buffer[], rows: Buffer, index: IndexToWrite, scopes: Buffer): SplitHint {
    const packedBytes = packedParts.reduce((n, b) => n + b.length, 0);
    const blocks = rows.length / ENTRY_BLOCK_ROW_BYTES;
    const cells = index.table?.length ?? Math.max(CELLS_MIN, 2 * index.keyed); // tableOf's count for a table of exactly 2K cells
    assert(stamp === null || !sealed, "only the active segment's prefix hint is stamped");
    const L = layoutV3(bodyBytes, packedBytes, index.keyed, cells, index.erases.length, scopes.length, blocks, HINT_BLOCK_BYTES, stamp === null ? 0 : HINT_STAMP_BYTES);
    const head = Buffer.alloc(HINT_V3_HEADER_BYTES);
    this.writeHeaderFields(head, stamp === null ? HINT_VERSION : HINT_VERSION_4, segmentId, header, coversEnd, sealed, bodyBytes, { ...index, cells }, scopes.length);
    if (stamp !== null) head[X_FLAGS] = HINT_BOOT_STAMPED;
    head.writeUInt32LE(packedBytes, X3_PACKED);
    head.writeUInt32LE(blocks, X3_ENTRY_BLOCKS);
    assert(HINT_V3_HEADER_BYTES + packedBytes === L.index, "the packed entries end where the index starts");
    // The index is written from the arrays themselves (no copy into one file buffer: on a machine
    // whose memory is full of page cache, a fresh buffer of the file's size costs a page fault per
    // 4 KiB, ~17 ms for a 200k-entry hint, twenty-sixth session).
    const hashes = u32Bytes(index.hashes);
    const finish = (): HintParts => {
      const table = index.table ?? tableOf(index.hashes, false);
      assert(table.length === cells, "the table has the cells the header promises");
      const indexParts = [hashes, u32Bytes(table)];
      assert(L.index + indexParts[0]!.length + indexParts[1]!.length === L.summary, "the index ends where the summary starts");
      const summary = Buffer.alloc(L.total - L.summary);
      const at = (x: number): number => x - L.summary;
      putU32s(summary, 0, index.erases);
      scopes.copy(summary, at(L.scopes));
      rows.copy(summary, at(L.blocks));
      for (let k = 0; k < L.indexBlocks; k++) {
        const from = k * HINT_BLOCK_BYTES;
        summary.writeBigUInt64LE(sumOfParts(indexParts, from, Math.min(L.summary - L.index, from + HINT_BLOCK_BYTES)), at(L.sums) + 8 * k);
      }
      if (stamp !== null) putStamp(summary, at(L.stamp), stamp, coversEnd);
      const tail = summary.length - HINT_TRAILER_BYTES;
      summary.writeBigUInt64LE(trailerSum(head, summary.subarray(0, tail)), tail);
      return [indexParts[1] as Buffer, summary];
    };
    return { head: [head, ...packedParts, hashes], finish };
  }
}

/** A loaded version-3 hint's scope list `scopes` with the PUT flags its index gives: what packing after it continues. */
function scopeItemsOf(prefix: LoadedHint, scopes: readonly Buffer[]): ScopeItem[] {
  const puts = new Set(prefix.index.scopes);
  return scopes.map((b) => ({ bytes: b, put: puts.has(b.toString("utf8")) }));
}

/** A loaded version-3 hint's packed entries as its file holds them (HintBytesV3.packedRun). */
type LoadedRun = NonNullable<ReturnType<HintBytesV3["packedRun"]>>;

/** The packed entries of loaded hint `prefix` with its hashes present; null when they cannot be read or checked. */
function loadedRun(prefix: LoadedHint, bytes: HintBytesV3): LoadedRun | null {
  const hashesAt = prefix.index.hashes.byteOffset - bytes.buf.byteOffset;
  if (!bytes.ensure(hashesAt, hashesAt + 4 * prefix.index.keyed)) return null;
  return bytes.packedRun();
}

/**
 * Writes the entry block rows of `packed` at rows[at...]: each block's packed, expanded and keyed
 * ends shifted by those of the blocks before it (a loaded hint's, or none), and its xxh64.
 */
function putRows(rows: Buffer, at: number, packed: Packed, packedBefore: number, bodyBefore: number, keyedBefore: number): void {
  for (let j = 0, from = 0; j < packed.rows.length / 3; j++) {
    const row = at + ENTRY_BLOCK_ROW_BYTES * j;
    const to = packed.rows[3 * j] as number;
    rows.writeUInt32LE(packedBefore + to, row);
    rows.writeUInt32LE(bodyBefore + (packed.rows[3 * j + 1] as number), row + 4);
    rows.writeUInt32LE(keyedBefore + (packed.rows[3 * j + 2] as number), row + 8);
    rows.writeBigUInt64LE(checksum64(packed.bytes, from, to), row + 12);
    from = to;
  }
}

/** Encodes so far that kept a loaded hint's packed blocks (for tests: that the path was taken). */
let encodesAppended = 0;

/** How many encodes kept a loaded version-3 hint's packed blocks since the process started. */
export function appendedEncodes(): number {
  return encodesAppended;
}

/** Test hook (the unsafe twin): when true, encodeAppended keeps the loaded blocks even when an added sequence is below their minSeq. */
let appendIgnoringMinSeq = false;

/** Test only: drops (true) or restores (false) encodeAppended's minSeq check. Never called outside tests. */
export function unsafeAppendIgnoringMinSeq(ignore: boolean): void {
  appendIgnoringMinSeq = ignore;
}

/** When false (a test's reference encode), an encode after a loaded version-3 hint repacks every entry. */
let reuseLoadedBlocks = true;

/** Test only: makes encode repack a loaded version-3 hint's entries (false) or reuse its blocks again (true). */
export function setReuseLoadedBlocks(reuse: boolean): void {
  reuseLoadedBlocks = reuse;
}

/** The trailer of a version-2 hint: xxh64 of its header followed by its summary. */
function trailerSum(head: Buffer, summary: Buffer): bigint {
  const both = Buffer.concat([head, summary]);
  return checksum64(both, 0, both.length);
}

/** True on a little-endian host: a typed array's bytes are then its values' little-endian encoding. */
const HOST_LITTLE_ENDIAN = os.endianness() === "LE";

/**
 * The bytes of `values` as little-endian u32s: a view of the array itself on a little-endian host
 * (an i32 and its u32 share their bytes), else a swapped copy.
 */
function u32Bytes(values: Uint32Array | Int32Array): Buffer {
  if (HOST_LITTLE_ENDIAN) return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  const out = Buffer.alloc(values.byteLength);
  putU32s(out, 0, values);
  return out;
}

/** xxh64 of bytes [from, to) of the concatenation of `parts` (a range across two parts is hashed as a stream). */
function sumOfParts(parts: readonly Buffer[], from: number, to: number): bigint {
  const pieces: Buffer[] = [];
  let base = 0;
  for (const part of parts) {
    const a = Math.max(from, base);
    const b = Math.min(to, base + part.length);
    if (a < b) pieces.push(part.subarray(a - base, b - base));
    base += part.length;
  }
  assert(pieces.reduce((n, p) => n + p.length, 0) === to - from, "the summed range lies inside the parts");
  return checksum64Of(pieces);
}

/** Writes `values` as little-endian u32s at out[at...]. */
function putU32s(out: Buffer, at: number, values: Uint32Array | Int32Array): void {
  assert(at >= 0 && at + 4 * values.length <= out.length, "the u32 section lies inside the file");
  if (HOST_LITTLE_ENDIAN) {
    // One copy of the array's bytes (an i32 and its u32 share them): the sections are not
    // 4-aligned in version 3, so no typed-array view of `out`, but a byte copy needs none.
    out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), at);
    return;
  }
  // Byte stores (writeUInt32LE's argument checks per element were most of this loop).
  for (let i = 0, o = at; i < values.length; i++, o += 4) {
    const v = (values[i] as number) >>> 0;
    out[o] = v & 0xff;
    out[o + 1] = (v >>> 8) & 0xff;
    out[o + 2] = (v >>> 16) & 0xff;
    out[o + 3] = v >>> 24;
  }
}

/**
 * Where each section of a version-2 hint starts, and its length: the indexed region [0, summary)
 * (header, entries padded to 4, entry offsets, hashes, table) in checksummed blocks, then the
 * summary (erase offsets, scope list, block sums), then the trailer.
 */
interface Layout {
  entryAt: number;
  hashes: number;
  table: number;
  /** End of the indexed region; the erase offsets start here. */
  summary: number;
  scopes: number;
  sums: number;
  blocks: number;
  total: number;
}

/** The section offsets of a version-2 hint with these counts (docs/FORMAT.md "Hint files"). */
function layoutOf(bodyBytes: number, keyed: number, cells: number, erases: number, scopesBytes: number, blockBytes: number): Layout {
  const entryAt = HINT_HEADER_BYTES + Math.ceil(bodyBytes / 4) * 4;
  const hashes = entryAt + 4 * keyed;
  const table = hashes + 4 * keyed;
  const summary = table + 4 * cells;
  const scopes = summary + 4 * erases;
  const sums = scopes + scopesBytes;
  const blocks = Math.ceil(summary / blockBytes);
  return { entryAt, hashes, table, summary, scopes, sums, blocks, total: sums + 8 * blocks + HINT_TRAILER_BYTES };
}

/** The PUT-scope list: for each scope its UTF-8 length (u16), then its bytes. */
function encodeScopes(scopes: readonly string[]): Buffer {
  const parts = scopes.map((sc) => Buffer.from(sc, "utf8"));
  const out = Buffer.alloc(parts.reduce((n, b) => n + 2 + b.length, 0));
  let at = 0;
  for (const b of parts) {
    out.writeUInt16LE(b.length, at);
    b.copy(out, at + 2);
    at += 2 + b.length;
  }
  return out;
}

/** Decodes a PUT-scope list; null when its items do not exactly fill it. */
function decodeScopes(buf: Buffer): string[] | null {
  const out: string[] = [];
  for (let at = 0; at < buf.length; ) {
    if (buf.length - at < 2) return null;
    const n = buf.readUInt16LE(at);
    if (n > SCOPE_BYTES_MAX || at + 2 + n > buf.length) return null;
    out.push(buf.toString("utf8", at + 2, at + 2 + n));
    at += 2 + n;
  }
  return out;
}

/** FNV-1a over bytes[from, to), continuing from `h`. */
function fnv(bytes: Uint8Array, from: number, to: number, h: number): number {
  for (let i = from; i < to; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193); // in bounds: every caller passes a range inside bytes
  return h >>> 0;
}

/**
 * The hash of a slot, part of the version-2 format: FNV-1a (32 bit) over its scope bytes, a 0xFF
 * separator (never in UTF-8), its key bytes.
 */
export function slotHash(bytes: Uint8Array, scopeAt: number, scopeLen: number, keyAt: number, keyLen: number): number {
  const h = Math.imul(fnv(bytes, scopeAt, scopeAt + scopeLen, 0x811c9dc5) ^ 0xff, 0x01000193);
  return fnv(bytes, keyAt, keyAt + keyLen, h);
}

/**
 * The slot index of one hint's entries: the body offset and slot hash of every keyed entry (PUT,
 * TOMBSTONE, CLEAR) in file order, an open-addressing table of their numbers plus one (0 = empty
 * cell, linear probing from `hash mod cells`), the body offsets of the SCOPE_ERASE entries, and
 * the distinct scopes of the PUTs in order of first appearance.
 */
export interface HintIndex {
  keyed: number;
  entryAt: Uint32Array;
  hashes: Uint32Array;
  table: Int32Array;
  erases: Uint32Array;
  scopes: string[];
}

/**
 * Computes the index of a body of well-formed entries (the writer, and an open of a version-1
 * hint): a table of a power of two cells (version 2) or of exactly max(16, 2K) (version 3: up to
 * half the cells of a power of two saved), probed from `hash mod cells` either way.
 */
export function buildIndex(body: Buffer, powerOfTwo = true): HintIndex {
  const at0: number[] = [];
  const hashes: number[] = [];
  const erases: number[] = [];
  const scopes = new Set<string>();
  let lastScopeAt = -1;
  let lastScopeLen = -1;
  for (let at = 0; at < body.length; ) {
    const f = at + 4;
    const type = body.readUInt8(f + C.R_TYPE);
    const scopeLen = body.readUInt16LE(f + C.R_SCOPE_LEN);
    const keyLen = body.readUInt16LE(f + C.R_KEY_LEN);
    const scopeAt = f + C.RECORD_FIXED_BYTES;
    if (type === C.RecordType.PUT && !sameBytes(body, lastScopeAt, lastScopeLen, scopeAt, scopeLen)) {
      scopes.add(body.toString("utf8", scopeAt, scopeAt + scopeLen));
      lastScopeAt = scopeAt;
      lastScopeLen = scopeLen;
    }
    if (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR) {
      at0.push(at);
      hashes.push(slotHash(body, scopeAt, scopeLen, scopeAt + scopeLen, keyLen));
    } else if (type === C.RecordType.SCOPE_ERASE) erases.push(at);
    const value = type === C.RecordType.SCOPE_ERASE ? body.readUInt32LE(f + C.R_VALUE_LEN) : 0;
    at = scopeAt + scopeLen + keyLen + value;
  }
  const h32 = Uint32Array.from(hashes);
  return { keyed: at0.length, entryAt: Uint32Array.from(at0), hashes: h32, table: tableOf(h32, powerOfTwo), erases: Uint32Array.from(erases), scopes: [...scopes] };
}

/**
 * The open-addressing table of `hashes` (entry numbers plus one, linear probing from `hash mod
 * cells`): a power of two cells at least twice the entries (version 2), or exactly max(16, 2K)
 * (version 3).
 */
export function tableOf(hashes: Uint32Array, powerOfTwo: boolean): Int32Array {
  const n = hashes.length;
  let cells = powerOfTwo ? CELLS_MIN : Math.max(CELLS_MIN, 2 * n);
  while (cells < 2 * n) cells *= 2;
  const table = new Int32Array(cells);
  for (let i = 0; i < n; i++) {
    let p = (hashes[i] as number) % cells;
    while (table[p] !== 0) p = p + 1 === cells ? 0 : p + 1;
    table[p] = i + 1;
  }
  return table;
}

/** The u32 LE at b[at] (inside b: callers read the fixed fields of a checked record). */
function u32At(b: Uint8Array, at: number): number {
  return ((b[at] as number) | ((b[at + 1] as number) << 8) | ((b[at + 2] as number) << 16)) + (b[at + 3] as number) * 0x100_0000;
}

/** True when body[a, a+aLen) equals body[b, b+bLen) (names are short: a byte loop). */
export function sameBytes(body: Uint8Array, a: number, aLen: number, b: number, bLen: number): boolean {
  if (a < 0 || aLen !== bLen) return false;
  for (let i = 0; i < bLen; i++) if (body[a + i] !== body[b + i]) return false;
  return true;
}

/** A hint that passed every check, for the segment header it was checked against. */
export interface LoadedHint {
  segmentId: number;
  /** The layout it was read in (HINT_VERSION_4, HINT_VERSION, HINT_VERSION_2 or HINT_VERSION_1); `body` is in the version-2 entry layout for all. */
  version: number;
  /** Version 4: the boot it was written in and what was durable then; null for every other version. */
  stamp: HintStamp | null;
  sealed: boolean;
  coversEnd: number;
  count: number;
  /** Lowest and highest sequence of the entries (0 when there are none). */
  minSeq: number;
  maxSeq: number;
  /** The entries, verbatim. */
  body: Buffer;
  /** Its slot index: views of the file's bytes (version 2), or computed at open (version 1). */
  index: HintIndex;
  /**
   * Version 2 read from a file: the indexed region, whose blocks are read and checked on first
   * use — every access to `body` or the index views must `ensure` its bytes first. Null when
   * every byte is in memory and checked (version 1, or a hint checked from memory).
   */
  bytes: HintBytes | HintBytesV3 | null;
}

/**
 * The indexed region [0, summary) of a version-2 hint file, read block by block on first use:
 * each block is read into `buf` at its file offset and must match its xxh64 from the summary
 * (checked at open with the trailer). The file is opened by name for each read, so a hint
 * replaced since (a seal rewrites the active segment's hint) is read too — and any of its blocks
 * that differ fail their sums: bytes are only ever accepted as exactly those the open checked.
 */
export class HintBytes {
  /** The region's bytes; valid only inside loaded blocks. Its ArrayBuffer starts at file offset 0. */
  readonly buf: Buffer;
  private readonly loaded: Uint8Array;
  private missing: number;
  /** Set when a block could not be read or failed its sum: nothing more is loaded. */
  private broken = false;

  constructor(
    private readonly file: string,
    regionBytes: number,
    private readonly blockBytes: number,
    private readonly sums: Buffer,
  ) {
    this.buf = longLivedBuffer(regionBytes); // address space only until blocks are read; not V8's external memory
    assert(this.buf.byteOffset === 0, "an unpooled buffer starts its ArrayBuffer");
    this.loaded = new Uint8Array(Math.ceil(regionBytes / blockBytes));
    this.missing = this.loaded.length;
    assert(sums.length === 8 * this.loaded.length, "one sum per block");
  }

  /** True once a block failed (the hint is then unusable from here on). */
  get failed(): boolean {
    return this.broken;
  }

  /** Never: a version-2 block that passes its sum is the writer's bytes, checked entry by entry at use. */
  get malformed(): boolean {
    return false;
  }

  /**
   * Makes bytes [from, to) of the region present and checked; false when they are outside it, a
   * block cannot be read, or a block fails its sum (then every later call is false too).
   */
  ensure(from: number, to: number): boolean {
    if (from < 0 || to > this.buf.length || from > to) return false;
    if (to === from) return true;
    const first = Math.floor(from / this.blockBytes);
    const last = Math.floor((to - 1) / this.blockBytes);
    if (first === last && this.loaded[first] !== 0) return true; // the common case: one block, present
    let k = first;
    while (k <= last && this.loaded[k] !== 0) k++;
    if (k > last) return true;
    if (this.broken) return false;
    return this.load(k, last);
  }

  /**
   * True once every block is loaded and checked: from then on every ensure() inside the region
   * is true, so a caller may skip it (blocks are never unloaded, and a failure needs a load).
   */
  get complete(): boolean {
    return this.missing === 0;
  }

  /** ensure() of the whole region. */
  ensureAll(): boolean {
    return this.missing === 0 || this.ensure(0, this.buf.length);
  }

  /** Reads and checks the blocks of [first, last] not loaded yet, in runs. */
  private load(first: number, last: number): boolean {
    let fd = -1;
    try {
      fd = fs.openSync(this.file, "r");
      for (let k = first; k <= last; ) {
        if (this.loaded[k] !== 0) {
          k++;
          continue;
        }
        let end = k;
        while (end + 1 <= last && this.loaded[end + 1] === 0) end++;
        const from = k * this.blockBytes;
        const to = Math.min(this.buf.length, (end + 1) * this.blockBytes);
        for (let done = from; done < to; ) {
          const n = fs.readSync(fd, this.buf, done, to - done, done);
          if (n === 0) throw new RangeError(`${this.file}: ends at ${done}, before ${to}`);
          done += n;
        }
        for (let b = k; b <= end; b++) {
          const bFrom = b * this.blockBytes;
          const sum = checksum64(this.buf, bFrom, Math.min(this.buf.length, bFrom + this.blockBytes));
          if (sum !== this.sums.readBigUInt64LE(8 * b)) throw new RangeError(`${this.file}: block ${b} fails its checksum`);
          this.loaded[b] = 1;
          this.missing -= 1;
        }
        k = end + 1;
      }
      return true;
    } catch {
      this.broken = true;
      return false;
    } finally {
      if (fd >= 0) fs.closeSync(fd);
    }
  }
}

/** One entry as recovery applies it: a record's fixed fields, names and erase list, and where it lies. */
export interface HintEntry extends Omit<DecodedRecord, "value"> {
  offset: number;
  /** SCOPE_ERASE: its erase list (null when empty); null for every other type. */
  value: Uint8Array | null;
}

/** Test hook (unsafe twin): when true, entryUsable accepts every entry. Never set outside tests. */
let skipEntryChecks = false;

/** Test only: turns the per-entry checks of entryUsable off (true) or on again (false). */
export function unsafeSkipHintEntryChecks(skip: boolean): void {
  skipEntryChecks = skip;
}

/**
 * The check of one entry at its first use: true when the entry at body offset `at` lies inside
 * the body with its names (and erase list), is of a type the caller expects (`keyed`: PUT,
 * TOMBSTONE or CLEAR; else SCOPE_ERASE), and describes a record inside [DATA_START, coversEnd)
 * whose sequence lies within the hint's range (and whose u64 fields are safe integers). A version-2 hint is checked entry by entry when
 * its entries are used, not at open (the checksum has already proved the bytes are the writer's).
 */
export function entryUsable(hint: Pick<LoadedHint, "body" | "coversEnd" | "minSeq" | "maxSeq">, at: number, keyed: boolean): boolean {
  if (skipEntryChecks) return true;
  const body = hint.body;
  if (!Number.isInteger(at) || at < 0 || body.length - at < ENTRY_FIXED_BYTES) return false;
  // Byte reads (every field lies inside the fixed part just checked): this runs once per entry
  // used, and Buffer's read* calls with their argument checks were most of it.
  const f = at + 4;
  const type = body[f + C.R_TYPE] as number;
  const isKeyed = type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR;
  if (keyed ? !isKeyed : type !== C.RecordType.SCOPE_ERASE) return false;
  const scopeLen = (body[f + C.R_SCOPE_LEN] as number) | ((body[f + C.R_SCOPE_LEN + 1] as number) << 8);
  const keyLen = (body[f + C.R_KEY_LEN] as number) | ((body[f + C.R_KEY_LEN + 1] as number) << 8);
  const value = keyed ? 0 : u32At(body, f + C.R_VALUE_LEN);
  if (scopeLen > SCOPE_BYTES_MAX || keyLen > KEY_BYTES_MAX || ENTRY_FIXED_BYTES + scopeLen + keyLen + value > body.length - at) return false;
  const offset = u32At(body, at);
  const length = u32At(body, f + C.R_LENGTH);
  if (offset < C.DATA_START || length < C.RECORD_V3_BYTES_MIN || offset + length > hint.coversEnd) return false;
  // Generation and expiry must be safe integers (their high words at most 2^21 - 1, as readU64 requires).
  if (u32At(body, f + C.R_GENERATION + 4) > U64_HIGH_MAX || u32At(body, f + C.R_EXPIRES_AT + 4) > U64_HIGH_MAX) return false;
  const seqHigh = u32At(body, f + C.R_SEQ + 4);
  if (seqHigh > U64_HIGH_MAX) return false;
  const seq = seqHigh * 0x1_0000_0000 + u32At(body, f + C.R_SEQ);
  return seq > 0 && seq >= hint.minSeq && seq <= hint.maxSeq;
}

/**
 * Version 1: walks the entries' extents: true when exactly `count` entries fill `body`, each
 * plausible, in ascending offsets within coversEnd, their sequences within [minSeq, maxSeq].
 */
function entriesWellFormed(body: Buffer, count: number, coversEnd: number, minSeq: number, maxSeq: number): boolean {
  let at = 0;
  let n = 0;
  let lastEnd: number = C.DATA_START;
  while (at < body.length) {
    if (body.length - at < ENTRY_FIXED_BYTES) return false;
    const offset = body.readUInt32LE(at);
    const f = at + 4;
    const length = body.readUInt32LE(f + C.R_LENGTH);
    const type = body.readUInt8(f + C.R_TYPE);
    const names = body.readUInt16LE(f + C.R_SCOPE_LEN) + body.readUInt16LE(f + C.R_KEY_LEN);
    const value = type === C.RecordType.SCOPE_ERASE ? body.readUInt32LE(f + C.R_VALUE_LEN) : 0;
    if (type === 0 || type > C.RECORD_TYPE_MAX || type === C.RecordType.GROUP) return false;
    if (offset < lastEnd || length < C.RECORD_V3_BYTES_MIN || offset + length > coversEnd) return false;
    const seq = readU64(body, f + C.R_SEQ);
    if (seq < minSeq || seq > maxSeq || seq === 0) return false;
    at += ENTRY_FIXED_BYTES + names + value;
    lastEnd = offset + length;
    n += 1;
  }
  return at === body.length && n === count;
}

/**
 * Reads `dir`'s hint of segment `segmentId` and checks it against that segment's current header;
 * null when it is missing, unreadable, damaged, of another version or stale. Never throws. A
 * version-2 hint is read lazily: its header and summary now (checked by the trailer), each block
 * of the rest on first use (HintBytes).
 */
export function readHint(dir: string, segmentId: number, header: HeaderChoice): LoadedHint | null {
  const file = path.join(dir, hintFileName(segmentId));
  let fd = -1;
  try {
    fd = fs.openSync(file, "r");
    const size = fs.fstatSync(fd).size;
    if (size > HINT_BYTES_MAX || size < HINT_HEADER_BYTES + HINT_TRAILER_BYTES) return size > HINT_BYTES_MAX ? null : checkHint(readAt(fd, 0, size), segmentId, header);
    const version = readAt(fd, X_VERSION, 1)[0];
    if (version === HINT_VERSION || version === HINT_VERSION_4) return readV3(fd, file, size, segmentId, header);
    const head = readAt(fd, 0, HINT_HEADER_BYTES);
    if (version !== HINT_VERSION_2) return checkHint(readAt(fd, 0, size), segmentId, header); // version 1 (or refused there)
    const layout = layoutV2(head, size);
    if (layout === null) return null;
    const summary = readAt(fd, layout.summary, size - layout.summary);
    const tail = summary.length - HINT_TRAILER_BYTES;
    if (trailerSum(head, summary.subarray(0, tail)) !== summary.readBigUInt64LE(tail)) return null;
    const common = commonChecks(head, segmentId, header);
    if (common === null) return null;
    const bytes = new HintBytes(file, layout.summary, head.readUInt32LE(X_BLOCK_BYTES), summary.subarray(layout.sums - layout.summary, tail));
    return finishV2(bytes.buf, bytes, layout, summary, head, common);
  } catch {
    return null;
  } finally {
    if (fd >= 0) fs.closeSync(fd);
  }
}

/** readHint of a version-3 file: its header and summary now, checked by the trailer; the rest on first use (HintBytesV3). */
function readV3(fd: number, file: string, size: number, segmentId: number, header: HeaderChoice): LoadedHint | null {
  if (size < HINT_V3_HEADER_BYTES + HINT_TRAILER_BYTES) return null;
  const head = readAt(fd, 0, HINT_V3_HEADER_BYTES);
  const layout = layoutOfV3(head, size);
  if (layout === null) return null;
  const summary = readAt(fd, layout.summary, size - layout.summary);
  const tail = summary.length - HINT_TRAILER_BYTES;
  if (trailerSum(head, summary.subarray(0, tail)) !== summary.readBigUInt64LE(tail)) return null;
  const common = commonChecks(head, segmentId, header);
  return common === null ? null : finishV3({ file }, head, layout, summary, common);
}

/** `n` bytes of `fd` from `at`, in a buffer of their own; throws when the file is shorter. */
function readAt(fd: number, at: number, n: number): Buffer {
  const buf = Buffer.allocUnsafeSlow(n);
  for (let done = 0; done < n; ) {
    const got = fs.readSync(fd, buf, done, n - done, at + done);
    if (got === 0) throw new RangeError(`short read: ${done} of ${n} bytes`);
    done += got;
  }
  return buf;
}

/** The checks of readHint on the bytes of a whole hint file in memory (either version; every block checked now). */
export function checkHint(buf: Buffer, segmentId: number, header: HeaderChoice): LoadedHint | null {
  if (buf.length < HINT_V1_HEADER_BYTES + HINT_TRAILER_BYTES || buf.length > HINT_BYTES_MAX) return null;
  if (buf.readUInt32LE(X_MAGIC) !== HINT_MAGIC) return null;
  const version = buf.readUInt8(X_VERSION);
  if (version === HINT_VERSION_1) {
    if (checksum64(buf, 0, buf.length - HINT_TRAILER_BYTES) !== buf.readBigUInt64LE(buf.length - HINT_TRAILER_BYTES)) return null;
    const common = commonChecks(buf, segmentId, header);
    return common === null ? null : checkV1(buf, common);
  }
  if (version === HINT_VERSION || version === HINT_VERSION_4) return checkV3(buf, segmentId, header);
  if (version !== HINT_VERSION_2 || buf.length < HINT_HEADER_BYTES + HINT_TRAILER_BYTES) return null;
  const head = buf.subarray(0, HINT_HEADER_BYTES);
  const layout = layoutV2(head, buf.length);
  if (layout === null) return null;
  const tail = buf.length - HINT_TRAILER_BYTES;
  if (trailerSum(head, buf.subarray(layout.summary, tail)) !== buf.readBigUInt64LE(tail)) return null;
  for (let k = 0; k < layout.blocks; k++) {
    const from = k * HINT_BLOCK_BYTES;
    if (checksum64(buf, from, Math.min(layout.summary, from + HINT_BLOCK_BYTES)) !== buf.readBigUInt64LE(layout.sums + 8 * k)) return null;
  }
  const common = commonChecks(head, segmentId, header);
  if (common === null) return null;
  // The index is viewed in place: 4-aligned sections need the file at a 4-aligned address.
  const own = buf.byteOffset % 4 === 0 ? buf : Buffer.from(buf);
  return finishV2(own.subarray(0, layout.summary), null, layout, own.subarray(layout.summary), own.subarray(0, HINT_HEADER_BYTES), common);
}

/** checkHint of a version-3 file in memory: every block read, checked and decoded now. */
function checkV3(buf: Buffer, segmentId: number, header: HeaderChoice): LoadedHint | null {
  if (buf.length < HINT_V3_HEADER_BYTES + HINT_TRAILER_BYTES) return null;
  const head = buf.subarray(0, HINT_V3_HEADER_BYTES);
  const layout = layoutOfV3(head, buf.length);
  if (layout === null) return null;
  const tail = buf.length - HINT_TRAILER_BYTES;
  if (trailerSum(head, buf.subarray(layout.summary, tail)) !== buf.readBigUInt64LE(tail)) return null;
  const common = commonChecks(head, segmentId, header);
  if (common === null) return null;
  const hint = finishV3({ memory: buf }, head, layout, buf.subarray(layout.summary), common);
  if (hint === null || hint.bytes === null || !hint.bytes.ensureAll()) return null;
  return { ...hint, bytes: null };
}

/**
 * The layout a version-3 header promises, or null when it is impossible: version 2's count
 * rules, packed entries of at least 5 bytes each and never more bytes than the v2 body, one
 * entry block at least per hint with entries and at most one per entry, and sections that add
 * up to exactly `fileBytes`.
 */
function layoutOfV3(head: Buffer, fileBytes: number): LayoutV3 | null {
  const count = head.readUInt32LE(X_COUNT);
  const bodyBytes = head.readUInt32LE(X_BODY_BYTES);
  const keyed = head.readUInt32LE(X_KEYED);
  const cells = head.readUInt32LE(X_CELLS);
  const erases = head.readUInt32LE(X_ERASES);
  const blockBytes = head.readUInt32LE(X_BLOCK_BYTES);
  const packed = head.readUInt32LE(X3_PACKED);
  const blocks = head.readUInt32LE(X3_ENTRY_BLOCKS);
  if (head.readUInt32LE(X3_RESERVED) !== 0 || blockBytes < 4096 || blockBytes > 1 << 20 || (blockBytes & (blockBytes - 1)) !== 0) return null;
  if (keyed + erases > count || cells < CELLS_MIN || cells < 2 * keyed) return null;
  if (count > 0 ? bodyBytes < count * ENTRY_FIXED_BYTES || packed < 5 * count || packed > bodyBytes || blocks < 1 || blocks > count : bodyBytes !== 0 || packed !== 0 || blocks !== 0) return null;
  const stampBytes = head[X_VERSION] === HINT_VERSION_4 ? HINT_STAMP_BYTES : 0;
  const layout = layoutV3(bodyBytes, packed, keyed, cells, erases, head.readUInt32LE(X_SCOPES_BYTES), blocks, blockBytes, stampBytes);
  return layout.total === fileBytes ? layout : null;
}

/**
 * Version 3, the rest of the open's checks and the index over the in-memory region: the scope
 * list must decode, the entry block rows rise to the header's totals, and every erase entry's
 * block decodes and the entry is usable (recovery applies erasures at open).
 */
function finishV3(source: HintSourceV3, head: Buffer, L: LayoutV3, summary: Buffer, c: Common): LoadedHint | null {
  if (os.endianness() !== "LE") return null; // the u32 sections are viewed as host-order typed arrays
  const at = (x: number): number => x - L.summary;
  const scopes = decodeScopeList(summary.subarray(at(L.scopes), at(L.blocks)));
  if (scopes === null) return null;
  const keyed = head.readUInt32LE(X_KEYED);
  const bodyBytes = head.readUInt32LE(X_BODY_BYTES);
  const rows = summary.subarray(at(L.blocks), at(L.sums));
  if (!checkRows(rows, L.entryBlocks, L.packed, bodyBytes, keyed)) return null;
  const version = head[X_VERSION] as number; // 3 or 4: readHint and checkHint dispatch only those here
  const stamp = version === HINT_VERSION_4 ? stampAt(summary, at(L.stamp), c.coversEnd) : null;
  if (version === HINT_VERSION_4 && stamp === null) return null;
  const bytes = new HintBytesV3(source, L, bodyBytes, head.readUInt32LE(X_BLOCK_BYTES), rows, summary.subarray(at(L.sums), at(L.stamp)), scopes.bytes, c.minSeq, c.lengthOf);
  const region = bytes.buf;
  const erases = new Uint32Array(head.readUInt32LE(X_ERASES));
  for (let i = 0; i < erases.length; i++) erases[i] = summary.readUInt32LE(4 * i);
  const u32 = (from: number, n: number): Uint32Array => new Uint32Array(region.buffer, region.byteOffset + from, n);
  const index: HintIndex = { keyed, entryAt: u32(L.entryAt, keyed), hashes: u32(L.hashes, keyed), table: new Int32Array(region.buffer, region.byteOffset + L.table, head.readUInt32LE(X_CELLS)), erases, scopes: scopes.puts };
  const hint: LoadedHint = { ...c, version, stamp, body: region.subarray(HINT_HEADER_BYTES, HINT_HEADER_BYTES + bodyBytes), index, bytes };
  for (const e of erases) if (!entryPresent(hint, e) || !entryUsable(hint, e, false)) return null;
  return hint;
}

/** The fields both versions share, checked against the segment's header; null when any is wrong. */
type Common = Pick<LoadedHint, "segmentId" | "sealed" | "coversEnd" | "count" | "minSeq" | "maxSeq"> & { lengthOf: RecordLengthOf };

/** The checks of the first 48 header bytes (both versions) against segment `segmentId`'s header. */
function commonChecks(head: Buffer, segmentId: number, header: HeaderChoice): Common | null {
  const flags = head.readUInt8(X_FLAGS);
  if ((flags & ~(HINT_SEALED | HINT_BOOT_STAMPED)) !== 0 || head.readUInt16LE(X_RESERVED) !== 0) return null;
  // Stamped exactly when version 4, and never sealed: a sealed segment's bytes are durable.
  if ((flags & HINT_BOOT_STAMPED) !== 0 !== (head[X_VERSION] === HINT_VERSION_4) || flags === (HINT_SEALED | HINT_BOOT_STAMPED)) return null;
  if (head.readUInt32LE(X_SEGMENT_ID) !== segmentId || head.readBigUInt64LE(X_IDENTITY) !== headerIdentity(header)) return null;
  const sealed = (flags & HINT_SEALED) !== 0;
  const segmentSealed = (header.header.flags & C.FLAG_SEALED) !== 0;
  const coversEnd = head.readUInt32LE(X_COVERS_END);
  if (sealed !== segmentSealed || coversEnd < C.DATA_START || (sealed && coversEnd !== header.header.sealedBytes)) return null;
  const count = head.readUInt32LE(X_COUNT);
  const minSeq = readU64(head, X_MIN_SEQ);
  const maxSeq = readU64(head, X_MAX_SEQ);
  if (minSeq < 0 || maxSeq < 0 || minSeq > maxSeq || (count === 0) !== (maxSeq === 0)) return null;
  return { segmentId, sealed, coversEnd, count, minSeq, maxSeq, lengthOf: recordLengthOf(formatOf(header)) };
}

/** Version 1: the entries are walked and indexed here (linear in the entries). */
function checkV1(buf: Buffer, c: Common): LoadedHint | null {
  const bodyBytes = buf.readUInt32LE(X_BODY_BYTES);
  if (bodyBytes !== buf.length - HINT_V1_HEADER_BYTES - HINT_TRAILER_BYTES) return null;
  const body = buf.subarray(HINT_V1_HEADER_BYTES, HINT_V1_HEADER_BYTES + bodyBytes);
  if (!entriesWellFormed(body, c.count, c.coversEnd, c.minSeq, c.maxSeq)) return null;
  return { ...c, version: HINT_VERSION_1, stamp: null, body, index: buildIndex(body), bytes: null };
}

/**
 * The layout a version-2 header promises, or null when it is impossible: the counts must fit the
 * entries, the table must be a power of two at least twice the keyed entries, the block size a
 * power of two in [4 KiB, 1 MiB], and the sections must add up to exactly `fileBytes`.
 */
function layoutV2(head: Buffer, fileBytes: number): Layout | null {
  const count = head.readUInt32LE(X_COUNT);
  const bodyBytes = head.readUInt32LE(X_BODY_BYTES);
  const keyed = head.readUInt32LE(X_KEYED);
  const cells = head.readUInt32LE(X_CELLS);
  const erases = head.readUInt32LE(X_ERASES);
  const blockBytes = head.readUInt32LE(X_BLOCK_BYTES);
  if (head.readUInt32LE(X_RESERVED2) !== 0 || blockBytes < 4096 || blockBytes > 1 << 20 || (blockBytes & (blockBytes - 1)) !== 0) return null;
  if (keyed + erases > count || cells < CELLS_MIN || (cells & (cells - 1)) !== 0 || cells < 2 * keyed) return null;
  if (count > 0 ? bodyBytes < count * ENTRY_FIXED_BYTES : bodyBytes !== 0) return null;
  const layout = layoutOf(bodyBytes, keyed, cells, erases, head.readUInt32LE(X_SCOPES_BYTES), blockBytes);
  return layout.total === fileBytes ? layout : null;
}

/**
 * Version 2, the rest of the checks and the index: `region` is the indexed region (at file offset
 * 0; in memory, or lazily filled by `bytes`), `summary` the file from the summary on. The scope
 * list must decode and every erase entry be usable (their blocks are read now); the keyed entries
 * are checked at first use (entryUsable), not here.
 */
function finishV2(region: Buffer, bytes: HintBytes | null, layout: Layout, summary: Buffer, head: Buffer, c: Common): LoadedHint | null {
  if (os.endianness() !== "LE") return null; // the u32 sections are viewed as host-order typed arrays
  const keyed = head.readUInt32LE(X_KEYED);
  const cells = head.readUInt32LE(X_CELLS);
  const eraseCount = head.readUInt32LE(X_ERASES);
  const scopes = decodeScopes(summary.subarray(layout.scopes - layout.summary, layout.sums - layout.summary));
  if (scopes === null) return null;
  const erases = new Uint32Array(eraseCount);
  for (let i = 0; i < eraseCount; i++) erases[i] = summary.readUInt32LE(4 * i);
  const u32 = (at: number, n: number): Uint32Array => new Uint32Array(region.buffer, region.byteOffset + at, n);
  const bodyBytes = head.readUInt32LE(X_BODY_BYTES);
  const index: HintIndex = { keyed, entryAt: u32(layout.entryAt, keyed), hashes: u32(layout.hashes, keyed), table: new Int32Array(region.buffer, region.byteOffset + layout.table, cells), erases, scopes };
  const hint: LoadedHint = { ...c, version: HINT_VERSION_2, stamp: null, body: region.subarray(HINT_HEADER_BYTES, HINT_HEADER_BYTES + bodyBytes), index, bytes };
  for (const at of erases) if (!entryPresent(hint, at) || !entryUsable(hint, at, false)) return null;
  return hint;
}

/**
 * Makes the entry at body offset `at` present (its fixed part, then its names and erase list):
 * true when it is (always for a hint in memory); false when its bytes cannot be read or checked.
 */
export function entryPresent(hint: Pick<LoadedHint, "body" | "bytes">, at: number): boolean {
  const bytes = hint.bytes;
  if (bytes === null) return true;
  const from = HINT_HEADER_BYTES + at;
  const bodyEnd = HINT_HEADER_BYTES + hint.body.length;
  if (!Number.isInteger(at) || at < 0 || !bytes.ensure(from, Math.min(bodyEnd, from + ENTRY_FIXED_BYTES))) return false;
  if (bodyEnd - from < ENTRY_FIXED_BYTES) return true; // entryUsable refuses it
  const f = at + 4;
  const body = hint.body;
  const type = body.readUInt8(f + C.R_TYPE);
  const extent = ENTRY_FIXED_BYTES + body.readUInt16LE(f + C.R_SCOPE_LEN) + body.readUInt16LE(f + C.R_KEY_LEN) + (type === C.RecordType.SCOPE_ERASE ? body.readUInt32LE(f + C.R_VALUE_LEN) : 0);
  return bytes.ensure(from, Math.min(bodyEnd, from + extent));
}

/** Decodes the entry at body offset `at` into `e` (names decoded fresh); returns the next entry's offset. */
export function decodeEntry(body: Buffer, at: number, e: HintEntry): number {
  const f = at + 4;
  const type = body[f + C.R_TYPE] as C.RecordTypeValue;
  const scopeLen = body.readUInt16LE(f + C.R_SCOPE_LEN);
  const keyLen = body.readUInt16LE(f + C.R_KEY_LEN);
  const scopeAt = f + C.RECORD_FIXED_BYTES;
  const keyAt = scopeAt + scopeLen;
  const value = type === C.RecordType.SCOPE_ERASE ? body.readUInt32LE(f + C.R_VALUE_LEN) : 0;
  e.offset = body.readUInt32LE(at);
  e.length = body.readUInt32LE(f + C.R_LENGTH);
  e.type = type;
  e.flags = body.readUInt8(f + C.R_FLAGS);
  e.seq = readU64(body, f + C.R_SEQ);
  e.generation = readU64(body, f + C.R_GENERATION);
  e.expiresAt = readU64(body, f + C.R_EXPIRES_AT);
  e.scope = body.toString("utf8", scopeAt, keyAt);
  e.key = body.toString("utf8", keyAt, keyAt + keyLen);
  e.value = value > 0 ? new Uint8Array(body.subarray(keyAt + keyLen, keyAt + keyLen + value)) : null;
  return keyAt + keyLen + value;
}

/** A blank entry for decodeEntry to fill. */
export function blankEntry(): HintEntry {
  return { offset: 0, length: 0, type: C.RecordType.PUT, flags: 0, seq: 0, generation: 0, expiresAt: 0, scope: "", key: "", value: null };
}

/**
 * Calls `visit` with every entry of a checked hint, in file order. The entry object is reused
 * from one call to the next (the visitor copies what it keeps; `value` is a fresh copy).
 */
export function forEachEntry(hint: LoadedHint, visit: (e: Readonly<HintEntry>) => void): void {
  if (hint.bytes !== null && !hint.bytes.ensureAll()) throw new RangeError(`hint of segment ${hint.segmentId}: its entries can no longer be read whole`);
  const e = blankEntry();
  for (let at = 0; at < hint.body.length; ) {
    at = decodeEntry(hint.body, at, e);
    visit(e);
  }
}

/**
 * Writes `bytes` as `dir`'s hint of segment `segmentId` with the durability order: .hint.tmp,
 * fdatasync, rename, directory fsync (fault point io:hint); a boot-stamped hint is written
 * unsynced instead, by writeHintFileOverlapped. Null bytes (HintBuilder.encode could not read its
 * prefix) write nothing and remove the hint there. Returns false — with the .tmp removed and any
 * older hint left as it was — when a step fails: a hint is never needed for correctness.
 */
export function writeHintFile(dir: string, segmentId: number, bytes: Buffer | HintParts | null): boolean {
  if (bytes === null) {
    // The builder's loaded prefix (the hint on disk) can no longer be read: remove it, so the
    // next open scans this segment and writes a whole hint, instead of meeting the damage again.
    unlinkHint(dir, segmentId);
    return false;
  }
  const file = path.join(dir, hintFileName(segmentId));
  try {
    io.replaceFileDurably("io:hint", file, bytes, FILE_MODE);
    return true;
  } catch {
    dropHintTmp(`${file}.tmp`);
    return false;
  }
}

/**
 * writeHintFile with the file's write, its fdatasync and the directory fsync on libuv's pool (io.ts
 * replaceFileDurablyAsync): the calling thread only opens, closes and renames. The temporary file
 * is `NNNNNNNN.hint.sealing.tmp` (SEALING_HINT_TMP), not the `.hint.tmp` of every other hint write,
 * so that what a crash leaves tells a seal's hint from a compaction's. `bytes` must not change
 * until it resolves. Resolves whether the hint was written; never rejects.
 */
export async function writeHintFileAsync(dir: string, segmentId: number, bytes: Buffer | HintParts): Promise<boolean> {
  const file = path.join(dir, hintFileName(segmentId));
  const tmp = `${file}${SEALING_HINT_TMP}`;
  try {
    await io.replaceFileDurablyAsync("io:hint", file, tmp, bytes, FILE_MODE);
    return true;
  } catch {
    dropHintTmp(tmp);
    return false;
  }
}

/** The suffix of the temporary file of a hint written off the commit turn (writeHintFileAsync). */
export const SEALING_HINT_TMP = ".sealing.tmp";

/** Removes the temporary file `tmp` a failed hint write may have left (quietly: recovery removes *.tmp at the next open). */
function dropHintTmp(tmp: string): void {
  try {
    io.unlink("io:hint", tmp);
  } catch {
    // the .tmp is deleted at the next open (recovery removes *.tmp)
  }
}

/**
 * writeHintFile for a boot-stamped hint, with nothing synced (neither the file nor the directory),
 * in two overlapping steps: the head (header, packed entries and slot hashes: most of the file)
 * goes to the kernel on libuv's pool while this thread builds the table (SplitHint.finish); then
 * the rest is written after it and the `.tmp` renamed over the hint. A null split removes the hint (as writeHintFile). Returns false —
 * the `.tmp` removed, any older hint left — when an I/O step fails; a failure of finish() (a
 * writer bug) is thrown after the same cleanup.
 */
export async function writeHintFileOverlapped(dir: string, segmentId: number, split: SplitHint | null): Promise<boolean> {
  if (split === null) return writeHintFile(dir, segmentId, null);
  const file = path.join(dir, hintFileName(segmentId));
  const tmp = `${file}.tmp`;
  let fd = -1;
  let bug: unknown = null;
  try {
    fd = io.openFile("io:hint", tmp, "w", FILE_MODE);
    const headBytes = split.head.reduce((n, b) => n + b.length, 0);
    const writing = io.writeAll("io:hint", fd, split.head, 0).then(() => null, (err: unknown) => err);
    let rest: HintParts = [];
    try {
      rest = split.finish();
    } catch (err) {
      bug = err;
    }
    const failed = await writing; // the descriptor stays open until the pool's write is done
    if (bug !== null) throw bug;
    if (failed !== null) throw failed;
    io.writeAllSync("io:hint", fd, rest, headBytes);
    io.closeFile(fd);
    fd = -1;
    io.rename("io:hint", tmp, file);
    return true;
  } catch {
    if (fd >= 0) io.closeQuietly(fd);
    try {
      io.unlink("io:hint", tmp);
    } catch {
      // the .tmp is deleted at the next open (recovery removes *.tmp)
    }
    if (bug !== null) throw bug;
    return false;
  }
}

/**
 * Removes `dir`'s hint of segment `segmentId` (no directory fsync: the caller's covers it); a
 * failure is swallowed: a hint whose segment is gone is never used, and the next open deletes it.
 */
export function unlinkHint(dir: string, segmentId: number): void {
  try {
    io.unlink("io:hint", path.join(dir, hintFileName(segmentId)));
  } catch {
    // an orphan hint is harmless (readHint is only asked for present segments)
  }
}
