/**
 * Memory that lives as long as the store that allocates it — hint regions, block-cache slabs —
 * allocated as a SharedArrayBuffer. V8 counts a plain ArrayBuffer's backing store as external
 * memory and answers each large one with collections ("external memory pressure": scavenges and
 * a mark-compact), which can only ever free short-lived buffers. A SharedArrayBuffer's backing
 * store is not counted there: `process.memoryUsage()` shows it in `arrayBuffers`, not in
 * `external`. At 2M keys an open allocates ~117 MB of hint regions: with plain ArrayBuffers that
 * cost 7–10 collections, ~10 ms of a 46–48 ms open and first read (fifteenth session). The bytes
 * start zeroed (calloc: a large allocation is fresh pages, untouched until written). Nothing here
 * is shared with another thread; only the accounting differs.
 */
import { assert } from "../rules/assert.js";

/**
 * Test switch, never set by the engine or any option (test/long-lived-memory.test.ts):
 * `plainArrayBuffer` allocates long-lived memory as a plain ArrayBuffer (Buffer.alloc, zeroed
 * like the shared one), which V8 then counts as external memory, as before compact-15.
 */
export const longLivedForTests = { plainArrayBuffer: false };

/** A zeroed buffer of `bytes` bytes, starting its own (shared) ArrayBuffer, that V8 does not count as external memory. */
export function longLivedBuffer(bytes: number): Buffer {
  assert(Number.isSafeInteger(bytes) && bytes >= 0, `a long-lived buffer has a byte count, got ${bytes}`);
  if (longLivedForTests.plainArrayBuffer) return Buffer.alloc(bytes);
  const buf = Buffer.from(new SharedArrayBuffer(bytes));
  assert(buf.byteOffset === 0 && buf.length === bytes, "a long-lived buffer is its whole allocation");
  return buf;
}
