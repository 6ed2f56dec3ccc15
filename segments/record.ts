/**
 * The record codec. A record is self-delimiting and self-checking: length first, xxh64 last, and
 * the checksum covers content only (never the record's offset), so compaction copies records
 * verbatim. That is exactly why a checksum alone cannot tell a read at a moved offset from a good
 * one, and why readers also compare type, scope, key and generation (engine/reads.ts).
 */
import { checksum64 } from "./checksum.js";
import * as C from "./constants.js";
import { InvalidArgumentError } from "../rules/errors.js";
import { assertKey, assertScope } from "../rules/names.js";
import { readU64 } from "./u64.js";
import { assert } from "../rules/assert.js";

/** What a caller gives the encoder. */
export interface RecordInput {
  type: C.RecordTypeValue;
  /** RF_IN_BATCH or 0; the value-kind flag is derived from `value`. */
  flags?: number;
  seq: number;
  /** Slot generation (PUT, CLEAR), killed generation (TOMBSTONE), op count (BATCH_COMMIT): build those with record-kinds.ts. */
  generation: number;
  /** PUT: expiry, ms since epoch, 0 = never. TOMBSTONE: the killed version; CLEAR, SCOPE_ERASE: the commit time (record-kinds.ts). */
  expiresAt?: number;
  scope: string;
  /** "" for SCOPE_ERASE and BATCH_COMMIT; 1–1024 bytes otherwise. */
  key: string;
  /** PUT: the value. SCOPE_ERASE: optionally the encoded list of slots it kills (bytes). */
  value?: string | Uint8Array;
}

/** A record as decoded from bytes. */
export interface DecodedRecord {
  type: C.RecordTypeValue;
  flags: number;
  seq: number;
  generation: number;
  expiresAt: number;
  scope: string;
  key: string;
  /** PUT: a string when RF_UTF8 is set, else bytes: a copy, or with decodeRecord's "view" a view of the caller's own buffer. */
  value: string | Uint8Array | null;
  /** Total bytes of the record, checksum included. */
  length: number;
}

/** Why bytes at an offset are not a record. */
export type RecordFault = "short" | "empty" | "length" | "structure" | "checksum";

const decoder = new TextDecoder("utf-8", { fatal: true });

/** True when `value` is a safe integer in [0, max]. */
function isIntIn(value: unknown, max: number): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && value <= max;
}

/** Checks an input before any byte is produced; throws InvalidArgumentError naming the field. */
function assertInput(r: RecordInput, valueBytesMax: number): void {
  if (typeof r !== "object" || r === null) throw new InvalidArgumentError(`record must be an object, got ${r === null ? "null" : typeof r}`);
  if (!isIntIn(valueBytesMax, Number.MAX_SAFE_INTEGER)) throw new InvalidArgumentError(`valueBytesMax ${String(valueBytesMax)} must be a non-negative safe integer`);
  if (!isIntIn(r.type, C.RECORD_TYPE_MAX) || (r.type as number) === 0) throw new InvalidArgumentError(`record type ${String(r.type)} is unknown`);
  if (!isIntIn(r.flags ?? 0, C.RF_IN_BATCH) || ((r.flags ?? 0) & ~C.RF_IN_BATCH) !== 0) {
    throw new InvalidArgumentError(`record flags ${String(r.flags)}: only RF_IN_BATCH may be given`);
  }
  if (!isIntIn(r.seq, C.SEQ_MAX) || r.seq === 0) throw new InvalidArgumentError(`record seq ${String(r.seq)} must be a positive safe integer`);
  if (!isIntIn(r.generation, C.SEQ_MAX)) throw new InvalidArgumentError(`record generation ${String(r.generation)} must be a non-negative safe integer`);
  if (!isIntIn(r.expiresAt ?? 0, C.SEQ_MAX)) throw new InvalidArgumentError(`record expiresAt ${String(r.expiresAt)} must be a non-negative safe integer`);
  assertScope(r.scope);
  const keyless = r.type === C.RecordType.SCOPE_ERASE || r.type === C.RecordType.BATCH_COMMIT || r.type === C.RecordType.GROUP;
  if (keyless) {
    if (r.key !== "") throw new InvalidArgumentError("SCOPE_ERASE, BATCH_COMMIT and GROUP records carry no key");
  } else {
    assertKey(r.key);
  }
  if (r.type === C.RecordType.PUT) {
    assertValue(r.value, valueBytesMax);
  } else if (r.type === C.RecordType.SCOPE_ERASE && r.value instanceof Uint8Array) {
    // An erasure carries the retention records of the slots it kills (segments/erase-list.ts).
    if (r.value.byteLength > C.VALUE_BYTES_MAX) throw new InvalidArgumentError(`erasure list is ${r.value.byteLength} bytes; at most ${C.VALUE_BYTES_MAX}`);
  } else if (r.type === C.RecordType.GROUP) {
    if (!(r.value instanceof Uint8Array) || r.value.byteLength !== C.GROUP_VALUE_BYTES) throw new InvalidArgumentError(`a GROUP record carries exactly ${C.GROUP_VALUE_BYTES} value bytes`);
  } else if (r.value !== undefined) {
    throw new InvalidArgumentError("only PUT records carry a value (and SCOPE_ERASE records a byte list)");
  }
}

