/**
 * What both record frames share (record.ts, version 2; record-v3.ts, version 3): the record's
 * fields as callers give and get them, the input checks, and the UTF-8 name helpers.
 */
import * as C from "./constants.js";
import { InvalidArgumentError } from "../rules/errors.js";
import { assertKey, assertScope } from "../rules/names.js";
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
export function isIntIn(value: unknown, max: number): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && value <= max;
}

/** Checks an input before any byte is produced; throws InvalidArgumentError naming the field. */
export function assertInput(r: RecordInput, valueBytesMax: number): void {
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

/** The checks of encodeNamedRecord and encodeNamedInto; throws InvalidArgumentError for a bad integer or value. */
export function assertNamed(
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

/** The value checks of assertInput for a PUT: a string or bytes, within the limit, well-formed UTF-16. */
export function assertValue(value: unknown, valueBytesMax: number): void {
  if (typeof value !== "string" && !(value instanceof Uint8Array)) throw new InvalidArgumentError("value must be a string or a Uint8Array");
  const bytes = typeof value === "string" ? Buffer.byteLength(value, "utf8") : value.byteLength;
  const max = Math.min(valueBytesMax, C.VALUE_BYTES_MAX);
  if (bytes > max) throw new InvalidArgumentError(`value is ${bytes} bytes; at most ${max} (valueBytesMax)`);
  if (typeof value === "string" && !value.isWellFormed()) throw new InvalidArgumentError("value string must be well-formed UTF-16");
}

/** Bytes of a record's value in UTF-8 (a string) or as given (bytes); 0 for none. */
export function valueLength(value: string | Uint8Array | undefined): number {
  return value === undefined ? 0 : typeof value === "string" ? Buffer.byteLength(value, "utf8") : value.byteLength;
}

/** Strings up to this many UTF-16 units are measured and written by a JS loop (no native call). */
const SHORT_NAME_UNITS_MAX = 64;

/** Bytes of `s` in UTF-8: counted in JS when `s` is short and ASCII, else by Buffer.byteLength. */
export function utf8Length(s: string): number {
  if (s.length > SHORT_NAME_UNITS_MAX) return Buffer.byteLength(s, "utf8");
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8");
  return s.length;
}

/** Writes `s` (`bytes` long in UTF-8) at `at`; returns `bytes`. ASCII (bytes === length) short names are copied unit by unit. */
export function writeName(buf: Buffer, s: string, bytes: number, at: number): number {
  if (bytes !== s.length || bytes > SHORT_NAME_UNITS_MAX) return buf.write(s, at, "utf8");
  for (let i = 0; i < bytes; i++) buf[at + i] = s.charCodeAt(i);
  return bytes;
}

/** Decodes UTF-8 strictly: Buffer's fast decoder, confirmed by the fatal one only when it replaced bytes. */
export function utf8(buf: Buffer, start: number, end: number): string {
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
export function utf8Known(buf: Buffer, start: number, end: number, known: string | undefined): string {
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
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The end of both frames' decodeRecord: the payload checks of FORMAT.md's check 8 (a value only
 * on PUT, SCOPE_ERASE and GROUP; a GROUP's shape; strict UTF-8) and the decoded record, whose
 * scope starts at `scopeAt`. The frame's own fields (`fields`) were checked by the caller.
 */
export function decodePayload(
  bytes: Uint8Array,
  fields: Readonly<Omit<DecodedRecord, "scope" | "key" | "value">>,
  scopeAt: number,
  scopeLen: number,
  keyLen: number,
  valueLen: number,
  withValue: boolean | "view",
  names: ExpectedNames | undefined,
): DecodedRecord | RecordFault {
  const { type, flags } = fields;
  if (type !== C.RecordType.PUT && type !== C.RecordType.SCOPE_ERASE && type !== C.RecordType.GROUP && valueLen !== 0) return "structure";
  if (type === C.RecordType.GROUP && (valueLen !== C.GROUP_VALUE_BYTES || keyLen !== 0 || (flags & C.RF_UTF8) !== 0)) return "structure";
  const buf = asBuffer(bytes);
  const valueAt = scopeAt + scopeLen + keyLen;
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
  return { type, flags, seq: fields.seq, generation: fields.generation, expiresAt: fields.expiresAt, scope, key, value, length: fields.length };
}
