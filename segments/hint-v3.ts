/**
 * Hint version 3: the version-2 index (slot hashes and table, erase offsets, scopes) beside a
 * packed entry body. An entry keeps only what the segment's bytes do not already imply: the
 * record's length is 48 + scope + key + value bytes (the record format's own rule), the offset is
 * a gap after the previous entry's record, the sequence a delta from the previous entry's, the
 * scope an index into the hint's own scope list (or "same as before"), every number a varint.
 * Entries are packed into blocks that each start a fresh delta state and hold whole entries, each
 * block checked by its own xxh64 from the summary; on first use a block is decoded into the
 * version-2 entry layout in memory (the "region"), at the body offsets the version-2 code reads,
 * so everything above this file sees one entry layout for every version. docs/FORMAT.md "Hint
 * files" is the layout's contract; segments/hint.ts reads the header and summary and owns the
 * checks every version shares.
 */
import * as fs from "node:fs";
import * as C from "./constants.js";
import { checksum64 } from "./checksum.js";
import { assert } from "../rules/assert.js";
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX } from "../rules/limits.js";
import type { RecordLengthOf } from "./record.js";
import { frameAtV3, recordLengthV3, type FrameV3 } from "./record-v3.js";
import { longLivedBuffer } from "./long-lived.js";

/** Bytes of the version-3 hint header (version 2's 72, then packed bytes, entry blocks, reserved). */
export const HINT_V3_HEADER_BYTES = 80;
/** Header field: bytes of packed entries `P` (u32; v2's reserved word). */
export const X3_PACKED = 68;
/** Header field: entry blocks `N` (u32). */
export const X3_ENTRY_BLOCKS = 72;
/** Header field: reserved, zero (u32). */
export const X3_RESERVED = 76;
/** Bytes of the version-2 header that the in-memory region keeps in front of the decoded body. */
const REGION_HEAD_BYTES = 72;
/** A writer closes an entry block at the first entry boundary at or past this many packed bytes. */
export const ENTRY_BLOCK_BYTES = 4 * 1024;
/** Bytes per entry block in the summary: packed end, expanded end, keyed end (u32 each), xxh64 (u64). */
export const ENTRY_BLOCK_ROW_BYTES = 20;
/** Bytes of the v2 entry layout before the names: offset (u32), the record's first 40 bytes. */
const ENTRY_FIXED = 4 + C.RECORD_FIXED_BYTES;
/** Bits of an entry's first byte: type (bits 0–2), record flags (3–4), and these. */
const B_SAME_SCOPE = 0x20;
const B_SEQ_DOWN = 0x40;
const B_NO_EXPIRY = 0x80;

/** Where each section of a version-3 hint file starts (docs/FORMAT.md), from its header's counts. */
export interface LayoutV3 {
  /** Bytes of packed entries, at [HINT_V3_HEADER_BYTES, index); the index (hashes, table) follows at once. */
  packed: number;
  index: number;
  /** Bytes of the index: 4K + 4T. */
  indexBytes: number;
  /** Start of the summary: erase offsets, scopes, entry blocks, index block sums. */
  summary: number;
  scopes: number;
  blocks: number;
  sums: number;
  entryBlocks: number;
  indexBlocks: number;
  /** Where a version-4 file's boot stamp starts (segments/hint-stamp.ts): right after the index block sums. */
  stamp: number;
  total: number;
  /** The in-memory region (v2 layout): where entryAt, hashes and the table start, and its length. */
  entryAt: number;
  hashes: number;
  table: number;
  regionBytes: number;
}

/** The sections of a version-3 hint with these counts (and of a version-4 one: `stampBytes` of boot stamp before the trailer). */
export function layoutV3(bodyBytes: number, packed: number, keyed: number, cells: number, erases: number, scopesBytes: number, entryBlocks: number, blockBytes: number, stampBytes = 0): LayoutV3 {
  const index = HINT_V3_HEADER_BYTES + packed; // no padding: every byte of the file is under a checksum
  const indexBytes = 4 * keyed + 4 * cells;
  const summary = index + indexBytes;
  const scopes = summary + 4 * erases;
  const blocks = scopes + scopesBytes;
  const sums = blocks + ENTRY_BLOCK_ROW_BYTES * entryBlocks;
  const indexBlocks = Math.ceil(indexBytes / blockBytes);
  const entryAt = REGION_HEAD_BYTES + Math.ceil(bodyBytes / 4) * 4;
  const hashes = entryAt + 4 * keyed;
  const table = hashes + 4 * keyed;
  const stamp = sums + 8 * indexBlocks;
  return { packed, index, indexBytes, summary, scopes, blocks, sums, entryBlocks, indexBlocks, stamp, total: stamp + stampBytes + 8, entryAt, hashes, table, regionBytes: table + 4 * cells };
}

/** Appends `v` (a safe integer >= 0) as a LEB128 varint at out[at...]; returns the next offset. */
function putVarint(out: Buffer, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}

/** A scope of a hint's scope list: its bytes and whether any PUT entry names it. */
export interface ScopeItem {
  bytes: Buffer;
  put: boolean;
}

/** The packed entries of a v2-layout body, cut into blocks, and the scope list they index. */
export interface Packed {
  bytes: Buffer;
  /** Per block: packed end, expanded (v2 body) end, keyed entries through it. */
  rows: number[];
  scopes: Buffer;
}

/**
 * One hint's packed entries as they are written: the bytes, the block rows, the scope list and the
 * deltas each block restarts. packEntries (from v2-layout entries) and packRecords (straight from
 * records) feed it one entry at a time, so both write exactly the same bytes for the same fields.
 */
class EntryPacker {
  out: Buffer;
  q = 0;
  readonly rows: number[] = [];
  readonly scopes: ScopeItem[];
  /** Keyed entries (PUT, TOMBSTONE, CLEAR) packed so far. */
  keyed = 0;
  /** The scope index of the entry last added, and whether its scope differs from the one before it. */
  scopeId = -1;
  scopeChanged = false;
  private readonly scopeIds = new Map<string, number>();
  private blockStart = 0;
  private prevEnd: number = C.DATA_START;
  private prevSeq: number;
  private prevScope = -1;

