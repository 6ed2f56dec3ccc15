/**
 * `EngramStore`'s TTL (engram/langgraph), PostgresStore's `ttl: { defaultTtl, refreshOnRead }`,
 * `put(…, { ttl })` and `search(…, { refreshTtl })`, on the engine.
 *
 * How it works: time is moved, never slept. Date is faked (vitest, Date only) and the engram
 * store is opened with `clock: () => Date.now()`, so one `vi.setSystemTime` moves both the
 * times EngramStore stamps on items (createdAt / updatedAt) and the clock engram expires values
 * by; every expiry is then checked on both sides of its instant (visible 1 ms before, gone at it)
 * through get, search and engram's `probe` (its `expiresAt`, its "expired" state). Cases: a
 * default TTL, a per-put ttl over it (through put and through batch's `options.ttl`), ttl 0 and
 * no TTL never expiring; refreshOnRead renewing from now on get and search while createdAt,
 * updatedAt and the creation order stay, `refreshTtl` per call overriding it either way, and
 * no refresh without one; races, made deterministic by a backing store whose `read` of the item
 * runs another EngramStore's delete or put (on its own queue, as another worker would) before it
 * answers, so the refresh that follows the read always finds the item changed: it must neither
 * bring a deleted item back nor overwrite the newer put; bad TTL values (negative, NaN,
 * Infinity, strings, past TTL_MINUTES_MAX, a non-boolean refresh flag) refused with
 * INVALID_ARGUMENT and the commit sequence unmoved, through the constructor, put, batch, get and
 * search; and an expiry, a refreshed one included, surviving close and reopen. A namespace whose
 * items all expired stays listed (as after deletes; PostgresStore also lists it, until a sweep).
 *
 * Property stressed: an item is visible exactly until its TTL, counted from its last put or
 * refresh, and nothing else moves its expiry or its contents.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Engram } from "../src/index.js";
import type { LangGraphBackingStore } from "../src/integrations/langgraph.js";
import { EngramStore, itemKey, TTL_MINUTES_MAX } from "../src/integrations/langgraph.js";
import { tempDir } from "./helpers/tmp.js";

const T0 = Date.parse("2026-12-07T09:00:00Z");
const MIN = 60_000;
const SCOPE = { scope: "langgraph" };

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(T0);
});
afterEach(() => {
  vi.useRealTimers();
});

/** Opens an engram store whose TTL clock is the (faked) Date. */
function open(dir: string): Promise<Engram> {
  return Engram.open(dir, { clock: () => Date.now(), compaction: { workers: 0 } });
}

/** Moves the faked clock to `ms` after T0. */
function at(ms: number): void {
  vi.setSystemTime(T0 + ms);
}

/** The keys a search returns, in order. */
async function keys(store: EngramStore, prefix: string[], options: { refreshTtl?: boolean } = {}): Promise<string[]> {
  return (await store.search(prefix, { limit: 100, ...options })).map((i) => i.key);
}

/** The expiry engram holds for an item (null: none, or not live). */
async function expiresAt(engram: Engram, ns: string[], key: string): Promise<number | null> {
  return (await engram.probe(itemKey(ns, key), SCOPE)).expiresAt;
}

/** What a call gave: "ok", or its error code. */
async function codeOf(f: () => unknown): Promise<string> {
  try {
    await f();
    return "ok";
  } catch (err) {
    return String((err as { code?: unknown }).code ?? (err as Error).message);
  }
}

/**
 * A backing store over `engram` that, on the first read of `target` after `arm`, runs `hook`
 * before answering with what it read: a writer that slips in between a read and its refresh.
 */
function racing(engram: Engram, target: string): LangGraphBackingStore & { arm(hook: () => Promise<unknown>): void; fired: boolean } {
  let hook: (() => Promise<unknown>) | null = null;
  return {
    fired: false,
    arm(h) {
      hook = h;
    },
    async read(key, options) {
      const r = await engram.read(key, options);
      if (hook !== null && key === target) {
        const h = hook;
        hook = null;
        await h();
        this.fired = true;
      }
      return r;
    },
    write: (key, value, options) => engram.write(key, value, options),
    forget: (key, options) => engram.forget(key, options),
    batch: (ops) => engram.batch(ops),
    list: (options) => engram.list(options),
  };
}

