/**
 * Sequential scan of a segment's records. It tells three endings apart:
 *  - clean: the records end where the file (or its zeroed preallocation) ends;
 *  - torn tail: the last record is incomplete or fails its checksum and nothing valid follows it
 *    (a crash during the final append) — the caller truncates it;
 *  - corruption: a record fails but a valid record follows it, or a sealed segment fails anywhere.
 *    That is never a crash artefact, so it is a CorruptionError, never skipped silently.
 * Records flagged RF_IN_BATCH in an unsealed segment are held back until their BATCH_COMMIT; a
 * batch without one at the end is part of the torn tail (the batch is all-or-nothing).
 * Unsealed segments of format 2 and later are group-framed (group.ts): they are scanned group by group, and a
 * failing group is a torn tail unless a later valid group was written after it was durable.
 */
import * as C from "./constants.js";
import { batchOpCountOf } from "./record-kinds.js";
import { CorruptionError } from "../rules/errors.js";
import { assert } from "../rules/assert.js";
import { checkRecordAt, decodeRecord, isRecord, probeRecord, recordTypeAt, type DecodedRecord, type RecordFault } from "./record.js";
import { firstBadSum, SUM_SPAN_BYTES_MAX } from "./checksum.js";
import { isSyncMark, readGroupFrame, type GroupFault } from "./group.js";
import { isLeanFrame } from "./version-written.js";

/** How a scan ended. */
export interface ScanEnd {
  /** Offset just past the last record delivered (the truncation point when torn). */
  end: number;
  /** Set when the tail was torn: where and why. */
  torn: { offset: number; reason: GroupFault | "uncommitted-batch" } | null;
  /** Records delivered. */
  records: number;
  /**
   * Group-framed scans only: the offset up to which the frames read prove the segment durable
   * (the highest syncedEnd, or just past a sync mark). Data beyond it is not proven durable.
   */
  covered?: number;
}

/** Called for each record in file order (batch records only once committed). */
export type RecordVisitor = (record: DecodedRecord, offset: number) => void;

const ZERO_CHUNK = new Uint8Array(64 * 1024);

/** Offset of the first non-zero byte in bytes[from, end), or end. memcmp-speed over zeroed space. */
function firstNonZero(bytes: Uint8Array, from: number, end: number): number {
  let at = from;
  while (at < end) {
    const n = Math.min(ZERO_CHUNK.length, end - at);
    if (Buffer.compare(bytes.subarray(at, at + n), ZERO_CHUNK.subarray(0, n)) === 0) {
      at += n;
      continue;
    }
    for (let i = at; i < at + n; i++) if (bytes[i] !== 0) return i;
  }
  return end;
}

/** True when some offset in (from, end) holds a record of format `version` that passes every check. */
export function validRecordAfter(bytes: Uint8Array, from: number, end: number, version: number): boolean {
  for (let at = firstNonZero(bytes, from, end); at < end; at = firstNonZero(bytes, at + 1, end)) {
    if (typeof checkRecordAt(bytes, at, end, version) === "number") return true;
  }
  return false;
}

/**
 * Scans bytes[DATA_START, end) of segment `segmentId`. Throws CorruptionError on corruption;
 * returns how the records ended otherwise. With `withValues` false, PUT values are checked by the
 * checksum but not materialized (value: null). `version` is the segment's format version (its
 * header's): it decides the record frame, and from 2 on the records of an unsealed segment come
 * in group frames. GROUP records are never delivered to `visit`.
 */