  /** A packer whose blocks start at `minSeq`, its buffer `bytes` long to begin with (grown by reserve); its scope list continues `startScopes` (a loaded hint's, whose packed blocks keep their indexes). */
  constructor(bytes: number, readonly minSeq: number, startScopes: readonly ScopeItem[], private readonly blockBytes: number = ENTRY_BLOCK_BYTES) {
    this.out = Buffer.allocUnsafe(bytes + 16);
    this.scopes = startScopes.map((sc) => ({ bytes: sc.bytes, put: sc.put }));
    this.scopes.forEach((sc, id) => this.scopeIds.set(sc.bytes.toString("latin1"), id));
    this.prevSeq = minSeq;
  }

  /** Makes room for an entry of `names` name and erase-list bytes (its varints need at most 64 more). */
  reserve(names: number): void {
    const need = this.q + 64 + names;
    if (need <= this.out.length) return;
    const next = Buffer.allocUnsafe(Math.max(2 * this.out.length, need));
    this.out.copy(next, 0, 0, this.q);
    this.out = next;
  }

  /**
   * Packs the entry of these fields, whose scope and key lie at src[scopeAt...] (an erasure's list
   * after the key): false, with nothing changed, when it cannot be packed — a type or flag outside
   * the format, an offset before the previous record's end, a sequence outside [minSeq, 2^53), or
   * a stored `length` other than the frame's `derived` one (the decoder derives it from the fields).
   */
  add(src: Buffer, type: number, flags: number, offset: number, seq: number, gen: number, exp: number, valueLen: number, scopeAt: number, scopeLen: number, keyLen: number, length: number, derived: number): boolean {
    if (flags > C.RECORD_FLAGS_KNOWN || type < 1 || type >= C.RecordType.GROUP || offset < this.prevEnd || seq < this.minSeq || seq > Number.MAX_SAFE_INTEGER || gen > Number.MAX_SAFE_INTEGER || exp > Number.MAX_SAFE_INTEGER) return false;
    if (derived !== length) return false;
    // Compared with the current scope's own copy, not with src: an incremental packer's records
    // come in different buffers (a group's pieces), which may be reused after the call.
    const current = this.scopes[this.scopeId];
    this.scopeChanged = current === undefined || !sameRange(current.bytes, src, scopeAt, scopeLen);
    if (this.scopeChanged) this.enterScope(src, scopeAt, scopeLen);
    const id = this.scopeId;
    if (type === C.RecordType.PUT) (this.scopes[id] as ScopeItem).put = true;
    const keyAt = scopeAt + scopeLen;
    const n = keyLen + (type === C.RecordType.SCOPE_ERASE ? valueLen : 0);
    this.q = putPacked(this.out, this.q, type, flags, offset - this.prevEnd, seq, this.prevSeq, valueLen, gen, exp, id === this.prevScope ? -1 : id, keyLen, src, keyAt, n);
    if (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR) this.keyed++;
    this.prevEnd = offset + length;
    this.prevSeq = seq;
    this.prevScope = id;
    return true;
  }

  /** Makes src[at, at + len) the current scope, adding it to the list when new. */
  private enterScope(src: Buffer, at: number, len: number): void {
    const name = src.toString("latin1", at, at + len);
    let id = this.scopeIds.get(name);
    if (id === undefined) {
      id = this.scopes.length;
      this.scopeIds.set(name, id);
      this.scopes.push({ bytes: Buffer.from(src.subarray(at, at + len)), put: false });
    }
    this.scopeId = id;
  }

  /** Ends the block after the entry just added when it is full or `last`: a row (packed end, v2 body end `bodyAt`, keyed entries), and the deltas restart. */
  endBlockIf(bodyAt: number, last: boolean): void {
    if (this.q - this.blockStart < this.blockBytes && !last) return;
    this.rows.push(this.q, bodyAt, this.keyed);
    this.blockStart = this.q;
    this.prevEnd = C.DATA_START;
    this.prevSeq = this.minSeq;
    this.prevScope = -1;
  }

  /**
   * The packed entries so far, the last block closed after the entry that ends at v2 body offset
   * `bodyAt` (what endBlockIf(bodyAt, true) would have given) without closing it here: more
   * entries may still be added to it.
   */
  packed(bodyAt: number): Packed {
    const rows = this.q > this.blockStart ? [...this.rows, this.q, bodyAt, this.keyed] : this.rows;
    return { bytes: this.out.subarray(0, this.q), rows, scopes: encodeScopeList(this.scopes) };
  }

  /** The scope list's bytes, by index (what decodeBlock reads). */
  scopeBytes(): Buffer[] {
    return this.scopes.map((sc) => sc.bytes);
  }
}

/**
 * Packs `body` (v2-layout entries, in file order) into version-3 entries with `minSeq` as every
 * block's starting sequence. Linear in the body; never larger than it. Null when an entry cannot
 * be packed (a type or flag outside the format, an offset before the previous record's end, a
 * sequence outside [minSeq, 2^53)): only a loaded older hint can hold one, and it is then not
 * rewritten (the caller removes it; the next open scans the segment).
 */
export function packEntries(body: Buffer, minSeq: number, lengthOf: RecordLengthOf, startScopes: readonly ScopeItem[] = []): Packed | null {
  const packer = new EntryPacker(body.length, minSeq, startScopes);
  for (let at = 0; at < body.length; ) {
    const f = at + 4;
    const type = body[f + C.R_TYPE] as number;
    const scopeLen = u16(body, f + C.R_SCOPE_LEN);
    const keyLen = u16(body, f + C.R_KEY_LEN);
    const valueLen = u32(body, f + C.R_VALUE_LEN);
    const seq = u32(body, f + C.R_SEQ + 4) * 0x1_0000_0000 + u32(body, f + C.R_SEQ);
    const gen = u32(body, f + C.R_GENERATION + 4) * 0x1_0000_0000 + u32(body, f + C.R_GENERATION);
    const exp = u32(body, f + C.R_EXPIRES_AT + 4) * 0x1_0000_0000 + u32(body, f + C.R_EXPIRES_AT);
    const derived = lengthOf(scopeLen, keyLen, valueLen, seq, gen, exp);
    if (!packer.add(body, type, body[f + C.R_FLAGS] as number, u32(body, at), seq, gen, exp, valueLen, f + C.RECORD_FIXED_BYTES, scopeLen, keyLen, u32(body, f + C.R_LENGTH), derived)) return null;
    at = f + C.RECORD_FIXED_BYTES + scopeLen + keyLen + (type === C.RecordType.SCOPE_ERASE ? valueLen : 0);
    packer.endBlockIf(at, at >= body.length);
  }
  const packed = packer.packed(body.length);
  assert(packed.bytes.length <= body.length, "packed entries are never larger than the v2 entries");
  return packed;
}