describe("EngramStore TTL: expiry", () => {
  it("a default TTL hides an item at its instant; a per-put ttl (put or batch) overrides it; ttl 0 and no TTL never expire", async () => {
    const engram = await open(tempDir("lg-ttl-expiry"));
    try {
      const s = new EngramStore(engram, { ttl: { defaultTtl: 1 } });
      const plain = new EngramStore(engram, { scope: "plain" });
      await s.put(["a"], "default", { v: 1 });
      await s.put(["b"], "five", { v: 2 }, undefined, { ttl: 5 });
      await s.put(["b"], "zero", { v: 3 }, undefined, { ttl: 0 });
      await s.batch([{ namespace: ["b"], key: "two", value: { v: 4 }, options: { ttl: 2 } }]);
      await s.put(["b"], "frac", { v: 5 }, undefined, { ttl: 0.02 });
      await plain.put(["b"], "none", { v: 6 });
      expect(await expiresAt(engram, ["a"], "default")).toBe(T0 + MIN);
      expect(await expiresAt(engram, ["b"], "frac")).toBe(T0 + 1200);
      at(1199);
      expect(await keys(s, ["b"])).toEqual(["five", "zero", "two", "frac"]);
      at(1200);
      expect(await keys(s, ["b"])).toEqual(["five", "zero", "two"]);
      at(MIN - 1);
      expect((await s.get(["a"], "default"))?.value).toEqual({ v: 1 });
      at(MIN);
      expect(await s.get(["a"], "default")).toBeNull();
      expect(await keys(s, [])).toEqual(["five", "zero", "two"]);
      expect((await engram.probe(itemKey(["a"], "default"), SCOPE)).state).toBe("expired");
      // The namespace stays listed, as after a delete (PostgresStore lists it until a sweep).
      expect(await s.listNamespaces()).toEqual([["a"], ["b"]]);
      at(2 * MIN);
      expect(await keys(s, ["b"])).toEqual(["five", "zero"]);
      at(5 * MIN - 1);
      expect(await s.get(["b"], "five")).not.toBeNull();
      at(5 * MIN);
      expect(await s.get(["b"], "five")).toBeNull();
      at(1000 * 24 * 60 * MIN);
      expect(await keys(s, [])).toEqual(["zero"]);
      expect((await plain.get(["b"], "none"))?.value).toEqual({ v: 6 });
      expect([await expiresAt(engram, ["b"], "zero"), (await engram.probe(itemKey(["b"], "none"), { scope: "plain" })).expiresAt]).toEqual([null, null]);
      // A put over an expired item makes it new: a new createdAt and a fresh TTL.
      await s.put(["a"], "default", { v: 7 });
      const again = await s.get(["a"], "default");
      expect([again?.value, again?.createdAt.getTime()]).toEqual([{ v: 7 }, Date.now()]);
    } finally {
      await engram.close();
    }
  });

  it("a put replaces the TTL: with none, an item that had one never expires; with one, an item that had none expires", async () => {
    const engram = await open(tempDir("lg-ttl-replace"));
    try {
      const s = new EngramStore(engram);
      await s.put(["n"], "k1", { v: 1 }, undefined, { ttl: 1 });
      await s.put(["n"], "k2", { v: 1 });
      at(30_000);
      await s.put(["n"], "k1", { v: 2 });
      await s.put(["n"], "k2", { v: 2 }, undefined, { ttl: 1 });
      at(30_000 + MIN);
      expect(await keys(s, ["n"])).toEqual(["k1"]);
      expect((await s.get(["n"], "k1"))?.createdAt.getTime()).toBe(T0);
    } finally {
      await engram.close();
    }
  });
});

