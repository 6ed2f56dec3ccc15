/**
 * xxh64 over byte ranges, via xxhash-wasm. The WASM module initialises asynchronously once per
 * thread; every other function here is synchronous and requires `initChecksum()` to have resolved.
 *
 * Two ways in: `checksum64` hashes one range (xxhash-wasm's h64Raw copies the range into the
 * module's memory per call: ~1.5–2 µs of fixed cost per call here, measured in
 * docs/performance-history.md "compact-5"), and `firstBadSum` checks many records' stored checksums in one
 * go — the records' bytes are copied into the module's memory once, then each record is hashed
 * where it lies (one WASM call per record, no copy, no subarray): what a sealed-segment walk uses.
 */
import xxhash from "xxhash-wasm";
import { formatVersionWritten, isLeanFrame } from "./version-written.js";

type H64Raw = (bytes: Uint8Array, seed?: bigint) => bigint;
type Create64 = (seed?: bigint) => { update(input: Uint8Array): unknown; digest(): bigint };
/** The module's own exports: its memory, and xxh64 over memory[ptr, ptr+len) (a signed i64). */
interface RawExports {
  mem: { readonly buffer: ArrayBuffer };
  xxh64: (ptr: number, len: number, seed: bigint) => bigint;
}
/** The part of the global WebAssembly object used here (the compiler's lib has no WebAssembly types). */
interface WasmGlobal {
  instantiate: (...args: unknown[]) => Promise<unknown>;
}
let h64Raw: H64Raw | null = null;
let create64: Create64 | null = null;
let raw: RawExports | null = null;
let initializing: Promise<void> | null = null;

/**
 * Bytes one firstBadSum call copies into the module's memory at most (larger spans are checked
 * in pieces): bounds how far the module's memory grows (it never shrinks).
 */
export const SUM_SPAN_BYTES_MAX = 8 * 1024 * 1024;

/** Loads the xxhash WASM module; resolves immediately once loaded. */
export function initChecksum(): Promise<void> {
  if (h64Raw !== null) return Promise.resolve();
  if (initializing === null) initializing = load();
  return initializing;
}

/**
 * Instantiates xxhash-wasm, keeping its instance's raw exports too: the library does not expose
 * them, so WebAssembly.instantiate is observed for the duration of its one call (the hashes are
 * the library's own code either way). Without them, firstBadSum falls back to h64Raw per record.
 */
async function load(): Promise<void> {
  const wasm = (globalThis as unknown as { WebAssembly: WasmGlobal }).WebAssembly;
  const instantiate = wasm.instantiate;
  let seen: unknown = null;
  wasm.instantiate = async (...args: unknown[]): Promise<unknown> => {
    const made = await instantiate.apply(wasm, args);
    if (made !== null && typeof made === "object" && "instance" in made) seen = (made as { instance: unknown }).instance;
    return made;
  };
  let api: Awaited<ReturnType<typeof xxhash>>;
  try {
    api = await xxhash();
  } finally {
    wasm.instantiate = instantiate;
  }
  h64Raw = api.h64Raw;
  create64 = api.create64;
  raw = rawExportsOf(seen);
}

/** The raw exports of the xxhash instance when they have the expected shape and agree with h64Raw, else null. */
function rawExportsOf(instance: unknown): RawExports | null {
  const ex = (instance as { exports?: Partial<RawExports> } | null)?.exports;
  if (ex === undefined || typeof ex.xxh64 !== "function" || !(ex.mem?.buffer instanceof ArrayBuffer)) return null;
  const candidate: RawExports = { mem: ex.mem, xxh64: ex.xxh64 };
  const probe = Buffer.from("engram xxh64 probe");
  const want = (h64Raw as H64Raw)(probe, 0n); // the library copies the probe to its memory at 0
  return BigInt.asUintN(64, candidate.xxh64(0, probe.length, 0n)) === want ? candidate : null;
}

/** xxh64 (seed 0) of bytes[start, end). */
export function checksum64(bytes: Uint8Array, start: number, end: number): bigint {
  if (h64Raw === null) throw new Error("checksum64 before initChecksum() resolved");
  return h64Raw(bytes.subarray(start, end), 0n);
}

/** The module's memory as bytes, for checksumLow32; renewed when a grow replaced the buffer it views (and detached that one). */
let rawBytes: Uint8Array | null = null;

/**
 * The low 32 bits of xxh64 (seed 0) of bytes[start, end): the version-3 record checksum, exactly
 * `Number(BigInt.asUintN(32, checksum64(bytes, start, end)))`. With the raw exports the range is
 * copied into the module's memory (TypedArray#set of a view) and hashed there: no masked BigInt
 * per call (h64Raw's fixed cost; a point read and a record encode each pay one). A range longer
 * than the module's memory takes checksum64, which grows it.
 */
