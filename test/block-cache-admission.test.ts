/**
 * The block cache's fill policy (reads-7, engine/block-cache.ts): while the budget has room every
 * missed block is read whole; once full, a block is read whole only on its second miss (a first
 * miss returns null and the caller preads the record alone), and an evicted block's buffer is
 * reused by the next fill. The property: the policy changes what is read, never what is served —
 * every range returned is exactly the file's bytes at the generation the read was authorized at,
 * and a value a read returned stays the caller's own after its block's memory is reused.
 *
 * How it works: against a real file and a real generation table, a cache of a few 16 KiB blocks
 * is filled, then missed blocks are counted (`counters`) and their bytes compared with the file;
 * a rewrite in place with the generation moved between a block's two misses must not be hidden.
 * The twins turn a rule off and must show the difference: with `secondMiss` off a first miss on a
 * full cache reads the block whole (and evicts); with `recycle` off a view kept past its block's
 * eviction keeps its bytes, while with it on the next fill overwrites them — which is why the
 * read path copies a block's value before it returns (engine/reads.ts finishRead), checked end to
 * end on a store whose block cache is the minimum (four blocks) with the value cache off: every
 * value any read returned is still right after thousands of later reads, across an in-place
 * compaction.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { BLOCK_BYTES, BlockCache } from "../engine/block-cache.js";
import { GenerationTable } from "../engine/generations.js";
import type { Segment } from "../engine/segment.js";
import { tempDir } from "./helpers/tmp.js";

const BLOCKS = 12;
const FILE_BYTES = BLOCKS * BLOCK_BYTES;

/** The fields of a Segment the block cache reads, over a real file. */
function fakeSegment(fd: number, cell: number): Segment {
  return { id: 3, fd, cell, dataEnd: FILE_BYTES, writer: null } as unknown as Segment;
}

function pattern(seed: number): Buffer {
  const bytes = Buffer.alloc(FILE_BYTES);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + seed * 7 + (i >>> 14)) & 255;
  return bytes;
}

/** Runs `body` with a real file holding pattern(1), a generation cell at 2, and a segment over them. */
function withFile<T>(body: (seg: Segment, gens: GenerationTable, fd: number, bytes: Buffer) => T): T {
  const dir = tempDir("block-admit");
  const file = path.join(dir, "seg");
  const bytes = pattern(1);
  fs.writeFileSync(file, bytes);
  const gens = new GenerationTable();
  const cell = gens.allocate(2) as number;
  const fd = fs.openSync(file, "r+");
  try {
    return body(fakeSegment(fd, cell), gens, fd, bytes);
  } finally {
    fs.closeSync(fd);
  }
}

/** The range of 200 bytes at 100 into block `b`. */
const at = (b: number): number => b * BLOCK_BYTES + 100;

/** Reads block b's range and checks it against `bytes`; returns "pass" (null: the caller preads) or "ok". */
function readBlock(cache: BlockCache, seg: Segment, gens: GenerationTable, b: number, bytes: Buffer, generation = 2): "pass" | "ok" {
  const got = cache.read(seg, gens, at(b), 200, generation);
  if (got === null) return "pass";
  expect(Buffer.from(got).equals(bytes.subarray(at(b), at(b) + 200))).toBe(true);
  return "ok";
}

describe("block cache admission: a full cache reads a block whole on its second miss", () => {
  it("fills every miss while the budget has room, then passes a first miss and fills the second", () => {
    withFile((seg, gens, _fd, bytes) => {
      const cache = new BlockCache(4 * BLOCK_BYTES);
      for (let b = 0; b < 4; b++) expect(readBlock(cache, seg, gens, b, bytes)).toBe("ok");
      expect(cache.counters).toMatchObject({ fills: 4, passes: 0, hits: 0 });
      expect(readBlock(cache, seg, gens, 0, bytes)).toBe("ok"); // a hit
      expect(readBlock(cache, seg, gens, 6, bytes)).toBe("pass");
      expect(cache.counters).toMatchObject({ fills: 4, passes: 1, hits: 1 });
      expect(readBlock(cache, seg, gens, 6, bytes)).toBe("ok");
      expect(cache.counters).toMatchObject({ fills: 5, passes: 1 });
      expect(readBlock(cache, seg, gens, 6, bytes)).toBe("ok"); // now cached
      expect(cache.counters).toMatchObject({ fills: 5, hits: 2 });
      expect(cache.bytesHeld).toBeLessThanOrEqual(4 * BLOCK_BYTES);
    });
  });

  it("twin: with the second-miss rule off a first miss on a full cache reads the block whole", () => {
    withFile((seg, gens, _fd, bytes) => {
      const cache = new BlockCache(4 * BLOCK_BYTES, true, true, { secondMiss: false });
      for (let b = 0; b < 4; b++) readBlock(cache, seg, gens, b, bytes);
      expect(readBlock(cache, seg, gens, 6, bytes)).toBe("ok");
      expect(cache.counters).toMatchObject({ fills: 5, passes: 0 });
    });
  });

  it("keeps no bytes for a first miss: a rewrite in place between the two misses is served new", () => {
    withFile((seg, gens, fd, bytes) => {
      const cache = new BlockCache(2 * BLOCK_BYTES);
      readBlock(cache, seg, gens, 0, bytes);
      readBlock(cache, seg, gens, 1, bytes);
      expect(readBlock(cache, seg, gens, 8, bytes)).toBe("pass");
      gens.bump(seg.cell); // odd: the rewrite begins
      const next = pattern(9);
      fs.writeSync(fd, next, 0, next.length, 0);
      gens.bump(seg.cell); // even again: 4
      expect(readBlock(cache, seg, gens, 8, next, 4)).toBe("ok");
      // The blocks cached at generation 2 serve nobody at 4: a first miss again, then the new bytes.
      expect(readBlock(cache, seg, gens, 0, next, 4)).toBe("pass");
      expect(readBlock(cache, seg, gens, 0, next, 4)).toBe("ok");
    });
  });

  it("bounds its set of once-missed blocks: it starts over at four times the cache's blocks", () => {
    withFile((seg, gens, _fd, bytes) => {
      const cache = new BlockCache(BLOCK_BYTES); // one block: the set holds at most 4 keys
      readBlock(cache, seg, gens, 0, bytes);
      for (let b = 1; b <= 5; b++) expect(readBlock(cache, seg, gens, b, bytes)).toBe("pass");
      expect(readBlock(cache, seg, gens, 1, bytes)).toBe("pass"); // forgotten when the set started over at block 5
      expect(readBlock(cache, seg, gens, 5, bytes)).toBe("ok");
    });
  });
});