describe("EngramStore TTL: refresh", () => {
  it("refreshOnRead: get and search renew the item's own TTL from now; createdAt, updatedAt and the order stay", async () => {
    const engram = await open(tempDir("lg-ttl-refresh"));
    try {
      const s = new EngramStore(engram, { ttl: { defaultTtl: 1, refreshOnRead: true } });
      await s.put(["g"], "x", { v: 1 });
      await s.put(["s"], "y", { v: 2 }, undefined, { ttl: 2 });
      await s.put(["s"], "z", { v: 3 });
      await s.put(["s"], "w", { v: 4 }, undefined, { ttl: 0 });
      at(50_000);
      const got = await s.get(["g"], "x");
      expect([got?.createdAt.getTime(), got?.updatedAt.getTime()]).toEqual([T0, T0]);
      expect(await expiresAt(engram, ["g"], "x")).toBe(T0 + 50_000 + MIN);
      at(100_000);
      // z expired at 60 s; y is refreshed from now with its own 2 minutes; w has no TTL to renew.
      expect(await keys(s, ["s"])).toEqual(["y", "w"]);
      expect(await expiresAt(engram, ["s"], "y")).toBe(T0 + 100_000 + 2 * MIN);
      expect(await expiresAt(engram, ["s"], "w")).toBeNull();
      at(110_000 - 1);
      const late = await s.get(["g"], "x", { refreshTtl: false });
      expect([late?.createdAt.getTime(), late?.updatedAt.getTime()]).toEqual([T0, T0]);
      at(110_000);
      expect(await s.get(["g"], "x", { refreshTtl: false })).toBeNull();
      at(220_000 - 1);
      const items = await s.search(["s"], { refreshTtl: false });
      expect(items.map((i) => [i.key, i.createdAt.getTime(), i.updatedAt.getTime()])).toEqual([
        ["y", T0, T0],
        ["w", T0, T0],
      ]);
      at(220_000);
      expect(await keys(s, ["s"], { refreshTtl: false })).toEqual(["w"]);
      // The creation order survives refreshes: y, created before a later item, still comes first.
      const order = new EngramStore(engram, { scope: "order", ttl: { defaultTtl: 1, refreshOnRead: true } });
      for (const k of ["p", "q", "r"]) await order.put(["o"], k, { k });
      await order.get(["o"], "p");
      await order.get(["o"], "q");
      expect(await keys(order, ["o"])).toEqual(["p", "q", "r"]);
    } finally {
      await engram.close();
    }
  });

  it("without refreshOnRead (the default) reads leave the expiry; refreshTtl per call overrides the setting either way, through batch too", async () => {
    const engram = await open(tempDir("lg-ttl-norefresh"));
    try {
      const off = new EngramStore(engram, { ttl: { defaultTtl: 1 } });
      const on = new EngramStore(engram, { scope: "on", ttl: { defaultTtl: 1, refreshOnRead: true } });
      for (const s of [off, on]) for (const k of ["a", "b", "c", "d"]) await s.put(["n"], k, { k });
      at(30_000);
      await off.get(["n"], "a");
      await off.search(["n"], { filter: { k: "b" } });
      await on.get(["n"], "a", { refreshTtl: false });
      await on.search(["n"], { filter: { k: "b" }, refreshTtl: false });
      await off.get(["n"], "c", { refreshTtl: true });
      await off.batch([{ namespacePrefix: ["n"], filter: { k: "d" }, limit: 10, offset: 0, refreshTtl: true }]);
      await on.batch([{ namespace: ["n"], key: "c", refreshTtl: false }]);
      at(MIN);
      expect(await keys(off, ["n"], { refreshTtl: false })).toEqual(["c", "d"]);
      expect(await keys(on, ["n"], { refreshTtl: false })).toEqual([]);
      expect(await expiresAt(engram, ["n"], "c")).toBe(T0 + 30_000 + MIN);
    } finally {
      await engram.close();
    }
  });

  it("a put in the same batch as a refreshing read keeps the put's TTL", async () => {
    const engram = await open(tempDir("lg-ttl-batch"));
    try {
      const s = new EngramStore(engram, { ttl: { defaultTtl: 1, refreshOnRead: true } });
      await s.put(["n"], "k", { v: 1 });
      at(10_000);
      const [read] = await s.batch([
        { namespace: ["n"], key: "k" },
        { namespace: ["n"], key: "k", value: { v: 2 }, options: { ttl: 5 } },
      ]);
      expect(read?.value).toEqual({ v: 2 });
      expect(await expiresAt(engram, ["n"], "k")).toBe(T0 + 10_000 + 5 * MIN);
    } finally {
      await engram.close();
    }
  });

  it("a refresh after a get whose item another writer deleted is dropped under tombstoneWrites require-clear too, the read answering", async () => {
    const engram = await Engram.open(tempDir("lg-ttl-race-clear"), { clock: () => Date.now(), compaction: { workers: 0 }, tombstoneWrites: "require-clear" });
    try {
      const backing = racing(engram, itemKey(["n"], "k"));
      const reader = new EngramStore(backing, { ttl: { defaultTtl: 1, refreshOnRead: true } });
      const other = new EngramStore(engram);
      await other.put(["n"], "k", { v: 1 });
      backing.arm(() => other.delete(["n"], "k"));
      expect((await reader.get(["n"], "k"))?.value).toEqual({ v: 1 });
      expect([backing.fired, await reader.get(["n"], "k")]).toEqual([true, null]);
    } finally {
      await engram.close();
    }
  });

  /**
   * The races' setup: `other` puts ["n"] "k" (1 min TTL) at T0; `reader` refreshes on read through
   * a backing store whose read of the item can be armed to let another writer in; the clock at 10 s.
   */
  async function raceOn(engram: Engram): Promise<{ backing: ReturnType<typeof racing>; reader: EngramStore; other: EngramStore }> {
    const backing = racing(engram, itemKey(["n"], "k"));
    const reader = new EngramStore(backing, { ttl: { defaultTtl: 1, refreshOnRead: true } });
    const other = new EngramStore(engram, { ttl: { defaultTtl: 1 } });
    await other.put(["n"], "k", { v: 1 });
    at(10_000);
    return { backing, reader, other };
  }

  for (const via of ["get", "search"] as const) {
    it(`a refresh after a ${via} never brings back an item another writer deleted after the read`, async () => {
      const engram = await open(tempDir(`lg-ttl-race-del-${via}`));
      try {
        const { backing, reader, other } = await raceOn(engram);
        backing.arm(() => other.delete(["n"], "k"));
        // The read answers from before the delete; the refresh after it loses its compare-and-set.
        const seen = via === "get" ? [(await reader.get(["n"], "k"))?.key] : await keys(reader, ["n"]);
        expect([backing.fired, seen]).toEqual([true, ["k"]]);
        expect([await reader.get(["n"], "k"), await other.get(["n"], "k")]).toEqual([null, null]);
        expect((await engram.probe(itemKey(["n"], "k"), SCOPE)).state).toBe("tombstoned");
      } finally {
        await engram.close();
      }
    });

    it(`a refresh after a ${via} never overwrites a newer put by another writer, nor its TTL`, async () => {
      const engram = await open(tempDir(`lg-ttl-race-put-${via}`));
      try {
        const { backing, reader, other } = await raceOn(engram);
        backing.arm(() => other.put(["n"], "k", { v: 2 }, undefined, { ttl: 10 }));
        const seen = via === "get" ? [(await reader.get(["n"], "k"))?.value] : (await reader.search(["n"])).map((i) => i.value);
        expect([backing.fired, seen]).toEqual([true, [{ v: 1 }]]);
        const now = await other.get(["n"], "k");
        expect([now?.value, now?.updatedAt.getTime()]).toEqual([{ v: 2 }, T0 + 10_000]);
        expect(await expiresAt(engram, ["n"], "k")).toBe(T0 + 10_000 + 10 * MIN);
      } finally {
        await engram.close();
      }
    });
  }
});

