/**
 * The record codec. A record is self-delimiting and self-checking: length first, xxh64 last, and
 * the checksum covers content only (never the record's offset), so compaction copies records
 * verbatim. That is exactly why a checksum alone cannot tell a read at a moved offset from a good
 * one, and why readers also compare type, scope, key and generation (engine/reads.ts).
 */
import { checksum64 } from "./checksum.js";
import * as C from "./constants.js";
import { readU64 } from "./u64.js";
import { assert } from "../rules/assert.js";
import { asBuffer, assertInput, assertNamed, decodePayload, utf8, utf8Length, valueLength, writeName, type DecodedRecord, type ExpectedNames, type RecordFault, type RecordInput } from "./record-common.js";
import { checkRecordAtV3, decodeRecordV3, fillV3, lengthAtV3, namesAtV3, probeRecordV3, recordLengthV3, typeAtV3 } from "./record-v3.js";
import { formatVersionWritten, isLeanFrame } from "./version-written.js";

export { assertInput, assertNamed, valueLength, type DecodedRecord, type ExpectedNames, type RecordFault, type RecordInput } from "./record-common.js";

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
  const valueLen = valueLength(value);
  if (isLeanFrame(formatVersionWritten())) {
    const lean = recordLengthV3(scopeLen, keyLen, valueLen, seq, generation, expiresAt);
    const at = arena.claim(lean); // before `current`: the claim may open a new chunk
    fillV3(arena.current, at, lean, type, flags, seq, generation, expiresAt, scope, scopeLen, key, keyLen, value, valueLen, false);
    return lean;
  }
  const length = C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen;
  const base = arena.claim(length);
  fillFields(arena.current, base, length, scopeLen, keyLen, type, flags, seq, generation, expiresAt, scope, key, value, false);
  return length;
}

/** Lays out checked fields as a record of the written format (from `arena` when given) and writes its checksum. */
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
  const valueLen = valueLength(value);
  const sum = arena === undefined || !arena.defersSums;
  if (isLeanFrame(formatVersionWritten())) {
    const lean = type === C.RecordType.GROUP ? C.GROUP_FRAME_BYTES_V3 : recordLengthV3(scopeLen, keyLen, valueLen, seq, generation, expiresAt);
    const buf = arena === undefined ? Buffer.allocUnsafe(lean) : arena.take(lean);
    fillV3(buf, 0, lean, type, givenFlags, seq, generation, expiresAt, scope, scopeLen, key, keyLen, value, valueLen, sum);
    return buf;
  }
  const length = C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen;
  const buf = arena === undefined ? Buffer.allocUnsafe(length) : arena.take(length);
  fillFields(buf, 0, length, scopeLen, keyLen, type, givenFlags, seq, generation, expiresAt, scope, key, value, sum);
  return buf;
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

/** Most bytes of finished arenas' chunks kept for reuse (ChunkPool), across every store of the process. */
export const RECORD_ARENA_POOL_BYTES_MAX = 4 * RECORD_ARENA_CHUNK_BYTES_MAX;

/**
 * Chunks of arenas whose records are done with (RecordArena.recycle), handed to the next arenas
 * instead of fresh ones. A fresh chunk is fresh memory: a bulk load of 200k × 256 B in batches of
 * 1000 allocated one ~290 KB chunk per batch, and its first writes (record encoding) took a page
 * fault per 4 KiB — ~10 µs each on the machines measured, 17 % of the load's main-thread time.
 * Bounded by RECORD_ARENA_POOL_BYTES_MAX; a chunk larger than RECORD_ARENA_CHUNK_BYTES_MAX (one
 * huge record's) is never kept.
 */
class ChunkPool {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  /** Chunks handed out again since load (tests and bench/: that the pool is used). */
  reused = 0;

  /** A chunk of at least `size` bytes (contents undefined): a kept one no larger than 4 × size, else a fresh one. */
  take(size: number): Buffer {
    for (let i = this.chunks.length - 1; i >= 0; i--) {
      const c = this.chunks[i] as Buffer; // in bounds: i < length
      if (c.length < size || c.length > 4 * size) continue;
      this.chunks.splice(i, 1);
      this.bytes -= c.length;
      this.reused += 1;
      return c;
    }
    return Buffer.allocUnsafeSlow(size);
  }

