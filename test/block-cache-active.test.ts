/**
 * The block cache on the active segment (engine/block-cache.ts, reads-5): whole blocks below the
 * active segment's data end are cached, its last, still filling block is not. The property: a
 * read served from such a block gets exactly the bytes of the record written there, however many
 * appends follow — a block never holds bytes from beyond the data end at its fill (preallocated
 * space that later appends overwrite).
 *
 * How it works: against a real file standing in for an active segment (writer set), blocks are
 * read while the data end sits partway through the file, then more records are appended past it
 * and the data end moved, and every range below the new data end must read the appended bytes.
 * The twin is the same cache with the bound off (`boundActive` false: a block fills to its full
 * size whatever the data end), which must serve the stale preallocated bytes. Then end to end, a
 * real store with the value cache off (every read goes through blocks) writes into one active
 * segment, reads, keeps appending and overwriting, and every read returns the last value written.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { BLOCK_BYTES, BlockCache } from "../engine/block-cache.js";
import { GenerationTable } from "../engine/generations.js";
import type { Segment } from "../engine/segment.js";
import { tempDir } from "./helpers/tmp.js";

const FILE_BYTES = 4 * BLOCK_BYTES;

/** An active segment over a real file: the fields the block cache reads. */
function activeSegment(fd: number, cell: number, dataEnd: number): Segment {
  return { id: 9, fd, cell, dataEnd, writer: {} } as unknown as Segment;
}

/** Reads below a data end at 2.5 blocks, appends the rest of the file, reads again; returns stale reads. */
function staleAfterAppend(cache: BlockCache): number {
  const dir = tempDir("blocks-active");
  const file = path.join(dir, "seg");
  const written = Buffer.alloc(FILE_BYTES);
  for (let i = 0; i < written.length; i++) written[i] = (i * 11 + 3) & 255;
  const firstEnd = 2 * BLOCK_BYTES + BLOCK_BYTES / 2;
  fs.writeFileSync(file, Buffer.concat([written.subarray(0, firstEnd), Buffer.alloc(FILE_BYTES - firstEnd)])); // zeros ahead: preallocated
  const gens = new GenerationTable();
  const cell = gens.allocate(2) as number;
  const fd = fs.openSync(file, "r+");
  try {
    const seg = activeSegment(fd, cell, firstEnd);
    const ranges = Array.from({ length: 60 }, (_, i) => ({ off: 64 + ((i * 3001) % (FILE_BYTES - 600)), len: 300 }));
    for (const r of ranges) if (r.off + r.len <= firstEnd) cache.read(seg, gens, r.off, r.len, 2);
    // The appends: the rest of the file written, the data end moved (the generation does not move on an active segment).
    fs.writeSync(fd, written, firstEnd, FILE_BYTES - firstEnd, firstEnd);
    seg.dataEnd = FILE_BYTES;
    let stale = 0;
    let served = 0;
    for (const r of ranges) {
      const got = cache.read(seg, gens, r.off, r.len, 2);
      if (got === null) continue; // across a block boundary, or the last block: the caller preads
      served++;
      if (!Buffer.from(got).equals(written.subarray(r.off, r.off + r.len))) stale++;
    }
    expect(served).toBeGreaterThan(20);
    return stale;
  } finally {
    fs.closeSync(fd);
  }
}

describe("block cache: the active segment's blocks", () => {
  it("serves appended bytes after the data end moved past a block read earlier", () => {
    expect(staleAfterAppend(new BlockCache(4 * 1024 * 1024))).toBe(0);
  });

  it("twin: filling blocks past the data end serves the preallocated zeros the appends replaced", () => {
    expect(staleAfterAppend(new BlockCache(4 * 1024 * 1024, true, false))).toBeGreaterThan(0);
  });

  it("caches whole blocks below the data end and refuses the last, still filling one", () => {
    const dir = tempDir("blocks-active");
    const file = path.join(dir, "seg");
    fs.writeFileSync(file, Buffer.alloc(FILE_BYTES, 7));
    const gens = new GenerationTable();
    const cell = gens.allocate(2) as number;
    const fd = fs.openSync(file, "r");
    try {
      const cache = new BlockCache(4 * 1024 * 1024);
      const seg = activeSegment(fd, cell, BLOCK_BYTES + 1000);
      expect(cache.read(seg, gens, 100, 200, 2)).not.toBeNull(); // block 0 is whole below the data end
      expect(cache.bytesHeld).toBe(BLOCK_BYTES);
      expect(cache.read(seg, gens, BLOCK_BYTES + 100, 200, 2)).toBeNull(); // block 1 is still filling
      expect(cache.read(seg, gens, BLOCK_BYTES + 900, 200, 2)).toBeNull(); // past the data end
      expect(cache.bytesHeld).toBe(BLOCK_BYTES);
    } finally {
      fs.closeSync(fd);
    }
  });
});

describe("block cache: the active segment end to end", () => {
  it("every read of a growing active segment returns the last value written (value cache off)", async () => {
    const dir = tempDir("blocks-active-store");
    const store = await Engram.open(dir, { durability: "none", cacheBytes: 0, compaction: { auto: false } });
    const N = 3000;
    const last = new Map<string, Uint8Array>();
    const value = (i: number, round: number): Uint8Array => Uint8Array.from({ length: 200 + (i % 100) }, (_, j) => (i * 7 + j + round * 13) & 255);
    try {
      for (let round = 0; round < 4; round++) {
        const ops = [];
        for (let i = round; i < N; i += round + 1) {
          const v = value(i, round);
          last.set(`k${i}`, v);
          ops.push({ op: "write" as const, key: `k${i}`, value: v });
        }
        await store.batch(ops);
        let wrong = 0;
        for (const [key, want] of last) {
          const got = store.readSync(key);
          if (got.status !== "OK" || !Buffer.from(got.value as Uint8Array).equals(Buffer.from(want))) wrong++;
        }
        expect(wrong).toBe(0);
      }
      expect((await store.stats()).segments.length).toBe(1); // every read above was of the active segment
    } finally {
      await store.close();
    }
  });
});
