/**
 * The issue-9 defect-1 script (test/retirement.test.ts and its child process): k and k2 in
 * segment 1, a rotation, a read of k2 paused after authorization, forget(k), forget(k2), gc twice.
 * The first gc empties segment 1 while the read still holds it; the second drops the tombstones.
 */
import type { Engram } from "../../src/engram.js";
import type { ReadResult } from "../../src/types.js";

export type RetireMode = "copy-on-write" | "in-place";

/** The value of k; long enough that k, k2 and the filler rotate a 4096-byte segment. */
export const K_VALUE = `forgotten-k-${"v".repeat(1400)}`;
export const K2_VALUE = `forgotten-k2-${"w".repeat(1400)}`;

/** Runs the script; returns the still-paused read of k2 (wrapped: an async function would wait for it). */
export async function runToSecondGc(store: Engram): Promise<{ reading: Promise<ReadResult> }> {
  await store.write("k", K_VALUE);
  await store.write("k2", K2_VALUE);
  await store.write("filler", "f".repeat(1400)); // does not fit: segment 2 starts
  const segs = store.stats().segments;
  if (segs.length < 2) throw new Error(`expected a rotation, have ${segs.length} segment(s)`);
  const reading = store.read("k2");
  await store.faults.waitFor("read:after-authorize");
  await store.forget("k");
  await store.forget("k2");
  await store.gc();
  await store.gc();
  return { reading };
}
