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