export function checksumLow32(bytes: Uint8Array, start: number, end: number): number {
  const r = raw;
  const len = end - start;
  if (r === null) return lowHalf(checksum64(bytes, start, end));
  const memory = r.mem.buffer;
  if (memory.byteLength < len) return lowHalf(checksum64(bytes, start, end));
  let mem = rawBytes;
  // A grow detaches the old buffer: a set() into a view of it throws, even of no bytes.
  if (mem === null || (mem.buffer !== memory && !unsafeChecksumForTests.keepStaleView)) mem = rawBytes = new Uint8Array(memory);
  // TypedArray#set of a view: two builtins. Buffer#copy runs node's argument checks in JS first,
  // interpreted in a short-lived process: ~1 µs of every cold put's two or three sums.
  mem.set(new Uint8Array(bytes.buffer, bytes.byteOffset + start, len), 0);
  return lowHalf(r.xxh64(0, len, 0n));
}

/**
 * Test-only: `keepStaleView` keeps checksumLow32's view of the module's memory after a grow
 * detached it (the copy then fails, or lands nowhere and the old bytes at 0 are hashed): the bug the
 * renewal prevents (test/checksum-low32.test.ts). Never set but by that test.
 */
export const unsafeChecksumForTests = { keepStaleView: false };

/** The low 32 bits of a sum (the raw export's signed i64 or h64Raw's u64: setBigInt64 wraps either to the same bits), without BigInt arithmetic. */
function lowHalf(sum: bigint): number {
  LOW_HALF.setBigInt64(0, sum, true);
  return LOW_HALF.getUint32(0, true);
}

/** xxh64 (seed 0) of the concatenation of `parts`, streamed: no concatenated copy is built. */
export function checksum64Of(parts: readonly Uint8Array[]): bigint {
  if (h64Raw === null || create64 === null) throw new Error("checksum64Of before initChecksum() resolved");
  if (parts.length === 1) return h64Raw(parts[0] as Uint8Array, 0n);
  const state = create64(0n);
  for (const p of parts) state.update(p);
  return state.digest();
}

/**
 * Checks `count` records of `bytes`: record i lies at starts[i] with length lengths[i] and ends
 * in its xxh64 over every byte before it (a little-endian u64, or its low 32 bits when `sumBytes`
 * is 4: format 3). The records must be in file order
 * and lie within bytes[from, to), a span of at most SUM_SPAN_BYTES_MAX. Returns the index of the
 * first record whose stored checksum differs, or -1 when all match.
 */
export function firstBadSum(bytes: Uint8Array, from: number, to: number, starts: Int32Array, lengths: Int32Array, count: number, sumBytes: 4 | 8 = 8): number {
  if (h64Raw === null) throw new Error("firstBadSum before initChecksum() resolved");
  if (count === 0) return -1;
  if (to - from > SUM_SPAN_BYTES_MAX || from < 0 || to > bytes.length) throw new Error(`firstBadSum: span [${from}, ${to}) of ${bytes.length} bytes over ${SUM_SPAN_BYTES_MAX}`);
  if (raw === null) return firstBadSumEach(bytes, starts, lengths, count, sumBytes);
  const r = raw;
  // Growing through the library keeps its own view of the memory valid (it renews it only when it
  // grows the memory itself); the hash of zeros it computes on the way is thrown away.
  if (r.mem.buffer.byteLength < to - from) h64Raw(new Uint8Array(to - from), 0n);
  new Uint8Array(r.mem.buffer, 0, to - from).set(bytes.subarray(from, to));
  const view = new DataView(r.mem.buffer);
  for (let i = 0; i < count; i++) {
    const at = (starts[i] as number) - from;
    const sumAt = at + (lengths[i] as number) - sumBytes;
    if (at < 0 || sumAt + sumBytes > to - from) throw new Error(`firstBadSum: record ${i} at ${starts[i]} outside [${from}, ${to})`);
    const sum = r.xxh64(at, sumAt - at, 0n);
    if (sumBytes === 8 ? sum !== view.getBigInt64(sumAt, true) : Number(BigInt.asUintN(32, sum)) !== view.getUint32(sumAt, true)) return i;
  }
  return -1;
}

