/**
 * compact-13: the compaction thread's kept buffers (segments/whole-file.ts ReadScratch) and the
 * journal encoded into one of them (segments/journal.ts encodeJournal's `into`). A first touch of
 * memory costs ~10 µs per 4 KiB page on the machines measured, so a compaction keeps its large
 * buffers across jobs; reuse is safe only if no buffer is ever handed to a second taker while the
 * first still holds it. Method: seeded sequences of take/release with random sizes across the
 * retention limit, each taken buffer filled with a byte of its own and checked intact at its
 * release (a buffer handed out twice is overwritten by the second taker), and identity checks that
 * a released buffer large enough is the one taken next (reuse happens). Twin: a scratch that
 * ignores who holds its buffers (`unsafeScratchForTests.ignoreHeld`) hands a held buffer out again,
 * and the same sequence finds an overwritten buffer. The journal: encoded into a buffer full of
 * junk it is byte for byte the journal encoded into a fresh one, and decodes to its data.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { rng } from "./helpers/rng.js";
import { ReadScratch, unsafeScratchForTests } from "../segments/whole-file.js";
import { decodeJournal, encodeJournal, journalBytes } from "../segments/journal.js";
import { initChecksum } from "../segments/checksum.js";

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeScratchForTests.ignoreHeld = false;
});

/** A taken buffer, the byte it was filled with, and whether it came from the scratch's kept set. */
interface Taken {
  buf: Buffer;
  fill: number;
}

/**
 * Runs `steps` seeded take/release steps on a scratch keeping `buffersMax` buffers of up to
 * `retain` bytes; returns how many buffers were found overwritten at their release and how many
 * takes reused the memory of an earlier take.
 */
function churn(seed: number, steps: number, buffersMax: number, retain: number): { overwritten: number; reused: number } {
  const r = rng(seed);
  const scratch = new ReadScratch(retain, buffersMax);
  const held: Taken[] = [];
  const seen = new Set<ArrayBufferLike>();
  let overwritten = 0;
  let reused = 0;
  let fill = 1;
  const release = (i: number): void => {
    const t = held.splice(i, 1)[0] as Taken;
    if (!t.buf.every((b) => b === t.fill)) overwritten += 1;
    scratch.release(t.buf);
  };
  for (let step = 0; step < steps; step++) {
    if (held.length > 0 && (held.length >= 4 || r() < 0.45)) {
      release(Math.floor(r() * held.length));
      continue;
    }
    const size = 1 + Math.floor(r() * retain * 1.2); // some over the retention limit: never kept
    const buf = scratch.take(size);
    expect(buf.length).toBe(size);
    if (seen.has(buf.buffer)) reused += 1;
    seen.add(buf.buffer);
    fill = (fill % 255) + 1;
    buf.fill(fill);
    held.push({ buf, fill });
  }
  while (held.length > 0) release(0);
  return { overwritten, reused };
}

describe("ReadScratch", () => {
  it("keeps up to buffersMax buffers: two held at once are distinct, a third is fresh, a released one is taken again", () => {
    const scratch = new ReadScratch(1 << 20, 2);
    const a = scratch.take(4096);
    const b = scratch.take(8192);
    const c = scratch.take(1000);
    expect(new Set([a.buffer, b.buffer, c.buffer]).size).toBe(3);
    scratch.release(c); // not kept: dropped
    scratch.release(a);
    const again = scratch.take(4000);
    expect(again.buffer).toBe(a.buffer); // the free kept buffer large enough
    const grown = scratch.take(6000); // a is held again, b is held: fresh, not kept
    expect(grown.buffer).not.toBe(a.buffer);
    expect(grown.buffer).not.toBe(b.buffer);
    scratch.release(again);
    scratch.release(b);
    const large = scratch.take(16384); // both free and too small: the first one is replaced
    expect(large.buffer).not.toBe(a.buffer);
    expect(large.buffer).not.toBe(b.buffer);
    scratch.release(large);
    expect(scratch.take(16000).buffer).toBe(large.buffer);
  });

  it("never hands a held buffer to a second taker (seeded take/release sequences, 1 and 2 kept buffers)", () => {
    let reusedTotal = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      for (const buffersMax of [1, 2]) {
        const { overwritten, reused } = churn(seed * 31 + buffersMax, 400, buffersMax, 4096);
        expect(overwritten).toBe(0);
        reusedTotal += reused;
      }
    }
    expect(reusedTotal).toBeGreaterThan(100); // the kept buffers are what the takes got back
  });

  it("twin: ignoring who holds a buffer hands it out twice, and the sequence finds it overwritten", () => {
    unsafeScratchForTests.ignoreHeld = true;
    let overwrittenTotal = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) overwrittenTotal += churn(seed * 31 + 2, 400, 2, 4096).overwritten;
    expect(overwrittenTotal).toBeGreaterThan(0);
  });

  it("with reserveBytes, a kept buffer made for a small take serves a larger one later (the same memory)", () => {
    const scratch = new ReadScratch(1 << 20, 2, 1 << 20);
    const small = scratch.take(4096);
    scratch.release(small);
    const large = scratch.take(900_000);
    expect(large.buffer).toBe(small.buffer);
    expect(large.length).toBe(900_000);
    scratch.release(large);
    expect(() => new ReadScratch(4096, 1, 8192)).toThrow(RangeError); // a reserve above what is kept
  });

  it("refuses a count of kept buffers outside 1..4", () => {
    expect(() => new ReadScratch(4096, 0)).toThrow(RangeError);
    expect(() => new ReadScratch(4096, 5)).toThrow(RangeError);
    expect(() => new ReadScratch(4096, 1.5)).toThrow(RangeError);
  });
});

describe("encodeJournal into a kept buffer", () => {
  it("is byte for byte the journal encoded into a fresh buffer, whatever the buffer held, and decodes to its data", () => {
    const r = rng(77);
    for (const n of [0, 1, 7, 300, 4096, 70_000]) {
      const data = Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256)));
      const fresh = encodeJournal(12, 40 + n, data);
      const junk = Buffer.alloc(journalBytes(n), 0xa5);
      const into = encodeJournal(12, 40 + n, data, junk);
      expect(into).toBe(junk);
      expect(Buffer.compare(into, fresh)).toBe(0);
      const j = decodeJournal(into);
      expect(j?.segmentId).toBe(12);
      expect(j?.generation).toBe(40 + n);
      expect(j !== null && Buffer.compare(j.data, data) === 0).toBe(true);
    }
  });

  it("refuses a buffer of the wrong size", () => {
    expect(() => encodeJournal(1, 2, Buffer.alloc(10), Buffer.alloc(journalBytes(10) + 1))).toThrow(RangeError);
  });
});