export function scanRecords(bytes: Uint8Array, segmentId: number, sealed: boolean, visit: RecordVisitor, withValues: boolean, version: number, from: number = C.DATA_START): ScanEnd {
  // I2: recovery reads a prefix of the commit sequence: only a torn tail is cut; damage before it is CorruptionError.
  if (version >= C.FORMAT_VERSION_FRAMED && !sealed) return scanFramed(bytes, segmentId, visit, withValues, from, version);
  if (from !== C.DATA_START) throw new Error(`segment ${segmentId}: only a group-framed unsealed scan starts past the header (at ${from})`);
  const end = bytes.length;
  let at = C.DATA_START;
  let records = 0;
  let batch: Array<{ record: DecodedRecord; offset: number }> = [];
  let batchStart = -1;
  while (at < end) {
    const got = decodeRecord(bytes, at, end, withValues, undefined, version);
    if (!isRecord(got)) return finishFault(bytes, segmentId, sealed, at, got, batchStart, records, version);
    if (got.type === C.RecordType.GROUP) {
      at += got.length; // a sealed format-2 segment keeps its frames until compaction drops them
      continue;
    }
    if (!sealed && (got.flags & C.RF_IN_BATCH) !== 0) {
      if (batchStart < 0) batchStart = at;
      batch.push({ record: got, offset: at });
    } else if (!sealed && got.type === C.RecordType.BATCH_COMMIT) {
      if (batch.length !== batchOpCountOf(got)) {
        throw new CorruptionError(segmentId, at, `batch commit counts ${batchOpCountOf(got)} records, found ${batch.length}`);
      }
      for (const b of batch) visit(b.record, b.offset);
      records += batch.length;
      visit(got, at);
      records += 1;
      batch = [];
      batchStart = -1;
    } else {
      if (batchStart >= 0) throw new CorruptionError(segmentId, at, "record inside an uncommitted batch");
      visit(got, at);
      records += 1;
    }
    at += got.length;
  }
  if (batchStart >= 0) return { end: batchStart, torn: { offset: batchStart, reason: "uncommitted-batch" }, records };
  return { end: at, torn: null, records };
}

/** Records one walkSealed window checks together (and the window's byte span: SUM_SPAN_BYTES_MAX). */
const WALK_WINDOW_RECORDS = 4096;

/**
 * Sealed segments only: visits each record's offset, length and type after checking its fixed
 * fields and checksum, decoding nothing (compaction copies records verbatim). Any fault is
 * corruption, as in scanRecords with `sealed`. The records are taken in windows (up to
 * WALK_WINDOW_RECORDS records within SUM_SPAN_BYTES_MAX bytes): each window's fixed fields are
 * probed, then all its checksums checked in one firstBadSum call, and only then are its records
 * visited — no record reaches `visit` before its checksum passed, and the first fault in file
 * order is the one reported. Returns the file's end (where the walk ended).
 */
export function walkSealed(bytes: Uint8Array, segmentId: number, version: number, visit: (offset: number, length: number, type: number) => void): number {
  const end = walkSealedPiece({ bytes, base: 0, fileEnd: bytes.length }, C.DATA_START, segmentId, version, visit);
  assert(end === bytes.length, `a whole-file walk ends at the file's end (${end} of ${bytes.length})`);
  return end;
}

/**
 * A piece of a sealed segment read into memory: bytes[i] is the file's byte at offset base + i;
 * the file is fileEnd bytes long (a piece that reaches it is the last one).
 */
export interface SealedPiece {
  bytes: Uint8Array;
  base: number;
  fileEnd: number;
}

/**
 * walkSealed over one piece of a sealed segment read in pieces (compaction streams its sources,
 * compact-13): visits, with file offsets, every record from file offset `from` that ends inside
 * the piece, checked as walkSealed checks them, and returns the file offset where it stopped —
 * the start of the first record the piece holds only in part (the next piece starts there), or
 * the file's end. Only the last piece (base + bytes.length === fileEnd) reports a record cut off
 * at its end, as corruption; any other fault is corruption in every piece.
 */
export function walkSealedPiece(piece: SealedPiece, from: number, segmentId: number, version: number, visit: (offset: number, length: number, type: number) => void): number {
  const { bytes, base } = piece;
  const last = base + bytes.length === piece.fileEnd;
  assert(base + bytes.length <= piece.fileEnd && from >= base && from <= base + bytes.length, `piece [${base}, ${base + bytes.length}) of a ${piece.fileEnd}-byte file holds ${from}`);
  const sumBytes = isLeanFrame(version) ? C.RECORD_V3_CHECKSUM_BYTES : C.RECORD_CHECKSUM_BYTES;
  let at = from - base; // positions in bytes from here on
  // Per call, not per module: a visitor may walk another segment.
  const walkStarts = new Int32Array(WALK_WINDOW_RECORDS);
  const walkLengths = new Int32Array(WALK_WINDOW_RECORDS);
  while (at < bytes.length) {
    const windowFrom = at;
    let n = 0;
    let fault: RecordFault | null = null;
    while (at < bytes.length && n < WALK_WINDOW_RECORDS) {
      const length = probeRecord(bytes, at, bytes.length, version);
      if (typeof length !== "number") {
        fault = length;
        break;
      }
      if (at + length - windowFrom > SUM_SPAN_BYTES_MAX) {
        if (n > 0) break; // the next window takes it
        const checked = checkRecordAt(bytes, at, bytes.length, version); // one record over the span: hashed alone
        if (typeof checked !== "number") throw new CorruptionError(segmentId, base + at, `record ${checked} inside a sealed segment`);
        visit(base + at, length, recordTypeAt(bytes, at, version));
        at += length;
        break;
      }
      walkStarts[n] = at;
      walkLengths[n] = length;
      n += 1;
      at += length;
    }
    const bad = firstBadSum(bytes, windowFrom, at, walkStarts, walkLengths, n, sumBytes);
    if (bad >= 0) throw new CorruptionError(segmentId, base + (walkStarts[bad] as number), "record checksum inside a sealed segment");
    const goesOn = fault === "short" && !last; // the record goes on past this piece: the next piece starts with it
    if (fault !== null && !goesOn) throw new CorruptionError(segmentId, base + at, `record ${fault} inside a sealed segment`);
    for (let i = 0; i < n; i++) {
      const off = walkStarts[i] as number;
      visit(base + off, walkLengths[i] as number, recordTypeAt(bytes, off, version));
    }
    if (goesOn) return base + at;
  }
  return base + at;
}

