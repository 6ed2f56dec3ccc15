/**
 * `EngramStore` (engram/langgraph): the defects the fifty-fourth session's audit found by driving
 * it beside LangGraph's `InMemoryStore` (scripts in /tmp/p54/integ), each pinned here.
 *
 * How it works. Bad input: puts, gets, deletes, searches and batches with a key that is not a
 * string, a namespace that is not an array (a string, null), and values JSON cannot hold (a
 * BigInt, a cycle, `undefined`). Each must be refused with a typed error — LangGraph's own
 * `InvalidNamespaceError` for a namespace, engram's `InvalidArgumentError` otherwise, never a
 * raw TypeError from inside the class — while the store's commit sequence stays where it was,
 * so nothing was written (not even the namespace marker). Concurrent puts: three EngramStore
 * instances over one engram store (as two graphs or workers in one process have) put the same
 * item 60 times at once; every put must resolve and the item must hold one of the values. The
 * twin sets `unsafeLangGraphForTests.queuePerInstance` (each instance queued only its own
 * batches) and must see puts rejected with VERSION_CONFLICT, an error no BaseStore caller expects.
 *
 * Counts (fifty-fifth session): listNamespaces and search beside the reference `InMemoryStore`
 * with the same puts. `maxDepth: 0` must answer what the reference answers (`[[""]]`: it joins
 * labels with ":" and splits the empty cut back into one empty label; `[]` on an empty store), and
 * so must the edge values it handles sensibly (`maxDepth` beyond the deepest namespace or
 * Infinity, `limit: 0`, an offset past the end). A `maxDepth`, `limit` or `offset` the reference
 * mishandles — negative (it slices from the end: `maxDepth: -1` lists namespaces of one empty
 * label), fractional (truncated), NaN, a string, a null maxDepth (cut to no label, as 0) — must
 * be refused with INVALID_ARGUMENT with nothing written, through listNamespaces, search and batch
 * alike; each such case also runs on the reference, which must answer without an error (the
 * misbehaviour refused here). A null `limit` or `offset` (fifty-sixth session; refused before) is
 * read as the reference reads it, `op.limit ?? default`: over 105 namespaces and 11 items, every
 * mix of null and numbers through listNamespaces, search and batch must give the reference's
 * answer (listNamespaces all 105 — BaseStore's 100 applies only to a limit left out — and
 * search 10), times aside.
 *
 * Values JSON changes (fifty-fifth session): LangGraph's own durable store, PostgresStore, writes
 * `JSON.stringify(value)` into a jsonb column (libs/checkpoint-postgres, crud-operations.ts), so
 * NaN and ±Infinity come back null, a Date its ISO string, a Map or Set `{}`, and undefined or
 * function fields are dropped; EngramStore does the same, documented, rather than refusing such
 * values. A value holding each of these is put, read by get, search and a batch that puts it over
 * an existing item and gets it in the same batch, then read again after a reopen: every answer
 * must equal `JSON.parse(JSON.stringify(value))`, what PostgresStore would return (the in-batch
 * get returned the caller's own objects before). The reference InMemoryStore, which hands back the
 * very objects it was given, is run beside it to show the departure. A value JSON cannot hold at
 * all (a function, a symbol) is INVALID_ARGUMENT with nothing written.
 *
 * Property stressed: bad input is typed and writes nothing; puts from several instances never
 * fail on contention; counts answer as the reference or are refused; a value reads back as JSON
 * made it, the same from every call and across reopens.
 */
import { InMemoryStore, InvalidNamespaceError, type Operation, type SearchItem } from "@langchain/langgraph-checkpoint";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError } from "../src/index.js";
import { EngramStore, unsafeLangGraphForTests } from "../src/integrations/langgraph.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  unsafeLangGraphForTests.queuePerInstance = false;
});

/** A value with a cycle. */
function cyclic(): Record<string, unknown> {
  const o: Record<string, unknown> = { a: 1 };
  o["self"] = o;
  return o;
}

type Call = [label: string, run: (s: EngramStore) => Promise<unknown>, expected: typeof InvalidArgumentError | typeof InvalidNamespaceError];

