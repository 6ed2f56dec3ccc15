/**
 * xxh64 over byte ranges, via xxhash-wasm. The WASM module initialises asynchronously once per
 * thread; every other function here is synchronous and requires `initChecksum()` to have resolved.
 */
import xxhash from "xxhash-wasm";

type H64Raw = (bytes: Uint8Array, seed?: bigint) => bigint;
type Create64 = (seed?: bigint) => { update(input: Uint8Array): unknown; digest(): bigint };
let h64Raw: H64Raw | null = null;
let create64: Create64 | null = null;
let initializing: Promise<void> | null = null;

/** Loads the xxhash WASM module; resolves immediately once loaded. */
export function initChecksum(): Promise<void> {
  if (h64Raw !== null) return Promise.resolve();
  if (initializing === null) {
    initializing = xxhash().then((api) => {
      h64Raw = api.h64Raw;
      create64 = api.create64;
    });
  }
  return initializing;
}

/** xxh64 (seed 0) of bytes[start, end). */
export function checksum64(bytes: Uint8Array, start: number, end: number): bigint {
  if (h64Raw === null) throw new Error("checksum64 before initChecksum() resolved");
  return h64Raw(bytes.subarray(start, end), 0n);
}

/** xxh64 (seed 0) of the concatenation of `parts`, streamed: no concatenated copy is built. */
export function checksum64Of(parts: readonly Uint8Array[]): bigint {
  if (h64Raw === null || create64 === null) throw new Error("checksum64Of before initChecksum() resolved");
  if (parts.length === 1) return h64Raw(parts[0] as Uint8Array, 0n);
  const state = create64(0n);
  for (const p of parts) state.update(p);
  return state.digest();
}

/*
 * Batched record sums (bulk-6). xxhash-wasm's h64Raw copies its input into the module's memory
 * and masks a BigInt on every call (~0.6 µs of a bulk record). `writeRecordSums` copies a run of
 * contiguous records into a second instance's memory once and hashes each where it lies. The
 * library does not expose its instance, so one is made here by observing WebAssembly.instantiate
 * for the duration of one xxhash() call (appended here, apart from the functions above, which the
 * compaction branch reworks the same way: the two instances can be merged once both land).
 */

/** The module's own exports: its memory (growable), and xxh64 over memory[ptr, ptr + len) as a signed i64. */
interface SumExports {
  mem: { readonly buffer: ArrayBuffer };
  xxh64: (ptr: number, len: number, seed: bigint) => bigint;
  /** The library's h64Raw of the call that made the instance: growing the memory through it keeps the library's own view valid. */
  grow: (bytes: number) => void;
}
/** The part of the global WebAssembly object used here (the compiler's lib has no WebAssembly types). */
interface SumWasmGlobal {
  instantiate: (...args: unknown[]) => Promise<unknown>;
}
let sumExports: SumExports | null = null;
let sumLoading: Promise<void> | null = null;

/** Bytes of records one run copies into the module's memory at most (longer runs are split): bounds its growth. */
export const RECORD_SUMS_RUN_BYTES_MAX = 4 * 1024 * 1024;

/**
 * Loads the instance writeRecordSums hashes in; resolves once it is ready (or known unusable:
 * writeRecordSums then hashes each record with checksum64). Called
 * and once at module load, so a store that awaited initChecksum() normally finds it ready.
 */
export function initRecordSums(): Promise<void> {
  sumLoading ??= loadSumExports().catch(() => undefined);
  return sumLoading;
}

