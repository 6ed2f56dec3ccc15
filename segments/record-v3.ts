/**
 * The version-3 record frame (docs/FORMAT.md "Record, version 3"): the same fields as the
 * version-2 frame (record.ts), each number an unsigned LEB128 varint in its shortest form, type
 * and flags in one byte, no reserved word, and a 4-byte checksum (the low half of the record's
 * xxh64). A typical PUT's frame is ~16 bytes instead of 48. The length comes first and a zero
 * first byte is length 0, so zeroed, preallocated space still reads as unwritten; the checksum
 * covers content only, so compaction may copy a record verbatim.
 *
 * A GROUP frame is the one exception to "shortest form": its seq and generation (syncedEnd) are
 * always written in 8 varint bytes, so the frame has one size (GROUP_FRAME_BYTES_V3) that the
 * commit log reserves before it knows either number.
 */
import { checksumLow32 } from "./checksum.js";
import * as C from "./constants.js";
import { assertInput, asBuffer, decodePayload, utf8, utf8Length, valueLength, writeName, type DecodedRecord, type ExpectedNames, type RecordFault, type RecordInput } from "./record-common.js";

/** Varint bytes a safe integer >= 0 takes in its shortest form (1–8: 2^53 − 1 needs 8). */
export function varintBytes(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x20_0000) return 3;
  if (v < 0x1000_0000) return 4;
  let n = 4;
  for (let rest = Math.floor(v / 0x1000_0000); rest > 0; rest = Math.floor(rest / 0x80)) n++;
  return n;
}

/** Writes the safe integer `v` >= 0 as a varint at buf[at..] in `width` bytes (its shortest form, or padded); returns the end. */
function putVarint(buf: Uint8Array, v: number, at: number, width: number): number {
  if (width === 1) {
    buf[at] = v; // most lengths, generations and expiry-less zeros: one store
    return at + 1;
  }
  let rest = v;
  for (let i = 1; i < width; i++) {
    buf[at++] = (rest % 0x80) | 0x80; // % and / rather than bit operators: v may exceed 2^31
    rest = Math.floor(rest / 0x80);
  }
  buf[at++] = rest;
  return at;
}

/** Where readVarint leaves its result: the value (-1 when malformed) and the bytes it took. */
const got = { value: 0, bytes: 0 };

/**
 * Reads the varint at buf[at..end) into `got`: value -1 when it runs past `end`, past 8 bytes, or
 * beyond 2^53 − 1. No allocation: the record decoders read several per record.
 */
function readVarint(buf: Uint8Array, at: number, end: number): void {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < C.VARINT_BYTES_MAX && at + i < end; i++) {
    const b = buf[at + i] as number;
    value += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) {
      got.value = value <= C.SEQ_MAX ? value : -1;
      got.bytes = i + 1;
      return;
    }
    scale *= 0x80;
  }
  got.value = -1;
  got.bytes = 0;
}

/** The header bytes (length varint excluded) of a record of these fields, checksum excluded. */
function fieldBytes(scopeLen: number, keyLen: number, valueLen: number, seq: number, generation: number, expiresAt: number): number {
  return 1 + varintBytes(scopeLen) + varintBytes(keyLen) + varintBytes(valueLen) + varintBytes(seq) + varintBytes(generation) + varintBytes(expiresAt);
}

/** The total of a record whose other bytes are `rest`: rest plus its own shortest length varint (a fixed point: the varint counts itself). */
function withLength(rest: number): number {
  let width = varintBytes(rest + 1);
  if (varintBytes(rest + width) !== width) width++;
  return rest + width;
}

/**
 * The total bytes of a version-3 record of these fields, checksum included: a pure function of
 * them (hint version 3 derives a record's length this way instead of storing it). Not for GROUP.
 */
export function recordLengthV3(scopeLen: number, keyLen: number, valueLen: number, seq: number, generation: number, expiresAt: number): number {
  return withLength(fieldBytes(scopeLen, keyLen, valueLen, seq, generation, expiresAt) + scopeLen + keyLen + valueLen + C.RECORD_V3_CHECKSUM_BYTES);
}

