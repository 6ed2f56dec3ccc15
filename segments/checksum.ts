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
 * back-to-back records into a second instance's memory once and hashes each where it lies. The
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
 * Writes the checksum of every record of `run`, records laid back to back from run[0] to its end:
 * each starts with its total length (u32 little-endian, at least 12) and ends in 8 bytes that get
 * xxh64 (seed 0) of all its bytes before them, little-endian (exactly checksum64's sum). The run
 * is copied into the hash module's memory once and each record hashed where it lies; a run over
 * RECORD_SUMS_RUN_BYTES_MAX is hashed record by record. Throws when a length does not tile the run.
 * Requires initChecksum() to have resolved.
 */
export function writeRecordSums(run: Uint8Array): void {
  if (h64Raw === null) throw new Error("writeRecordSums before initChecksum() resolved");
  const bytes = run.byteLength;
  const ex = sumExports;
  if (ex !== null && bytes <= RECORD_SUMS_RUN_BYTES_MAX && ex.mem.buffer.byteLength < bytes) ex.grow(bytes);
  // Still too small only if the observed instance was not the one grown (another xxhash() call
  // was instantiated meanwhile): never grow memory whose library view this module does not own.
  if (ex === null || bytes > RECORD_SUMS_RUN_BYTES_MAX || ex.mem.buffer.byteLength < bytes) writeSumsEach(run);
  else writeSumsRun(ex, run);
}

/** writeRecordSums by one copy of `run` into the module and one call per record. */
function writeSumsRun(ex: SumExports, run: Uint8Array): void {
  const bytes = run.byteLength;
  new Uint8Array(ex.mem.buffer, 0, bytes).set(run);
  const mem = new DataView(ex.mem.buffer, 0, bytes);
  const out = new DataView(run.buffer, run.byteOffset, bytes);
  let at = 0;
  while (at < bytes) {
    const len = at + 4 <= bytes ? mem.getUint32(at, true) : 0;
    if (len < 12 || at + len > bytes) throw new Error(`writeRecordSums: a record of ${len} bytes at ${at} does not fit a run of ${bytes}`);
    out.setBigInt64(at + len - 8, ex.xxh64(at, len - 8, 0n), true); // the signed i64's bits are the u64 sum's
    at += len;
  }
}

/** writeRecordSums one checksum64 call per record (no raw exports, or a run too long to copy). */
function writeSumsEach(run: Uint8Array): void {
  const bytes = run.byteLength;
  const view = new DataView(run.buffer, run.byteOffset, bytes);
  let at = 0;
  while (at < bytes) {
    const len = at + 4 <= bytes ? view.getUint32(at, true) : 0;
    if (len < 12 || at + len > bytes) throw new Error(`writeRecordSums: a record of ${len} bytes at ${at} does not fit a run of ${bytes}`);
    view.setBigUint64(at + len - 8, checksum64(run, at, at + len - 8), true);
    at += len;
  }
}
