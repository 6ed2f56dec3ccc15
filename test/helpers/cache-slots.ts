/**
 * Slots and values for the value cache's own tests (value-cache-admission, value-cache-order):
 * a real Slot at a distinct made-up location, and a 200-byte value that names its index.
 */
import { Slot } from "../../engine/keydir.js";

/** The slot of `key` in "global" at a location of its own for index `i` (segment 1–5, offset 64·i). */
export function cacheSlot(key: string, i: number): Slot {
  const s = new Slot("global", key);
  s.seg = 1 + (i % 5);
  s.off = 64 * i;
  s.len = 300;
  return s;
}

/** 200 bytes: byte 0 is 7, the rest `i & 255` (a hit's bytes say whose value it is). */
export function cacheValue(i: number): Uint8Array {
  const b = new Uint8Array(200);
  b.fill(i & 255);
  b[0] = 7;
  return b;
}