/**
 * Encodes a record into a fresh buffer. Throws InvalidArgumentError (and produces nothing) for a
 * bad scope, key, value, or a value over `valueBytesMax`.
 */
export function encodeRecord(r: RecordInput, valueBytesMax: number = C.VALUE_BYTES_MAX, arena?: RecordArena): Buffer {
  assertInput(r, valueBytesMax);
  return encodeFields(r.type, r.flags ?? 0, r.seq, r.generation, r.expiresAt ?? 0, r.scope, r.key, r.value, arena);
}

/**
 * encodeRecord for a PUT (with its value) or a TOMBSTONE (value undefined) whose scope and key the
 * caller already checked against the grammar (rules/args.ts, before anything was decided): the
 * names are not checked again (no second pass over a key per record), the integers and the value
 * are (its type, the byte limit, well-formed UTF-16), and no RecordInput object is needed.
 * Throws InvalidArgumentError (producing nothing) for a bad integer or value.
 */
export function encodeNamedRecord(
  type: C.RecordTypeValue,
  flags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  key: string,
  value: string | Uint8Array | undefined,
  valueBytesMax: number,
  arena?: RecordArena,
): Buffer {
  assertNamed(type, flags, seq, generation, expiresAt, scope, key, value, valueBytesMax);
  return encodeFields(type, flags, seq, generation, expiresAt, scope, key, value, arena);
}

/** The checks of encodeNamedRecord and encodeNamedInto; throws InvalidArgumentError for a bad integer or value. */
function assertNamed(
  type: C.RecordTypeValue,
  flags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  key: string,
  value: string | Uint8Array | undefined,
  valueBytesMax: number,
): void {
  // Paired with assertInput: what this path does not check again must hold by construction.
  assert((type === C.RecordType.PUT) === (value !== undefined) && (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE), "a named record is a PUT with a value or a TOMBSTONE without");
  assert((flags & ~C.RF_IN_BATCH) === 0 && typeof scope === "string" && typeof key === "string" && key.length > 0, "a named record's names were checked before it was decided");
  // The integers stay checked as assertInput checks them (a caller's clock or ttl feeds expiresAt).
  if (!isIntIn(seq, C.SEQ_MAX) || seq === 0) throw new InvalidArgumentError(`record seq ${String(seq)} must be a positive safe integer`);
  if (!isIntIn(generation, C.SEQ_MAX)) throw new InvalidArgumentError(`record generation ${String(generation)} must be a non-negative safe integer`);
  if (!isIntIn(expiresAt, C.SEQ_MAX)) throw new InvalidArgumentError(`record expiresAt ${String(expiresAt)} must be a non-negative safe integer`);
  if (value !== undefined) assertValue(value, valueBytesMax);
}

/**
 * encodeNamedRecord into a deferring arena (a batch's), with no Buffer made for the record: the
 * record is laid out in the arena's current chunk and only its length is returned (the plan
 * keeps lengths; the log writes the arena's runs, seal() writes the sums). The same checks and
 * the same bytes as encodeNamedRecord (test/write-pieces.test.ts). Throws InvalidArgumentError
 * (the arena unchanged) for a bad integer or value.
 */
export function encodeNamedInto(
  arena: RecordArena,
  type: C.RecordTypeValue,
  flags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  key: string,
  value: string | Uint8Array | undefined,
  valueBytesMax: number,
): number {
  assert(arena.defersSums, "only a deferring arena's records are encoded in place (its owner writes their sums)");
  assertNamed(type, flags, seq, generation, expiresAt, scope, key, value, valueBytesMax);
  const scopeLen = utf8Length(scope);
  const keyLen = utf8Length(key);
  const length = C.RECORD_OVERHEAD + scopeLen + keyLen + valueLength(value);
  const base = arena.claim(length);
  fillFields(arena.current, base, length, scopeLen, keyLen, type, flags, seq, generation, expiresAt, scope, key, value, false);
  return length;
}