/**
 * A sealed segment must end exactly where its header says (sealedBytes): records cut off at a
 * record boundary leave a scan that ends cleanly, and only this length check can tell.
 */
export function assertSealedEnd(segmentId: number, sealedBytes: number, scannedEnd: number, fileBytes: number): void {
  if (scannedEnd !== sealedBytes || fileBytes !== sealedBytes) {
    throw new CorruptionError(segmentId, scannedEnd, `sealed segment holds ${fileBytes} bytes, records end at ${scannedEnd}, header says ${sealedBytes}`);
  }
}

/**
 * How a record-by-record scan ends at a fault at `at`: in an unsealed segment a torn tail (cut at
 * the open batch or the record) when no valid record follows it (a short record always is);
 * otherwise, and anywhere in a sealed segment, CorruptionError (I2).
 */
function finishFault(
  bytes: Uint8Array,
  segmentId: number,
  sealed: boolean,
  at: number,
  fault: RecordFault,
  batchStart: number,
  records: number,
  version: number,
): ScanEnd {
  const end = bytes.length;
  const cut = batchStart >= 0 ? batchStart : at;
  if (fault === "empty") {
    // Zeroed (preallocated) space: a clean end if everything after it is zero too.
    if (!sealed && firstNonZero(bytes, at, end) === end) {
      return batchStart >= 0 ? { end: cut, torn: { offset: cut, reason: "uncommitted-batch" }, records } : { end: at, torn: null, records };
    }
    // Zeros then stray bytes with no valid record among them: a final append whose later pages
    // reached the disk before its earlier ones (power loss). Only a valid record after the gap
    // proves that the zeros sit in the middle of committed data.
    if (!sealed && !validRecordAfter(bytes, at + 1, end, version)) return { end: cut, torn: { offset: at, reason: "empty" }, records };
    throw new CorruptionError(segmentId, at, sealed ? "zero bytes inside a sealed segment" : "zero length followed by valid records");
  }
  if (sealed) throw new CorruptionError(segmentId, at, `record ${fault} inside a sealed segment`);
  // A checksum failure means the fixed fields were self-consistent, so the record's extent is
  // known: a "valid record" inside it is value bytes (a value may embed an encoded record), not a
  // record boundary, and must not turn a torn final append into corruption. Search after it.
  const skip = fault === "checksum" ? (probeRecord(bytes, at, end, version) as number) : 1;
  if (fault !== "short" && validRecordAfter(bytes, at + skip, end, version)) {
    throw new CorruptionError(segmentId, at, `record ${fault} with valid records after it`);
  }
  return { end: cut, torn: { offset: at, reason: fault }, records };
}

/**
 * Format 2, unsealed: group after group from `from` (DATA_START, or a group boundary up to which
 * a hint proved the segment durable: engine/recovery.ts). Each group's frame and body checksum are
 * checked first; its records are then decoded strictly (a record that fails inside a group whose
 * checksum passed is corruption). The first group that fails ends the scan (finishGroupFault).
 */
function scanFramed(bytes: Uint8Array, segmentId: number, visit: RecordVisitor, withValues: boolean, from: number, version: number): ScanEnd {
  const end = bytes.length;
  let at = from;
  let records = 0;
  let covered: number = from;
  while (at < end) {
    const frame = readGroupFrame(bytes, at, end, version);
    if (typeof frame === "string") return { ...finishGroupFault(bytes, segmentId, at, frame, records, version), covered };
    records += scanGroupBody(bytes, segmentId, frame.bodyStart, frame.bodyEnd, visit, withValues, version);
    covered = Math.max(covered, isSyncMark(frame, at) ? frame.bodyEnd : frame.syncedEnd);
    at = frame.bodyEnd;
  }
  return { end: at, torn: null, records, covered };
}