describe("block cache recycling: an evicted block's memory is reused, so no view may outlive its read", () => {
  /** Keeps a view of block 0, then streams other blocks through a two-block cache; true if the view still holds block 0's bytes. */
  function viewSurvives(recycle: boolean): boolean {
    return withFile((seg, gens, _fd, bytes) => {
      const cache = new BlockCache(2 * BLOCK_BYTES, true, true, { recycle, secondMiss: false });
      const kept = cache.read(seg, gens, at(0), 200, 2) as Uint8Array;
      expect(kept).not.toBeNull();
      for (let round = 0; round < 3; round++) for (let b = 1; b < BLOCKS; b++) readBlock(cache, seg, gens, b, bytes);
      return Buffer.from(kept).equals(bytes.subarray(at(0), at(0) + 200));
    });
  }

  it("reuses the memory: a view kept past its block's eviction is overwritten by a later fill", () => {
    expect(viewSurvives(true)).toBe(false);
  });

  it("twin: with recycling off the same view keeps its bytes", () => {
    expect(viewSurvives(false)).toBe(true);
  });

  it("end to end: every value a read returned stays right after later reads reuse its block, across an in-place compaction", async () => {
    const dir = tempDir("block-admit-e2e");
    const opts = { durability: "none" as const, cacheBytes: 0, blockCacheBytes: 4 * BLOCK_BYTES, segmentBytes: 256 * 1024, compaction: { auto: false, mode: "in-place" as const } };
    const n = 3000;
    const valueOf = (i: number, v: number): Uint8Array => {
      const b = Buffer.alloc(200);
      for (let j = 0; j < b.length; j++) b[j] = (i * 7 + j * 13 + v) & 255;
      b.writeUInt32LE(i, 0);
      return b;
    };
    let s = await Engram.open(dir, opts);
    for (let i = 0; i < n; i += 500) await s.batch(Array.from({ length: 500 }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: valueOf(i + j, 1) })));
    const kept: Array<{ i: number; v: number; value: Uint8Array }> = [];
    const readAll = (v: (i: number) => number | null): void => {
      for (let r = 0; r < n; r++) {
        const i = (r * 1201) % n; // a stride through the keys: blocks are missed, filled and evicted all the time
        const got = s.readSync(`k${i}`);
        const want = v(i);
        if (want === null) {
          expect(got.status).toBe("NOT_FOUND");
          continue;
        }
        if (got.status !== "OK") throw new Error(`k${i}: ${got.status}`);
        expect(Buffer.from(got.value as Uint8Array).equals(valueOf(i, want))).toBe(true);
        if (r % 7 === 0) kept.push({ i, v: want, value: got.value as Uint8Array });
      }
    };
    readAll(() => 1);
    readAll(() => 1);
    await s.batch(Array.from({ length: n / 3 }, (_, j) => ({ op: "forget" as const, key: `k${3 * j}` })));
    await s.compact();
    readAll((i) => (i % 3 === 0 ? null : 1));
    await s.close();
    s = await Engram.open(dir, opts);
    readAll((i) => (i % 3 === 0 ? null : 1));
    await s.close();
    expect(kept.length).toBeGreaterThan(1000);
    for (const k of kept) expect(Buffer.from(k.value).equals(valueOf(k.i, k.v))).toBe(true);
  });
});