/** Calls outside the types (as JavaScript callers and deserialized graph state make them). */
const BAD: Call[] = [
  ["put with a numeric key", (s) => s.put(["a"], 5 as unknown as string, { x: 1 }), InvalidArgumentError],
  ["put with a null key", (s) => s.put(["a"], null as unknown as string, { x: 1 }), InvalidArgumentError],
  ["get with a numeric key", (s) => s.get(["a"], 5 as unknown as string), InvalidArgumentError],
  ["delete with a numeric key", (s) => s.delete(["a"], 5 as unknown as string), InvalidArgumentError],
  ["put with a string namespace", (s) => s.put("abc" as unknown as string[], "k", { x: 1 }), InvalidNamespaceError],
  ["get with a null namespace", (s) => s.get(null as unknown as string[], "k"), InvalidNamespaceError],
  ["search with a string prefix", (s) => s.search("abc" as unknown as string[]), InvalidNamespaceError],
  ["listNamespaces with a string prefix", (s) => s.listNamespaces({ prefix: "abc" as unknown as string[] }), InvalidNamespaceError],
  ["put of a BigInt", (s) => s.put(["a"], "k", { b: 1n }), InvalidArgumentError],
  ["put of a cycle", (s) => s.put(["a"], "k", cyclic()), InvalidArgumentError],
  ["put of undefined", (s) => s.put(["a"], "k", undefined as unknown as Record<string, unknown>), InvalidArgumentError],
  ["put of a function", (s) => s.put(["a"], "k", (() => 1) as unknown as Record<string, unknown>), InvalidArgumentError],
  ["put of a symbol", (s) => s.put(["a"], "k", Symbol("v") as unknown as Record<string, unknown>), InvalidArgumentError],
  ["batch with a BigInt after a good put", (s) => s.batch([{ namespace: ["ok"], key: "k", value: { x: 1 } }, { namespace: ["a"], key: "k", value: { b: 2n } }]), InvalidArgumentError],
];

describe("bad input", () => {
  it("is refused with a typed error and writes nothing", async () => {
    const engram = await Engram.open(tempDir("lg-badinput"), { compaction: { workers: 0 } });
    try {
      const store = new EngramStore(engram);
      await store.put(["seed"], "k", { x: 0 });
      for (const [label, run, expected] of BAD) {
        const before = engram.stats().sequence;
        const err = await run(store).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, label).toBeInstanceOf(expected);
        expect(engram.stats().sequence, label).toBe(before);
      }
      expect(await store.listNamespaces()).toEqual([["seed"]]);
    } finally {
      await engram.close();
    }
  });
});

/** 60 puts of one item from three instances over one engram store, at once: their outcomes and the final value. */
async function contendedPuts(): Promise<{ rejected: string[]; value: unknown }> {
  const engram = await Engram.open(tempDir("lg-contention"), { compaction: { workers: 0 } });
  try {
    const stores = [new EngramStore(engram), new EngramStore(engram), new EngramStore(engram)];
    const outcomes = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => (stores[i % 3] as EngramStore).put(["hot"], "item", { i })));
    const rejected = outcomes.flatMap((o) => (o.status === "rejected" ? [String((o.reason as { code?: unknown }).code)] : []));
    return { rejected, value: (await (stores[0] as EngramStore).get(["hot"], "item"))?.value };
  } finally {
    await engram.close();
  }
}

describe("instances over one engram store", () => {
  it("all puts of a hot item resolve", async () => {
    const { rejected, value } = await contendedPuts();
    expect(rejected).toEqual([]);
    expect(value).toEqual({ i: expect.any(Number) });
  });

  it("twin: with a queue per instance, puts fail with VERSION_CONFLICT", async () => {
    unsafeLangGraphForTests.queuePerInstance = true;
    const { rejected } = await contendedPuts();
    expect(rejected.length).toBeGreaterThan(0);
    expect(new Set(rejected)).toEqual(new Set(["VERSION_CONFLICT"]));
  });
});

/** The same namespaces put into the reference and into an EngramStore over a fresh engram store. */
async function sideBySide<T>(body: (ref: InMemoryStore, store: EngramStore, engram: Engram) => Promise<T>, namespaces: string[][] = [["a", "b", "c"], ["a", "d"], ["e"]]): Promise<T> {
  const engram = await Engram.open(tempDir("lg-counts"), { compaction: { workers: 0 } });
  try {
    const ref = new InMemoryStore();
    const store = new EngramStore(engram);
    for (const ns of namespaces) {
      await ref.put(ns, "k", { x: 1 });
      await store.put(ns, "k", { x: 1 });
    }
    return await body(ref, store, engram);
  } finally {
    await engram.close();
  }
}

type ListOptions = NonNullable<Parameters<EngramStore["listNamespaces"]>[0]>;

/** listNamespaces options the reference answers sensibly: both stores must agree. */
const SAME: ListOptions[] = [
  { maxDepth: 0 },
  { maxDepth: 0, prefix: ["a"] },
  { maxDepth: 0, prefix: ["zzz"] },
  { maxDepth: 1 },
  { maxDepth: 2 },
  { maxDepth: 9 },
  { maxDepth: Infinity },
  { limit: 0 },
  { limit: Infinity },
  { offset: 5 },
  { maxDepth: 1, limit: 1, offset: 1 },
];

