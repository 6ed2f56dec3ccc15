/**
 * Hot-value cache copies (issue 11, gets): a cache hit on a binary value returns a copy taken
 * from a shared pool ArrayBuffer (engine/value-cache.ts copyOf) instead of a fresh ArrayBuffer.
 * The property: a caller's mutation of what a read returned never reaches the cache or any other
 * reader.
 *
 * How it works: an isolation check hands out many copies of several sources, writes over every
 * byte of each copy in turn, and requires that every other copy and every source still hold their
 * bytes. It runs against copyOf (small values from the pool, and values past
 * POOLED_COPY_BYTES_MAX), and — the twins — against an identity "copy" and a view that shares
 * its source's bytes, which it must reject. Then the same property end to end on a real store:
 * repeated readSync/read hits of cached binary values (pool-sized and large) are scribbled over
 * and later reads still return the written bytes; the unsafe option that turns the cache off
 * (`unsafe.skipReadValidation`) returns the same bytes too.
 */
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { copyOf, POOLED_COPY_BYTES_MAX } from "../engine/value-cache.js";
import { tempDir } from "./helpers/tmp.js";

type Copy = (src: Uint8Array) => Uint8Array;

const pattern = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

/** Returns null when no copy's mutation reached another copy or a source; else what leaked. */
function isolationFault(copy: Copy, sizes: number[], rounds: number): string | null {
  const sources = sizes.map((n, i) => pattern(n, i + 1));
  const expected = sources.map((s) => Uint8Array.from(s));
  const copies: Array<{ bytes: Uint8Array; from: number }> = [];
  for (let r = 0; r < rounds; r++) sources.forEach((s, i) => copies.push({ bytes: copy(s), from: i }));
  for (const c of copies) if (!equal(c.bytes, expected[c.from] as Uint8Array)) return "a copy does not hold its source's bytes";
  for (let k = 0; k < copies.length; k++) {
    const victim = copies[k] as { bytes: Uint8Array; from: number };
    victim.bytes.fill(0xee);
    for (let j = 0; j < sources.length; j++) if (!equal(sources[j] as Uint8Array, expected[j] as Uint8Array)) return `mutating copy ${k} changed source ${j}`;
    for (let j = k + 1; j < copies.length; j++) {
      const other = copies[j] as { bytes: Uint8Array; from: number };
      if (!equal(other.bytes, expected[other.from] as Uint8Array)) return `mutating copy ${k} changed copy ${j}`;
    }
  }
  return null;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

describe("copyOf: every copy owns its bytes", () => {
  const SIZES = [0, 1, 7, 256, 1000, POOLED_COPY_BYTES_MAX, POOLED_COPY_BYTES_MAX + 1, 20_000];

  it("copies of small (pooled) and large values never share a byte with each other or their source", () => {
    // 12 rounds × ~30 KiB crosses several 64 KiB pools, so pool turnover is covered too.
    expect(isolationFault(copyOf, SIZES, 12)).toBeNull();
    expect(copyOf(pattern(256, 3))).toBeInstanceOf(Uint8Array);
  });

  it("twins: an identity copy and a view sharing its source's bytes are caught", () => {
    expect(isolationFault((s) => s, SIZES, 2)).not.toBeNull();
    expect(isolationFault((s) => new Uint8Array(s.buffer, s.byteOffset, s.byteLength), SIZES, 2)).not.toBeNull();
  });
});

describe("a store's cached binary values survive callers that mutate what they read", () => {
  for (const size of [256, POOLED_COPY_BYTES_MAX + 100]) {
    it(`${size}-byte values: readSync and read hits scribbled over never change a later read`, async () => {
      const dir = tempDir("cache-copies");
      const store = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
      const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
      for (const [i, k] of keys.entries()) await store.write(k, pattern(size, i));
      for (let round = 0; round < 5; round++) {
        for (const [i, k] of keys.entries()) {
          const a = store.readSync(k);
          const b = await store.read(k);
          if (a.status !== "OK" || b.status !== "OK") throw new Error(`${k} not found`);
          expect(equal(a.value as Uint8Array, pattern(size, i)), `${k} round ${round} (sync)`).toBe(true);
          expect(equal(b.value as Uint8Array, pattern(size, i)), `${k} round ${round} (async)`).toBe(true);
          (a.value as Uint8Array).fill(0xee);
          (b.value as Uint8Array).fill(0xdd);
        }
      }
      await store.close();
      const naive = await Engram.open(dir, { durability: "none", compaction: { auto: false }, unsafe: { skipReadValidation: true } });
      for (const [i, k] of keys.entries()) {
        const r = naive.readSync(k);
        expect(r.status === "OK" && equal(r.value as Uint8Array, pattern(size, i)), `${k} with the cache off`).toBe(true);
      }
      await naive.close();
    });
  }
});
