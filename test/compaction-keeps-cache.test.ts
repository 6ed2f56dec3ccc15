/**
 * A compaction pass moves records, bytes unchanged; the hot-value cache keys each value by the
 * place and segment generation it was read from, so before compact-15 every value a pass moved
 * missed afterwards and was read from its file again — the reads beside a compaction paid for it.
 * Publication now moves a cached value with its record (engine/value-cache.ts `moveWith`, called
 * by the compactor's relocate), but only a value read from exactly the place and generation the
 * record left: any other entry on the slot (an older value cached before an overwrite) stays where
 * it was read and misses, as before.
 *
 * Method: real stores in small segments, copy-on-write and in place, inline and with a worker.
 * Every key is read until cached (the cache's counters show a full pass of hits), a quarter is
 * forgotten, and compact() runs over every segment with garbage. Afterwards every live key must
 * read back right with no miss at all, and the counters must show values moved. The twin
 * (`unsafeValueCacheForTests.moveUnchecked`) moves whatever entry hangs on the slot: a key whose
 * first value was cached and then overwritten (not read since) returns that first value after
 * the pass — the stale read the place check prevents, which the protected run must not show.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeValueCacheForTests } from "../engine/value-cache.js";
import { initChecksum } from "../segments/checksum.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const T = 60_000;
const KEYS = 1500;
const MODES = ["copy-on-write", "in-place"] as const;

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeValueCacheForTests.moveUnchecked = false;
});

const keyOf = (i: number): string => `k${String(i).padStart(5, "0")}`;

/** Value `version` of key i: 200 bytes that differ between keys and versions. */
function valueOf(i: number, version: number): Uint8Array {
  const v = new Uint8Array(200);
  for (let j = 0; j < v.length; j++) v[j] = (i * 7 + j * 13 + version * 101) & 255;
  return v;
}

/** The value readSync returns for `key`, or undefined when it returns none. */
function readValue(s: Store, key: string): Uint8Array | undefined {
  const r = s.readSync(key);
  if (r.status !== "OK") return undefined;
  return typeof r.value === "string" ? new TextEncoder().encode(r.value) : r.value;
}

/** The indices 0..n-1 in a seeded order (reads out of key order: the cache admits on the first miss). */
function shuffled(n: number, seed: number): number[] {
  const next = rng(seed);
  const xs = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [xs[i], xs[j]] = [xs[j] as number, xs[i] as number];
  }
  return xs;
}

async function openStore(mode: (typeof MODES)[number], workers: number, segmentBytes: number): Promise<Store> {
  return Store.open(tempDir("keeps-cache"), { durability: "none", segmentBytes, compaction: { mode, workers, auto: false } });
}

/** Writes keys [from, to) at `version` in batches of 100. */
async function writeKeys(s: Store, from: number, to: number, version: number): Promise<void> {
  for (let b = from; b < to; b += 100) {
    const ops = [];
    for (let i = b; i < Math.min(b + 100, to); i++) ops.push({ op: "write" as const, key: keyOf(i), value: valueOf(i, version) });
    await s.batch(ops);
  }
}

/** Forgets every key i in [from, to) with i % 4 === 0. */
async function forgetQuarter(s: Store, from: number, to: number): Promise<void> {
  const ops = [];
  for (let i = from; i < to; i++) if (i % 4 === 0) ops.push({ op: "forget" as const, key: keyOf(i) });
  for (let b = 0; b < ops.length; b += 100) await s.batch(ops.slice(b, b + 100));
}

describe("a compaction pass moves each cached value with its record", () => {
  for (const mode of MODES) {
    for (const workers of [0, 1]) {
      it(`${mode}, ${workers === 0 ? "inline" : "with a worker"}: every live key hits the cache after the pass`, async () => {
        const s = await openStore(mode, workers, 64 * 1024);
        try {
          await writeKeys(s, 0, KEYS, 1);
          for (const pass of [1, 2]) for (const i of shuffled(KEYS, pass)) expect(readValue(s, keyOf(i))).toEqual(valueOf(i, 1));
          const cache = s.cache;
          if (cache === null) throw new Error("the store's value cache is on by default");
          const warm = { ...cache.counters };
          for (const i of shuffled(KEYS, 3)) readValue(s, keyOf(i));
          expect(cache.counters.misses - warm.misses).toBe(0); // every value is cached before the pass
          await forgetQuarter(s, 0, KEYS);
          const report = await s.compact({ mode });
          expect(report.segments.length).toBeGreaterThan(1);
          expect(report.recordsDropped).toBeGreaterThan(0);
          const before = { ...cache.counters };
          expect(before.moved - warm.moved).toBeGreaterThan(KEYS / 2);
          for (const i of shuffled(KEYS, 4)) {
            if (i % 4 === 0) expect(readValue(s, keyOf(i))).toBeUndefined();
            else expect(readValue(s, keyOf(i))).toEqual(valueOf(i, 1));
          }
          expect(cache.counters.misses - before.misses).toBe(0);
          expect(cache.counters.hits - before.hits).toBe(KEYS - KEYS / 4);
        } finally {
          await s.close();
        }
      }, T);
    }
  }
});

describe("only a value read from the place its record left moves with it", () => {
  /** Key 0's first value is cached, then overwritten and not read; a pass moves the second value's record. Returns what key 0 reads. */
  async function afterOverwrite(mode: (typeof MODES)[number]): Promise<{ got: Uint8Array | undefined; moved: number }> {
    const s = await openStore(mode, 0, 16 * 1024);
    try {
      await writeKeys(s, 0, 1, 1);
      for (let k = 0; k < 2; k++) expect(readValue(s, keyOf(0))).toEqual(valueOf(0, 1)); // cached at its first place
      await writeKeys(s, 0, 400, 2); // key 0's second value, and enough after it to seal its segment
      await forgetQuarter(s, 1, 400); // garbage in every segment (key 0 itself stays)
      const cache = s.cache;
      if (cache === null) throw new Error("the store's value cache is on by default");
      const moved0 = cache.counters.moved;
      const report = await s.compact({ mode });
      expect(report.segments.length).toBeGreaterThan(1);
      return { got: readValue(s, keyOf(0)), moved: cache.counters.moved - moved0 };
    } finally {
      await s.close();
    }
  }

  for (const mode of MODES) {
    it(`${mode}: the overwritten key reads its second value`, async () => {
      const { got } = await afterOverwrite(mode);
      expect(got).toEqual(valueOf(0, 2));
    }, T);

    it(`${mode}, twin (moveUnchecked): the first value, moved with the second's record, is served`, async () => {
      unsafeValueCacheForTests.moveUnchecked = true;
      const { got, moved } = await afterOverwrite(mode);
      expect(moved).toBeGreaterThan(0);
      expect(got).toEqual(valueOf(0, 1)); // stale: the failure the place check prevents
    }, T);
  }
});
