/**
 * Sequential scan of a segment's records. It tells three endings apart:
 *  - clean: the records end where the file (or its zeroed preallocation) ends;
 *  - torn tail: the last record is incomplete or fails its checksum and nothing valid follows it
 *    (a crash during the final append) — the caller truncates it;
 *  - corruption: a record fails but a valid record follows it, or a sealed segment fails anywhere.
 *    That is never a crash artefact, so it is a CorruptionError, never skipped silently.
 * Records flagged RF_IN_BATCH in an unsealed segment are held back until their BATCH_COMMIT; a
 * batch without one at the end is part of the torn tail (the batch is all-or-nothing).
 */
import * as C from "./constants.js";
import { CorruptionError } from "../rules/errors.js";
import { checkRecordAt, decodeRecord, isRecord, probeRecord, recordTypeAt, type DecodedRecord, type RecordFault } from "./record.js";
import { checksum64 } from "./checksum.js";

/** How a scan ended. */
export interface ScanEnd {
  /** Offset just past the last record delivered (the truncation point when torn). */
  end: number;
  /** Set when the tail was torn: where and why. */
  torn: { offset: number; reason: RecordFault | "uncommitted-batch" } | null;
  /** Records delivered. */
  records: number;
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

/** True when some offset in (from, end) holds a record that passes every check. */
export function validRecordAfter(bytes: Uint8Array, from: number, end: number): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  for (let at = firstNonZero(bytes, from, end); at < end; at = firstNonZero(bytes, at + 1, end)) {
    const length = probeRecord(bytes, at, end);
    if (typeof length !== "number") continue;
    const sumAt = at + length - C.RECORD_CHECKSUM_BYTES;
    if (checksum64(bytes, at, sumAt) === view.getBigUint64(sumAt, true)) return true;
  }
  return false;
}

/**
 * Scans bytes[DATA_START, end) of segment `segmentId`. Throws CorruptionError on corruption;
 * returns how the records ended otherwise. With `withValues` false, PUT values are checked by the
 * checksum but not materialized (value: null).
 */
export function scanRecords(bytes: Uint8Array, segmentId: number, sealed: boolean, visit: RecordVisitor, withValues = true): ScanEnd {
  const end = bytes.length;
  let at = C.DATA_START;
  let records = 0;
  let batch: Array<{ record: DecodedRecord; offset: number }> = [];
  let batchStart = -1;
  while (at < end) {
    const got = decodeRecord(bytes, at, end, withValues);
    if (!isRecord(got)) return finishFault(bytes, segmentId, sealed, at, got, batchStart, records);
    if (!sealed && (got.flags & C.RF_IN_BATCH) !== 0) {
      if (batchStart < 0) batchStart = at;
      batch.push({ record: got, offset: at });
    } else if (!sealed && got.type === C.RecordType.BATCH_COMMIT) {
      if (batch.length !== got.generation) {
        throw new CorruptionError(segmentId, at, `batch commit counts ${got.generation} records, found ${batch.length}`);
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

/**
 * Sealed segments only: visits each record's offset, length and type after checking its fixed
 * fields and checksum, decoding nothing (compaction copies records verbatim). Any fault is
 * corruption, as in scanRecords with `sealed`.
 */
export function walkSealed(bytes: Uint8Array, segmentId: number, visit: (offset: number, length: number, type: number) => void): ScanEnd {
  let at = C.DATA_START;
  let records = 0;
  while (at < bytes.length) {
    const length = checkRecordAt(bytes, at, bytes.length);
    if (typeof length !== "number") throw new CorruptionError(segmentId, at, `record ${length} inside a sealed segment`);
    visit(at, length, recordTypeAt(bytes, at));
    records += 1;
    at += length;
  }
  return { end: at, torn: null, records };
}

/**
 * A sealed segment must end exactly where its header says (sealedBytes): records cut off at a
 * record boundary leave a scan that ends cleanly, and only this length check can tell.
 */
export function assertSealedEnd(segmentId: number, sealedBytes: number, end: ScanEnd, fileBytes: number): void {
  if (end.end !== sealedBytes || fileBytes !== sealedBytes) {
    throw new CorruptionError(segmentId, end.end, `sealed segment holds ${fileBytes} bytes, records end at ${end.end}, header says ${sealedBytes}`);
  }
}

function finishFault(
  bytes: Uint8Array,
  segmentId: number,
  sealed: boolean,
  at: number,
  fault: RecordFault,
  batchStart: number,
  records: number,
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
    if (!sealed && !validRecordAfter(bytes, at + 1, end)) return { end: cut, torn: { offset: at, reason: "empty" }, records };
    throw new CorruptionError(segmentId, at, sealed ? "zero bytes inside a sealed segment" : "zero length followed by valid records");
  }
  if (sealed) throw new CorruptionError(segmentId, at, `record ${fault} inside a sealed segment`);
  // A checksum failure means the fixed fields were self-consistent, so the record's extent is
  // known: a "valid record" inside it is value bytes (a value may embed an encoded record), not a
  // record boundary, and must not turn a torn final append into corruption. Search after it.
  const skip = fault === "checksum" ? (probeRecord(bytes, at, end) as number) : 1;
  if (fault !== "short" && validRecordAfter(bytes, at + skip, end)) {
    throw new CorruptionError(segmentId, at, `record ${fault} with valid records after it`);
  }
  return { end: cut, torn: { offset: at, reason: fault }, records };
}