/**
 * Records to pack straight into a hint, without their version-2 entries first: record i lies at
 * segment offset `offsets[i]`, ascending, and starts at `rec[offsets[i] - base]` (a compaction's
 * output: segments/hint.ts HintBuilder.ofRecords). GROUP records are not entries and are skipped.
 * (Until the seventeenth session a run could also hold only each record's hint prefix; a
 * copy-on-write output now packs its hint as it is written: RunPacker.)
 */
export interface RecordRun {
  rec: Buffer;
  offsets: Uint32Array;
  base: number;
  /** The records are in the version-3 frame (varint fields, docs/FORMAT.md), else in the 48-byte one. */
  lean: boolean;
}

/** Where record i of `run` starts in its `rec`. */
export function recordAt(run: RecordRun, i: number): number {
  return (run.offsets[i] as number) - run.base;
}

/** The fields of the record runTotals or packRecords reads now (one object for every record: no allocation per record). */
const fieldsAt: FrameV3 = { length: 0, type: 0, flags: 0, scopeLen: 0, keyLen: 0, valueLen: 0, seq: 0, generation: 0, expiresAt: 0, payloadAt: 0 };

/**
 * The fields of the (already checked) record at rec[f...] of either frame, read into one shared
 * object; seq is -1 when the 48-byte frame's sequence is not a safe integer (HintBuilder.addRecord's
 * -1). The lean frame's varints are read by frameAtV3, which throws on a malformed record.
 */
function fieldsOf(rec: Buffer, f: number, lean: boolean): Readonly<FrameV3> {
  if (lean) return frameAtV3(rec, f);
  const o = fieldsAt;
  o.length = u32(rec, f + C.R_LENGTH);
  o.type = rec[f + C.R_TYPE] as number;
  o.flags = rec[f + C.R_FLAGS] as number;
  o.scopeLen = u16(rec, f + C.R_SCOPE_LEN);
  o.keyLen = u16(rec, f + C.R_KEY_LEN);
  o.valueLen = u32(rec, f + C.R_VALUE_LEN);
  const seqHigh = u32(rec, f + C.R_SEQ + 4);
  o.seq = seqHigh > SEQ_HIGH_MAX ? -1 : seqHigh * 0x1_0000_0000 + u32(rec, f + C.R_SEQ);
  o.generation = u32(rec, f + C.R_GENERATION + 4) * 0x1_0000_0000 + u32(rec, f + C.R_GENERATION);
  o.expiresAt = u32(rec, f + C.R_EXPIRES_AT + 4) * 0x1_0000_0000 + u32(rec, f + C.R_EXPIRES_AT);
  o.payloadAt = f + C.RECORD_FIXED_BYTES;
  return o;
}

/** What a hint needs of a run of records before packing: entries, their version-2 bytes, sequence range, end. */
export interface RunTotals {
  count: number;
  bodyBytes: number;
  minSeq: number;
  maxSeq: number;
  end: number;
}

/**
 * The totals of `run` (one pass over its fixed fields), or null when a record's sequence is not
 * a safe integer (HintBuilder.addRecord's -1) or a record starts before the previous one ends:
 * the caller then takes the entry-by-entry path, which refuses or asserts as it always did.
 */
export function runTotals(run: RecordRun): RunTotals | null {
  const { rec, offsets, lean } = run;
  const totals: RunTotals = { count: 0, bodyBytes: 0, minSeq: 0, maxSeq: 0, end: C.DATA_START };
  for (let i = 0; i < offsets.length; i++) {
    const r = fieldsOf(rec, recordAt(run, i), lean);
    if (r.type === C.RecordType.GROUP) continue;
    if (!addTotals(totals, r, offsets[i] as number)) return null; // out of order: addRecord's assertion reports it
  }
  return totals;
}

/**
 * Adds the (non-GROUP) record `r` at segment offset `offset` to `totals`; false, with `totals`
 * unchanged, when runTotals refuses the run for it: it starts before the previous record ends,
 * or its sequence is not a safe integer.
 */
function addTotals(totals: RunTotals, r: Readonly<FrameV3>, offset: number): boolean {
  if (offset < totals.end || r.seq < 0 || r.seq > Number.MAX_SAFE_INTEGER) return false;
  if (totals.minSeq === 0 || r.seq < totals.minSeq) totals.minSeq = r.seq;
  if (r.seq > totals.maxSeq) totals.maxSeq = r.seq;
  totals.bodyBytes += ENTRY_FIXED + r.scopeLen + r.keyLen + (r.type === C.RecordType.SCOPE_ERASE ? r.valueLen : 0);
  totals.count += 1;
  totals.end = offset + r.length;
  return true;
}

/** Highest high word of a u64 sequence that is a safe integer (2^53 - 1 >> 32). */
const SEQ_HIGH_MAX = 0x1fffff;

/** What packRecords gives beyond packEntries: the slot index HintBuilder would have kept while adding. */
export interface PackedRun extends Packed {
  /** Slot hash (segments/hint.ts slotHash) of each keyed entry, in file order. */
  hashes: Uint32Array;
  /** Version-2 body offsets of the SCOPE_ERASE entries. */
  erases: Uint32Array;
}

/**
 * packEntries of the entries `run`'s records would have as version-2 entries (`totals` from
 * runTotals), read from the records themselves, with each keyed entry's slot hash and each erase
 * entry's body offset computed on the way: the same bytes, rows and scope list as HintBuilder's
 * addRecord per record followed by packEntries, in one pass and without the 60-odd bytes per
 * record of the intermediate entry. Null exactly when packEntries would be. It feeds the records
 * to a RunPacker whose prediction is the totals' lowest sequence; RecordPacker's entries are
 * packEntries' with a record's fields where an entry's are (a record's first bytes are an entry's
 * after its offset word); test/hint-of-records.test.ts compares the two byte for byte, so a change
 * to one that the other lacks fails there.
 */
