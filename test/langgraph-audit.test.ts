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
 * Property stressed: bad input is typed and writes nothing; puts from several instances never
 * fail on contention.
 */
import { InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
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