/** The low 32 bits of the xxh64 of bytes[from, to): the version-3 record checksum. */
export function checksum32(bytes: Uint8Array, from: number, to: number): number {
  return checksumLow32(bytes, from, to);
}

/** Encodes a version-3 record into a fresh buffer. Throws InvalidArgumentError (producing nothing) for a bad input, as encodeRecord. */
export function encodeRecordV3(r: RecordInput, valueBytesMax: number = C.VALUE_BYTES_MAX): Buffer {
  assertInput(r, valueBytesMax);
  const scopeLen = utf8Length(r.scope);
  const keyLen = utf8Length(r.key);
  const valueLen = valueLength(r.value);
  const group = r.type === C.RecordType.GROUP;
  const length = group ? C.GROUP_FRAME_BYTES_V3 : recordLengthV3(scopeLen, keyLen, valueLen, r.seq, r.generation, r.expiresAt ?? 0);
  const buf = Buffer.allocUnsafe(length);
  fillV3(buf, 0, length, r.type, r.flags ?? 0, r.seq, r.generation, r.expiresAt ?? 0, r.scope, scopeLen, r.key, keyLen, r.value, valueLen, true);
  return buf;
}

/**
 * Writes the version-3 record of checked fields, `length` bytes, at buf[base, base + length);
 * its checksum too when `sum`. Throws (a programming error) when the layout does not fill `length`.
 */
export function fillV3(
  buf: Buffer,
  base: number,
  length: number,
  type: C.RecordTypeValue,
  givenFlags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  scopeLen: number,
  key: string,
  keyLen: number,
  value: string | Uint8Array | undefined,
  valueLen: number,
  sum: boolean,
): void {
  const flags = givenFlags | (typeof value === "string" ? C.RF_UTF8 : 0);
  // A GROUP's seq and syncedEnd take 8 bytes each, whatever their values: the frame's size is fixed.
  const wide = type === C.RecordType.GROUP ? C.VARINT_BYTES_MAX : 0;
  let at = putVarint(buf, length, base, varintBytes(length));
  buf[at++] = type | (flags << C.RV3_FLAGS_SHIFT);
  at = putVarint(buf, scopeLen, at, varintBytes(scopeLen));
  at = putVarint(buf, keyLen, at, varintBytes(keyLen));
  at = putVarint(buf, valueLen, at, varintBytes(valueLen));
  at = putVarint(buf, seq, at, wide || varintBytes(seq));
  at = putVarint(buf, generation, at, wide || varintBytes(generation));
  at = putVarint(buf, expiresAt, at, varintBytes(expiresAt));
  at += writeName(buf, scope, scopeLen, at);
  at += writeName(buf, key, keyLen, at);
  if (typeof value === "string") at += buf.write(value, at, "utf8");
  else if (value !== undefined) {
    buf.set(value, at);
    at += value.byteLength;
  }
  if (at !== base + length - C.RECORD_V3_CHECKSUM_BYTES) throw new Error(`v3 record encode wrote ${at - base} of ${length - C.RECORD_V3_CHECKSUM_BYTES} bytes`);
  if (sum) buf.writeUInt32LE(checksum32(buf, base, at), at);
}

/** The fields of a version-3 frame as probeV3 read them (reused: no object per record). */
export interface FrameV3 {
  length: number;
  type: number;
  flags: number;
  scopeLen: number;
  keyLen: number;
  valueLen: number;
  seq: number;
  generation: number;
  expiresAt: number;
  /** Offset of the scope bytes. */
  payloadAt: number;
}
/** The varints after the type byte, in order: scope, key and value lengths, seq, generation, expires at. */
const FIELDS_V3 = 6;
const fields = new Float64Array(FIELDS_V3);
const frame: FrameV3 = { length: 0, type: 0, flags: 0, scopeLen: 0, keyLen: 0, valueLen: 0, seq: 0, generation: 0, expiresAt: 0, payloadAt: 0 };

/**
 * Reads the next varint of a frame into `got`; false when it is malformed or, unless `anyWidth`,
 * not in its shortest form (a frame has one encoding, so its length is a function of its fields).
 */