/** The value checks of assertInput for a PUT: a string or bytes, within the limit, well-formed UTF-16. */
function assertValue(value: unknown, valueBytesMax: number): void {
  if (typeof value !== "string" && !(value instanceof Uint8Array)) throw new InvalidArgumentError("value must be a string or a Uint8Array");
  const bytes = typeof value === "string" ? Buffer.byteLength(value, "utf8") : value.byteLength;
  const max = Math.min(valueBytesMax, C.VALUE_BYTES_MAX);
  if (bytes > max) throw new InvalidArgumentError(`value is ${bytes} bytes; at most ${max} (valueBytesMax)`);
  if (typeof value === "string" && !value.isWellFormed()) throw new InvalidArgumentError("value string must be well-formed UTF-16");
}

/** Lays out checked fields as a record (from `arena` when given) and writes its checksum. */
function encodeFields(
  type: C.RecordTypeValue,
  givenFlags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  key: string,
  value: string | Uint8Array | undefined,
  arena: RecordArena | undefined,
): Buffer {
  const scopeLen = utf8Length(scope);
  const keyLen = utf8Length(key);
  const length = C.RECORD_OVERHEAD + scopeLen + keyLen + valueLength(value);
  const buf = arena === undefined ? Buffer.allocUnsafe(length) : arena.take(length);
  fillFields(buf, 0, length, scopeLen, keyLen, type, givenFlags, seq, generation, expiresAt, scope, key, value, arena === undefined || !arena.defersSums);
  return buf;
}

/** Bytes of a record's value in UTF-8 (a string) or as given (bytes); 0 for none. */
function valueLength(value: string | Uint8Array | undefined): number {
  return value === undefined ? 0 : typeof value === "string" ? Buffer.byteLength(value, "utf8") : value.byteLength;
}

/**
 * Writes the record of checked fields, `length` bytes, at buf[base, base + length) (names of
 * `scopeLen` and `keyLen` UTF-8 bytes); its checksum too when `sum` (a deferring arena's owner
 * writes them later). Throws (a programming error) when the layout does not fill exactly `length`.
 */
function fillFields(
  buf: Buffer,
  base: number,
  length: number,
  scopeLen: number,
  keyLen: number,
  type: C.RecordTypeValue,
  givenFlags: number,
  seq: number,
  generation: number,
  expiresAt: number,
  scope: string,
  key: string,
  value: string | Uint8Array | undefined,
  sum: boolean,
): void {
  const valueLen = length - C.RECORD_OVERHEAD - scopeLen - keyLen;
  const flags = givenFlags | (typeof value === "string" ? C.RF_UTF8 : 0);
  // Byte stores rather than Buffer's write methods (a call and a range check each: ~0.3 µs of
  // a record's encode); the values were range-checked above, the layout is u64.ts's and FORMAT.md's.
  putU32(buf, length, base + C.R_LENGTH);
  buf[base + C.R_TYPE] = type;
  buf[base + C.R_FLAGS] = flags;
  putU16(buf, scopeLen, base + C.R_SCOPE_LEN);
  putU16(buf, keyLen, base + C.R_KEY_LEN);
  putU16(buf, 0, base + C.R_RESERVED);
  putU32(buf, valueLen, base + C.R_VALUE_LEN);
  putU64(buf, seq, base + C.R_SEQ);
  putU64(buf, generation, base + C.R_GENERATION);
  putU64(buf, expiresAt, base + C.R_EXPIRES_AT);
  let at = base + C.RECORD_FIXED_BYTES;
  at += writeName(buf, scope, scopeLen, at);
  at += writeName(buf, key, keyLen, at);
  if (typeof value === "string") at += buf.write(value, at, "utf8");
  else if (value !== undefined) {
    buf.set(value, at); // a memcpy, without a Buffer object over the value
    at += value.byteLength;
  }
  if (at !== base + length - C.RECORD_CHECKSUM_BYTES) throw new Error(`record encode wrote ${at - base} of ${length - C.RECORD_CHECKSUM_BYTES} bytes`);
  if (sum) writeChecksum(buf, checksum64(buf, base, at), at);
}

/** Stores the u16 `v` (0 <= v < 2^16) little-endian at buf[at, at + 2). */
function putU16(buf: Uint8Array, v: number, at: number): void {
  buf[at] = v;
  buf[at + 1] = v >>> 8;
}

