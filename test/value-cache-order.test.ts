/**
 * The value cache's admission trigger (reads-8, engine/value-cache.ts Admission): first misses
 * only mark while they walk the (scope, key) order — a read-all — and cache while they come in no
 * order, however long the hot set takes to come back. The property: a hot set of 65,536 keys
 * drawn at random from a large store and read twice in the same random order (W4 over 2M keys)
 * is cached on its first pass, so every read of the second pass hits; a pass in key order, up or
 * down, holds at most one window's values; reads out of order after it cache again within a
 * window.
 *
 * How it works: real Slot objects fed to a ValueCache as the read path feeds them (get, then put
 * on a miss). Twins: the same cache with "always" (every first miss only marks) misses every read
 * of the second pass, and the sampled re-read rule reads-7 had (kept below as a model: one first
 * miss in 16 watched, judged 32,768 first misses later) takes that hot set for a stream — the
 * failure this trigger replaces; with "off" an ordered pass holds every value it read. End to
 * end, a store's readSync over its keys in order turns the store's cache to marking, and random
 * gets turn it back and hit.
 */
import { describe, expect, it } from "vitest";
import { Slot } from "../engine/keydir.js";
import { ValueCache, type AdmissionMode } from "../engine/value-cache.js";
import { Store } from "../engine/store.js";
import { tempDir } from "./helpers/tmp.js";
import { cacheSlot, cacheValue } from "./helpers/cache-slots.js";

const BUDGET = 64 * 1024 * 1024;
/** Bytes the cache counts per value of cacheValue (200 + 64). */
const ENTRY = 264;

/** One read as the read path does it: true on a hit, else the value is offered (put). */
function readOnce(cache: ValueCache, slot: Slot, i: number): boolean {
  if (cache.get(slot, 2) !== undefined) return true;
  cache.put(slot, cacheValue(i), slot.seg, slot.off, 2);
  return false;
}