export function packRecords(run: RecordRun, totals: RunTotals): PackedRun | null {
  const packer = new RunPacker(totals.minSeq, run.lean, totals.bodyBytes, totals.count);
  for (let i = 0; i < run.offsets.length; i++) packer.add(run.rec, recordAt(run, i), run.offsets[i] as number);
  const done = packer.finish(); // its prediction is the run's own lowest sequence: null only for an entry that does not pack
  if (done !== null) assert(done.totals.count === totals.count && done.totals.bodyBytes === totals.bodyBytes, "the records pack into exactly their totals' entries");
  return done === null ? null : done.packed;
}

/**
 * runTotals and packRecords in one pass, fed one record at a time as a copy-on-write compaction
 * writes its output (engine/compaction-core.ts OutputFile): each record's fields are read once,
 * where the two functions read them twice more from a copy of its hint prefix. packRecords needs
 * the run's lowest sequence before its first entry (every block's deltas start there), so the
 * caller predicts it (`predicted`: the plan's lowest survivor sequence); finish() checks the
 * prediction against the run and gives what runTotals and packRecords would have given, or null
 * when the prediction was wrong or either of them would have refused — the caller then packs the
 * run from its records the long way (HintBuilder.ofRecords), so a wrong guess costs time only.
 * test/compaction-stream.test.ts compares its hints with the long way's, byte for byte.
 */
export class RunPacker {
  private readonly packer: RecordPacker;
  private readonly totals: RunTotals = { count: 0, bodyBytes: 0, minSeq: 0, maxSeq: 0, end: C.DATA_START };
  /** True once a record could not be packed under the prediction (or runTotals would have refused the run). */
  private failed = false;
  /** Records taken (GROUP ones included). */
  records = 0;

  /** A run of records in the frame `lean` says, whose lowest sequence is predicted to be `predicted` (runTotals' minSeq: 0 for a run of no entry); `bytes` and `keyed` size the first buffers (they grow). */
  constructor(readonly predicted: number, private readonly lean: boolean, bytes: number, keyed: number) {
    assert(Number.isSafeInteger(predicted) && predicted >= 0, "a run's predicted lowest sequence is a sequence, or 0 for none");
    this.packer = new RecordPacker(predicted, [], bytes, keyed, ENTRY_BLOCK_BYTES, skewRecordHashes);
  }

  /** Takes the (checked) record at rec[f...], which lies at segment offset `offset` after the ones taken before; returns its length. */
  add(rec: Buffer, f: number, offset: number): number {
    const r = fieldsOf(rec, f, this.lean);
    const length = r.length;
    this.records += 1;
    if (r.type === C.RecordType.GROUP || this.failed) return length;
    // runTotals' refusals, then packRecords': any of them sends the run the long way.
    if (!addTotals(this.totals, r, offset)) {
      this.failed = true;
      return length;
    }
    const derived = this.lean ? recordLengthV3(r.scopeLen, r.keyLen, r.valueLen, r.seq, r.generation, r.expiresAt) : C.RECORD_OVERHEAD + r.scopeLen + r.keyLen + r.valueLen;
    if (!this.packer.add(rec, r, offset, derived)) this.failed = true;
    return length;
  }

  /**
   * runTotals' and packRecords' answers for the records taken, or null: the prediction missed, or
   * the long way is needed (see the class comment). `unsafeTrustPrediction` (tests only: the twin)
   * skips the check of the prediction against the run.
   */
  finish(unsafeTrustPrediction = false): { totals: RunTotals; packed: PackedRun } | null {
    const totals = this.totals;
    if (this.failed || (totals.minSeq !== this.predicted && !unsafeTrustPrediction)) return null;
    const packed = this.packer.packed();
    assert(this.packer.bodyBytes === totals.bodyBytes && packed.bytes.length <= totals.bodyBytes, "the records pack into exactly their totals' entries, never larger");
    return { totals: { ...totals }, packed };
  }
}

/**
 * Packs records into a hint's version-3 entries one at a time, as they arrive (a compaction's
 * run: packRecords; the active segment's committed groups: segments/hint.ts HintBuilder), keeping
 * beside the packed bytes what the hint's index needs — each keyed entry's slot hash and each
 * erase entry's version-2 body offset — so that an encode packs nothing: it closes the last
 * partial block and writes the index. The bytes are packEntries' of the version-2 entries these
 * records would have (test/hint-incremental.test.ts, test/hint-of-records.test.ts).
 */
export class RecordPacker {
  private readonly packer: EntryPacker;
  private hashes: Uint32Array;
  private readonly erases: number[] = [];
  /** FNV-1a over the current scope and the separator: slotHash's first half. */
  private scopeHash = 0;
  /** The version-2 body offset of the next entry (the bytes of the entries added, in that layout). */
  private at = 0;

  /** Blocks start at `minSeq`; scope numbers continue `startScopes`; the buffers start at `bytes` packed bytes and `keyed` hashes (they grow); `skewHashes` is packRecords' twin. */
  constructor(minSeq: number, startScopes: readonly ScopeItem[], bytes: number, keyed: number, blockBytes: number = ENTRY_BLOCK_BYTES + incrementalBlockSkew, private readonly skewHashes = false) {
    this.packer = new EntryPacker(bytes, minSeq, startScopes, blockBytes);
    this.hashes = new Uint32Array(Math.max(16, keyed));
  }

  /** The sequence every block starts from: a record below it cannot be added. */
  get minSeq(): number {
    return this.packer.minSeq;
  }

  /** Bytes of the version-2 entries of the records added. */
  get bodyBytes(): number {
    return this.at;
  }