/** Stores the u32 `v` (0 <= v < 2^32) little-endian at buf[at, at + 4). */
function putU32(buf: Uint8Array, v: number, at: number): void {
  buf[at] = v;
  buf[at + 1] = v >>> 8;
  buf[at + 2] = v >>> 16;
  buf[at + 3] = v >>> 24;
}

/** Stores the safe integer `v` >= 0 as a little-endian u64 at buf[at, at + 8) (u64.ts writeU64's bytes). */
function putU64(buf: Uint8Array, v: number, at: number): void {
  // ToUint32 is v mod 2^32 exactly for any safe integer (no float remainder); the high word is then an exact quotient.
  const low = v >>> 0;
  putU32(buf, low, at);
  putU32(buf, v === low ? 0 : (v - low) / 0x1_0000_0000, at + 4);
}

/** Scratch for writeChecksum: a BigUint64Array store and eight byte copies cost a third of Buffer.writeBigUInt64LE. */
const SUM_SCRATCH = new BigUint64Array(1);
const SUM_BYTES = new Uint8Array(SUM_SCRATCH.buffer);
/** Little-endian byte order of this machine's BigUint64Array (checked once: the format is little-endian). */
const HOST_LITTLE_ENDIAN = ((): boolean => {
  SUM_SCRATCH[0] = 1n;
  return SUM_BYTES[0] === 1;
})();

/** Writes the u64 checksum `sum` little-endian at buf[at, at + 8). */
export function writeChecksum(buf: Buffer, sum: bigint, at: number): void {
  if (!HOST_LITTLE_ENDIAN) {
    buf.writeBigUInt64LE(sum, at);
    return;
  }
  SUM_SCRATCH[0] = sum;
  for (let i = 0; i < 8; i++) buf[at + i] = SUM_BYTES[i] as number;
}

/** The first chunk a RecordArena allocates; each later one doubles, up to RECORD_ARENA_CHUNK_BYTES_MAX. */
export const RECORD_ARENA_CHUNK_BYTES_MIN = 4 * 1024;
/** The largest chunk a RecordArena allocates (a larger record gets a chunk of its own size). */
export const RECORD_ARENA_CHUNK_BYTES_MAX = 1024 * 1024;

/**
 * Hands out the buffers of a batch's records carved in order from a few shared chunks, so that
 * consecutive records lie contiguous in memory: the group's body is then hashed and written as a
 * few runs (segments/group.ts `contiguousRuns`) instead of one allocation, one iovec and one
 * concatenation copy per record. Chunks start small and double, so a batch of two ops costs a
 * few KiB and one of 1000 a handful of chunks. Not thread-safe; one arena per batch plan.
 */
export class RecordArena {
  /**
   * With `defersSums` the encoder leaves each record's checksum unwritten: its owner writes them
   * all at once (segments/checksum.ts writeRecordSums) before a record leaves it. Such a record
   * does not decode until then.
   */
  constructor(readonly defersSums = false) {}

  private chunk: Buffer = Buffer.alloc(0);
  private used = 0;
  private nextBytes = RECORD_ARENA_CHUNK_BYTES_MIN;
  /** Every chunk left behind, with the bytes it handed out (a deferring arena's runs(): not kept otherwise). */
  private readonly full: Buffer[] = [];

  /** A fresh, uninitialized buffer of `bytes` bytes, directly after the previous one when it fits in the same chunk. */
  take(bytes: number): Buffer {
    const at = this.claim(bytes);
    return this.chunk.subarray(at, this.used);
  }

  /**
   * take() without the Buffer: claims `bytes` uninitialized bytes of `current` and returns their
   * offset there (a new chunk first when they do not fit the current one). `current` is the
   * chunk until the next claim.
   */
  claim(bytes: number): number {
    if (this.used + bytes > this.chunk.length) {
      if (this.defersSums && this.used > 0) this.full.push(this.chunk.subarray(0, this.used));
      this.chunk = Buffer.allocUnsafeSlow(Math.max(bytes, this.nextBytes));
      this.used = 0;
      this.nextBytes = Math.min(this.nextBytes * 2, RECORD_ARENA_CHUNK_BYTES_MAX);
    }
    const at = this.used;
    this.used += bytes;
    assert(this.used <= this.chunk.length, "an arena's buffer lies inside its chunk");
    return at;
  }

  /** The chunk the last claim() was made in. */
  get current(): Buffer {
    return this.chunk;
  }

