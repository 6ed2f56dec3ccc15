/**
 * Reads of compact rows as they are (engine/store.ts find, Keydir.readRef): a read in a pass in
 * key order, or any read with no value cache, takes a held row's location and fields without
 * making a Slot of it, and a hinted reopen holds a name whose one hint entry is a plain PUT as a
 * row (Keydir.holdApplied). The property: such a read answers exactly what a read of the Slot
 * would — the same value, nothing under a covering erasure, ScopeErasedDuringRead when an
 * in-place compaction straddles it — and the value cache still caches a pass read twice.
 *
 * How it works: a store of 3,000 keys loaded in random order is reopened from its hints and read
 * three times in key order; the first pass must leave most names rows (no Slot per name, nothing
 * cached), the second must make them Slots and cache them (the row's mark, `touched`, is the
 * cache's mark of a first miss), the third must hit. Every read is checked against the value
 * written. The erasure rule is checked on a Keydir directly, row against the Slot it becomes, over
 * every order of a PUT's sequence and a covering erasure's; its twin (`ignoreErase`) must then
 * disagree. The seed's torn read (test/seed-torn-read.test.ts) is replayed with K held as a row
 * after a hinted reopen and the value cache off: the read must fail closed, and under
 * `unsafe.skipReadValidation` the same script must return "user:bob"'s bytes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { isReadable, Keydir, unsafeRowReadsForTests } from "../engine/keydir.js";
import { ScopeErasedDuringRead } from "../rules/errors.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";
import { BIG, READER, SESSION1, sized } from "./helpers/seed-layout.js";

const N = 3000;
const DEADLINE_MS = 10_000;

afterEach(() => {
  unsafeRowReadsForTests.ignoreErase = false;
});

const keyOf = (i: number): string => `k${String(i).padStart(6, "0")}`;
const valueOf = (i: number): string => `value of ${i}`;

/** Rejects after `ms` unless `p` settles first. */
async function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** N keys written in random order in batches of 100, closed, and opened again from the hints. */
async function reopenedLoad(): Promise<Store> {
  const dir = tempDir("row-reads");
  const order = Array.from({ length: N }, (_, i) => i);
  const next = rng(11);
  for (let i = N - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  const loader = await Store.open(dir, { durability: "none", compaction: { auto: false } });
  for (let b = 0; b < N; b += 100) await loader.batch(order.slice(b, b + 100).map((i) => ({ op: "write", key: keyOf(i), value: valueOf(i) })));
  await loader.flush();
  await loader.close();
  return Store.open(dir, { durability: "sync", compaction: { auto: false } });
}

/** Reads every key in key order; returns how many answers were wrong. */
function readAll(store: Store): number {
  let wrong = 0;
  for (let i = 0; i < N; i++) {
    const r = store.readSync(keyOf(i));
    if (r.status !== "OK" || r.value !== valueOf(i) || r.version <= 0) wrong++;
  }
  return wrong;
}

describe("reads of compact rows: the answer a Slot would give, with no Slot per name", () => {
  it("a pass in key order after a hinted reopen reads rows as they are; a second pass caches them; a third hits", async () => {
    const store = await reopenedLoad();
    const cache = store.cache;
    expect(cache).not.toBeNull();
    if (cache === null) return;
    expect(store.keydir.isDeferred).toBe(true);
    expect(readAll(store)).toBe(0);
    // The first 256 first misses decide the pass (Admission's window): those names are made Slots.
    expect(store.keydir.rowsInUse).toBeGreaterThan(N - 600);
    expect(cache.bytesHeld).toBeLessThan(600 * 128); // only what the window cached before it took the reads for a pass
    expect(readAll(store)).toBe(0);
    expect(store.keydir.rowsInUse).toBe(0);
    expect(cache.bytesHeld).toBeGreaterThan(0);
    const hits = cache.counters.hits;
    expect(readAll(store)).toBe(0);
    expect(cache.counters.hits - hits).toBeGreaterThan(N - 600);
    await store.close();
  });

  it("reads out of key order make rows Slots, cached as before", async () => {
    const store = await reopenedLoad();
    const next = rng(12);
    let wrong = 0;
    for (let k = 0; k < N; k++) {
      const i = Math.floor(next() * N);
      const r = store.readSync(keyOf(i));
      if (r.status !== "OK" || r.value !== valueOf(i)) wrong++;
    }
    expect(wrong).toBe(0);
    // Random reads never turn streaming on: every name read was made a Slot and offered to the
    // cache (a name never read is still only in its hint: no row either).
    expect(store.keydir.rowsInUse).toBe(0);
    expect(store.cache?.bytesHeld ?? 0).toBeGreaterThan(0);
    await store.close();
  });

  it("an async read and a write after a pass read the row's current state", async () => {
    const store = await reopenedLoad();
    expect(readAll(store)).toBe(0);
    const held = store.keydir.rowsInUse;
    expect(held).toBeGreaterThan(N - 600);
    // Overwrites of names held as rows (a batch holds the row and moves it), then a pass again.
    await store.batch(Array.from({ length: 100 }, (_, i) => ({ op: "write", key: keyOf(N - 1 - i), value: `new ${i}` })));
    for (let i = 0; i < 100; i++) expect(await within(DEADLINE_MS, store.read(keyOf(N - 1 - i)), "async read")).toMatchObject({ status: "OK", value: `new ${i}` });
    await store.forget(keyOf(N - 1));
    expect(store.readSync(keyOf(N - 1))).toEqual({ status: "NOT_FOUND" });
    await store.close();
  });

  it("a row is readable exactly when the Slot it becomes is, under every order of its PUT and a covering erasure", () => {
    expect(rowsAgreeWithSlots()).toBe(0);
  });

  it("twin: with the erasure check off, a row killed by its scope's erasure reads as live (caught)", () => {
    unsafeRowReadsForTests.ignoreErase = true;
    expect(rowsAgreeWithSlots()).toBeGreaterThan(0);
  });
});

/**
 * For each (PUT sequence, erasure sequence) pair, a held row in "user:a/s" under an erasure of
 * "user:a": how many pairs rowReadable answers otherwise than isReadable of the Slot get() makes of it.
 */
function rowsAgreeWithSlots(): number {
  let disagree = 0;
  for (const putSeq of [1, 5, 9]) {
    for (const eraseSeq of [0, 4, 5, 6, 10]) {
      const keydir = new Keydir();
      // A deferred source with one PUT of the name, as a hint's (engine/hint-index.ts holdLone).
      keydir.defer({
        load: (k, scope, key) => expect(k.holdApplied(scope, key, putSeq, { seg: 1, off: 64, len: 40 })).toBe(true),
        loadAll: () => undefined,
        loadWithin: () => undefined,
        loadStep: () => true,
      });
      if (eraseSeq > 0) keydir.erases.set("user:a", { seq: eraseSeq, committedAt: 0, seg: 1, off: 200, len: 30, records: 1 });
      const row = keydir.readRef("user:a/s", "k");
      expect(typeof row).toBe("number");
      const asRow = keydir.rowReadable(row as number, "user:a/s");
      const slot = keydir.get("user:a/s", "k");
      expect(slot).toBeDefined();
      if (slot === undefined) continue;
      expect(keydir.rowsInUse).toBe(0); // get() made the row a Slot
      if (asRow !== isReadable(keydir, slot, 0)) disagree++;
    }
  }
  return disagree;
}


describe("the seed's torn read, with K read as a row", () => {
  async function straddle(unsafe: boolean): Promise<{ ok: true; value: unknown; scope: string } | { ok: false; error: unknown }> {
    const dir = tempDir("row-torn");
    const options: OpenOptions = { compaction: { mode: "in-place", workers: 1, auto: false }, cacheBytes: 0, ...(unsafe ? { unsafe: { skipReadValidation: true } } : {}) };
    const writer = await Store.open(dir, options);
    await writer.write("note", sized(SESSION1, "note", "session-1 secret"), { scope: SESSION1 });
    await writer.write("K", sized("global", "K", "global value of K", BIG));
    await writer.write("b", sized("user:bob", "b", "bob private memory", BIG), { scope: "user:bob" });
    await writer.close();
    const store = await Store.open(dir, { ...options, faults: { pauseAt: ["read:after-authorize"] } });
    expect(store.keydir.isDeferred).toBe(true);
    const reading = store.read("K", { scope: READER });
    await within(DEADLINE_MS, store.faults.waitFor("read:after-authorize"), "the read's pause");
    expect(store.keydir.rowsInUse).toBe(1); // K, held as a row from its hint and read as it is
    const erased = await within(DEADLINE_MS, store.forgetScope(SESSION1, { reclaim: "eager" }), "forgetScope");
    expect(erased.reclaimedBytes).toBeGreaterThan(0);
    store.faults.release("read:after-authorize");
    try {
      const r = await within(DEADLINE_MS, reading, "the straddling read");
      if (r.status !== "OK") throw new Error("the straddling read found nothing");
      return { ok: true, value: r.value, scope: r.scope };
    } catch (error) {
      return { ok: false, error };
    } finally {
      await store.close();
    }
  }

  it("fails closed with ScopeErasedDuringRead", async () => {
    const outcome = await straddle(false);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error).toBeInstanceOf(ScopeErasedDuringRead);
  });

  it("twin: under unsafe.skipReadValidation the same read returns user:bob's record", async () => {
    const outcome = await straddle(true);
    expect(outcome).toMatchObject({ ok: true, scope: "user:bob", value: sized("user:bob", "b", "bob private memory", BIG) });
  });
});