  /**
   * Adds the (checked, not GROUP) record of fields `r` at segment offset `offset` whose names lie
   * in `rec` at r.payloadAt, its stored length `r.length` and the length its fields imply
   * `derived`: false, with nothing changed, when its entry cannot be packed (EntryPacker.add).
   */
  add(rec: Buffer, r: Readonly<FrameV3>, offset: number, derived: number): boolean {
    const { type, scopeLen, keyLen, valueLen, payloadAt: scopeAt } = r;
    const tail = type === C.RecordType.SCOPE_ERASE ? valueLen : 0;
    const p = this.packer;
    p.reserve(keyLen + tail);
    const keyedBefore = p.keyed;
    if (!p.add(rec, type, r.flags, offset, r.seq, r.generation, r.expiresAt, valueLen, scopeAt, scopeLen, keyLen, r.length, derived)) return false;
    if (p.scopeChanged) this.scopeHash = scopeHashOf(rec, scopeAt, scopeLen, this.skewHashes);
    if (p.keyed > keyedBefore) {
      if (keyedBefore === this.hashes.length) this.hashes = grown(this.hashes);
      this.hashes[keyedBefore] = keyHash(rec, scopeAt + scopeLen, keyLen, this.scopeHash);
    } else if (type === C.RecordType.SCOPE_ERASE) this.erases.push(this.at);
    this.at += ENTRY_FIXED + scopeLen + keyLen + tail;
    p.endBlockIf(this.at, false);
    return true;
  }

  /** The packed entries so far (the last block closed in the answer only), with their slot hashes and erase offsets. */
  packed(): PackedRun {
    const p = this.packer;
    return { ...p.packed(this.at), hashes: this.hashes.subarray(0, p.keyed), erases: Uint32Array.from(this.erases) };
  }

  /**
   * The version-2 entries of the records added, decoded from the packed blocks (the layout
   * HintBuilder.addRecord writes), and each keyed entry's body offset; null when a block does not
   * decode into exactly what was packed (a packer bug: the caller writes no hint).
   */
  entries(lengthOf: RecordLengthOf): { body: Buffer; keyedAt: Uint32Array } | null {
    const packed = this.packed();
    const keyed = packed.hashes.length;
    const entryAt = REGION_HEAD_BYTES + Math.ceil(this.at / 4) * 4; // 4-aligned: keyedAt views it
    const out = Buffer.alloc(entryAt + 4 * keyed);
    const scopes = this.packer.scopeBytes();
    for (let j = 0, from = 0; j < packed.rows.length / 3; j++) {
      const to = packed.rows[3 * j] as number;
      const x = REGION_HEAD_BYTES + (j === 0 ? 0 : (packed.rows[3 * j - 2] as number));
      const k = j === 0 ? 0 : (packed.rows[3 * j - 1] as number);
      if (!decodeBlock(packed.bytes.subarray(from, to), out, x, REGION_HEAD_BYTES + (packed.rows[3 * j + 1] as number), k, packed.rows[3 * j + 2] as number, entryAt, scopes, this.minSeq, lengthOf)) return null;
      from = to;
    }
    const keyedAt = new Uint32Array(out.buffer, out.byteOffset + entryAt, keyed);
    return { body: out.subarray(REGION_HEAD_BYTES, REGION_HEAD_BYTES + this.at), keyedAt };
  }
}

/** A copy of `a` twice as long. */
function grown(a: Uint32Array): Uint32Array {
  const next = new Uint32Array(2 * a.length);
  next.set(a);
  return next;
}

/** Test hook (the unsafe twin of the incremental packer): bytes added to its block size, so its blocks end one entry off. */
let incrementalBlockSkew = 0;

/** Test only: makes RecordPackers made from now on (other than packRecords') close blocks `skew` bytes later (0: as the format says). */
export function unsafeSkewIncrementalBlocks(skew: number): void {
  incrementalBlockSkew = skew;
}

/** Test hook (the unsafe twin of packRecords): when true, its slot hashes leave out the scope/key separator. */
let skewRecordHashes = false;

/** Test only: makes packRecords hash a slot wrongly (true: no 0xFF between scope and key) or rightly again (false). */
export function unsafeSkewRecordHashes(skew: boolean): void {
  skewRecordHashes = skew;
}

/** FNV-1a over a scope's bytes and the 0xFF separator: the state slotHash continues with the key. */
function scopeHashOf(b: Buffer, at: number, n: number, skew: boolean): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < n; k++) h = Math.imul(h ^ (b[at + k] as number), 0x01000193);
  return skew ? h : Math.imul(h ^ 0xff, 0x01000193);
}

/** slotHash from a scope's state (scopeHashOf) over the key's bytes. */
function keyHash(b: Buffer, at: number, n: number, h: number): number {
  for (let k = 0; k < n; k++) h = Math.imul(h ^ (b[at + k] as number), 0x01000193);
  return h >>> 0;
}

/**
 * Writes one packed entry at out[q...] (docs/FORMAT.md "Hint files"): the first byte (type,
 * flags, same scope, sequence down, no expiry), the gap after the previous record, the sequence
 * delta, the value length (PUT, SCOPE_ERASE), the generation, the expiry (when not 0), the scope
 * index (when not the previous entry's), the key length, then the key and erase list, src[keyAt,
 * keyAt + n); `scope` is -1 for the previous entry's. Returns the offset after it. packEntries and
 * packRecords both write through it (its arguments, not an object: no allocation per entry).
 */
function putPacked(out: Buffer, q: number, type: number, flags: number, gap: number, seq: number, prevSeq: number, valueLen: number, gen: number, exp: number, scope: number, keyLen: number, src: Buffer, keyAt: number, n: number): number {
  out[q++] = type | (flags << 3) | (scope < 0 ? B_SAME_SCOPE : 0) | (seq < prevSeq ? B_SEQ_DOWN : 0) | (exp === 0 ? B_NO_EXPIRY : 0);
  // Most values are below 128: one byte without a call.
  if (gap < 0x80) out[q++] = gap;
  else q = putVarint(out, q, gap);
  const dSeq = seq < prevSeq ? prevSeq - seq : seq - prevSeq;
  if (dSeq < 0x80) out[q++] = dSeq;
  else q = putVarint(out, q, dSeq);
  if (type === C.RecordType.PUT || type === C.RecordType.SCOPE_ERASE) q = putVarint(out, q, valueLen);
  if (gen < 0x80) out[q++] = gen;
  else q = putVarint(out, q, gen);
  if (exp !== 0) q = putVarint(out, q, exp);
  if (scope >= 0) q = putVarint(out, q, scope);
  if (keyLen < 0x80) out[q++] = keyLen;
  else q = putVarint(out, q, keyLen);
  if (n <= 32) for (let i = 0; i < n; i++) out[q + i] = src[keyAt + i] as number; // short names: a loop beats a native call
  else src.copy(out, q, keyAt, keyAt + n);
  return q + n;
}