/** Options the reference mishandles (it slices with them): EngramStore refuses them. */
const MISHANDLED: Array<Record<string, unknown>> = [
  { maxDepth: -1 },
  { maxDepth: -2 },
  { maxDepth: 1.5 },
  { maxDepth: NaN },
  { maxDepth: null },
  { maxDepth: "1" },
  { limit: -1 },
  { limit: 1.5 },
  { limit: NaN },
  { limit: "2" },
  { offset: -1 },
  { offset: 1.5 },
  { offset: NaN },
  { offset: "1" },
];

/** Resolves to the error `p` rejects with, or null. */
async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => null,
    (e: unknown) => e,
  );
}

describe("counts beside the reference", () => {
  it("maxDepth 0 answers as the reference: [[\"\"]], and [] on an empty store", async () => {
    await sideBySide(async (ref, store) => {
      expect(await ref.listNamespaces({ maxDepth: 0 }), "the reference").toEqual([[""]]);
      expect(await store.listNamespaces({ maxDepth: 0 })).toEqual([[""]]);
    });
    await sideBySide(async (ref, store) => {
      expect(await store.listNamespaces({ maxDepth: 0 })).toEqual(await ref.listNamespaces({ maxDepth: 0 }));
      expect(await store.listNamespaces({ maxDepth: 0 })).toEqual([]);
    }, []);
  });

  it("edge values the reference handles sensibly give its answers", async () => {
    await sideBySide(async (ref, store) => {
      for (const o of SAME) expect(await store.listNamespaces(o), JSON.stringify(o)).toEqual(await ref.listNamespaces(o));
      // Without their times: each store stamps its own puts, and sideBySide's two puts of an item may fall in different milliseconds.
      for (const o of [{ limit: 0 }, { offset: 9 }, { limit: Infinity }]) expect(untimed(await store.search(["a"], o)), String(o.limit ?? o.offset)).toEqual(untimed(await ref.search(["a"], o)));
    });
  });

  it("values the reference mishandles are INVALID_ARGUMENT through listNamespaces, search and batch, with nothing written", async () => {
    await sideBySide(async (ref, store, engram) => {
      expect(await ref.listNamespaces({ maxDepth: -1 }), "the reference lists a namespace of one empty label").toContainEqual([""]);
      for (const o of MISHANDLED) {
        const label = JSON.stringify(o, (_k, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v));
        expect(await failure(ref.listNamespaces(o as ListOptions)), `${label}: the reference answers without an error`).toBeNull();
        const before = engram.stats().sequence;
        const listed = await failure(store.listNamespaces(o as ListOptions));
        expect(listed, `listNamespaces ${label}`).toBeInstanceOf(InvalidArgumentError);
        expect((listed as InvalidArgumentError).code, label).toBe("INVALID_ARGUMENT");
        expect((listed as Error).message, label).toMatch(/whole number ≥ 0/);
        const op = { matchConditions: undefined, maxDepth: undefined, limit: 100, offset: 0, ...o } as unknown as Operation;
        const put: Operation = { namespace: ["written"], key: "k", value: { x: 1 } };
        expect(await failure(store.batch([put, op])), `batch ${label}`).toBeInstanceOf(InvalidArgumentError);
        if (!("maxDepth" in o)) expect(await failure(store.search(["a"], o as { limit?: number; offset?: number })), `search ${label}`).toBeInstanceOf(InvalidArgumentError);
        expect(engram.stats().sequence, `${label}: nothing written`).toBe(before);
      }
      expect(await store.listNamespaces(), "the batches' puts were not written").toEqual(await ref.listNamespaces());
    });
  });
});

/** Search results without their times (each store stamps its own). */
function untimed(items: SearchItem[]): unknown[] {
  return items.map(({ namespace, key, value, score }) => ({ namespace, key, value, score }));
}

/** Null counts: the reference reads a null limit or offset with `??`, as the operation's default. */
const NULLS: Array<Record<string, unknown>> = [{ limit: null }, { offset: null }, { limit: null, offset: null }, { limit: null, offset: 2 }, { limit: 3, offset: null }];

