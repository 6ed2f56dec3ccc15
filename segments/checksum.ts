/**
 * xxh64 over byte ranges, via xxhash-wasm. The WASM module initialises asynchronously once per
 * thread; every other function here is synchronous and requires `initChecksum()` to have resolved.
 */
import xxhash from "xxhash-wasm";

type H64Raw = (bytes: Uint8Array, seed?: bigint) => bigint;
let h64Raw: H64Raw | null = null;
let initializing: Promise<void> | null = null;

/** Loads the xxhash WASM module; resolves immediately once loaded. */
export function initChecksum(): Promise<void> {
  if (h64Raw !== null) return Promise.resolve();
  if (initializing === null) {
    initializing = xxhash().then((api) => {
      h64Raw = api.h64Raw;
    });
  }
  return initializing;
}

/** xxh64 (seed 0) of bytes[start, end). */
export function checksum64(bytes: Uint8Array, start: number, end: number): bigint {
  if (h64Raw === null) throw new Error("checksum64 before initChecksum() resolved");
  return h64Raw(bytes.subarray(start, end), 0n);
}
