/**
 * `EngramStore` (engram/langgraph) against LangGraph's own `InMemoryStore`, differentially, and
 * inside a real compiled LangGraph graph.
 *
 * How it works: a seeded random sequence of store calls — put (default index, `index: false`,
 * explicit fields), delete, get, search (namespace prefixes of every length including [],
 * filters with $eq $ne $gt $gte $lt $lte and plain values, limit, offset, and `query` over a
 * deterministic fake embeddings function), listNamespaces (prefix and suffix with "*", maxDepth 0-3,
 * limit, offset; a limit or offset is now and then null, which both stores read as the default)
 * and mixed `batch` calls — runs against both stores; every result and every
 * refusal is compared with toEqual, Dates included (Date is faked and advanced per call so both
 * stores see the same clock). Namespaces include spaces, non-ASCII, 90-character labels, 10
 * levels, a 10-level non-ASCII namespace whose key is too long for engram (the hashed layout),
 * the reserved "langgraph" root, and refused labels. The engram store is closed and reopened
 * every few calls. One reference behaviour is deliberately not reproduced and is removed from the
 * reference before each put or delete: InMemoryStore keeps an item's old embeddings (of fields
 * the new value lacks, and of deleted items) and keeps scoring by them.
 *
 * Then the improvements, each with its twin on the reference: labels with ":" work (the
 * reference refuses them); a prefix never matches a longer label; createdAt survives updates and
 * reopens; delete is a forget that `probe` explains. Last, a real `StateGraph` compiled with
 * `{ store: new EngramStore(...) }` whose node reads and writes memories, run, closed, reopened
 * and run again: the second run sees the first run's memory.
 *
 * Property stressed: call-for-call equality with the reference. ENGRAM_LANGGRAPH_OPS (default
 * 300) and ENGRAM_LANGGRAPH_SEED tune the run.
 */
import { Embeddings } from "@langchain/core/embeddings";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import type { Operation, PutOperation } from "@langchain/langgraph-checkpoint";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Engram } from "../src/index.js";
import { EngramStore, itemKey } from "../src/integrations/langgraph.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const OPS = Number(process.env["ENGRAM_LANGGRAPH_OPS"] ?? 300);
const SEED = Number(process.env["ENGRAM_LANGGRAPH_SEED"] ?? 20261201);
const REOPEN_EVERY = 30;
const DIMS = 6;


/** A deterministic embedding: character counts folded into DIMS buckets (no network, no model). */
function embed(text: string): number[] {
  const v = new Array<number>(DIMS).fill(0);
  for (let i = 0; i < text.length; i += 1) {
    const d = text.charCodeAt(i) % DIMS;
    v[d] = (v[d] ?? 0) + 1 + (i % 3);
  }
  return v;
}

class FakeEmbeddings extends Embeddings {
  constructor() {
    super({});
  }
  embedDocuments(texts: string[]): Promise<number[][]> {
    return Promise.resolve(texts.map(embed));
  }
  embedQuery(text: string): Promise<number[]> {
    return Promise.resolve(embed(text));
  }
}

const LONG = "L".repeat(90);
const NAMESPACES: string[][] = [
  ["users"],
  ["users", "alice"],
  ["users", "al"],
  ["users", "alice", "prefs"],
  ["docs"],
  ["docs", "v1"],
  ["a b", "ü ñ 雪"],
  [LONG, "x"],
  Array.from({ length: 10 }, (_, i) => `level${i}`),
  Array.from({ length: 10 }, () => "é".repeat(90)),
  ["langgraph", "reserved"],
];
const BAD_NAMESPACES: string[][] = [["bad.label"], [""], ["ok", ""], []];
const KEYS = ["k1", "k2", "pref", "", "ü key", "a/b|c%"];
const TEXTS = ["dark theme", "python tutorial", "typescript guide", "pizza", "ünïcode"];

type Call =
  | { kind: "put"; ns: string[]; key: string; value: Record<string, unknown>; index?: false | string[] }
  | { kind: "delete"; ns: string[]; key: string }
  | { kind: "get"; ns: string[]; key: string }
  | { kind: "search"; prefix: string[]; options: Record<string, unknown> }
  | { kind: "list"; options: Record<string, unknown> }
  | { kind: "batch"; ops: Operation[] };

