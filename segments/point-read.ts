/**
 * Point reads: one pread of a record at a known offset, then its length, checksum and the fields
 * the reader expects (docs/FORMAT.md "Point reads"). Returns the record or the first failed check.
 */
import { readAt } from "./io.js";
import { formatVersionWritten } from "./version-written.js";
import { decodeRecord, isRecord, type DecodedRecord, type RecordFault } from "./record.js";

/** What a point read expects to find; any field left out is not compared. */
export interface RecordExpectation {
  type?: number;
  scope?: string;
  key?: string;
  generation?: number;
  seq?: number;
}

/** Why a point read refused the bytes it found. */
export type PointReadFault = RecordFault | "type" | "scope" | "key" | "generation" | "seq";

/** Compares a decoded record with an expectation; returns the first field that differs, or null. */
export function mismatch(record: DecodedRecord, expect: RecordExpectation): PointReadFault | null {
  if (expect.type !== undefined && record.type !== expect.type) return "type";
  if (expect.scope !== undefined && record.scope !== expect.scope) return "scope";
  if (expect.key !== undefined && record.key !== expect.key) return "key";
  if (expect.generation !== undefined && record.generation !== expect.generation) return "generation";
  if (expect.seq !== undefined && record.seq !== expect.seq) return "seq";
  return null;
}

/** Reads `length` bytes at `offset` with one pread (fault point `io:read`); a short read returns fewer bytes. */
export function preadSync(fd: number, offset: number, length: number): Uint8Array {
  const buf = Buffer.allocUnsafe(length);
  const n = readAt(fd, buf, 0, length, offset);
  return n === length ? buf : buf.subarray(0, n);
}

/**
 * Point read: one pread of the record at `offset` of a segment of format `version` (its header's),
 * then length, checksum and the expected fields.
 * Returns the record, or the name of the first check that failed.
 */
export function readRecordAt(fd: number, offset: number, length: number, expect: RecordExpectation, version: number = formatVersionWritten()): DecodedRecord | PointReadFault {
  const bytes = preadSync(fd, offset, length);
  return checkRecordBytes(bytes, length, expect, true, version);
}

/**
 * Decodes a record read at its offset — the `length` bytes (or fewer: a short read) at `at` of
 * `bytes` — and checks it against an expectation. With `owned` (the point read's fresh buffer,
 * handed to no one else) a binary value is a view of `bytes`; without (bytes shared with a cache)
 * it is a copy.
 */
export function checkRecordBytes(bytes: Uint8Array, length: number, expect: RecordExpectation, owned = true, version: number = formatVersionWritten(), at = 0): DecodedRecord | PointReadFault {
  const end = at === 0 ? bytes.length : Math.min(bytes.length, at + length);
  const got = decodeRecord(bytes, at, end, owned ? "view" : true, expect, version); // expected names are reused, not decoded again, when they match
  if (!isRecord(got)) return got;
  if (got.length !== length) return "length";
  return mismatch(got, expect) ?? got;
}