/** Delivers the records of one verified group body; returns how many. Any fault is corruption. */
function scanGroupBody(bytes: Uint8Array, segmentId: number, from: number, to: number, visit: RecordVisitor, withValues: boolean, version: number): number {
  const view = bytes.subarray(0, to);
  let batch: Array<{ record: DecodedRecord; offset: number }> = [];
  let delivered = 0;
  for (let at = from; at < to; ) {
    const got = decodeRecord(view, at, to, withValues, undefined, version);
    if (!isRecord(got)) throw new CorruptionError(segmentId, at, `record ${got} inside a group whose checksum passed`);
    if (got.type === C.RecordType.GROUP) throw new CorruptionError(segmentId, at, "group frame inside a group");
    if ((got.flags & C.RF_IN_BATCH) !== 0) {
      batch.push({ record: got, offset: at });
    } else if (got.type === C.RecordType.BATCH_COMMIT) {
      if (batch.length !== batchOpCountOf(got)) throw new CorruptionError(segmentId, at, `batch commit counts ${batchOpCountOf(got)} records, found ${batch.length}`);
      for (const b of batch) visit(b.record, b.offset);
      delivered += batch.length + 1;
      visit(got, at);
      batch = [];
    } else {
      if (batch.length > 0) throw new CorruptionError(segmentId, at, "record inside an uncommitted batch");
      visit(got, at);
      delivered += 1;
    }
    at += got.length;
  }
  if (batch.length > 0) throw new CorruptionError(segmentId, from, "a group ends inside a batch");
  return delivered;
}

/**
 * The group at `at` failed. Zeros to the end of the file (however few): a clean end. Otherwise the group is a
 * torn tail — the unacknowledged last group(s), whose pages may have reached the disk in any
 * order — unless some later valid group says the segment was durable past `at` when it was
 * written: then the failing bytes were committed, and that is corruption.
 */
function finishGroupFault(bytes: Uint8Array, segmentId: number, at: number, fault: GroupFault, records: number, version: number): ScanEnd {
  const end = bytes.length;
  // Zeros to the end: a clean end. Fewer than 4 of them are "short" to the frame decoder, yet no
  // group fits there (a frame is GROUP_FRAME_BYTES): the writer left the segment's last bytes unused.
  if ((fault === "empty" || (fault === "short" && end - at < 4)) && firstNonZero(bytes, at, end) === end) return { end: at, torn: null, records };
  const witness = durableGroupAfter(bytes, at, end, version);
  if (witness >= 0) {
    throw new CorruptionError(segmentId, damageIn(bytes, at, end, version), `group at ${at}: ${fault}, although the group at ${witness} was written after it was durable`);
  }
  return { end: at, torn: { offset: at, reason: fault }, records };
}

/** Offset of a valid group after `at` whose frame says the segment was durable past `at`, or -1. */
export function durableGroupAfter(bytes: Uint8Array, at: number, end: number, version: number): number {
  for (let p = firstNonZero(bytes, at + 1, end); p < end; p = firstNonZero(bytes, p + 1, end)) {
    const frame = readGroupFrame(bytes, p, end, version);
    if (typeof frame !== "string" && frame.syncedEnd > at) return p;
  }
  return -1;
}

/**
 * Where the damage of the failing group at `at` is: the first record of its body that fails its
 * own checks when the frame itself is intact (a body checksum failure), else the frame.
 */
function damageIn(bytes: Uint8Array, at: number, end: number, version: number): number {
  const frame = decodeRecord(bytes, at, end, false, undefined, version);
  if (!isRecord(frame) || frame.type !== C.RecordType.GROUP) return at;
  const bodyBytes = Number(Buffer.from((frame.value as Uint8Array).buffer, (frame.value as Uint8Array).byteOffset, C.GROUP_VALUE_BYTES).readBigUInt64LE(0));
  const bodyEnd = Math.min(end, at + frame.length + bodyBytes);
  for (let p = at + frame.length; p < bodyEnd; ) {
    const got = decodeRecord(bytes, p, bodyEnd, false, undefined, version);
    if (!isRecord(got)) return p;
    p += got.length;
  }
  return at;
}