/** The u16 LE at b[at] (callers stay inside b: packEntries walks well-formed entries). */
function u16(b: Buffer, at: number): number {
  return (b[at] as number) | ((b[at + 1] as number) << 8);
}

/** The u32 LE at b[at] (inside b, as u16). */
function u32(b: Buffer, at: number): number {
  return ((b[at] as number) | ((b[at + 1] as number) << 8) | ((b[at + 2] as number) << 16)) + (b[at + 3] as number) * 0x100_0000;
}

/** True when `a` holds exactly the bytes src[b, b + bLen). */
function sameRange(a: Buffer, src: Buffer, b: number, bLen: number): boolean {
  if (a.length !== bLen) return false;
  for (let i = 0; i < bLen; i++) if (a[i] !== src[b + i]) return false;
  return true;
}

/** The v3 scope list: per scope a flag byte (bit 0: a PUT names it), its UTF-8 length (u16), its bytes. */
function encodeScopeList(scopes: readonly ScopeItem[]): Buffer {
  const out = Buffer.alloc(scopes.reduce((n, s) => n + 3 + s.bytes.length, 0));
  let at = 0;
  for (const s of scopes) {
    out[at] = s.put ? 1 : 0;
    out.writeUInt16LE(s.bytes.length, at + 1);
    at += 3 + s.bytes.copy(out, at + 3);
  }
  return out;
}

/** A decoded scope list: every scope's bytes, and the PUT scopes as strings; null when it does not decode exactly. */
export function decodeScopeList(buf: Buffer): { bytes: Buffer[]; puts: string[] } | null {
  const bytes: Buffer[] = [];
  const puts: string[] = [];
  for (let at = 0; at < buf.length; ) {
    if (buf.length - at < 3) return null;
    const flag = buf[at] as number;
    const n = buf.readUInt16LE(at + 1);
    if (flag > 1 || n === 0 || n > SCOPE_BYTES_MAX || at + 3 + n > buf.length) return null;
    const b = buf.subarray(at + 3, at + 3 + n);
    bytes.push(b);
    if (flag === 1) puts.push(b.toString("utf8"));
    at += 3 + n;
  }
  return { bytes, puts };
}

/** Where a version-3 hint's bytes come from: the file (opened by name for each read) or memory. */
export type HintSourceV3 = { file: string } | { memory: Buffer };

/**
 * The in-memory region of a version-3 hint in the version-2 layout — [72-byte head][decoded body,
 * padded to 4][entryAt][hashes][table] — filled on first use: an entry block is read, checked
 * against its xxh64 and decoded (its entries and their entryAt cells); an index block is read,
 * checked and copied. A block whose bytes cannot be read or fail their sum sets `failed` (damage:
 * the caller rescans the segment); one that passes its sum but does not decode exactly also sets
 * `malformed` (a writer bug: the caller fails closed).
 */
export class HintBytesV3 {
  readonly buf: Buffer;
  private readonly entryDone: Uint8Array;
  private readonly indexDone: Uint8Array;
  private missing: number;
  private broken = false;
  private bad = false;

  /**
   * `rows` holds the entry blocks' (packed end, expanded end, keyed end, sum) as checked at open
   * (checkRows); `indexSums` one xxh64 per index block; `scopes` the decoded scope list.
   */
  constructor(
    private readonly source: HintSourceV3,
    private readonly layout: LayoutV3,
    private readonly bodyBytes: number,
    private readonly blockBytes: number,
    private readonly rows: Buffer,
    private readonly indexSums: Buffer,
    private readonly scopes: readonly Buffer[],
    private readonly minSeq: number,
    /** The record length of the segment's frame (its format version), derived per entry. */
    private readonly lengthOf: RecordLengthOf,
  ) {
    this.buf = longLivedBuffer(layout.regionBytes); // address space only until blocks are decoded; not V8's external memory
    assert(this.buf.byteOffset === 0, "an unpooled buffer starts its ArrayBuffer");
    this.buf.fill(0, 0, REGION_HEAD_BYTES);
    this.buf.fill(0, REGION_HEAD_BYTES + bodyBytes, layout.entryAt); // the padding is never decoded
    this.entryDone = new Uint8Array(layout.entryBlocks);
    this.indexDone = new Uint8Array(layout.indexBlocks);
    this.missing = layout.entryBlocks + layout.indexBlocks;
  }

  /**
   * The packed entries as the file holds them, every entry block checked against its sum, with
   * the rows and the scope list that describe them (what an encode that appends entries after
   * this hint's reuses verbatim: segments/hint.ts HintBuilder); null when they cannot be read or
   * a block fails its sum.
   */
  packedRun(): { bytes: Buffer; rows: Buffer; scopes: readonly Buffer[] } | null {
    if (this.broken) return null;
    try {
      const L = this.layout;
      const bytes = this.read(HINT_V3_HEADER_BYTES, L.packed);
      for (let j = 0; j < L.entryBlocks; j++) {
        const row = ENTRY_BLOCK_ROW_BYTES * j;
        const from = this.before(j, 0);
        const to = this.rows.readUInt32LE(row);
        if (checksum64(bytes, from, to) !== this.rows.readBigUInt64LE(row + 12)) throw new RangeError(`entry block ${j} fails its checksum`);
      }
      return { bytes, rows: this.rows, scopes: this.scopes };
    } catch {
      this.broken = true;
      return null;
    }
  }

  /** The hint's scope list, by index (the bytes its packed entries number their scopes by). */
  get scopeList(): readonly Buffer[] {
    return this.scopes;
  }

  /** True once a block failed to read, to check or to decode: nothing more is loaded. */
  get failed(): boolean {
    return this.broken;
  }

  /** True when a block passed its checksum but did not decode (written that way). */
  get malformed(): boolean {
    return this.bad;
  }

  /** True once every block is loaded (only ever turns true). */
  get complete(): boolean {
    return this.missing === 0;
  }

  /** ensure() of the whole region. */
  ensureAll(): boolean {
    return this.missing === 0 || this.ensure(0, this.buf.length);
  }

