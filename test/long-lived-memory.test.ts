/**
 * Memory that lives as long as its store — the hint regions an open allocates, the block cache's
 * slabs — is allocated where V8 does not count it as external memory (segments/long-lived.ts:
 * a SharedArrayBuffer). V8 answers external memory with collections that can only ever free
 * short-lived buffers: at 2M keys the hint regions (~117 MB) cost 7–10 of them, ~10 ms of a
 * 46–48 ms open and first read, before compact-15.
 *
 * Method: a store of 60,000 keys in 1 MiB segments (every sealed one hinted) is reopened, then
 * 3,000 random keys are read (hint blocks decoded, block-cache slabs carved). Around the open and
 * around the reads, `process.memoryUsage()` gives `arrayBuffers` (every ArrayBuffer and
 * SharedArrayBuffer) and `external` (what V8 counts toward its collections). The regions and
 * slabs must show in `arrayBuffers` and mostly not in `external`. The twin
 * (`longLivedForTests.plainArrayBuffer`) allocates them as plain ArrayBuffers again: `external`
 * then grows with them.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { compactRows } from "../engine/keydir.js";
import { longLivedForTests } from "../segments/long-lived.js";
import { initChecksum } from "../segments/checksum.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const T = 60_000;
const KEYS = 60_000;
const OPTIONS = { durability: "none", segmentBytes: 1024 * 1024, compaction: { auto: false } } as const;

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  longLivedForTests.plainArrayBuffer = false;
});

const keyOf = (i: number): string => `m${String(i).padStart(6, "0")}`;

/**
 * A closed store of KEYS keys in sealed, hinted segments. Written with compact rows off
 * (engine/compact-slots.ts): the rows' typed arrays (~1.5 MB), dropped at the builder's close,
 * would be collected during the measured open and taken off the growth it measures.
 */
async function built(): Promise<string> {
  const dir = tempDir("long-lived");
  compactRows.enabled = false;
  const s = await Store.open(dir, OPTIONS).finally(() => (compactRows.enabled = true));
  for (let b = 0; b < KEYS; b += 1000) {
    const ops = [];
    for (let i = b; i < b + 1000; i++) ops.push({ op: "write" as const, key: keyOf(i), value: new Uint8Array(64).fill(i & 255) });
    await s.batch(ops);
  }
  await s.close();
  return dir;
}

interface Growth {
  /** Growth of every ArrayBuffer and SharedArrayBuffer, and of what V8 counts as external memory, in bytes. */
  openBuffers: number;
  openExternal: number;
  readBuffers: number;
  readExternal: number;
}

/** Reopens `dir`, reads 3,000 random keys, and says how the two memory counts grew across each step. */
async function growth(dir: string): Promise<Growth> {
  const m0 = process.memoryUsage();
  const s = await Store.open(dir, OPTIONS);
  try {
    const m1 = process.memoryUsage();
    const next = rng(5);
    for (let k = 0; k < 3000; k++) {
      const i = Math.floor(next() * KEYS);
      const r = s.readSync(keyOf(i));
      expect(r.status === "OK" && r.value instanceof Uint8Array && r.value[0] === (i & 255)).toBe(true);
    }
    const m2 = process.memoryUsage();
    return { openBuffers: m1.arrayBuffers - m0.arrayBuffers, openExternal: m1.external - m0.external, readBuffers: m2.arrayBuffers - m1.arrayBuffers, readExternal: m2.external - m1.external };
  } finally {
    await s.close();
  }
}

describe("long-lived memory is not V8's external memory", () => {
  it("the hint regions of an open and the block cache's slabs grow arrayBuffers, not external", async () => {
    const g = await growth(await built());
    console.log(`long-lived: open +${(g.openBuffers / 1048576).toFixed(1)} MB arrayBuffers, +${(g.openExternal / 1048576).toFixed(1)} MB external; reads +${(g.readBuffers / 1048576).toFixed(1)} / +${(g.readExternal / 1048576).toFixed(1)} MB`);
    expect(g.openBuffers).toBeGreaterThan(2 * 1024 * 1024); // the regions: ~60 B per entry
    expect(g.openExternal).toBeLessThan(g.openBuffers / 4);
    expect(g.readBuffers).toBeGreaterThan(1024 * 1024); // slabs carved by the reads' block fills
    expect(g.readExternal).toBeLessThan(g.readBuffers / 2);
  }, T);

  it("twin (plainArrayBuffer): the same memory counts as external", async () => {
    const dir = await built();
    longLivedForTests.plainArrayBuffer = true;
    const g = await growth(dir);
    console.log(`long-lived twin: open +${(g.openBuffers / 1048576).toFixed(1)} MB arrayBuffers, +${(g.openExternal / 1048576).toFixed(1)} MB external; reads +${(g.readBuffers / 1048576).toFixed(1)} / +${(g.readExternal / 1048576).toFixed(1)} MB`);
    expect(g.openBuffers).toBeGreaterThan(2 * 1024 * 1024);
    expect(g.openExternal).toBeGreaterThan(g.openBuffers / 2);
    expect(g.readExternal).toBeGreaterThan(g.readBuffers / 2);
  }, T);
});
