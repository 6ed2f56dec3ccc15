/**
 * Segment files on disk: naming, creation with both header copies, header rewrites (A/B), point
 * reads that check what they read, and directory fsync. Pure I/O: no policy lives here.
 * Files are created 0600 and directories 0700 because memories can hold personal data.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "./constants.js";
import { chooseHeader, encodeHeader, nextHeaderOffset, type HeaderChoice, type SegmentHeader } from "./header.js";
import { decodeRecord, isRecord, type DecodedRecord, type RecordFault } from "./record.js";
import * as io from "./io.js";
import type { FaultPoint } from "../rules/types.js";

/** Permission bits of every file engram creates. */
export const FILE_MODE = 0o600;
/** Permission bits of every directory engram creates. */
export const DIR_MODE = 0o700;

const NAME = /^(\d{8,10})\.seg$/;

/** "00000042.seg" for segment 42. */
export function segmentFileName(id: number): string {
  return `${String(id).padStart(8, "0")}.seg`;
}

/** "00000042.journal": the redo journal of an in-place compaction of segment 42. */
export function journalFileName(id: number): string {
  return `${String(id).padStart(8, "0")}.journal`;
}

/** "00000042.seg.tmp": copy-on-write output not yet published. */
export function tmpFileName(id: number): string {
  return `${segmentFileName(id)}.tmp`;
}

/** The segment id named by a file name, or null when the name is not a segment's. */
export function parseSegmentFileName(name: string): number | null {
  const m = NAME.exec(name);
  if (m === null) return null;
  // Ids are u32 (header field) and names are canonical: "000000042.seg" is not segment 42.
  const id = Number(m[1]);
  return id <= 0xffffffff && segmentFileName(id) === name ? id : null;
}

/** fsyncs a directory so that creates, renames and unlinks in it are durable. */
export function fsyncDir(dir: string): void {
  io.syncDir("io:dir-sync", dir);
}

/** Removes a file and ignores any error: cleanup after another failure, which is what gets reported. */
export function unlinkQuietly(file: string): void {
  try {
    io.unlink("io:unlink", file);
  } catch {
    // the first failure is the one the caller reports
  }
}

/**
 * Creates segment `header.segmentId` in `dir` with both header copies and `sizeBytes` of
 * zeroed, preallocated space, and returns its open fd (read/write). The file is written as
 * NNNNNNNN.seg.tmp, fdatasynced, renamed and the directory fsynced, so a crash never leaves a
 * segment file with a torn header (recovery deletes *.tmp).
 */
export function createSegmentFile(dir: string, header: SegmentHeader, sizeBytes: number): number {
  const file = path.join(dir, segmentFileName(header.segmentId));
  const tmp = path.join(dir, tmpFileName(header.segmentId));
  if (fs.existsSync(file)) throw new Error(`EEXIST: segment file ${file} already exists`);
  const fd = io.openFile("io:create", tmp, "wx+", FILE_MODE);
  let renamed = false;
  try {
    const bytes = encodeHeader(header);
    io.writeAllSync("io:create", fd, [bytes], C.HEADER_A_OFFSET);
    io.writeAllSync("io:create", fd, [bytes], C.HEADER_B_OFFSET);
    io.truncate("io:create", fd, Math.max(sizeBytes, C.DATA_START));
    io.datasyncSync("io:create", fd);
    io.rename("io:rename", tmp, file);
    renamed = true;
    fsyncDir(dir);
  } catch (err) {
    // Nothing was acknowledged on this file: leave neither an fd nor an orphan .seg/.seg.tmp.
    io.closeQuietly(fd);
    unlinkQuietly(renamed ? file : tmp);
    throw err;
  }
  return fd;
}

/** Reads both header copies of an open segment and picks the current one. */
export function readHeader(fd: number, segmentId: number): HeaderChoice {
  const bytes = new Uint8Array(C.DATA_START);
  const n = fs.readSync(fd, bytes, 0, C.DATA_START, 0);
  return chooseHeader(bytes.subarray(0, n), segmentId);
}

/**
 * Writes `next` over the copy that is not current and fdatasyncs; the current copy stays intact
 * until that write is durable, so a tear at any byte still opens. Returns the new choice.
 */
export function writeHeader(fd: number, current: HeaderChoice, next: SegmentHeader, point: FaultPoint = "io:seal"): HeaderChoice {
  const header = { ...next, headerSeq: current.header.headerSeq + 1 };
  const bytes = encodeHeader(header);
  const at = nextHeaderOffset(current);
  io.writeAllSync(point, fd, [bytes], at);
  io.datasyncSync(point, fd);
  // The copy just written carries FORMAT_VERSION (version absent). A sealed segment's records read
  // the same in every version, so a format-1 segment may be resealed or rewritten this way.
  return { header, copy: at === C.HEADER_A_OFFSET ? 0 : 1 };
}

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

/** Reads `length` bytes at `offset` with one pread; a short read returns fewer bytes. */
export function preadSync(fd: number, offset: number, length: number): Uint8Array {
  const buf = Buffer.allocUnsafe(length);
  const n = fs.readSync(fd, buf, 0, length, offset);
  return n === length ? buf : buf.subarray(0, n);
}

/**
 * Point read: one pread of the record at `offset`, then length, checksum and the expected fields.
 * Returns the record, or the name of the first check that failed.
 */
export function readRecordAt(fd: number, offset: number, length: number, expect: RecordExpectation): DecodedRecord | PointReadFault {
  const bytes = preadSync(fd, offset, length);
  return checkRecordBytes(bytes, length, expect);
}

/** Decodes a record read at its offset and checks it against an expectation. */
export function checkRecordBytes(bytes: Uint8Array, length: number, expect: RecordExpectation): DecodedRecord | PointReadFault {
  const got = decodeRecord(bytes, 0, bytes.length);
  if (!isRecord(got)) return got;
  if (got.length !== length) return "length";
  return mismatch(got, expect) ?? got;
}

/** Reads a whole file into memory (segments are bounded by segmentBytes). */
export function readWholeFile(fd: number): Uint8Array {
  const size = fs.fstatSync(fd).size;
  const buf = Buffer.allocUnsafe(size);
  let done = 0;
  while (done < size) {
    const n = fs.readSync(fd, buf, done, size - done, done);
    if (n === 0) break;
    done += n;
  }
  return done === size ? buf : buf.subarray(0, done);
}
