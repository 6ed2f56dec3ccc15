/**
 * Segment header: two fixed-size copies, A and B, at the start of every segment file. A header
 * update overwrites the copy that is not current, so a write torn at any byte leaves the current
 * copy intact. Opening picks the valid copy with the highest (generation, headerSeq).
 */
import { checksum64 } from "./checksum.js";
import * as C from "./constants.js";
import { CorruptionError, NotSupportedError } from "../rules/errors.js";
import { readU64 } from "./u64.js";
import { assert } from "../rules/assert.js";
import { formatVersionWritten } from "./version-written.js";

/** The decoded content of one header copy. */
export interface SegmentHeader {
  segmentId: number;
  /** Bumped by two for every in-place rewrite (odd while rewriting, see engine/generations). */
  generation: number;
  /** Counts header writes; breaks ties between copies with equal generation. */
  headerSeq: number;
  flags: number;
  createdSeq: number;
  minSeq: number;
  maxSeq: number;
  /** The segment this one replaces (copy-on-write output), 0 for none. */
  replacesId: number;
  /** Once sealed: the file's length, where its last record ends (a cut-off record is then detectable). 0 while unsealed. */
  sealedBytes: number;
}

/** The u64 at `at` of the copy `view` spans; -1 beyond 2^53 - 1. */
function u64(view: DataView, at: number): number {
  return readU64(Buffer.from(view.buffer, view.byteOffset, view.byteLength), at);
}

/** Encodes one header copy of format `version` (default: the version new segments are written in) into a fresh 64-byte buffer, checksum included. */
export function encodeHeader(h: SegmentHeader, version: number = formatVersionWritten()): Uint8Array {
  assert(version >= C.FORMAT_VERSION_FRAMED && version <= C.FORMAT_VERSION, `a header is written in format 2 or ${C.FORMAT_VERSION} (${version})`);
  assertHeaderFields(h);
  const bytes = new Uint8Array(C.HEADER_COPY_BYTES);
  const view = new DataView(bytes.buffer);
  view.setUint32(C.H_MAGIC, C.HEADER_MAGIC, true);
  view.setUint16(C.H_VERSION, version, true);
  view.setUint16(C.H_FLAGS, h.flags, true);
  view.setUint32(C.H_SEGMENT_ID, h.segmentId, true);
  view.setUint32(C.H_HEADER_SEQ, h.headerSeq, true);
  view.setBigUint64(C.H_GENERATION, BigInt(h.generation), true);
  view.setBigUint64(C.H_CREATED_SEQ, BigInt(h.createdSeq), true);
  view.setBigUint64(C.H_MIN_SEQ, BigInt(h.minSeq), true);
  view.setBigUint64(C.H_MAX_SEQ, BigInt(h.maxSeq), true);
  view.setUint32(C.H_REPLACES_ID, h.replacesId, true);
  view.setUint32(C.H_SEALED_BYTES, h.sealedBytes, true);
  view.setBigUint64(C.H_CHECKSUM, checksum64(bytes, 0, C.H_CHECKSUM), true);
  // Paired check: what we wrote decodes to what we were given.
  const back = decodeHeader(bytes, 0);
  if (back === null || back.generation !== h.generation || back.segmentId !== h.segmentId) {
    throw new Error("header encode/decode mismatch");
  }
  return bytes;
}

/** Throws when a header field is not an integer in its field's range or a flag is unknown (before any byte is encoded). */
function assertHeaderFields(h: SegmentHeader): void {
  const ints: Array<[string, number, number]> = [
    ["segmentId", h.segmentId, 0xffffffff],
    ["headerSeq", h.headerSeq, 0xffffffff],
    ["replacesId", h.replacesId, 0xffffffff],
    ["sealedBytes", h.sealedBytes, 0xffffffff],
    ["flags", h.flags, C.HEADER_FLAGS_KNOWN],
    ["generation", h.generation, C.SEQ_MAX],
    ["createdSeq", h.createdSeq, C.SEQ_MAX],
    ["minSeq", h.minSeq, C.SEQ_MAX],
    ["maxSeq", h.maxSeq, C.SEQ_MAX],
  ];
  for (const [name, value, max] of ints) {
    if (!Number.isSafeInteger(value) || value < 0 || value > max) throw new Error(`header field ${name}=${value} out of range`);
  }
  if ((h.flags & ~C.HEADER_FLAGS_KNOWN) !== 0) throw new Error(`unknown header flags ${h.flags}`);
}