function xorshift(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

/** 65,536 distinct keys drawn at random from 2M names, in random order (W4's key array at 2M keys). */
function hotSet(): Slot[] {
  const next = xorshift(2024);
  const seen = new Set<number>();
  const slots: Slot[] = [];
  while (slots.length < 65_536) {
    const k = next() % 2_000_000;
    if (seen.has(k)) continue;
    seen.add(k);
    slots.push(cacheSlot(`k${String(k).padStart(9, "0")}`, slots.length));
  }
  return slots;
}

/** Reads `slots` twice in the same order; returns the second pass's hits and whether marking ever ran. */
function twoPasses(mode: AdmissionMode): { hits: number; everStreaming: boolean } {
  const cache = new ValueCache(BUDGET, true, mode);
  const slots = hotSet();
  let everStreaming = false;
  for (let i = 0; i < slots.length; i++) {
    readOnce(cache, slots[i] as Slot, i);
    if (cache.streaming) everStreaming = true;
  }
  let hits = 0;
  for (let i = 0; i < slots.length; i++) if (readOnce(cache, slots[i] as Slot, i)) hits++;
  return { hits, everStreaming };
}

/**
 * reads-7's trigger, as a model (the twin of the first case): every 16th first miss is watched;
 * its place is taken 2,048 watched misses later, when it is judged re-read or not; a window of 256
 * judgements with under 1 in 16 re-read switches to marking. Returns true when it ever did.
 */
function sampledRuleStreams(keys: readonly Slot[], passes: number): boolean {
  const watched = new Array<string | undefined>(2048);
  const readAgain = new Set<string>();
  const seen = new Set<string>();
  let misses = 0;
  let judged = 0;
  let retouched = 0;
  for (let p = 0; p < passes; p++) {
    for (const slot of keys) {
      if (seen.has(slot.key)) {
        readAgain.add(slot.key);
        continue;
      }
      seen.add(slot.key);
      const n = misses++;
      if (n % 16 !== 0) continue;
      const at = (n / 16) % 2048;
      const prev = watched[at];
      watched[at] = slot.key;
      if (prev === undefined) continue;
      judged++;
      if (readAgain.has(prev)) retouched++;
      if (judged < 256) continue;
      if (retouched * 16 < judged) return true;
      judged = 0;
      retouched = 0;
    }
  }
  return false;
}

describe("value cache admission trigger: the key order of first misses, not a sample of re-reads", () => {
  it("a hot set re-read after 65,536 first misses stays cached: the second pass hits every read", () => {
    const got = twoPasses("adaptive");
    expect(got.everStreaming).toBe(false);
    expect(got.hits).toBe(65_536);
  });

  it("twins: with every first miss marked the second pass misses; the sampled rule takes the hot set for a stream", () => {
    const always = twoPasses("always");
    expect(always.everStreaming).toBe(true);
    expect(always.hits).toBe(0);
    expect(sampledRuleStreams(hotSet(), 2)).toBe(true);
  });

  it("a pass in key order, up or down, holds at most one window; reads out of order cache again", () => {
    for (const down of [false, true]) {
      const cache = new ValueCache(BUDGET, true, "adaptive");
      const n = 50_000;
      const slots = Array.from({ length: n }, (_, i) => cacheSlot(`k${String(i).padStart(9, "0")}`, i));
      let hits = 0;
      for (let j = 0; j < n; j++) {
        const i = down ? n - 1 - j : j;
        if (readOnce(cache, slots[i] as Slot, i)) hits++;
      }
      expect(hits).toBe(0);
      expect(cache.streaming).toBe(true);
      expect(cache.bytesHeld).toBeLessThanOrEqual(256 * ENTRY);
      // Out of order now (other slots, at random): marking stops within one window, and values are cached again.
      const next = xorshift(77);
      const others = Array.from({ length: 4096 }, (_, i) => cacheSlot(`x${String(next()).padStart(10, "0")}`, n + i));
      for (let i = 0; i < others.length; i++) readOnce(cache, others[i] as Slot, n + i);
      expect(cache.streaming).toBe(false);
      let cached = 0;
      for (let i = 0; i < others.length; i++) if (cache.get(others[i] as Slot, 2) !== undefined) cached++;
      expect(cached).toBeGreaterThan(others.length - 2 * 256);
    }
  });

  it("twin: with first-miss caching always on an ordered pass holds every value it read", () => {
    const cache = new ValueCache(BUDGET, true, "off");
    const n = 50_000;
    for (let i = 0; i < n; i++) readOnce(cache, cacheSlot(`k${String(i).padStart(9, "0")}`, i), i);
    expect(cache.streaming).toBe(false);
    expect(cache.bytesHeld).toBe(n * ENTRY);
  });

  it("end to end: the store's cache marks during a read-all in key order and caches random gets", async () => {
    const dir = tempDir("value-order");
    const n = 20_000;
    const key = (i: number): string => `k${String(i).padStart(9, "0")}`;
    let s = await Store.open(dir, { durability: "none", compaction: { auto: false } });
    const next = xorshift(9);
    const order = Array.from({ length: n }, (_, i) => i).sort(() => (next() & 1 ? 1 : -1));
    for (let b = 0; b < n; b += 1000) await s.batch(order.slice(b, b + 1000).map((i) => ({ op: "write" as const, key: key(i), value: `v${i}` })));
    await s.close();
    s = await Store.open(dir, { durability: "none", compaction: { auto: false } });
    try {
      const cache = s.cache as ValueCache;
      for (let i = 0; i < n; i++) {
        const r = s.readSync(key(i));
        expect(r.status === "OK" && r.value === `v${i}`).toBe(true);
      }
      expect(cache.streaming).toBe(true);
      expect(cache.bytesHeld).toBeLessThanOrEqual(256 * 100);
      // A marked slot read again is cached on that read (not a first miss: the mode is not asked).
      const cachedNow = (k: string): boolean => ((s.keydir.get("global", k) as Slot).cached?.seg ?? -1) > 0;
      const again = Array.from({ length: 512 }, () => key(next() % n));
      for (const k of again) s.readSync(k);
      expect(again.every(cachedNow)).toBe(true);
      // Keys never read, now read at random: first misses out of order, so marking stops within a window.
      const fresh = Array.from({ length: 2048 }, (_, j) => `x${String(next()).padStart(10, "0")}-${j}`);
      for (let b = 0; b < fresh.length; b += 1000) await s.batch(fresh.slice(b, b + 1000).map((k) => ({ op: "write" as const, key: k, value: k })));
      for (const k of fresh) expect(s.readSync(k)).toMatchObject({ status: "OK", value: k });
      expect(cache.streaming).toBe(false);
      expect(fresh.filter(cachedNow).length).toBeGreaterThan(fresh.length - 2 * 256);
    } finally {
      await s.close();
    }
  });
});