function nextField(buf: Uint8Array, at: number, end: number, anyWidth: boolean): boolean {
  readVarint(buf, at, end);
  return got.value >= 0 && (anyWidth || acceptPadded || got.bytes === varintBytes(got.value));
}

/** Test hook (the twin of test/format-record-v3.test.ts): accept varints that are not in their shortest form. */
let acceptPadded = false;

/** Switches the shortest-form check of the frame's varints off (true) or on: for the twin test only. */
export function unsafeAcceptPaddedVarints(accept: boolean): void {
  acceptPadded = accept;
}

/**
 * Reads the frame at `at` into `frame` and checks it as FORMAT.md's decoding checks 1–6 do
 * (without the checksum). Returns the record length, or the fault.
 */
function probeV3(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  if (end - at === 0 || bytes[at] === 0) return "empty"; // a zero first byte is length 0: unwritten space
  readVarint(bytes, at, Math.min(end, at + C.VARINT_BYTES_MAX));
  if (got.value < 0) return got.bytes === 0 && end - at < C.VARINT_BYTES_MAX ? "short" : "length";
  const length = got.value;
  if (got.bytes !== varintBytes(length) || length < C.RECORD_V3_BYTES_MIN || length > C.RECORD_V3_BYTES_MAX) return "length";
  // Every header varint must end inside the record: read them against its end, not the buffer's.
  const recordEnd = Math.min(end, at + length);
  let p = at + got.bytes;
  if (p >= recordEnd) return end - at < length ? "short" : "structure";
  const kind = bytes[p++] as number;
  frame.type = kind & C.RV3_TYPE_MASK;
  frame.flags = kind >>> C.RV3_FLAGS_SHIFT;
  if (frame.type === 0 || frame.type > C.RECORD_TYPE_MAX || (frame.flags & ~C.RECORD_FLAGS_KNOWN) !== 0) return "structure";
  const group = frame.type === C.RecordType.GROUP;
  for (let i = 0; i < FIELDS_V3; i++) {
    if (!nextField(bytes, p, recordEnd, group && (i === 3 || i === 4))) return recordEnd < at + length ? "short" : "structure";
    fields[i] = got.value;
    p += got.bytes;
  }
  const scopeLen = fields[0] as number;
  const keyLen = fields[1] as number;
  const valueLen = fields[2] as number;
  if (scopeLen === 0 || scopeLen > C.SCOPE_BYTES_MAX || keyLen > C.KEY_BYTES_MAX) return "structure";
  if (p - at + scopeLen + keyLen + valueLen + C.RECORD_V3_CHECKSUM_BYTES !== length) return "structure";
  if (end - at < length) return "short";
  frame.length = length;
  frame.scopeLen = scopeLen;
  frame.keyLen = keyLen;
  frame.valueLen = valueLen;
  frame.seq = fields[3] as number;
  frame.generation = fields[4] as number;
  frame.expiresAt = fields[5] as number;
  frame.payloadAt = p;
  return length;
}

/** probeRecord for a version-3 frame: its length, or the fault (checks 1–6, no checksum). */
export function probeRecordV3(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  return probeV3(bytes, at, end);
}

/** True when the 4-byte checksum of the record of `length` bytes at `at` matches its bytes. */
function sumMatches(bytes: Uint8Array, at: number, length: number): boolean {
  const sumAt = at + length - C.RECORD_V3_CHECKSUM_BYTES;
  return checksum32(bytes, at, sumAt) === asBuffer(bytes).readUInt32LE(sumAt);
}

/** checkRecordAt for a version-3 frame: fixed fields, extent and checksum, without decoding. */
export function checkRecordAtV3(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  const length = probeV3(bytes, at, end);
  if (typeof length !== "number") return length;
  return sumMatches(bytes, at, length) ? length : "checksum";
}

/**
 * decodeRecord for a version-3 frame: the record, or the fault of FORMAT.md's decoding checks
 * (never throws on bad bytes, never returns a record whose checksum failed). `withValue` and
 * `names` as decodeRecord's.
 */