  /** Makes region bytes [from, to) present: false when outside the region or a block fails (then always false). */
  ensure(from: number, to: number): boolean {
    if (from < 0 || to > this.buf.length || from > to) return false;
    if (to === from || this.missing === 0) return true;
    const L = this.layout;
    const bodyEnd = REGION_HEAD_BYTES + this.bodyBytes;
    if (from < bodyEnd && to > REGION_HEAD_BYTES && !this.entriesFor(Math.max(from, REGION_HEAD_BYTES) - REGION_HEAD_BYTES, Math.min(to, bodyEnd) - REGION_HEAD_BYTES, 4)) return false;
    if (from < L.hashes && to > L.entryAt && !this.entriesFor(Math.floor((Math.max(from, L.entryAt) - L.entryAt) / 4), Math.ceil((Math.min(to, L.hashes) - L.entryAt) / 4), 8)) return false;
    if (to > L.hashes) {
      const a = Math.floor((Math.max(from, L.hashes) - L.hashes) / this.blockBytes);
      const b = Math.floor((to - 1 - L.hashes) / this.blockBytes);
      for (let k = a; k <= b; k++) if (this.indexDone[k] === 0 && !this.loadIndex(k)) return false;
    }
    return true;
  }

  /** Decodes the entry blocks whose expanded bytes (field 4) or keyed entries (field 8) meet [lo, hi). */
  private entriesFor(lo: number, hi: number, field: number): boolean {
    const n = this.layout.entryBlocks;
    // The first block whose end (in that field) is past lo: a binary search over the rows.
    let a = 0;
    let b = n;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (this.rows.readUInt32LE(ENTRY_BLOCK_ROW_BYTES * mid + field) <= lo) a = mid + 1;
      else b = mid;
    }
    // The last block needed: the first from a whose end reaches hi.
    let z = a;
    while (z < n - 1 && this.rows.readUInt32LE(ENTRY_BLOCK_ROW_BYTES * z + field) < hi) z++;
    for (let j = a; j <= z && j < n; ) {
      if (this.entryDone[j] !== 0) {
        j++;
        continue;
      }
      let end = j;
      while (end + 1 <= z && this.entryDone[end + 1] === 0) end++;
      if (!this.loadEntries(j, end)) return false;
      j = end + 1;
    }
    return true;
  }

  /** Bytes [at, at + n) of the hint file. */
  private read(at: number, n: number): Buffer {
    if ("memory" in this.source) return this.source.memory.subarray(at, at + n);
    const out = Buffer.allocUnsafe(n);
    const fd = fs.openSync(this.source.file, "r");
    try {
      for (let done = 0; done < n; ) {
        const got = fs.readSync(fd, out, done, n - done, at + done);
        if (got === 0) throw new RangeError(`${this.source.file}: ends at ${at + done}, before ${at + n}`);
        done += got;
      }
    } finally {
      fs.closeSync(fd);
    }
    return out;
  }

  /** Reads, checks and copies index block k into the region. */
  private loadIndex(k: number): boolean {
    if (this.broken) return false;
    try {
      const L = this.layout;
      const from = k * this.blockBytes;
      const n = Math.min(L.indexBytes, from + this.blockBytes) - from;
      const raw = this.read(L.index + from, n);
      if (checksum64(raw, 0, n) !== this.indexSums.readBigUInt64LE(8 * k)) throw new RangeError(`index block ${k} fails its checksum`);
      raw.copy(this.buf, L.hashes + from);
      this.indexDone[k] = 1;
      this.missing -= 1;
      return true;
    } catch {
      this.broken = true;
      return false;
    }
  }

  /** Field `at` (0 packed end, 4 decoded end, 8 keyed end) of the row before block j (0 for block 0). */
  private before(j: number, at: number): number {
    return j === 0 ? 0 : this.rows.readUInt32LE(ENTRY_BLOCK_ROW_BYTES * (j - 1) + at);
  }

  /** Reads entry blocks [j, last] (all missing) in one read, then checks and decodes each into the region. */
  private loadEntries(j: number, last: number): boolean {
    if (this.broken) return false;
    const pFrom = this.before(j, 0);
    let raw: Buffer;
    try {
      raw = this.read(HINT_V3_HEADER_BYTES + pFrom, this.rows.readUInt32LE(ENTRY_BLOCK_ROW_BYTES * last) - pFrom);
    } catch {
      this.broken = true;
      return false;
    }
    for (let b = j; b <= last; b++) {
      const row = ENTRY_BLOCK_ROW_BYTES * b;
      const block = raw.subarray(this.before(b, 0) - pFrom, this.rows.readUInt32LE(row) - pFrom);
      if (checksum64(block, 0, block.length) !== this.rows.readBigUInt64LE(row + 12)) {
        this.broken = true;
        return false;
      }
      if (!decodeBlock(block, this.buf, REGION_HEAD_BYTES + this.before(b, 4), REGION_HEAD_BYTES + this.rows.readUInt32LE(row + 4), this.before(b, 8), this.rows.readUInt32LE(row + 8), this.layout.entryAt, this.scopes, this.minSeq, this.lengthOf)) {
        this.broken = true;
        this.bad = true;
        return false;
      }
      this.entryDone[b] = 1;
      this.missing -= 1;
    }
    return true;
  }
}

/** Test hook (the unsafe twin): when true, decodeBlock skips its structural checks of each entry and of the block's totals. */
let trustPacked = false;

/** Test only: makes the block decoder take packed entries without checking their structure (true), or check again (false). */
export function unsafeTrustPackedEntries(trust: boolean): void {
  trustPacked = trust;
}

/** Names and values longer than this are copied with Buffer.copy (its native call pays off only then). */
const COPY_LOOP_MAX = 64;

/** Stores u32 `v` (0 <= v < 2^32, checked by the caller) little-endian at `at` (in bounds: checked by the caller). */
export function putU32(out: Buffer, at: number, v: number): void {
  out[at] = v & 0xff;
  out[at + 1] = (v >>> 8) & 0xff;
  out[at + 2] = (v >>> 16) & 0xff;
  out[at + 3] = v >>> 24;
}

