/**
 * The block cache of sealed segments (engine/block-cache.ts, option `blockCacheBytes`). The
 * property: a read served from a block gets exactly the bytes the file holds at the generation
 * the read was authorized at — an in-place rewrite (which moves the segment generation) is never
 * hidden by a block read before it.
 *
 * How it works: against a real file and a real generation table, blocks are read at one
 * generation, the file is rewritten in place with other bytes and the generation moved (odd, then
 * the next even value, as a worker does), and a read at the new generation must return the new
 * bytes. The twin is the same cache with its generation check off, which must return the stale
 * bytes (so the test can fail). A read whose generation moved during the block's pread must not
 * be cached. Then the limits: ranges across a block boundary, past the data end or in the active
 * segment's last block are refused (the caller preads), the budget holds, and bad option values are typed
 * errors. End to end, a store with the value cache off (every read goes through blocks) keeps
 * returning the right values of one scope across a sibling scope's erasure and an in-place
 * compaction of the shared segments, read before and after; the concurrent case is
 * test/torture.test.ts, whose stores run with the block cache on (the default).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { BLOCK_BYTES, BlockCache } from "../engine/block-cache.js";
import { GenerationTable } from "../engine/generations.js";
import type { Segment } from "../engine/segment.js";
import { tempDir } from "./helpers/tmp.js";

const FILE_BYTES = 5 * BLOCK_BYTES + 1000;

/** The fields of a Segment the block cache reads, over a real file. */
function fakeSegment(fd: number, cell: number, dataEnd: number, active = false): Segment {
  return { id: 7, fd, cell, dataEnd, writer: active ? {} : null } as unknown as Segment;
}

function fileWith(dir: string, seed: number): { file: string; bytes: Buffer } {
  const bytes = Buffer.alloc(FILE_BYTES);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 13 + seed) & 255;
  const file = path.join(dir, "seg");
  fs.writeFileSync(file, bytes);
  return { file, bytes };
}

/** Reads ranges at generation g, rewrites the file in place moving g to g+2, reads again; returns the stale reads seen. */
function staleAfterRewrite(cache: BlockCache): number {
  const dir = tempDir("blocks");
  const { file } = fileWith(dir, 1);
  const gens = new GenerationTable();
  const cell = gens.allocate(2) as number;
  const fd = fs.openSync(file, "r+");
  try {
    const seg = fakeSegment(fd, cell, FILE_BYTES);
    const ranges = Array.from({ length: 40 }, (_, i) => ({ off: (i * 7919) % (FILE_BYTES - 400), len: 300 }));
    for (const r of ranges) cache.read(seg, gens, r.off, r.len, 2);
    // An in-place rewrite: odd while the bytes change, then the next even generation.
    gens.bump(cell);
    const next = Buffer.alloc(FILE_BYTES);
    for (let i = 0; i < next.length; i++) next[i] = (i * 29 + 5) & 255;
    fs.writeSync(fd, next, 0, next.length, 0);
    gens.bump(cell);
    let stale = 0;
    for (const r of ranges) {
      const got = cache.read(seg, gens, r.off, r.len, 4);
      if (got === null) continue; // across a block boundary: the caller preads
      if (!Buffer.from(got).equals(next.subarray(r.off, r.off + r.len))) stale++;
    }
    return stale;
  } finally {
    fs.closeSync(fd);
  }
}

