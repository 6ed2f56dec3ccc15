/**
 * Copy pools made between turns (issue 11, reads beside a compaction pass): a value cache hit
 * copies its value into a 64 KiB pool (engine/value-cache.ts copyOf), and a new pool's pages are
 * fresh memory, ~10 µs a page on this machine kind. The property: a reader that lets its turn
 * end now and then never makes a pool inside a copy: once a pool is half used, the next one is
 * made (and its pages touched) in a setImmediate callback, and the copy that fills the pool takes
 * it. A loop that never yields still gets its pools, made inside the copy as before.
 *
 * How it works: copies of 256 bytes (the bench's values) in the rhythm of the bench's reads
 * beside a pass (a turn ends every 16 copies), counting the pools made inside copyOf calls
 * (copyPoolCounters.made before and after each call) and the pools taken from the spare. The
 * twin runs the same copies in one turn, where no spare can be made: there every new pool is made
 * inside a copy, which is what the first loop would show without the spare, and one setImmediate
 * is queued however many pools the turn fills (a bound: a long loop of readSyncs queues no more).
 * Both check each copy's bytes.
 */
import { describe, expect, it } from "vitest";
import { copyOf, copyPoolCounters } from "../engine/value-cache.js";

const VALUE_BYTES = 256;
/** ~8 pools of 64 KiB at 256 bytes (+ alignment) a copy. */
const COPIES = 2000;
const DEADLINE_MS = 10_000;

function source(i: number): Uint8Array {
  return Uint8Array.from({ length: VALUE_BYTES }, (_, j) => (i * 7 + j) & 255);
}

const turnEnds = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/** Copies COPIES sources, ending the turn every `yieldEvery` copies (never when 0); returns the pools made inside copies and taken as spares. */
async function copyAll(yieldEvery: number): Promise<{ madeInCopy: number; spares: number; swaps: number; queued: number }> {
  await turnEnds(); // a spare asked for by an earlier test is made now
  const startedAt = Date.now();
  const sparesBefore = copyPoolCounters.spares;
  const queuedBefore = copyPoolCounters.queued;
  let madeInCopy = 0;
  let swaps = 0;
  let lastBuffer: ArrayBufferLike | null = null;
  for (let i = 0; i < COPIES; i++) {
    if (yieldEvery > 0 && i % yieldEvery === yieldEvery - 1) await turnEnds();
    const src = source(i);
    const made = copyPoolCounters.made;
    const copy = copyOf(src);
    madeInCopy += copyPoolCounters.made - made;
    expect(copy).toEqual(src);
    if (lastBuffer !== null && copy.buffer !== lastBuffer) swaps++;
    lastBuffer = copy.buffer;
    expect(Date.now() - startedAt).toBeLessThan(DEADLINE_MS);
  }
  return { madeInCopy, spares: copyPoolCounters.spares - sparesBefore, swaps, queued: copyPoolCounters.queued - queuedBefore };
}

describe("copy pools are made between turns", () => {
  it("a reader that yields every 16 copies takes every new pool from the spare", async () => {
    const got = await copyAll(16);
    expect(got.swaps).toBeGreaterThanOrEqual(6);
    expect(got.madeInCopy).toBe(0);
    expect(got.spares).toBe(got.swaps);
    expect(got.queued).toBeGreaterThanOrEqual(got.swaps); // one setImmediate per pool
  });

  it("twin: a loop that never yields makes each new pool inside a copy", async () => {
    const got = await copyAll(0);
    expect(got.swaps).toBeGreaterThanOrEqual(6);
    expect(got.spares).toBeLessThanOrEqual(1); // at most a spare made before the loop
    expect(got.madeInCopy).toBeGreaterThanOrEqual(got.swaps - 1);
    expect(got.queued).toBeLessThanOrEqual(1); // a turn that fills many pools queues one setImmediate, not one per pool
  });
});
