/**
 * The record codec. A record is self-delimiting and self-checking: length first, xxh64 last, and
 * the checksum covers content only (never the record's offset), so compaction copies records
 * verbatim. That is exactly why a checksum alone cannot tell a read at a moved offset from a good
 * one, and why readers also compare type, scope, key and generation (reader.ts).
 */
import { checksum64 } from "./checksum.js";
import * as C from "./constants.js";
import { InvalidArgumentError } from "./errors.js";
import { assertKey, assertScope } from "./names.js";

/** What a caller gives the encoder. */
export interface RecordInput {
  type: C.RecordTypeValue;
  /** RF_IN_BATCH or 0; the value-kind flag is derived from `value`. */
  flags?: number;
  seq: number;
  /** Slot generation (PUT, CLEAR), killed generation (TOMBSTONE), op count (BATCH_COMMIT). */
  generation: number;
  /** ms since epoch, 0 = never. */
  expiresAt?: number;
  scope: string;
  /** "" for SCOPE_ERASE and BATCH_COMMIT; 1–1024 bytes otherwise. */
  key: string;
  /** PUT only. */
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
  /** PUT: a string when RF_UTF8 is set, else bytes (a copy, never a view of the read buffer). */
  value: string | Uint8Array | null;
  /** Total bytes of the record, checksum included. */
  length: number;
}

/** Why bytes at an offset are not a record. */
export type RecordFault = "short" | "empty" | "length" | "structure" | "checksum";

const decoder = new TextDecoder("utf-8", { fatal: true });

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
  const keyless = r.type === C.RecordType.SCOPE_ERASE || r.type === C.RecordType.BATCH_COMMIT;
  if (keyless) {
    if (r.key !== "") throw new InvalidArgumentError("SCOPE_ERASE and BATCH_COMMIT records carry no key");
  } else {
    assertKey(r.key);
  }
  if (r.type === C.RecordType.PUT) {
    if (typeof r.value !== "string" && !(r.value instanceof Uint8Array)) {
      throw new InvalidArgumentError("value must be a string or a Uint8Array");
    }
    const bytes = typeof r.value === "string" ? Buffer.byteLength(r.value, "utf8") : r.value.byteLength;
    if (bytes > Math.min(valueBytesMax, C.VALUE_BYTES_MAX)) {
      throw new InvalidArgumentError(`value is ${bytes} bytes; at most ${Math.min(valueBytesMax, C.VALUE_BYTES_MAX)} (maxValueBytes)`);
    }
    if (typeof r.value === "string" && !r.value.isWellFormed()) throw new InvalidArgumentError("value string must be well-formed UTF-16");
  } else if (r.value !== undefined) {
    throw new InvalidArgumentError("only PUT records carry a value");
  }
}

/**
 * Encodes a record into a fresh buffer. Throws InvalidArgumentError (and produces nothing) for a
 * bad scope, key, value, or a value over `valueBytesMax`.
 */
export function encodeRecord(r: RecordInput, valueBytesMax: number = C.VALUE_BYTES_MAX): Buffer {
  assertInput(r, valueBytesMax);
  const scopeLen = Buffer.byteLength(r.scope, "utf8");
  const keyLen = Buffer.byteLength(r.key, "utf8");
  const value = r.value;
  const valueLen = value === undefined ? 0 : typeof value === "string" ? Buffer.byteLength(value, "utf8") : value.byteLength;
  const length = C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen;
  const buf = Buffer.allocUnsafe(length);
  const flags = (r.flags ?? 0) | (typeof value === "string" ? C.RF_UTF8 : 0);
  buf.writeUInt32LE(length, C.R_LENGTH);
  buf[C.R_TYPE] = r.type;
  buf[C.R_FLAGS] = flags;
  buf.writeUInt16LE(scopeLen, C.R_SCOPE_LEN);
  buf.writeUInt16LE(keyLen, C.R_KEY_LEN);
  buf.writeUInt16LE(0, C.R_RESERVED);
  buf.writeUInt32LE(valueLen, C.R_VALUE_LEN);
  buf.writeBigUInt64LE(BigInt(r.seq), C.R_SEQ);
  buf.writeBigUInt64LE(BigInt(r.generation), C.R_GENERATION);
  buf.writeBigUInt64LE(BigInt(r.expiresAt ?? 0), C.R_EXPIRES_AT);
  let at = C.RECORD_FIXED_BYTES;
  at += buf.write(r.scope, at, "utf8");
  at += buf.write(r.key, at, "utf8");
  if (typeof value === "string") at += buf.write(value, at, "utf8");
  else if (value !== undefined) at += Buffer.from(value.buffer, value.byteOffset, value.byteLength).copy(buf, at);
  if (at !== length - C.RECORD_CHECKSUM_BYTES) throw new Error(`record encode wrote ${at} of ${length - C.RECORD_CHECKSUM_BYTES} bytes`);
  buf.writeBigUInt64LE(checksum64(buf, 0, at), at);
  return buf;
}