/** Instantiates xxhash-wasm once more, keeping the instance's raw exports when they hash as h64Raw does. */
async function loadSumExports(): Promise<void> {
  const wasm = (globalThis as unknown as { WebAssembly: SumWasmGlobal }).WebAssembly;
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
  const ex = (seen as { exports?: Partial<SumExports> } | null)?.exports;
  if (ex === undefined || typeof ex.xxh64 !== "function" || ex.mem === undefined || !(ex.mem.buffer instanceof ArrayBuffer)) return;
  const own = api.h64Raw;
  const candidate: SumExports = { mem: ex.mem, xxh64: ex.xxh64, grow: (bytes) => void own(new Uint8Array(bytes), 0n) };
  const probe = Buffer.from("engram xxh64 record sums probe");
  new Uint8Array(candidate.mem.buffer).set(probe, 0);
  if (BigInt.asUintN(64, candidate.xxh64(0, probe.length, 0n)) === api.h64Raw(probe, 0n)) sumExports = candidate;
}
void initRecordSums();

/**
 * Writes each record's checksum: for every record r of `records` (a record ends in 8 bytes for its
 * sum), stores xxh64 (seed 0) of r[0, r.length - 8) little-endian into r[r.length - 8, r.length).
 * Records lying back to back in one ArrayBuffer are copied into the module's memory in one run and
 * hashed where they lie; the sums are exactly checksum64's. Requires initChecksum() to have resolved.
 */
export function writeRecordSums(records: readonly Uint8Array[]): void {
  if (h64Raw === null) throw new Error("writeRecordSums before initChecksum() resolved");
  let i = 0;
  while (i < records.length) {
    const first = records[i] as Uint8Array;
    let end = i + 1;
    let bytes = first.byteLength;
    for (; end < records.length; end++) {
      const r = records[end] as Uint8Array;
      const prev = records[end - 1] as Uint8Array;
      if (r.buffer !== first.buffer || r.byteOffset !== prev.byteOffset + prev.byteLength || bytes + r.byteLength > RECORD_SUMS_RUN_BYTES_MAX) break;
      bytes += r.byteLength;
    }
    if (sumExports !== null && bytes <= RECORD_SUMS_RUN_BYTES_MAX && sumExports.mem.buffer.byteLength < bytes) sumExports.grow(bytes);
    // Still too small only if the observed instance was not the one grown (another xxhash() call
    // was instantiated meanwhile): never grow memory whose library view this module does not own.
    if (sumExports === null || bytes > RECORD_SUMS_RUN_BYTES_MAX || sumExports.mem.buffer.byteLength < bytes) writeSumsEach(records, i, end);
    else writeSumsRun(sumExports, records, i, end, bytes);
    i = end;
  }
}

/** writeRecordSums for records[from, to), back to back and `bytes` long in all: one copy into the module, one call per record. */
function writeSumsRun(ex: SumExports, records: readonly Uint8Array[], from: number, to: number, bytes: number): void {
  if (ex.mem.buffer.byteLength < bytes) throw new Error(`writeRecordSums: a run of ${bytes} bytes exceeds the module's memory`);
  const first = records[from] as Uint8Array;
  const mem = new Uint8Array(ex.mem.buffer, 0, bytes);
  mem.set(new Uint8Array(first.buffer, first.byteOffset, bytes));
  const view = new DataView(first.buffer, first.byteOffset, bytes);
  let at = 0;
  for (let i = from; i < to; i++) {
    const len = (records[i] as Uint8Array).byteLength;
    if (len < 8) throw new Error(`writeRecordSums: record ${i} is ${len} bytes, shorter than its sum`);
    view.setBigInt64(at + len - 8, ex.xxh64(at, len - 8, 0n), true); // the signed i64's bits are the u64 sum's
    at += len;
  }
  if (at !== bytes) throw new Error(`writeRecordSums: hashed ${at} of a run's ${bytes} bytes`);
}

/** writeRecordSums one checksum64 call per record (no raw exports, or a record longer than a run). */
function writeSumsEach(records: readonly Uint8Array[], from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const r = records[i] as Uint8Array;
    if (r.byteLength < 8) throw new Error(`writeRecordSums: record ${i} is ${r.byteLength} bytes, shorter than its sum`);
    new DataView(r.buffer, r.byteOffset, r.byteLength).setBigUint64(r.byteLength - 8, checksum64(r, 0, r.byteLength - 8), true);
  }
}