function generator(r: () => number): () => Call {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const ns = (): string[] => (r() < 0.05 ? pick(BAD_NAMESPACES) : pick(NAMESPACES));
  const value = (): Record<string, unknown> => {
    const v: Record<string, unknown> = { n: Math.floor(r() * 5), tag: pick(["a", "b"]) };
    if (r() < 0.8) v["text"] = pick(TEXTS);
    if (r() < 0.3) v["chapters"] = [{ content: pick(TEXTS) }, { content: pick(TEXTS) }];
    return v;
  };
  const prefix = (): string[] => {
    const base = pick(NAMESPACES);
    return base.slice(0, Math.floor(r() * (base.length + 1)));
  };
  const filter = (): Record<string, unknown> | undefined => {
    const op = pick(["none", "plain", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]);
    if (op === "none") return undefined;
    if (op === "plain") return { tag: pick(["a", "b"]) };
    if (op === "$eq" || op === "$ne") return { tag: { [op]: pick(["a", "b"]) } };
    return { n: { [op]: Math.floor(r() * 5) } };
  };
  const searchOptions = (): Record<string, unknown> => {
    const o: Record<string, unknown> = {};
    const f = filter();
    if (f) o["filter"] = f;
    // null too: the reference reads it as the default (`op.limit ?? 10`), and so must EngramStore.
    if (r() < 0.5) o["limit"] = r() < 0.15 ? null : 1 + Math.floor(r() * 4);
    if (r() < 0.4) o["offset"] = r() < 0.15 ? null : Math.floor(r() * 3);
    if (r() < 0.5) o["query"] = pick(TEXTS);
    return o;
  };
  const listOptions = (): Record<string, unknown> => {
    const o: Record<string, unknown> = {};
    if (r() < 0.4) o["prefix"] = prefix().map((l) => (r() < 0.2 ? "*" : l));
    if (r() < 0.3) o["suffix"] = pick(NAMESPACES).slice(-1 - Math.floor(r() * 2)).map((l) => (r() < 0.2 ? "*" : l));
    if (r() < 0.4) o["maxDepth"] = Math.floor(r() * 4); // 0 too: the reference answers [[""]]
    if (r() < 0.3) o["limit"] = r() < 0.15 ? null : 1 + Math.floor(r() * 4);
    if (r() < 0.3) o["offset"] = r() < 0.15 ? null : Math.floor(r() * 3);
    return o;
  };
  const index = (): false | string[] | undefined => pick([undefined, undefined, false, ["text"], ["chapters[*].content"], ["text", "tag"]]);
  const single = (): Call => {
    switch (pick(["put", "put", "put", "delete", "get", "get", "search", "search", "list"] as const)) {
      case "put": {
        const i = index();
        return i === undefined ? { kind: "put", ns: ns(), key: pick(KEYS), value: value() } : { kind: "put", ns: ns(), key: pick(KEYS), value: value(), index: i };
      }
      case "delete":
        return { kind: "delete", ns: ns(), key: pick(KEYS) };
      case "get":
        return { kind: "get", ns: ns(), key: pick(KEYS) };
      case "search":
        return { kind: "search", prefix: prefix(), options: searchOptions() };
      case "list":
        return { kind: "list", options: listOptions() };
    }
  };
  const asOp = (c: Call): Operation => {
    switch (c.kind) {
      case "put":
        return c.index === undefined ? { namespace: c.ns, key: c.key, value: c.value } : { namespace: c.ns, key: c.key, value: c.value, index: c.index };
      case "delete":
        return { namespace: c.ns, key: c.key, value: null };
      case "get":
        return { namespace: c.ns, key: c.key };
      case "search":
        return { namespacePrefix: c.prefix, limit: 10, offset: 0, ...c.options };
      default:
        return { matchConditions: undefined, limit: 100, offset: 0 };
    }
  };
  return () => {
    if (r() < 0.12) return { kind: "batch", ops: Array.from({ length: 2 + Math.floor(r() * 4) }, () => asOp(single())) };
    return single();
  };
}

/** Runs one call on a store. */
async function apply(store: InMemoryStore | EngramStore, c: Call): Promise<unknown> {
  switch (c.kind) {
    case "put":
      return store.put(c.ns, c.key, c.value, c.index);
    case "delete":
      return store.delete(c.ns, c.key);
    case "get":
      return store.get(c.ns, c.key);
    case "search":
      return store.search(c.prefix, c.options);
    case "list":
      return store.listNamespaces(c.options);
    case "batch":
      return store.batch(c.ops);
  }
}