/**
 * Reads only the fixed fields at `at` and says whether they describe a plausible record that fits
 * in `end`. Returns the record length, or the fault. Cheap: no checksum.
 */
export function probeRecord(bytes: Uint8Array, at: number, end: number): number | RecordFault {
  if (end - at < 4) return end - at === 0 ? "empty" : "short";
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  const length = view.getUint32(at + C.R_LENGTH, true);
  if (length === 0) return "empty";
  if (length < C.RECORD_OVERHEAD || length > C.RECORD_BYTES_MAX) return "length";
  if (end - at < C.RECORD_FIXED_BYTES) return "short";
  const type = bytes[at + C.R_TYPE] as number;
  const flags = bytes[at + C.R_FLAGS] as number;
  const scopeLen = view.getUint16(at + C.R_SCOPE_LEN, true);
  const keyLen = view.getUint16(at + C.R_KEY_LEN, true);
  const valueLen = view.getUint32(at + C.R_VALUE_LEN, true);
  if (type === 0 || type > C.RECORD_TYPE_MAX || (flags & ~C.RECORD_FLAGS_KNOWN) !== 0) return "structure";
  if (view.getUint16(at + C.R_RESERVED, true) !== 0) return "structure";
  if (scopeLen === 0 || scopeLen > C.SCOPE_BYTES_MAX || keyLen > C.KEY_BYTES_MAX) return "structure";
  if (C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen !== length) return "structure";
  if (end - at < length) return "short";
  return length;
}

/**
 * Decodes the record at `at` (bytes up to `end` are available). Returns the record or the fault;
 * never throws on bad bytes, and never returns a record whose checksum failed.
 */
export function decodeRecord(bytes: Uint8Array, at: number, end: number): DecodedRecord | RecordFault {
  const length = probeRecord(bytes, at, end);
  if (typeof length !== "number") return length;
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  const sumAt = at + length - C.RECORD_CHECKSUM_BYTES;
  if (checksum64(bytes, at, sumAt) !== view.getBigUint64(sumAt, true)) return "checksum";
  const seq = view.getBigUint64(at + C.R_SEQ, true);
  const generation = view.getBigUint64(at + C.R_GENERATION, true);
  const expiresAt = view.getBigUint64(at + C.R_EXPIRES_AT, true);
  const max = BigInt(C.SEQ_MAX);
  if (seq === 0n || seq > max || generation > max || expiresAt > max) return "structure";
  const type = bytes[at + C.R_TYPE] as C.RecordTypeValue;
  const flags = bytes[at + C.R_FLAGS] as number;
  const scopeLen = view.getUint16(at + C.R_SCOPE_LEN, true);
  const keyLen = view.getUint16(at + C.R_KEY_LEN, true);
  const valueLen = view.getUint32(at + C.R_VALUE_LEN, true);
  const scopeAt = at + C.RECORD_FIXED_BYTES;
  const valueAt = scopeAt + scopeLen + keyLen;
  let scope: string;
  let key: string;
  let value: string | Uint8Array | null = null;
  try {
    scope = decoder.decode(bytes.subarray(scopeAt, scopeAt + scopeLen));
    key = decoder.decode(bytes.subarray(scopeAt + scopeLen, valueAt));
    if (type === C.RecordType.PUT) {
      const raw = bytes.subarray(valueAt, valueAt + valueLen);
      value = (flags & C.RF_UTF8) !== 0 ? decoder.decode(raw) : Uint8Array.prototype.slice.call(raw);
    } else if (valueLen !== 0) {
      return "structure";
    }
  } catch {
    return "structure";
  }
  return { type, flags, seq: Number(seq), generation: Number(generation), expiresAt: Number(expiresAt), scope, key, value, length };
}

/** True when `x` is a decoded record rather than a fault. */
export function isRecord(x: DecodedRecord | RecordFault): x is DecodedRecord {
  return typeof x !== "string";
}