  /** The bytes handed out so far, as runs of records lying back to back (one per chunk, in order). */
  runs(): Buffer[] {
    assert(this.defersSums, "only a deferring arena keeps its runs");
    return this.used > 0 ? [...this.full, this.chunk.subarray(0, this.used)] : [...this.full];
  }
}

/** Strings up to this many UTF-16 units are measured and written by a JS loop (no native call). */
const SHORT_NAME_UNITS_MAX = 64;

/** Bytes of `s` in UTF-8: counted in JS when `s` is short and ASCII, else by Buffer.byteLength. */
function utf8Length(s: string): number {
  if (s.length > SHORT_NAME_UNITS_MAX) return Buffer.byteLength(s, "utf8");
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8");
  return s.length;
}

/** Writes `s` (`bytes` long in UTF-8) at `at`; returns `bytes`. ASCII (bytes === length) short names are copied unit by unit. */
function writeName(buf: Buffer, s: string, bytes: number, at: number): number {
  if (bytes !== s.length || bytes > SHORT_NAME_UNITS_MAX) return buf.write(s, at, "utf8");
  for (let i = 0; i < bytes; i++) buf[at + i] = s.charCodeAt(i);
  return bytes;
}

/**
 * Reads only the fixed fields at `at` and says whether they describe a plausible record that fits
 * in `end`. Returns the record length, or the fault. Cheap: no checksum.
 */
export function probeRecord(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  if (end - at < 4) return end - at === 0 ? "empty" : "short";
  const buf = asBuffer(bytes);
  const length = buf.readUInt32LE(at + C.R_LENGTH);
  if (length === 0) return "empty";
  if (length < C.RECORD_OVERHEAD || length > C.RECORD_BYTES_MAX) return "length";
  if (end - at < C.RECORD_FIXED_BYTES) return "short";
  const type = buf.readUInt8(at + C.R_TYPE);
  const flags = buf.readUInt8(at + C.R_FLAGS);
  const scopeLen = buf.readUInt16LE(at + C.R_SCOPE_LEN);
  const keyLen = buf.readUInt16LE(at + C.R_KEY_LEN);
  const valueLen = buf.readUInt32LE(at + C.R_VALUE_LEN);
  if (type === 0 || type > C.RECORD_TYPE_MAX || (flags & ~C.RECORD_FLAGS_KNOWN) !== 0) return "structure";
  if (buf.readUInt16LE(at + C.R_RESERVED) !== 0) return "structure";
  if (scopeLen === 0 || scopeLen > C.SCOPE_BYTES_MAX || keyLen > C.KEY_BYTES_MAX) return "structure";
  if (C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen !== length) return "structure";
  if (end - at < length) return "short";
  return length;
}

/** Decodes UTF-8 strictly: Buffer's fast decoder, confirmed by the fatal one only when it replaced bytes. */
function utf8(buf: Buffer, start: number, end: number): string {
  const text = buf.toString("utf8", start, end);
  if (text.includes("\uFFFD")) decoder.decode(buf.subarray(start, end)); // throws on invalid UTF-8
  return text;
}

/** The scope and key a reader expects (a point read's token): decoding reuses them when the bytes match. */
export interface ExpectedNames {
  scope?: string;
  key?: string;
}

/**
 * The strict UTF-8 string at buf[start, end), without decoding when the bytes are exactly the
 * ASCII encoding of `known` (then they decode to `known` and nothing else, so `known` itself is
 * returned: no new string per point read). Any other bytes are decoded as by utf8().
 */
function utf8Known(buf: Buffer, start: number, end: number, known: string | undefined): string {
  if (known !== undefined && asciiEquals(buf, start, end, known)) return known;
  return utf8(buf, start, end);
}

/** True when buf[start, end) is `s` and `s` is short ASCII (each byte < 0x80 equals its UTF-16 unit). */
function asciiEquals(buf: Buffer, start: number, end: number, s: string): boolean {
  if (end - start !== s.length || s.length > SHORT_NAME_UNITS_MAX) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f || buf[start + i] !== c) return false;
  }
  return true;
}

/** `bytes` as a Buffer over the same memory (no copy). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Decodes the record at `at` (bytes up to `end` are available). Returns the record or the fault;
 * never throws on bad bytes, and never returns a record whose checksum failed. With `withValue`
 * false the value is not materialized (recovery and compaction need only the metadata); with
 * "view" a binary value is a view of `bytes` instead of a copy (for a caller that owns `bytes`
 * and hands them on: a point read's fresh buffer).
 */
