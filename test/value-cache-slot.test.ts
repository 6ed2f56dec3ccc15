/**
 * The hot-value cache keeps its entry on the slot itself (engine/value-cache.ts CachedValue on
 * `Slot.cached`, reads-5): a hit is one field load instead of a Map lookup. The property: a hit
 * returns exactly the bytes of the record the slot points at now — never a value the slot has left
 * (overwritten, moved by a compaction, or read under another segment generation) — and the cache
 * stays inside its byte budget, letting go of every slot it evicts.
 *
 * How it works: first against the class alone, with real Slot objects moved the way applyPut and a
 * compaction move them; the twin is the same cache with its location check off, which must serve
 * the value the slot left (so the check is what keeps it out). Then the budget: many slots cached
 * through a small budget, every evicted slot holds no entry and every slot that holds one is
 * answered with its own bytes; clear() releases them all. End to end, a real store with a budget far
 * below its data is read in rounds with overwrites and both compaction modes between them, and
 * every value read equals the last one written; mutating what a read returned changes nothing.
 */
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { applyPut, Slot } from "../engine/keydir.js";
import { ValueCache } from "../engine/value-cache.js";
import { tempDir } from "./helpers/tmp.js";

const bytesOf = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 17 + seed) & 255);

/** Caches a value at one location, moves the slot three ways; returns how many stale hits were served. */
function staleHits(cache: ValueCache): number {
  let stale = 0;
  const moves: Array<(s: Slot) => number> = [
    (s) => {
      applyPut(s, s.putSeq + 1, s.putGen, 0, { seg: s.seg, off: s.off + 400, len: s.len }); // overwrite in the same segment
      return 2;
    },
    (s) => {
      s.seg += 1; // copy-on-write compaction: same record, another segment
      return 2;
    },
    () => 4, // in-place compaction: same location, the segment's generation moved
  ];
  moves.forEach((move, i) => {
    const slot = new Slot("global", `k${i}`);
    applyPut(slot, 1, 0, 0, { seg: 3, off: 100, len: 300 });
    cache.put(slot, bytesOf(256, i), slot.seg, slot.off, 2);
    expect(cache.get(slot, 2)).toEqual(bytesOf(256, i)); // a hit before the move
    const generation = move(slot);
    if (cache.get(slot, generation) !== undefined) stale++;
  });
  return stale;
}

describe("value cache on the slot: a hit is the record the slot points at now", () => {
  it("misses after an overwrite, a copy-on-write move and an in-place generation move", () => {
    expect(staleHits(new ValueCache(1 << 20))).toBe(0);
  });

  it("twin: with the location check off the same reads are served the value the slot left", () => {
    expect(staleHits(new ValueCache(1 << 20, false))).toBe(3);
  });

  it("a newer value of the same slot replaces the older one and the budget counts it once", () => {
    const cache = new ValueCache(1 << 20);
    const slot = new Slot("global", "k");
    applyPut(slot, 1, 0, 0, { seg: 3, off: 100, len: 300 });
    cache.put(slot, bytesOf(256, 1), 3, 100, 2);
    applyPut(slot, 2, 0, 0, { seg: 3, off: 500, len: 300 });
    cache.put(slot, bytesOf(256, 2), 3, 500, 2);
    expect(cache.get(slot, 2)).toEqual(bytesOf(256, 2));
    expect(cache.bytesHeld).toBe(256 + 64);
  });
});

describe("value cache on the slot: the budget", () => {
  it("holds at most bytesMax, evicted slots hold no entry, held ones answer with their own bytes", () => {
    const budget = 64 * 1024;
    const cache = new ValueCache(budget);
    const slots = Array.from({ length: 2000 }, (_, i) => {
      const s = new Slot("global", `k${i}`);
      applyPut(s, i + 1, 0, 0, { seg: 1 + (i % 5), off: 64 + i * 320, len: 300 });
      return s;
    });
    slots.forEach((s, i) => {
      cache.put(s, bytesOf(200 + (i % 56), i), s.seg, s.off, 2);
      expect(cache.bytesHeld).toBeLessThanOrEqual(budget);
    });
    let held = 0;
    let heldBytes = 0;
    slots.forEach((s, i) => {
      if (s.cached === null) {
        expect(cache.get(s, 2)).toBeUndefined();
        return;
      }
      held++;
      heldBytes += s.cached.bytes;
      expect(cache.get(s, 2)).toEqual(bytesOf(200 + (i % 56), i));
    });
    expect(heldBytes).toBe(cache.bytesHeld); // the count is exactly what hangs on slots
    expect(held).toBeGreaterThan(100);
    expect(held).toBeLessThan(slots.length);
    // First in, first out: the newest slot is held, the oldest is not.
    expect((slots[slots.length - 1] as Slot).cached).not.toBeNull();
    expect((slots[0] as Slot).cached).toBeNull();
    cache.clear();
    expect(slots.every((s) => s.cached === null)).toBe(true);
    expect(cache.bytesHeld).toBe(0);
  });

  it("does not cache a value larger than 1/16 of the budget, nor anything with a budget of 0", () => {
    const slot = new Slot("global", "k");
    applyPut(slot, 1, 0, 0, { seg: 1, off: 64, len: 5000 });
    const small = new ValueCache(64 * 1024);
    small.put(slot, bytesOf(64 * 1024 / 16, 1), 1, 64, 2);
    expect(slot.cached).toBeNull();
    new ValueCache(0).put(slot, bytesOf(10, 1), 1, 64, 2);
    expect(slot.cached).toBeNull();
  });
});

describe("value cache on the slot: end to end through a store with a small budget", () => {
  it("every read across overwrites and both compaction modes returns the last value written, and stays the caller's", async () => {
    const dir = tempDir("vcache-slot");
    const store = await Engram.open(dir, { durability: "none", cacheBytes: 64 * 1024, segmentBytes: 256 * 1024, compaction: { auto: false } });
    const N = 1500;
    const last = new Map<string, Uint8Array>();
    const writeAll = async (round: number): Promise<void> => {
      const ops = [];
      for (let i = 0; i < N; i++) {
        if (round > 0 && i % (round + 1) !== 0) continue; // later rounds overwrite a part
        const value = bytesOf(256, i * 7 + round);
        last.set(`k${i}`, value);
        ops.push({ op: "write" as const, key: `k${i}`, value });
      }
      await store.batch(ops);
    };
    const readAll = (): number => {
      let wrong = 0;
      for (const [key, want] of last) {
        // A miss then hits (the budget holds ~200 values of 1500: each key's repeats are the hits).
        for (let rep = 0; rep < 3; rep++) {
          const got = store.readSync(key);
          if (got.status !== "OK" || !Buffer.from(got.value as Uint8Array).equals(Buffer.from(want))) wrong++;
          if (got.status === "OK") (got.value as Uint8Array).fill(0xee); // a caller's scribble
        }
      }
      return wrong;
    };
    try {
      await writeAll(0);
      expect(readAll()).toBe(0);
      await writeAll(1);
      expect(readAll()).toBe(0);
      await store.compact({ mode: "copy-on-write" });
      expect(readAll()).toBe(0);
      await writeAll(2);
      await store.compact({ mode: "in-place" });
      expect(readAll()).toBe(0);
    } finally {
      await store.close();
    }
  });
});