describe("block cache: a block serves only the generation it was read at", () => {
  it("returns the rewritten bytes after an in-place rewrite moved the generation", () => {
    expect(staleAfterRewrite(new BlockCache(4 * 1024 * 1024))).toBe(0);
  });

  it("twin: with the generation check off the same reads return the bytes the rewrite replaced", () => {
    expect(staleAfterRewrite(new BlockCache(4 * 1024 * 1024, false))).toBeGreaterThan(0);
  });

  it("does not keep a block whose generation moved while it was read", () => {
    const dir = tempDir("blocks");
    const { file, bytes } = fileWith(dir, 2);
    const gens = new GenerationTable();
    const cell = gens.allocate(2) as number;
    gens.bump(cell); // a rewrite began after the read was authorized at 2
    const fd = fs.openSync(file, "r");
    try {
      const cache = new BlockCache(1024 * 1024);
      const got = cache.read(fakeSegment(fd, cell, FILE_BYTES), gens, 100, 200, 2);
      // The bytes are handed back (the read protocol's own re-check then fails the read closed) but never cached.
      expect(got === null ? null : Buffer.from(got).equals(bytes.subarray(100, 300))).toBe(true);
      expect(cache.bytesHeld).toBe(0);
    } finally {
      fs.closeSync(fd);
    }
  });

  it("refuses ranges across a block boundary, past the data end and in the active segment; holds its budget", () => {
    const dir = tempDir("blocks");
    const { file, bytes } = fileWith(dir, 3);
    const gens = new GenerationTable();
    const cell = gens.allocate(2) as number;
    const fd = fs.openSync(file, "r");
    try {
      // Every block filled (reads-7's second-miss rule off: a full cache's first miss would be left to the caller, test/block-cache-admission.test.ts).
      const cache = new BlockCache(2 * BLOCK_BYTES, true, true, { secondMiss: false });
      const seg = fakeSegment(fd, cell, FILE_BYTES);
      expect(cache.read(seg, gens, BLOCK_BYTES - 10, 20, 2)).toBeNull();
      expect(cache.read(seg, gens, FILE_BYTES - 10, 20, 2)).toBeNull();
      // The active segment's last block is still filling (reads-5: its whole blocks below the data end are cached, test/block-cache-active.test.ts).
      expect(cache.read(fakeSegment(fd, cell, FILE_BYTES, true), gens, 5 * BLOCK_BYTES + 10, 20, 2)).toBeNull();
      for (let b = 0; b < 6; b++) {
        const off = b * BLOCK_BYTES + 10;
        const got = cache.read(seg, gens, off, 50, 2);
        expect(got === null ? null : Buffer.from(got).equals(bytes.subarray(off, off + 50))).toBe(true);
        expect(cache.bytesHeld).toBeLessThanOrEqual(2 * BLOCK_BYTES);
      }
      // The last, short block (1000 bytes past the fifth boundary) serves its own range.
      const tail = cache.read(seg, gens, 5 * BLOCK_BYTES + 900, 100, 2);
      expect(tail === null ? null : Buffer.from(tail).equals(bytes.subarray(5 * BLOCK_BYTES + 900, 5 * BLOCK_BYTES + 1000))).toBe(true);
    } finally {
      fs.closeSync(fd);
    }
  });
});

describe("blockCacheBytes option", () => {
  it.each([-1, 1, 65535, 1.5, "64", null, 2 ** 40])("refuses %s with INVALID_ARGUMENT and creates nothing", async (bad) => {
    const dir = path.join(tempDir("blocks-opt"), "store");
    await expect(Engram.open(dir, { blockCacheBytes: bad as number })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("accepts 0 (off), the minimum and the default", async () => {
    for (const blockCacheBytes of [0, 65536, undefined]) {
      const s = await Engram.open(tempDir("blocks-opt"), { blockCacheBytes });
      await s.write("k", "v");
      expect(s.readSync("k")).toMatchObject({ status: "OK", value: "v" });
      await s.close();
    }
  });
});

describe("block cache in a store: in-place compaction of shared segments", () => {
  const value = (i: number, round: number): Uint8Array => Uint8Array.from({ length: 200 }, (_, j) => (i * 7 + j + round * 31) & 255);
  const same = (r: { status: string; value?: unknown }, b: Uint8Array): boolean => r.status === "OK" && r.value instanceof Uint8Array && Buffer.from(r.value).equals(b);

  it("reads of one scope stay right across a sibling's erasure and in-place compaction", async () => {
    const dir = tempDir("blocks-store");
    const n = 600;
    const s = await Engram.open(dir, { segmentBytes: 32 * 1024, cacheBytes: 0, blockCacheBytes: 1024 * 1024, compaction: { auto: false, mode: "in-place" } });
    try {
      // Two scopes interleaved, so every sealed segment holds both.
      for (let i = 0; i < n; i += 50) {
        await s.batch(
          Array.from({ length: 50 }, (_, j) => [
            { op: "write" as const, key: `k${i + j}`, value: value(i + j, 0), scope: "user:a" },
            { op: "write" as const, key: `k${i + j}`, value: value(i + j, 1), scope: "user:b" },
          ]).flat(),
        );
      }
      let wrong = 0;
      for (let i = 0; i < n; i++) if (!same(s.readSync(`k${i}`, { scope: "user:a", inherit: false }), value(i, 0))) wrong++;
      await s.forgetScope("user:b");
      const report = await s.compact({ mode: "in-place" });
      expect(report.segments.length).toBeGreaterThan(0);
      expect(report.recordsDropped).toBeGreaterThan(0);
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < n; i++) if (!same(s.readSync(`k${i}`, { scope: "user:a", inherit: false }), value(i, 0))) wrong++;
        for (let i = 0; i < n; i += 37) expect(s.readSync(`k${i}`, { scope: "user:b", inherit: false }).status).toBe("NOT_FOUND");
      }
      expect(wrong).toBe(0);
    } finally {
      await s.close();
    }
  });
});