export function decodeRecordV3(bytes: Uint8Array, at: number, end: number, withValue: boolean | "view" = true, names?: ExpectedNames): DecodedRecord | RecordFault {
  const length = probeV3(bytes, at, end);
  if (typeof length !== "number") return length;
  if (!sumMatches(bytes, at, length)) return "checksum";
  if (frame.seq === 0) return "structure";
  // The shared frame is the fields (probeV3 checked its type): no fields object per decoded record, which every cold read makes.
  const fields = frame as Readonly<FrameV3> & { readonly type: C.RecordTypeValue };
  return decodePayload(bytes, fields, frame.payloadAt, frame.scopeLen, frame.keyLen, frame.valueLen, withValue, names);
}

/** The type of the (already checked) version-3 record at `at`: the byte after its length varint. */
export function typeAtV3(bytes: Uint8Array, at: number): C.RecordTypeValue {
  readVarint(bytes, at, at + C.VARINT_BYTES_MAX);
  return ((bytes[at + got.bytes] as number) & C.RV3_TYPE_MASK) as C.RecordTypeValue;
}

/** The scope and key of the (already checked) version-3 record at `at`. */
export function namesAtV3(bytes: Uint8Array, at: number): { scope: string; key: string } {
  const length = probeV3(bytes, at, bytes.length);
  if (typeof length !== "number") throw new Error(`namesAtV3: no record at ${at} (${length})`);
  const buf = asBuffer(bytes);
  const keyAt = frame.payloadAt + frame.scopeLen;
  return { scope: utf8(buf, frame.payloadAt, keyAt), key: utf8(buf, keyAt, keyAt + frame.keyLen) };
}

/** frameAtV3's cursor: the bytes it reads and the offset of the next varint. */
const EMPTY = new Uint8Array(0);
let scanBytes: Uint8Array = EMPTY;
let scanAt = 0;

/** The varint at scanBytes[scanAt] (a byte below 0x80 ends it; most fields are one byte); moves scanAt past it. */
function nextVarint(): number {
  const bytes = scanBytes;
  let b = bytes[scanAt++] as number;
  if (b < 0x80) return b;
  let value = b & 0x7f;
  let scale = 0x80;
  for (let i = 1; i < C.VARINT_BYTES_MAX; i++) {
    b = bytes[scanAt++] as number;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value;
    scale *= 0x80;
  }
  throw new Error(`frameAtV3: a varint at ${scanAt} runs past ${C.VARINT_BYTES_MAX} bytes`);
}

/**
 * The fields of the (already checked, or just encoded) version-3 record at `at`, in an object
 * shared by every call: read them before the next. No check beyond the varints' own ends (the
 * hint builder's hot path: every record of a committed group passes here).
 */
export function frameAtV3(bytes: Uint8Array, at: number): Readonly<FrameV3> {
  // Module-level cursor and reader, not a closure per call: this runs once per record on the commit
  // path and in compaction's hint packing, where a closure per record cost 2–4× the v2 reads.
  scanBytes = bytes;
  scanAt = at;
  frame.length = nextVarint();
  const kind = bytes[scanAt++] as number;
  frame.type = kind & C.RV3_TYPE_MASK;
  frame.flags = kind >>> C.RV3_FLAGS_SHIFT;
  frame.scopeLen = nextVarint();
  frame.keyLen = nextVarint();
  frame.valueLen = nextVarint();
  frame.seq = nextVarint();
  frame.generation = nextVarint();
  frame.expiresAt = nextVarint();
  const p = scanAt;
  scanBytes = EMPTY; // holds no record past the call
  frame.payloadAt = p;
  if (p + frame.scopeLen + frame.keyLen + frame.valueLen + C.RECORD_V3_CHECKSUM_BYTES !== at + frame.length) throw new Error(`frameAtV3: no record at ${at}`);
  return frame;
}

/** The length varint of the record at `at` (0 when malformed: no record). */
export function lengthAtV3(bytes: Uint8Array, at: number): number {
  readVarint(bytes, at, Math.min(bytes.length, at + C.VARINT_BYTES_MAX));
  return Math.max(got.value, 0);
}