describe("a null limit or offset, as the reference reads it", () => {
  // 105 namespaces (past listNamespaces' default limit of 100) and 12 items under ["s"] (past
  // search's 10): a null limit is no limit for listNamespaces and 10 for search, in both stores.
  const many = [...Array.from({ length: 104 }, (_, i) => ["n", `l${String(i).padStart(3, "0")}`]), ["s"]];

  it("listNamespaces, search and batch answer as InMemoryStore, with nothing refused", async () => {
    await sideBySide(async (ref, store) => {
      for (let i = 0; i < 11; i += 1) {
        await ref.put(["s"], `k${i}`, { i });
        await store.put(["s"], `k${i}`, { i });
      }
      expect(await ref.listNamespaces({ limit: null } as unknown as ListOptions), "the reference: no limit").toHaveLength(105);
      expect(await ref.search(["s"], { limit: null } as unknown as { limit: number }), "the reference: 10").toHaveLength(10);
      for (const o of NULLS) {
        const label = JSON.stringify(o);
        expect(await store.listNamespaces(o as ListOptions), `listNamespaces ${label}`).toEqual(await ref.listNamespaces(o as ListOptions));
        expect(untimed(await store.search(["s"], o as { limit?: number })), `search ${label}`).toEqual(untimed(await ref.search(["s"], o as { limit?: number })));
        const ops = [{ matchConditions: undefined, maxDepth: undefined, ...o }, { namespacePrefix: ["s"], filter: undefined, query: undefined, ...o }] as unknown as Operation[];
        const [mine, theirs] = [await store.batch(ops), await ref.batch(ops)] as unknown as Array<[string[][], SearchItem[]]>;
        expect(mine?.[0], `batch listNamespaces ${label}`).toEqual(theirs?.[0]);
        expect(untimed(mine?.[1] ?? []), `batch search ${label}`).toEqual(untimed(theirs?.[1] ?? []));
      }
    }, many);
  });

  it("a null maxDepth stays INVALID_ARGUMENT: the reference cuts to no label with it, as with 0", async () => {
    await sideBySide(async (ref, store) => {
      expect(await ref.listNamespaces({ maxDepth: null } as unknown as ListOptions)).toEqual([[""]]);
      const refused = await failure(store.listNamespaces({ maxDepth: null } as unknown as ListOptions));
      expect(refused).toBeInstanceOf(InvalidArgumentError);
      expect((refused as Error).message).toMatch(/maxDepth .* got null; .*leave it out for no cut/);
    });
  });
});

/** A value holding everything JSON changes: non-finite numbers, a Date, a Map, a Set, undefined and function fields, a toJSON, -0. */
function jsonChanged(): Record<string, unknown> {
  return {
    nan: NaN,
    inf: Infinity,
    ninf: -Infinity,
    date: new Date(Date.UTC(2026, 11, 7)),
    map: new Map([["a", 1]]),
    set: new Set([1, 2]),
    undef: undefined,
    fn: () => 1,
    arr: [1, undefined, NaN, () => 1, new Date(0)],
    negZero: -0,
    nested: { when: new Date(1000), inf: -Infinity },
    custom: { toJSON: () => "custom" },
    plain: "kept",
  };
}

describe("values JSON changes, as LangGraph's PostgresStore stores them", () => {
  it("read back by get, search, an in-batch get and after a reopen as JSON.parse(JSON.stringify(value))", async () => {
    const dir = tempDir("lg-json");
    const asPostgres = JSON.parse(JSON.stringify(jsonChanged())) as Record<string, unknown>;
    expect(asPostgres).toMatchObject({ nan: null, date: "2026-12-07T00:00:00.000Z", map: {}, set: {}, arr: [1, null, null, null, "1970-01-01T00:00:00.000Z"], custom: "custom" });
    expect("fn" in asPostgres || "undef" in asPostgres).toBe(false);
    let engram = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const store = new EngramStore(engram);
      await store.put(["j"], "k", jsonChanged());
      expect((await store.get(["j"], "k"))?.value, "get").toStrictEqual(asPostgres);
      expect((await store.search(["j"]))[0]?.value, "search").toStrictEqual(asPostgres);
      await store.put(["j"], "again", { x: 1 });
      const [got] = await store.batch([{ namespace: ["j"], key: "again" }, { namespace: ["j"], key: "again", value: jsonChanged() }] as const);
      expect(got?.value, "a get in the batch that replaces the item").toStrictEqual(asPostgres);
      expect((await store.get(["j"], "again"))?.value, "a get after it").toStrictEqual(asPostgres);
      const ref = new InMemoryStore();
      const given = jsonChanged();
      await ref.put(["j"], "k", given);
      expect((await ref.get(["j"], "k"))?.value["date"], "the reference hands back the Date it was given").toBe(given["date"]);
      await engram.close();
      engram = await Engram.open(dir, { compaction: { workers: 0 } });
      const reopened = new EngramStore(engram);
      for (const key of ["k", "again"]) expect((await reopened.get(["j"], key))?.value, `${key} after a reopen`).toStrictEqual(asPostgres);
    } finally {
      await engram.close();
    }
  });
});