/**
 * The reference with its stale embeddings dropped (see the header): when a batch's puts reach the
 * embedding step (after its reads are answered), the old vectors of the items it writes go.
 */
function referenceStore(index: ConstructorParameters<typeof InMemoryStore>[0]): InMemoryStore {
  const ref = new InMemoryStore(index);
  const inner = ref as unknown as { vectors: Map<string, Map<string, unknown>>; extractTexts(ops: PutOperation[]): unknown };
  const extract = inner.extractTexts.bind(ref);
  inner.extractTexts = (ops: PutOperation[]) => {
    for (const op of ops) inner.vectors.get(op.namespace.join(":"))?.delete(op.key);
    return extract(ops);
  };
  return ref;
}

async function settle(p: Promise<unknown>): Promise<{ ok: unknown } | { error: string }> {
  try {
    return { ok: await p };
  } catch (err) {
    return { error: `${(err as Error).name}: ${(err as Error).message}` };
  }
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(new Date("2026-12-01T09:00:00Z"));
});
afterEach(() => {
  vi.useRealTimers();
});

describe("EngramStore against InMemoryStore", () => {
  it(`${OPS} random calls give the same results and refusals, across reopens (seed ${SEED})`, async () => {
    const index = { dims: DIMS, embeddings: new FakeEmbeddings(), fields: ["text"] };
    const ref = referenceStore({ index });
    const dir = tempDir("langgraph-diff");
    let engram = await Engram.open(dir, { compaction: { workers: 0 } });
    let store = new EngramStore(engram, { index });
    const next = generator(rng(SEED));
    const counts = { ok: 0, refused: 0, nonEmptySearches: 0, scored: 0 };
    try {
      for (let i = 0; i < OPS; i += 1) {
        if (i > 0 && i % REOPEN_EVERY === 0) {
          await engram.close();
          engram = await Engram.open(dir, { compaction: { workers: 0 } });
          store = new EngramStore(engram, { index });
        }
        vi.setSystemTime(Date.now() + 1000);
        const c = next();
        const want = await settle(apply(ref, c));
        const got = await settle(apply(store, c));
        expect(got, `call ${i} ${JSON.stringify(c)}`).toEqual(want);
        if ("ok" in want) counts.ok += 1;
        else counts.refused += 1;
        if (c.kind === "search" && "ok" in want && (want.ok as unknown[]).length > 0) {
          counts.nonEmptySearches += 1;
          if ((want.ok as Array<{ score?: number }>).some((x) => x.score !== undefined)) counts.scored += 1;
        }
      }
      // The whole store once more after a last reopen, through every namespace.
      await engram.close();
      engram = await Engram.open(dir, { compaction: { workers: 0 } });
      store = new EngramStore(engram, { index });
      expect(await store.listNamespaces({ limit: 1000 })).toEqual(await ref.listNamespaces({ limit: 1000 }));
      expect(await store.search([], { limit: 1000 })).toEqual(await ref.search([], { limit: 1000 }));
    } finally {
      await engram.close();
    }
    // The run must exercise the interesting paths, not only empty answers.
    expect(counts.ok).toBeGreaterThan(OPS / 2);
    expect(counts.refused).toBeGreaterThan(0);
    expect(counts.nonEmptySearches).toBeGreaterThan(OPS / 20);
    expect(counts.scored).toBeGreaterThan(0);
  });
});