/** firstBadSum one h64Raw call per record (no raw exports). */
function firstBadSumEach(bytes: Uint8Array, starts: Int32Array, lengths: Int32Array, count: number, sumBytes: 4 | 8): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) {
    const at = starts[i] as number;
    const sumAt = at + (lengths[i] as number) - sumBytes;
    const sum = checksum64(bytes, at, sumAt);
    if (sumBytes === 8 ? sum !== view.getBigUint64(sumAt, true) : Number(BigInt.asUintN(32, sum)) !== view.getUint32(sumAt, true)) return i;
  }
  return -1;
}

/**
 * Resolves once writeRecordSums can run: the same module and instance as initChecksum's (its raw
 * exports, kept by load()). A name of its own for the write path's open (engine/store.ts).
 */
export function initRecordSums(): Promise<void> {
  return initChecksum();
}

/** Bytes of records one writeRecordSums run copies into the module's memory at most (longer runs are hashed record by record): bounds its growth. */
export const RECORD_SUMS_RUN_BYTES_MAX = 4 * 1024 * 1024;

/**
 * Writes the checksum of every record of `run`, records laid back to back from run[0] to its end
 * (bulk-6), in the written format: each starts with its total length (format 3: a varint; 2: a
 * u32 little-endian; at least 12) and ends in 4 (format 3: the low half) or 8 bytes of the xxh64
 * (seed 0) of all its bytes before them, little-endian (exactly checksum64's sum).
 * The run is copied into the module's memory once and each record hashed where it lies (h64Raw per
 * record copies and masks a BigInt on each call: ~0.6 µs of a bulk record); a run over
 * RECORD_SUMS_RUN_BYTES_MAX, or no raw exports, is hashed record by record. Throws when a length
 * does not tile the run. Requires initChecksum() to have resolved.
 */
export function writeRecordSums(run: Uint8Array): void {
  if (h64Raw === null) throw new Error("writeRecordSums before initChecksum() resolved");
  const bytes = run.byteLength;
  if (raw === null || bytes > RECORD_SUMS_RUN_BYTES_MAX) return writeSumsEach(run);
  // Grown through the library, as firstBadSum does, so the library's own view of it stays valid.
  if (raw.mem.buffer.byteLength < bytes) h64Raw(new Uint8Array(bytes), 0n);
  writeSumsRun(raw, run);
}

/** writeRecordSums by one copy of `run` into the module and one call per record. */
function writeSumsRun(ex: RawExports, run: Uint8Array): void {
  const bytes = run.byteLength;
  new Uint8Array(ex.mem.buffer, 0, bytes).set(run);
  const mem = new DataView(ex.mem.buffer, 0, bytes);
  const out = new DataView(run.buffer, run.byteOffset, bytes);
  const lean = isLeanFrame(formatVersionWritten());
  let at = 0;
  while (at < bytes) {
    const len = lean ? varintLengthAt(run, at) : at + 4 <= bytes ? mem.getUint32(at, true) : 0;
    if (len < 12 || at + len > bytes) throw new Error(`writeRecordSums: a record of ${len} bytes at ${at} does not fit a run of ${bytes}`);
    if (lean) {
      LOW_HALF.setBigInt64(0, ex.xxh64(at, len - 4, 0n), true); // its low 32 bits, without BigInt arithmetic
      out.setUint32(at + len - 4, LOW_HALF.getUint32(0, true), true);
    }
    else out.setBigInt64(at + len - 8, ex.xxh64(at, len - 8, 0n), true); // the signed i64's bits are the u64 sum's
    at += len;
  }
}

/** Scratch for a sum's low half (format 3 stores the low 32 bits of the xxh64). */
const LOW_HALF = new DataView(new ArrayBuffer(8));

/** The length varint of a version-3 record at run[at] (0 when it does not end within 5 bytes: no record). */
function varintLengthAt(run: Uint8Array, at: number): number {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 5 && at + i < run.length; i++) {
    const b = run[at + i] as number;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value;
    scale *= 0x80;
  }
  return 0;
}

/** writeRecordSums one checksum64 call per record (no raw exports, or a run too long to copy). */
function writeSumsEach(run: Uint8Array): void {
  const bytes = run.byteLength;
  const view = new DataView(run.buffer, run.byteOffset, bytes);
  let at = 0;
  const lean = isLeanFrame(formatVersionWritten());
  while (at < bytes) {
    const len = lean ? varintLengthAt(run, at) : at + 4 <= bytes ? view.getUint32(at, true) : 0;
    if (len < 12 || at + len > bytes) throw new Error(`writeRecordSums: a record of ${len} bytes at ${at} does not fit a run of ${bytes}`);
    if (lean) view.setUint32(at + len - 4, Number(BigInt.asUintN(32, checksum64(run, at, at + len - 4))), true);
    else view.setBigUint64(at + len - 8, checksum64(run, at, at + len - 8), true);
    at += len;
  }
}