export function decodeRecord(bytes: Uint8Array, at: number, end: number, withValue: boolean | "view" = true, names?: ExpectedNames): DecodedRecord | RecordFault {
  const length = probeRecord(bytes, at, end);
  if (typeof length !== "number") return length;
  const buf = asBuffer(bytes);
  const sumAt = at + length - C.RECORD_CHECKSUM_BYTES;
  if (checksum64(bytes, at, sumAt) !== buf.readBigUInt64LE(sumAt)) return "checksum";
  const seq = readU64(buf, at + C.R_SEQ);
  const generation = readU64(buf, at + C.R_GENERATION);
  const expiresAt = readU64(buf, at + C.R_EXPIRES_AT);
  if (seq <= 0 || generation < 0 || expiresAt < 0) return "structure";
  const type = buf.readUInt8(at + C.R_TYPE) as C.RecordTypeValue; // a known type: probeRecord checked it
  const flags = buf.readUInt8(at + C.R_FLAGS);
  const scopeLen = buf.readUInt16LE(at + C.R_SCOPE_LEN);
  const keyLen = buf.readUInt16LE(at + C.R_KEY_LEN);
  const valueLen = buf.readUInt32LE(at + C.R_VALUE_LEN);
  const scopeAt = at + C.RECORD_FIXED_BYTES;
  const valueAt = scopeAt + scopeLen + keyLen;
  if (type !== C.RecordType.PUT && type !== C.RecordType.SCOPE_ERASE && type !== C.RecordType.GROUP && valueLen !== 0) return "structure";
  if (type === C.RecordType.GROUP && (valueLen !== C.GROUP_VALUE_BYTES || keyLen !== 0 || (flags & C.RF_UTF8) !== 0)) return "structure";
  let scope: string;
  let key: string;
  let value: string | Uint8Array | null = null;
  try {
    scope = utf8Known(buf, scopeAt, scopeAt + scopeLen, names?.scope);
    key = utf8Known(buf, scopeAt + scopeLen, valueAt, names?.key);
    if (type === C.RecordType.PUT && withValue !== false) {
      if ((flags & C.RF_UTF8) !== 0) value = utf8(buf, valueAt, valueAt + valueLen);
      else if (withValue === "view") value = new Uint8Array(bytes.buffer, bytes.byteOffset + valueAt, valueLen);
      else value = new Uint8Array(buf.subarray(valueAt, valueAt + valueLen));
    } else if (type === C.RecordType.GROUP) {
      value = new Uint8Array(buf.subarray(valueAt, valueAt + valueLen)); // always: the frame is the value
    } else if (type === C.RecordType.SCOPE_ERASE && valueLen > 0) {
      if ((flags & C.RF_UTF8) !== 0) return "structure";
      value = new Uint8Array(buf.subarray(valueAt, valueAt + valueLen)); // always: recovery needs it
    }
  } catch {
    return "structure";
  }
  return { type, flags, seq, generation, expiresAt, scope, key, value, length };
}

/**
 * Checks the record at `at` — fixed fields, extent and checksum — without decoding it. Returns its
 * length, or the fault. The cheap path of compaction, which copies records verbatim.
 */
export function checkRecordAt(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  const length = probeRecord(bytes, at, end);
  if (typeof length !== "number") return length;
  const sumAt = at + length - C.RECORD_CHECKSUM_BYTES;
  return checksum64(bytes, at, sumAt) === asBuffer(bytes).readBigUInt64LE(sumAt) ? length : "checksum";
}

/** The type of the (already checked) record at `at`. */
export function recordTypeAt(bytes: Uint8Array, at: number): C.RecordTypeValue {
  return asBuffer(bytes).readUInt8(at + C.R_TYPE) as C.RecordTypeValue;
}

/** The scope and key of the (already checked) record at `at`. */
export function recordNamesAt(bytes: Uint8Array, at: number): { scope: string; key: string } {
  const buf = asBuffer(bytes);
  const scopeLen = buf.readUInt16LE(at + C.R_SCOPE_LEN);
  const keyLen = buf.readUInt16LE(at + C.R_KEY_LEN);
  const scopeAt = at + C.RECORD_FIXED_BYTES;
  return { scope: utf8(buf, scopeAt, scopeAt + scopeLen), key: utf8(buf, scopeAt + scopeLen, scopeAt + scopeLen + keyLen) };
}

/** True when `x` is a decoded record rather than a fault. */
export function isRecord(x: DecodedRecord | RecordFault): x is DecodedRecord {
  return typeof x !== "string";
}