describe("better than the reference", () => {
  it("labels with ':' work and come back as given; the reference refuses them (twin)", async () => {
    const dir = tempDir("langgraph-colon");
    const engram = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const store = new EngramStore(engram);
      await store.put(["user:alice", "thread:1"], "k", { v: 1 });
      await store.put(["user", "alice:thread", "1"], "k", { v: 2 });
      expect((await store.get(["user:alice", "thread:1"], "k"))?.value).toEqual({ v: 1 });
      expect((await store.get(["user", "alice:thread", "1"], "k"))?.value).toEqual({ v: 2 });
      expect((await store.search(["user:alice"])).map((x) => x.namespace)).toEqual([["user:alice", "thread:1"]]);
      expect(await store.listNamespaces()).toEqual([["user", "alice:thread", "1"], ["user:alice", "thread:1"]]);
      await expect(new InMemoryStore().put(["user:alice"], "k", { v: 1 })).rejects.toThrow(/colons/);
    } finally {
      await engram.close();
    }
  });

  it("a prefix never matches a longer label (both stores; the twin shows a plain string prefix would)", async () => {
    const dir = tempDir("langgraph-prefix");
    const engram = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const store = new EngramStore(engram);
      await store.put(["user", "alice"], "k", { v: 1 });
      await store.put(["user", "al"], "k", { v: 2 });
      expect((await store.search(["user", "al"])).map((x) => x.value)).toEqual([{ v: 2 }]);
      expect(await store.listNamespaces({ prefix: ["user", "al"] })).toEqual([["user", "al"]]);
      // Twin: the engram keys of the two items, compared as plain strings, would match.
      const naive = (ns: string[]): string => ns.join("/");
      expect(naive(["user", "alice"]).startsWith(naive(["user", "al"]))).toBe(true);
      expect(itemKey(["user", "alice"], "k").startsWith(itemKey(["user", "al"], "").slice(0, -1))).toBe(false);
    } finally {
      await engram.close();
    }
  });

  it("createdAt survives updates and reopens; delete is a forget that probe explains", async () => {
    const dir = tempDir("langgraph-created");
    let engram = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      let store = new EngramStore(engram, { scope: "app:notes" });
      vi.setSystemTime(new Date("2026-12-01T10:00:00Z"));
      await store.put(["u"], "k", { v: 1 });
      vi.setSystemTime(new Date("2026-12-01T11:00:00Z"));
      await store.put(["u"], "k", { v: 2 });
      await engram.close();
      engram = await Engram.open(dir, { compaction: { workers: 0 } });
      store = new EngramStore(engram, { scope: "app:notes" });
      const item = await store.get(["u"], "k");
      expect(item?.value).toEqual({ v: 2 });
      expect(item?.createdAt).toEqual(new Date("2026-12-01T10:00:00Z"));
      expect(item?.updatedAt).toEqual(new Date("2026-12-01T11:00:00Z"));
      await store.delete(["u"], "k");
      expect(await store.get(["u"], "k")).toBeNull();
      const probe = await engram.probe(itemKey(["u"], "k"), { scope: "app:notes" });
      expect(probe.state).toBe("tombstoned");
      expect(probe.tombstoneSeq).not.toBeNull();
    } finally {
      await engram.close();
    }
  });
});

describe("a real LangGraph graph", () => {
  it("a node reads and writes memories through config.store, across a reopen", async () => {
    vi.useRealTimers();
    const dir = tempDir("langgraph-graph");
    const State = Annotation.Root({ input: Annotation<string>(), seen: Annotation<string[]>() });
    const remember = async (state: typeof State.State, config: LangGraphRunnableConfig): Promise<Partial<typeof State.State>> => {
      const store = config.store;
      if (store === undefined) throw new Error("no store in the graph config");
      const user = String(config.configurable?.["user_id"]);
      const ns = ["memories", user];
      const before = await store.search(ns, { limit: 100 });
      await store.put(ns, `m${before.length}`, { text: state.input });
      return { seen: before.map((m) => String(m.value["text"])).sort() };
    };
    const build = (store: EngramStore) =>
      new StateGraph(State).addNode("remember", remember).addEdge(START, "remember").addEdge("remember", END).compile({ store });
    let engram = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const config = { configurable: { thread_id: "t1", user_id: "alice" } };
      const first = await build(new EngramStore(engram)).invoke({ input: "likes tea" }, config);
      expect(first.seen).toEqual([]);
      const second = await build(new EngramStore(engram)).invoke({ input: "lives in Oslo" }, config);
      expect(second.seen).toEqual(["likes tea"]);
      await engram.close();
      engram = await Engram.open(dir, { compaction: { workers: 0 } });
      const third = await build(new EngramStore(engram)).invoke({ input: "has a cat" }, config);
      expect(third.seen).toEqual(["likes tea", "lives in Oslo"]);
      const other = await build(new EngramStore(engram)).invoke({ input: "x" }, { configurable: { thread_id: "t2", user_id: "bob" } });
      expect(other.seen).toEqual([]);
    } finally {
      await engram.close();
    }
  });
});