  /** Keeps `chunk` for a later take() while the pool has room for it (nothing else may hold it any more). */
  give(chunk: Buffer): void {
    assert(chunk.byteOffset === 0 && chunk.length === chunk.buffer.byteLength, "a pooled chunk is a whole allocation");
    if (chunk.length > RECORD_ARENA_CHUNK_BYTES_MAX || this.bytes + chunk.length > RECORD_ARENA_POOL_BYTES_MAX) return;
    if (unsafeArenaForTests.poison) chunk.fill(0xa5); // tests: a record still read from a recycled chunk is garbage at once
    this.chunks.push(chunk);
    this.bytes += chunk.length;
  }

  /** Drops every kept chunk (tests: arenas made next take fresh chunks of exactly the size they ask). */
  clear(): void {
    this.chunks.length = 0;
    this.bytes = 0;
  }
}

/** The process's pool of arena chunks (the main thread's: a worker has its own module). */
export const arenaChunks = new ChunkPool();

/**
 * Test switches, never set by the engine or any option (test/arena-recycle.test.ts): `poison`
 * overwrites every chunk given back to the pool, so that a record read from it afterwards is
 * garbage; `recycleAtSeal` makes a batch give its chunks back when it is sealed — before its
 * group is written — the early release whose chunks a later batch then overwrites.
 */
export const unsafeArenaForTests = { poison: false, recycleAtSeal: false };

/**
 * Hands out the buffers of a batch's records carved in order from a few shared chunks, so that
 * consecutive records lie contiguous in memory: the group's body is then hashed and written as a
 * few runs (segments/group.ts `contiguousRuns`) instead of one allocation, one iovec and one
 * concatenation copy per record. Chunks start small and double, so a batch of two ops costs a
 * few KiB and one of 1000 a handful of chunks; an owner that expects more bytes (a batch like
 * the one before) names its first chunk's size. Not thread-safe; one arena per batch plan.
 */
export class RecordArena {
  /**
   * With `defersSums` the encoder leaves each record's checksum unwritten: its owner writes them
   * all at once (segments/checksum.ts writeRecordSums) before a record leaves it. Such a record
   * does not decode until then. `firstBytes` is the first chunk's size (within the chunk bounds):
   * where the records' total is known about, one chunk instead of seven doubling ones (bulk-9:
   * seven allocations, runs, hash copies and iovecs per batch of 1000 × 256 B).
   */
  constructor(
    readonly defersSums = false,
    firstBytes = RECORD_ARENA_CHUNK_BYTES_MIN,
  ) {
    this.nextBytes = Math.min(Math.max(firstBytes, RECORD_ARENA_CHUNK_BYTES_MIN), RECORD_ARENA_CHUNK_BYTES_MAX);
  }