/** Decodes the header copy at `at`; null when its magic, version, flags or checksum is wrong. */
export function decodeHeader(bytes: Uint8Array, at: number): SegmentHeader | null {
  if (bytes.length < at + C.HEADER_COPY_BYTES) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, C.HEADER_COPY_BYTES);
  if (view.getUint32(C.H_MAGIC, true) !== C.HEADER_MAGIC) return null;
  const version = view.getUint16(C.H_VERSION, true);
  if (version < C.FORMAT_VERSION_MIN || version > C.FORMAT_VERSION) return null;
  const stored = view.getBigUint64(C.H_CHECKSUM, true);
  if (checksum64(bytes, at, at + C.H_CHECKSUM) !== stored) return null;
  const flags = view.getUint16(C.H_FLAGS, true);
  if ((flags & ~C.HEADER_FLAGS_KNOWN) !== 0) return null;
  const header: SegmentHeader = {
    segmentId: view.getUint32(C.H_SEGMENT_ID, true),
    headerSeq: view.getUint32(C.H_HEADER_SEQ, true),
    generation: u64(view, C.H_GENERATION),
    flags,
    createdSeq: u64(view, C.H_CREATED_SEQ),
    minSeq: u64(view, C.H_MIN_SEQ),
    maxSeq: u64(view, C.H_MAX_SEQ),
    replacesId: view.getUint32(C.H_REPLACES_ID, true),
    sealedBytes: view.getUint32(C.H_SEALED_BYTES, true),
  };
  if (header.generation < 0 || header.createdSeq < 0 || header.minSeq < 0 || header.maxSeq < 0) return null;
  return header;
}

/** Which copy is current, and the header it holds. */
export interface HeaderChoice {
  header: SegmentHeader;
  /** 0 for copy A, 1 for copy B. */
  copy: 0 | 1;
  /** The format version of the current copy; absent means FORMAT_VERSION (written by this code). */
  version?: number;
}

/** The version field of the copy at `at` (meaningful only for a copy decodeHeader accepted). */
function versionAt(bytes: Uint8Array, at: number): number {
  return new DataView(bytes.buffer, bytes.byteOffset + at, C.HEADER_COPY_BYTES).getUint16(C.H_VERSION, true);
}

/** The format version of a segment whose current header copy is `choice`. */
export function formatOf(choice: HeaderChoice): number {
  return choice.version ?? C.FORMAT_VERSION;
}

/**
 * The version a rewrite of this segment's header (a seal, an in-place compaction, a copy of its
 * records) carries: its own, but 2 for a format-1 segment (whose records read the same in 2, and
 * whose file takes no appends any more). Never a different record frame than its records have.
 */
export function rewrittenVersion(choice: HeaderChoice): number {
  return Math.max(formatOf(choice), C.FORMAT_VERSION_FRAMED);
}

/** The choice of a header copy just written in format `version` (version absent when it is FORMAT_VERSION). */
export function choiceOf(header: SegmentHeader, copy: 0 | 1, version: number): HeaderChoice {
  return version === C.FORMAT_VERSION ? { header, copy } : { header, copy, version };
}

/** True when segments of this header's version frame their unsealed records in groups. */
export function isFramed(choice: HeaderChoice): boolean {
  return (choice.version ?? C.FORMAT_VERSION) >= C.FORMAT_VERSION_FRAMED;
}

/**
 * Throws NotSupportedError when the copy at `at` is a whole, checksummed header of a format
 * version this code does not read (a newer engram wrote it): that is not corruption, and the
 * message says so.
 */
function refuseUnknownVersion(bytes: Uint8Array, at: number, segmentId: number): void {
  if (bytes.length < at + C.HEADER_COPY_BYTES) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, C.HEADER_COPY_BYTES);
  if (view.getUint32(C.H_MAGIC, true) !== C.HEADER_MAGIC) return;
  if (checksum64(bytes, at, at + C.H_CHECKSUM) !== view.getBigUint64(C.H_CHECKSUM, true)) return;
  const version = view.getUint16(C.H_VERSION, true);
  if (version >= C.FORMAT_VERSION_MIN && version <= C.FORMAT_VERSION) return;
  throw new NotSupportedError(
    `segment ${segmentId} was written in format version ${version}; this engram reads versions ${C.FORMAT_VERSION_MIN} to ${C.FORMAT_VERSION}: open the store with the engram release that wrote it (nothing was changed)`,
  );
}

/**
 * Picks the valid copy with the highest (generation, headerSeq) from the first 128 bytes of a
 * segment. Throws CorruptionError when neither copy is valid.
 */
export function chooseHeader(bytes: Uint8Array, segmentId: number): HeaderChoice {
  const a = decodeHeader(bytes, C.HEADER_A_OFFSET);
  const b = decodeHeader(bytes, C.HEADER_B_OFFSET);
  if (a === null && b === null) {
    refuseUnknownVersion(bytes, C.HEADER_A_OFFSET, segmentId);
    refuseUnknownVersion(bytes, C.HEADER_B_OFFSET, segmentId);
    throw new CorruptionError(segmentId, 0, "both header copies are invalid");
  }
  const pickB = a === null || (b !== null && (b.generation > a.generation || (b.generation === a.generation && b.headerSeq > a.headerSeq)));
  const at = pickB ? C.HEADER_B_OFFSET : C.HEADER_A_OFFSET;
  const version = versionAt(bytes, at);
  const header = (pickB ? b : a) as SegmentHeader;
  const choice: HeaderChoice = { header, copy: pickB ? 1 : 0 };
  if (version !== C.FORMAT_VERSION) choice.version = version;
  return choice;
}

/** The file offset where the next header write goes: the copy that is not current. */
export function nextHeaderOffset(current: HeaderChoice): number {
  return current.copy === 0 ? C.HEADER_B_OFFSET : C.HEADER_A_OFFSET;
}