/** Stores safe integer `v` >= 0 as a little-endian u64 at `at` (writeU64's bytes, without its calls). */
export function putU64(out: Buffer, at: number, v: number): void {
  const lo = v % 0x1_0000_0000;
  putU32(out, at, lo);
  putU32(out, at + 4, (v - lo) / 0x1_0000_0000);
}

/**
 * Decodes one block's packed entries `p` into `out` in the v2 layout at [x, xEnd), the keyed
 * ones numbered from k to kEnd (their body offsets in the entryAt section at `entryAt`). False
 * when the bytes do not decode into exactly that: a varint runs past the block or past a safe
 * integer, a type is no entry's, a scope index is unknown, a length past its limit, or the
 * entries end anywhere but at the block's end, xEnd and kEnd.
 */
function decodeBlock(p: Buffer, out: Buffer, x: number, xEnd: number, k: number, kEnd: number, entryAt: number, scopes: readonly Buffer[], minSeq: number, lengthOf: RecordLengthOf): boolean {
  if (trustPacked) out.fill(0, entryAt + 4 * k, entryAt + 4 * kEnd); // the unsafe twin: cells it may not reach hold 0, not garbage
  let q = 0;
  const end = p.length;
  let prevEnd: number = C.DATA_START;
  let prevSeq = minSeq;
  let prevScope = -1;
  // A varint at q: its value, or -1 when it runs past the block or a safe integer (q advanced past it).
  const varint = (): number => {
    let v = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (q >= end) return -1;
      const b = p[q++] as number;
      v += (b & 0x7f) * scale;
      if (b < 0x80) return v <= Number.MAX_SAFE_INTEGER ? v : -1;
      scale *= 0x80;
    }
    return -1;
  };
  while (q < end) {
    const b0 = p[q++] as number;
    const type = b0 & 7;
    const flags = (b0 >> 3) & 3;
    const gap = varint();
    const dSeq = varint();
    const valued = type === C.RecordType.PUT || type === C.RecordType.SCOPE_ERASE;
    const valueLen = valued ? varint() : 0;
    const gen = varint();
    const exp = (b0 & B_NO_EXPIRY) !== 0 ? 0 : varint();
    const scope = (b0 & B_SAME_SCOPE) !== 0 ? prevScope : varint();
    const keyLen = varint();
    const seq = (b0 & B_SEQ_DOWN) !== 0 ? prevSeq - dSeq : prevSeq + dSeq;
    const scopeBytes = scopes[scope];
    if (!trustPacked) {
      if (type === 0 || type >= C.RecordType.GROUP || gap < 0 || dSeq < 0 || valueLen < 0 || gen < 0 || exp < 0 || keyLen < 0 || keyLen > KEY_BYTES_MAX || scopeBytes === undefined) return false;
      if (seq <= 0 || seq > Number.MAX_SAFE_INTEGER || (type === C.RecordType.PUT && valueLen > C.VALUE_BYTES_MAX)) return false;
    }
    if (scopeBytes === undefined) return false; // even unchecked, a missing scope has no bytes to copy
    const tail = type === C.RecordType.SCOPE_ERASE ? valueLen : 0;
    const size = ENTRY_FIXED + scopeBytes.length + keyLen + tail;
    const offset = prevEnd + gap;
    const length = lengthOf(scopeBytes.length, keyLen, valueLen, seq, gen, exp);
    if (q + keyLen + tail > end || x + size > xEnd || offset > 0xffffffff || length > 0xffffffff) return false;
    // Byte stores, not Buffer.write*/copy: an entry is ~60 bytes, and those calls' argument checks
    // and native copies were most of a block's decode (docs/performance-history.md, slots-6).
    putU32(out, x, offset);
    const f = x + 4;
    putU32(out, f + C.R_LENGTH, length);
    out[f + C.R_TYPE] = type;
    out[f + C.R_FLAGS] = flags;
    const scopeLen = scopeBytes.length;
    out[f + C.R_SCOPE_LEN] = scopeLen & 0xff;
    out[f + C.R_SCOPE_LEN + 1] = scopeLen >>> 8;
    out[f + C.R_KEY_LEN] = keyLen & 0xff;
    out[f + C.R_KEY_LEN + 1] = keyLen >>> 8;
    out[f + C.R_RESERVED] = 0;
    out[f + C.R_RESERVED + 1] = 0;
    putU32(out, f + C.R_VALUE_LEN, valueLen);
    putU64(out, f + C.R_SEQ, seq);
    putU64(out, f + C.R_GENERATION, gen);
    putU64(out, f + C.R_EXPIRES_AT, exp);
    const scopeAt = f + C.RECORD_FIXED_BYTES;
    for (let i = 0; i < scopeLen; i++) out[scopeAt + i] = scopeBytes[i] as number;
    const rest = keyLen + tail;
    if (rest > COPY_LOOP_MAX) p.copy(out, scopeAt + scopeLen, q, q + rest);
    else for (let i = 0, o = scopeAt + scopeLen; i < rest; i++) out[o + i] = p[q + i] as number;
    q += keyLen + tail;
    if (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR) {
      if (k >= kEnd) return trustPacked;
      putU32(out, entryAt + 4 * k, x - REGION_HEAD_BYTES);
      k++;
    }
    x += size;
    prevEnd = offset + length;
    prevSeq = seq;
    prevScope = scope;
  }
  return trustPacked || (x === xEnd && k === kEnd);
}

/**
 * The entry block rows of a version-3 summary, checked at open: packed ends strictly rising to
 * `packed`, expanded ends strictly rising to `bodyBytes`, keyed ends never falling, ending at
 * `keyed`. False on any other shape (the hint is then not used).
 */
export function checkRows(rows: Buffer, n: number, packed: number, bodyBytes: number, keyed: number): boolean {
  let p = 0;
  let x = 0;
  let k = 0;
  for (let j = 0; j < n; j++) {
    const r = ENTRY_BLOCK_ROW_BYTES * j;
    const pe = rows.readUInt32LE(r);
    const xe = rows.readUInt32LE(r + 4);
    const ke = rows.readUInt32LE(r + 8);
    if (pe <= p || xe <= x || ke < k) return false;
    p = pe;
    x = xe;
    k = ke;
  }
  return p === packed && x === bodyBytes && k === keyed;
}