describe("EngramStore TTL: refusals and reopen", () => {
  const BAD: Array<[string, unknown]> = [
    ["negative", -1],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["-Infinity", -Infinity],
    ["a string", "5"],
    ["a boolean", true],
    ["an object", { minutes: 5 }],
    ["past TTL_MINUTES_MAX", TTL_MINUTES_MAX + 1],
  ];

  it("a bad ttl is INVALID_ARGUMENT with nothing written: constructor, put, batch; bad refresh flags too", async () => {
    const engram = await open(tempDir("lg-ttl-bad"));
    try {
      const s = new EngramStore(engram);
      await s.put(["n"], "k", { v: 1 });
      for (const [label, ttl] of BAD) {
        const before = engram.stats().sequence;
        expect(await codeOf(() => new EngramStore(engram, { ttl: { defaultTtl: ttl as number } })), `defaultTtl ${label}`).toBe("INVALID_ARGUMENT");
        expect(await codeOf(() => s.put(["n"], "new", { v: 1 }, undefined, { ttl: ttl as number })), `put ${label}`).toBe("INVALID_ARGUMENT");
        expect(await codeOf(() => s.put(["n"], "k", { v: 2 }, undefined, { ttl: ttl as number })), `update ${label}`).toBe("INVALID_ARGUMENT");
        const mixed = [
          { namespace: ["other"], key: "good", value: { v: 1 } },
          { namespace: ["n"], key: "bad", value: { v: 1 }, options: { ttl: ttl as number } },
        ];
        expect(await codeOf(() => s.batch(mixed)), `batch ${label}`).toBe("INVALID_ARGUMENT");
        expect(engram.stats().sequence, `${label}: nothing written`).toBe(before);
      }
      for (const bad of ["yes", 1, {}]) {
        expect(await codeOf(() => new EngramStore(engram, { ttl: { refreshOnRead: bad as boolean } }))).toBe("INVALID_ARGUMENT");
        expect(await codeOf(() => s.get(["n"], "k", { refreshTtl: bad as boolean }))).toBe("INVALID_ARGUMENT");
        expect(await codeOf(() => s.search(["n"], { refreshTtl: bad as boolean }))).toBe("INVALID_ARGUMENT");
      }
      expect(await codeOf(() => new EngramStore(engram, { ttl: 5 as unknown as { defaultTtl: number } }))).toBe("INVALID_ARGUMENT");
      expect([(await s.get(["n"], "k"))?.value, await s.get(["n"], "new"), await s.listNamespaces()]).toEqual([{ v: 1 }, null, [["n"]]]);
      // The limit itself, null (the default) and sweepIntervalMinutes (ignored) are accepted.
      await s.put(["n"], "max", { v: 1 }, undefined, { ttl: TTL_MINUTES_MAX });
      await s.put(["n"], "null", { v: 1 }, undefined, { ttl: null as unknown as number });
      expect(await expiresAt(engram, ["n"], "max")).toBe(Date.now() + TTL_MINUTES_MAX * MIN);
      expect(await codeOf(() => new EngramStore(engram, { ttl: { defaultTtl: 1, sweepIntervalMinutes: 5 } }))).toBe("ok");
    } finally {
      await engram.close();
    }
  });

  it("an expiry, a refreshed one included, survives close and reopen", async () => {
    const dir = tempDir("lg-ttl-reopen");
    const config = { ttl: { defaultTtl: 2, refreshOnRead: true } };
    let engram = await open(dir);
    try {
      let s = new EngramStore(engram, config);
      await s.put(["n"], "kept", { v: 1 });
      await s.put(["n"], "read", { v: 2 });
      at(MIN);
      await s.get(["n"], "read");
      await engram.close();
      engram = await open(dir);
      s = new EngramStore(engram, config);
      at(2 * MIN - 1);
      expect(await keys(s, ["n"], { refreshTtl: false })).toEqual(["kept", "read"]);
      await engram.close();
      engram = await open(dir);
      s = new EngramStore(engram, config);
      at(2 * MIN);
      expect(await keys(s, ["n"], { refreshTtl: false })).toEqual(["read"]);
      const read = await s.get(["n"], "read", { refreshTtl: false });
      expect([read?.createdAt.getTime(), read?.updatedAt.getTime()]).toEqual([T0, T0]);
      at(3 * MIN);
      expect(await s.get(["n"], "read", { refreshTtl: false })).toBeNull();
    } finally {
      await engram.close();
    }
  });
});