  private chunk: Buffer = Buffer.alloc(0);
  private used = 0;
  private nextBytes: number;
  /** Every chunk this arena took (whole), for recycle(). */
  private readonly taken: Buffer[] = [];
  /** Set by recycle(): the chunks are the pool's, and nothing more is claimed. */
  private recycled = false;
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
    assert(!this.recycled, "a recycled arena claims nothing");
    if (this.used + bytes > this.chunk.length) {
      if (this.defersSums && this.used > 0) this.full.push(this.chunk.subarray(0, this.used));
      this.chunk = arenaChunks.take(Math.max(bytes, this.nextBytes));
      this.taken.push(this.chunk);
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

  /** True once recycle() gave the chunks back. */
  get isRecycled(): boolean {
    return this.recycled;
  }

  /**
   * Gives every chunk back to the pool, for later arenas to overwrite. Only once nothing reads or
   * writes any buffer this arena handed out: a batch's, once its group is written and applied
   * (engine/commit.ts LogOp.release). Called at most once.
   */
  recycle(): void {
    assert(!this.recycled, "an arena is recycled once");
    this.recycled = true;
    for (const chunk of this.taken) arenaChunks.give(chunk);
    this.taken.length = 0;
    this.full.length = 0;
    this.chunk = Buffer.alloc(0);
    this.used = 0;
  }

  /** The bytes handed out so far, as runs of records lying back to back (one per chunk, in order). */
  runs(): Buffer[] {
    assert(this.defersSums, "only a deferring arena keeps its runs");
    return this.used > 0 ? [...this.full, this.chunk.subarray(0, this.used)] : [...this.full];
  }
}

/**
 * Reads only the fixed fields at `at` and says whether they describe a plausible record that fits
 * in `end`. Returns the record length, or the fault. Cheap: no checksum.
 */
export function probeRecord(bytes: Uint8Array, at: number, end: number, version: number = formatVersionWritten()): number | RecordFault {
  if (isLeanFrame(version)) return probeRecordV3(bytes, at, end);
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

/**
 * Decodes the record at `at` (bytes up to `end` are available). Returns the record or the fault;
 * never throws on bad bytes, and never returns a record whose checksum failed. With `withValue`
 * false the value is not materialized (recovery and compaction need only the metadata); with
 * "view" a binary value is a view of `bytes` instead of a copy (for a caller that owns `bytes`
 * and hands them on: a point read's fresh buffer).
 */
export function decodeRecord(bytes: Uint8Array, at: number, end: number, withValue: boolean | "view" = true, names?: ExpectedNames, version: number = formatVersionWritten()): DecodedRecord | RecordFault {
  if (isLeanFrame(version)) return decodeRecordV3(bytes, at, end, withValue, names);
  const length = probeRecord(bytes, at, end, version);
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
  const fields = { type, flags, seq, generation, expiresAt, length };
  return decodePayload(bytes, fields, at + C.RECORD_FIXED_BYTES, scopeLen, keyLen, valueLen, withValue, names);
}

/**
 * Checks the record at `at` — fixed fields, extent and checksum — without decoding it. Returns its
 * length, or the fault. The cheap path of compaction, which copies records verbatim.
 */
export function checkRecordAt(bytes: Uint8Array, at: number, end: number, version: number = formatVersionWritten()): number | RecordFault {
  if (isLeanFrame(version)) return checkRecordAtV3(bytes, at, end);
  const length = probeRecord(bytes, at, end, version);
  if (typeof length !== "number") return length;
  const sumAt = at + length - C.RECORD_CHECKSUM_BYTES;
  return checksum64(bytes, at, sumAt) === asBuffer(bytes).readBigUInt64LE(sumAt) ? length : "checksum";
}

/** The type of the (already checked) record at `at`. */
export function recordTypeAt(bytes: Uint8Array, at: number, version: number = formatVersionWritten()): C.RecordTypeValue {
  if (isLeanFrame(version)) return typeAtV3(bytes, at);
  return asBuffer(bytes).readUInt8(at + C.R_TYPE) as C.RecordTypeValue;
}

/** The scope and key of the (already checked) record at `at`. */
export function recordNamesAt(bytes: Uint8Array, at: number, version: number = formatVersionWritten()): { scope: string; key: string } {
  if (isLeanFrame(version)) return namesAtV3(bytes, at);
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

/** A record's total bytes as a pure function of its fields (per record frame): what hint version 3 derives instead of storing. */
export type RecordLengthOf = (scopeLen: number, keyLen: number, valueLen: number, seq: number, generation: number, expiresAt: number) => number;

/** The 48-byte frame's length: its fixed bytes plus the payload. */
const lengthOfFrame2: RecordLengthOf = (scopeLen, keyLen, valueLen) => C.RECORD_OVERHEAD + scopeLen + keyLen + valueLen;

/** The record length function of segments of format `version`. */
export function recordLengthOf(version: number): RecordLengthOf {
  return isLeanFrame(version) ? recordLengthV3 : lengthOfFrame2;
}

/** The total length of the (already checked, or just encoded) record at `at` of a segment of format `version`: the field it starts with. */
export function recordLengthAt(bytes: Uint8Array, at: number, version: number = formatVersionWritten()): number {
  return isLeanFrame(version) ? lengthAtV3(bytes, at) : asBuffer(bytes).readUInt32LE(at + C.R_LENGTH);
}
