/**
 * Values a read returns stay the caller's (read-12): a binary value decoded from a block cache
 * block is copied out before the read returns, because the block's memory is a slab block that a
 * later fill reuses (engine/block-cache.ts), and the shared objects a read fills again per call
 * (engine/reads.ts: the synchronous token, the expectation) never reach the caller. The
 * property: every value any read returned holds the bytes it was read with, byte for byte, after
 * later reads evicted and refilled every block many times over, after an in-place compaction
 * rewrote the segments, and after a reopen.
 *
 * How it works: a store with the smallest block cache (four blocks, so a read-all refills each
 * block memory dozens of times) and the value cache on (hits, admissions) or off is read in a
 * stride through the keys with readSync and read; one value in five is kept, and the kept ones
 * are compared at the end. The twin sets the test-only hook `unsafeReadsForTests.aliasBlockValues`
 * (the value is handed out as a view of the block): the same check must find changed values.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { BLOCK_BYTES } from "../engine/block-cache.js";
import { unsafeReadsForTests } from "../engine/reads.js";
import { tempDir } from "./helpers/tmp.js";

const N = 2400;

/** Value `v` of key i: 200 bytes, distinct per key and version. */
function valueOf(i: number, v: number): Buffer {
  const b = Buffer.alloc(200);
  for (let j = 0; j < b.length; j++) b[j] = (i * 11 + j * 29 + v * 3) & 255;
  b.writeUInt32LE(i, 0);
  b.writeUInt32LE(v, 4);
  return b;
}

/** Kept values that no longer hold the bytes they were read with, after reads, a compaction and a reopen. */
async function changedValues(cacheBytes: number): Promise<number> {
  const dir = tempDir("read-stable");
  const opts = { durability: "none" as const, cacheBytes, blockCacheBytes: 4 * BLOCK_BYTES, segmentBytes: 256 * 1024, compaction: { auto: false, mode: "in-place" as const } };
  let s = await Engram.open(dir, opts);
  for (let i = 0; i < N; i += 400) await s.batch(Array.from({ length: 400 }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: valueOf(i + j, 1) })));
  const kept: Array<{ value: Uint8Array; want: Buffer }> = [];
  const pass = async (live: (i: number) => boolean, async: boolean): Promise<void> => {
    for (let r = 0; r < N; r++) {
      const i = (r * 977) % N; // a stride: blocks are missed, filled and evicted all the time
      const got = async ? await s.read(`k${i}`) : s.readSync(`k${i}`);
      if (!live(i)) continue;
      if (got.status !== "OK") throw new Error(`k${i}: ${got.status}`);
      if (r % 5 === 0) kept.push({ value: got.value as Uint8Array, want: valueOf(i, 1) });
    }
  };
  await pass(() => true, false);
  await pass(() => true, true);
  await pass(() => true, false); // the value cache's second touch: admitted copies and hits
  await s.batch(Array.from({ length: N / 4 }, (_, j) => ({ op: "forget" as const, key: `k${4 * j}` })));
  await s.compact();
  await pass((i) => i % 4 !== 0, false);
  await s.close();
  s = await Engram.open(dir, opts);
  await pass((i) => i % 4 !== 0, false);
  await s.close();
  expect(kept.length).toBeGreaterThan(2000);
  return kept.filter((k) => !Buffer.from(k.value.buffer, k.value.byteOffset, k.value.byteLength).equals(k.want)).length;
}

describe("values a read returned never alias memory that later reads reuse", () => {
  afterEach(() => {
    unsafeReadsForTests.aliasBlockValues = false;
  });

  it("every kept value is unchanged after block refills, an in-place compaction and a reopen (value cache off)", async () => {
    expect(await changedValues(0)).toBe(0);
  });

  it("the same with the value cache on (admitted copies, hits)", async () => {
    expect(await changedValues(1024 * 1024)).toBe(0);
  });

  it("twin: a value handed out as a view of its block is changed by later fills", async () => {
    unsafeReadsForTests.aliasBlockValues = true;
    expect(await changedValues(0)).toBeGreaterThan(0);
  });
});
