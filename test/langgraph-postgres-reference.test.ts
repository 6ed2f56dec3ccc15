/**
 * `EngramStore` (engram/langgraph) against LangGraph's own durable store, `PostgresStore`
 * (`@langchain/langgraph-checkpoint-postgres/store`, a devDependency), run for real on the
 * throwaway PostgreSQL cluster of test/setup/postgres.ts — skipped, with the reason in the test's
 * name, when there is none.
 *
 * How it works. Per seed, a seeded random sequence of calls — put, delete, get (good namespaces
 * and refused ones), search (a namespace prefix of one or more labels, filters with a plain value,
 * $eq $ne $gt $gte $lt $lte, limit, offset, no query), listNamespaces (prefix and suffix now and
 * then with "*", maxDepth 0-3, limit, offset; a limit or offset is now and then null) and
 * `batch` of valid gets, puts, deletes, searches and listings — runs on three stores: an
 * EngramStore on the engine, an EngramStore on engram's PostgreSQL backend (its own schema), and
 * PostgresStore (its own schema on the same server, no index: the cluster has no pgvector). The
 * two EngramStores must agree call for call, refusals and times included (Date is faked and
 * advanced per call); both engram stores are reopened every 30 calls. Each EngramStore answer is
 * then held against PostgresStore's with exactly the departures docs/API.md lists tolerated:
 * - refusals: the same calls are refused (messages and error classes differ);
 * - get: the same item (namespace, key, value); times by order only — createdAt equals updatedAt
 *   exactly when the item was created by its last put, in both;
 * - search: the same set of items over the whole result (limit large), where PostgresStore's
 *   answer is first cut to the items whose namespace starts with the prefix label by label (its
 *   `LIKE 'prefix%'` on the ":"-joined path also matches `["users", "alice"]` under
 *   `["users", "al"]`); the page asked for must be that slice of EngramStore's own order (the
 *   reference InMemoryStore's: namespaces by first touch, items by creation), while
 *   PostgresStore's whole answer must be newest update first, as documented;
 * - listNamespaces: PostgresStore lists the namespaces of live items; EngramStore lists every
 *   namespace ever written. EngramStore's whole answer, cut to the live namespaces (and, with a
 *   maxDepth, to those no deeper — PostgresStore drops deeper namespaces where EngramStore cuts
 *   them), must equal the live namespaces matched label by label ("*" any label), in the same
 *   order; the page asked for must be that slice of EngramStore's own answer;
 * - batch: results before the batch's first write compare as above; later reads are not
 *   compared (PostgresStore runs each operation in turn, so a read sees an earlier put of the
 *   same batch; EngramStore, as InMemoryStore, answers every read from the state before it).
 * Every 10 calls and at the end the whole contents compare: live namespaces, and every item of
 * each (value, key, fresh-or-updated). Counters of the tolerated differences must be non-zero, so
 * the run shows it met them. A second test pins each listed departure on a small fixed case,
 * EngramStore's answer and PostgresStore's side by side. A third runs one TTL scenario on both
 * in real time (PostgresStore expires by the server's clock, so time cannot be faked): TTLs of
 * fractions of a minute (3 s, 6 s), every wait a 50 ms poll with a deadline, never a bare sleep.
 * It compares what get and search show before and after expiry (a default TTL, a per-put and a
 * batch `options.ttl`, ttl 0) and that an item read under refreshOnRead outlives its twin, and
 * pins the TTL departures docs/API.md lists: PostgresStore's refresh moves updated_at and gives
 * an item without a TTL one (its `expires_at` read from its table), its refreshOnRead left out
 * refreshes nothing, its listNamespaces keeps an expired namespace until `sweepExpiredItems`, a
 * put over an expired row keeps its created_at, a negative TTL is written as already expired
 * and NaN as none, where EngramStore refuses both. A view taken when a stalled machine may have
 * passed the expiry instant is not compared (the run says so).
 *
 * Property stressed: EngramStore answers as LangGraph's real durable store does, except where
 * docs/API.md says it follows InMemoryStore instead. ENGRAM_LGPG_OPS (default 300) and
 * ENGRAM_LGPG_SEEDS (comma-separated) tune the run.
 */
import { PostgresStore } from "@langchain/langgraph-checkpoint-postgres/store";
import type { Item, Operation } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Engram } from "../src/index.js";
import { EngramStore, itemKey } from "../src/integrations/langgraph.js";
import { dropSchemas, PG_SKIP, PG_URL, storeUrl } from "./helpers/pg.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

const OPS = Number(process.env["ENGRAM_LGPG_OPS"] ?? 300);
const SEEDS = (process.env["ENGRAM_LGPG_SEEDS"] ?? "20261207,77,4242").split(",").map(Number);
const REOPEN_EVERY = 30;
const STATE_EVERY = 10;
const BIG = 100_000;
const tag = `lgref${process.pid}`;
const skipNote = PG_SKIP === null ? "" : ` [skipped: ${PG_SKIP}]`;

afterAll(async () => {
  await dropSchemas(`${tag}_`);
});
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(new Date("2026-12-07T09:00:00Z"));
});
afterEach(() => {
  vi.useRealTimers();
});

const LONG = "L".repeat(90);
const NAMESPACES: string[][] = [
  ["users"],
  ["users", "alice"],
  ["users", "al"],
  ["users", "alice", "prefs"],
  ["users2"],
  ["Users"],
  ["docs"],
  ["docs", "v1"],
  ["a b", "ü ñ 雪"],
  [LONG, "x"],
  Array.from({ length: 10 }, (_, i) => `level${i}`),
  Array.from({ length: 10 }, () => "é".repeat(90)),
];
const BAD_NAMESPACES: string[][] = [["bad.label"], [""], ["ok", ""], []];
const KEYS = ["k1", "k2", "pref", "", "ü key", "a/b|c%", "k:1"];
const TEXTS = ["dark theme", "python tutorial", "typescript guide", "pizza", "ünïcode"];

type Opts = Record<string, unknown>;
type Call =
  | { kind: "put"; ns: string[]; key: string; value: Opts }
  | { kind: "delete"; ns: string[]; key: string }
  | { kind: "get"; ns: string[]; key: string }
  | { kind: "search"; prefix: string[]; options: Opts }
  | { kind: "list"; options: Opts }
  | { kind: "batch"; ops: Operation[] };

/** The random call stream of one seed. */
function generator(r: () => number): () => Call {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const value = (): Opts => {
    const v: Opts = { n: Math.floor(r() * 5), tag: pick(["a", "b"]), flag: r() < 0.5, f: pick([0.5, -1.25, 1e21, 0]) };
    if (r() < 0.8) v["text"] = pick(TEXTS);
    if (r() < 0.3) v["chapters"] = [{ content: pick(TEXTS) }, { content: pick(TEXTS), page: Math.floor(r() * 100) }];
    return v;
  };
  // One label or more: PostgresStore refuses the empty prefix (a listed departure).
  const prefix = (): string[] => {
    const base = pick(NAMESPACES);
    return base.slice(0, 1 + Math.floor(r() * base.length));
  };
  const filter = (): Opts | undefined => {
    const op = pick(["none", "none", "plain", "plainN", "flag", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$eqN", "$in", "$nin", "range", "two"]);
    if (op === "none") return undefined;
    if (op === "flag") return { flag: r() < 0.5 };
    if (op === "$in") return { tag: { $in: pick([["a"], ["a", "b"], ["x"]]) } };
    if (op === "$nin") return { tag: { $nin: pick([["a"], ["b", "x"]]) } };
    if (op === "range") return { n: { $gte: Math.floor(r() * 3), $lt: 2 + Math.floor(r() * 3) } };
    if (op === "two") return { tag: pick(["a", "b"]), f: { $lte: pick([0, 1, 1e22]) } };
    if (op === "plain") return { tag: pick(["a", "b"]) };
    if (op === "plainN") return { n: Math.floor(r() * 5) };
    if (op === "$eq" || op === "$ne") return { tag: { [op]: pick(["a", "b"]) } };
    if (op === "$eqN") return { n: { $eq: Math.floor(r() * 5) } };
    return { n: { [op]: Math.floor(r() * 5) } };
  };
  const searchOptions = (): Opts => {
    const o: Opts = {};
    const f = filter();
    if (f) o["filter"] = f;
    if (r() < 0.5) o["limit"] = r() < 0.15 ? null : 1 + Math.floor(r() * 4);
    if (r() < 0.4) o["offset"] = r() < 0.15 ? null : Math.floor(r() * 3);
    return o;
  };
  const listOptions = (): Opts => {
    const o: Opts = {};
    if (r() < 0.4) o["prefix"] = prefix().map((l) => (r() < 0.2 ? "*" : l));
    if (r() < 0.3) o["suffix"] = pick(NAMESPACES).slice(-1 - Math.floor(r() * 2)).map((l) => (r() < 0.2 ? "*" : l));
    if (r() < 0.4) o["maxDepth"] = Math.floor(r() * 4);
    if (r() < 0.3) o["limit"] = r() < 0.15 ? null : 1 + Math.floor(r() * 4);
    if (r() < 0.3) o["offset"] = r() < 0.15 ? null : Math.floor(r() * 3);
    return o;
  };
  const single = (good: boolean): Call => {
    const ns = (): string[] => (!good && r() < 0.06 ? pick(BAD_NAMESPACES) : pick(NAMESPACES));
    switch (pick(["put", "put", "put", "delete", "get", "get", "search", "search", "list"] as const)) {
      case "put":
        return { kind: "put", ns: ns(), key: pick(KEYS), value: value() };
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
  // Batches hold valid operations only: PostgresStore applies the puts before a refused one.
  const asOp = (c: Call): Operation => {
    switch (c.kind) {
      case "put":
        return { namespace: c.ns, key: c.key, value: c.value };
      case "delete":
        return { namespace: c.ns, key: c.key, value: null };
      case "get":
        return { namespace: c.ns, key: c.key };
      case "search":
        return { namespacePrefix: c.prefix, filter: c.options["filter"] as Opts | undefined, limit: BIG, offset: 0 };
      default:
        return { matchConditions: undefined, limit: BIG, offset: 0 };
    }
  };
  return () => {
    if (r() < 0.12) {
      // One write per item: PostgresStore applies each in turn (a delete and a put of one item
      // make it new again there; EngramStore keeps the last, as an update) — a pinned departure.
      const written = new Set<string>();
      const ops = Array.from({ length: 2 + Math.floor(r() * 4) }, () => asOp(single(true))).filter((op) => {
        if (!("value" in op)) return true;
        const id = j([op.namespace, op.key]);
        return !written.has(id) && written.add(id) !== undefined;
      });
      return { kind: "batch", ops };
    }
    return single(false);
  };
}

type AnyStore = EngramStore | PostgresStore;

/** Runs one call on a store. */
async function apply(store: AnyStore, c: Call): Promise<unknown> {
  switch (c.kind) {
    case "put":
      return store.put(c.ns, c.key, c.value);
    case "delete":
      return store.delete(c.ns, c.key);
    case "get":
      return store.get(c.ns, c.key);
    case "search":
      return store.search(c.prefix, c.options);
    case "list":
      return store.listNamespaces(c.options);
    case "batch":
      return batchOn(store, c.ops);
  }
}

/** A batch on either store (their `batch` signatures differ in readonly-ness only). */
function batchOn(store: AnyStore, ops: Operation[]): Promise<unknown[]> {
  return store instanceof EngramStore ? store.batch(ops) : store.batch(ops);
}

/** A call's answer, or its refusal as text. */
async function settle(p: Promise<unknown>): Promise<{ ok: unknown } | { error: string }> {
  try {
    return { ok: await p };
  } catch (err) {
    return { error: `${(err as Error).name}: ${(err as Error).message}` };
  }
}

/** An item as both stores can be compared: no times, only whether it was created by its last put. */
interface Seen {
  namespace: string[];
  key: string;
  value: unknown;
  fresh: boolean;
}
/** The comparable part of an item (null stays null). */
function seen(i: Item | null): Seen | null {
  return i === null ? null : { namespace: i.namespace, key: i.key, value: i.value, fresh: i.createdAt.getTime() === i.updatedAt.getTime() };
}
/** A value as a string key. */
const j = (x: unknown): string => JSON.stringify(x);
/** Items in a fixed order (namespace, then key), for comparing sets. */
function bySet(items: Item[]): Array<Seen | null> {
  return items.map(seen).sort((a, b) => (j([a?.namespace, a?.key]) < j([b?.namespace, b?.key]) ? -1 : 1));
}
/** True when `ns` starts with `prefix`, label by label. */
function hasPrefix(ns: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= ns.length && prefix.every((l, i) => ns[i] === l);
}
/** InMemoryStore's (and EngramStore's) namespace match: label by label, "*" any label. */
function matchesAll(options: Opts, ns: readonly string[]): boolean {
  const p = options["prefix"] as string[] | undefined;
  const s = options["suffix"] as string[] | undefined;
  if (p && (p.length > ns.length || !p.every((l, i) => l === "*" || ns[i] === l))) return false;
  if (s && (s.length > ns.length || !s.every((l, i) => l === "*" || ns[ns.length - s.length + i] === l))) return false;
  return true;
}

/** How often each tolerated departure showed (must be non-zero by the end: the run met them). */
interface Tally {
  compared: number;
  refusedBoth: number;
  searchPrefixOvermatch: number;
  searchPageDiffers: number;
  listEmptyNamespaces: number;
  listOrderDiffers: number;
  listPgAnswerDiffers: number;
  batchReadsAfterWrite: number;
  batchGetSeesLaterPut: number;
}

/** The three stores of one seed. */
interface Trio {
  engine: Engram;
  onPg: Engram;
  eng: EngramStore;
  engPg: EngramStore;
  ref: PostgresStore;
}

/** Live namespaces and every item, compared whole. */
async function compareState(t: Trio, where: string): Promise<void> {
  const live = await t.ref.listNamespaces({ limit: BIG });
  const items = await t.eng.search([], { limit: BIG });
  const engLive = [...new Set(items.map((i) => j(i.namespace)))].sort();
  expect(engLive, `${where}: live namespaces`).toEqual(live.map(j).sort());
  const want: Item[] = [];
  for (const ns of live) want.push(...(await t.ref.search(ns, { limit: BIG })).filter((i) => j(i.namespace) === j(ns)));
  expect(bySet(items), `${where}: every item`).toEqual(bySet(want));
  // Times by order: what one store created (or updated) earlier, so did the other.
  const at = new Map(want.map((i) => [j([i.namespace, i.key]), i]));
  for (const field of ["createdAt", "updatedAt"] as const) {
    for (const a of items) {
      for (const b of items) {
        const [pa, pb] = [at.get(j([a.namespace, a.key])), at.get(j([b.namespace, b.key]))] as [Item, Item];
        if (a[field] < b[field]) expect(pa[field] < pb[field], `${where}: ${field} of ${j([a.namespace, a.key])} before ${j([b.namespace, b.key])}`).toBe(true);
      }
    }
  }
  expect(await t.engPg.search([], { limit: BIG }), `${where}: engram's PostgreSQL backend`).toEqual(items);
}

/** A search answer held against PostgresStore's (tolerating the listed departures). */
async function compareSearch(t: Trio, prefix: string[], options: Opts, got: Item[], tally: Tally, where: string): Promise<void> {
  const filter = options["filter"] as Record<string, unknown> | undefined;
  const full = await t.eng.search(prefix, { filter, limit: BIG });
  const offset = (options["offset"] as number | null | undefined) ?? 0;
  const limit = (options["limit"] as number | null | undefined) ?? 10;
  expect(got, `${where}: the page is a slice of EngramStore's order`).toEqual(full.slice(offset, offset + limit));
  const pgAll = await t.ref.search(prefix, { filter: filter as Record<string, string>, limit: BIG });
  const times = pgAll.map((i) => i.updatedAt.getTime());
  expect(times, `${where}: PostgresStore answers newest update first`).toEqual([...times].sort((a, b) => b - a));
  const pgIn = pgAll.filter((i) => hasPrefix(i.namespace, prefix));
  tally.searchPrefixOvermatch += pgAll.length - pgIn.length;
  expect(bySet(full), `${where}: the same items as PostgresStore`).toEqual(bySet(pgIn));
  const pgPage = await t.ref.search(prefix, options);
  if (j(pgPage.map(seen)) !== j(got.map(seen))) tally.searchPageDiffers += 1;
}

/** A listNamespaces answer held against PostgresStore's (tolerating the listed departures). */
async function compareList(t: Trio, options: Opts, got: string[][], tally: Tally, where: string): Promise<void> {
  const whole = { ...options, limit: BIG, offset: 0 };
  const full = await t.eng.listNamespaces(whole);
  const offset = (options["offset"] as number | null | undefined) ?? 0;
  const limit = options["limit"] === undefined ? 100 : ((options["limit"] as number | null) ?? full.length);
  expect(got, `${where}: the page is a slice of EngramStore's answer`).toEqual(full.slice(offset, offset + limit));
  const live = await t.ref.listNamespaces({ limit: BIG });
  const liveSet = new Set(live.map(j));
  const depth = options["maxDepth"] as number | undefined;
  const shallow = (ns: string[]): boolean => depth === undefined || ns.length <= depth;
  const kept = full.filter((ns) => liveSet.has(j(ns)) && shallow(ns) && matchesAll(options, ns));
  tally.listEmptyNamespaces += full.filter((ns) => !liveSet.has(j(ns)) && ns.length > 0 && ns[0] !== "").length;
  const pgKept = live.filter((ns) => shallow(ns) && matchesAll(options, ns));
  // The same set; the order is each store's own (EngramStore: localeCompare of the ":"-joined
  // path, as InMemoryStore; PostgresStore: ORDER BY that path in the database's collation).
  expect(kept.map(j).sort(), `${where}: the live namespaces PostgresStore lists`).toEqual(pgKept.map(j).sort());
  if (j(kept) !== j(pgKept)) tally.listOrderDiffers += 1;
  const pgAnswer = await t.ref.listNamespaces(options);
  if (j(pgAnswer) !== j(got)) tally.listPgAnswerDiffers += 1;
}

/** A batch's answers held against PostgresStore's: reads before its first write only. */
function compareBatch(ops: Operation[], got: unknown[], want: unknown[], before: string[][], tally: Tally, where: string): void {
  const liveBefore = new Set(before.map(j));
  for (const [i, op] of ops.entries()) {
    if ("value" in op) {
      tally.batchReadsAfterWrite += ops.slice(i).filter((o) => !("value" in o)).length;
      return;
    }
    const g = got[i];
    const w = want[i];
    if ("key" in op) {
      // EngramStore, as InMemoryStore (which updates its item objects in place when the batch
      // ends), shows an existing item as the batch's last put of it leaves it; PostgresStore,
      // running the operations in turn, shows it as it was.
      const laterPut = ops.filter((o): o is Extract<Operation, { value: unknown }> => "value" in o && o.value !== null && j([o.namespace, o.key]) === j([op.namespace, op.key])).at(-1);
      if (laterPut !== undefined && w !== null) {
        tally.batchGetSeesLaterPut += 1;
        expect(seen(g as Item | null), `${where} op ${i}`).toEqual({ ...seen(w as Item), value: laterPut.value, fresh: false });
      } else expect(seen(g as Item | null), `${where} op ${i}`).toEqual(seen(w as Item | null));
    }
    else if ("namespacePrefix" in op) {
      const prefix = op.namespacePrefix;
      expect(bySet(g as Item[]), `${where} op ${i}`).toEqual(bySet((w as Item[]).filter((x) => hasPrefix(x.namespace, prefix))));
    } else expect((g as string[][]).filter((ns) => liveBefore.has(j(ns))).map(j).sort(), `${where} op ${i}`).toEqual((w as string[][]).map(j).sort());
  }
}

/** Opens the three stores of a seed (reusing the directory and schemas on a reopen). */
async function openEngram(dir: string, schema: string): Promise<Pick<Trio, "engine" | "onPg" | "eng" | "engPg">> {
  const engine = await Engram.open(dir, { compaction: { workers: 0 } });
  const onPg = await Engram.open(storeUrl(schema));
  return { engine, onPg, eng: new EngramStore(engine), engPg: new EngramStore(onPg) };
}

async function runSeed(seed: number): Promise<Tally> {
  const tally: Tally = { compared: 0, refusedBoth: 0, searchPrefixOvermatch: 0, searchPageDiffers: 0, listEmptyNamespaces: 0, listOrderDiffers: 0, listPgAnswerDiffers: 0, batchReadsAfterWrite: 0, batchGetSeesLaterPut: 0 };
  const dir = tempDir(`lgpg-${seed}`);
  const ref = new PostgresStore({ connectionOptions: PG_URL as string, schema: `${tag}_ref_${seed}` });
  await ref.setup();
  let t: Trio = { ...(await openEngram(dir, `${tag}_eng_${seed}`)), ref };
  const next = generator(rng(seed));
  try {
    for (let i = 0; i < OPS; i += 1) {
      if (i > 0 && i % REOPEN_EVERY === 0) {
        await t.engine.close();
        await t.onPg.close();
        t = { ...(await openEngram(dir, `${tag}_eng_${seed}`)), ref };
      }
      vi.setSystemTime(Date.now() + 1000);
      const c = next();
      const where = `seed ${seed} call ${i} ${j(c)}`;
      const before = c.kind === "batch" ? await t.ref.listNamespaces({ limit: BIG }) : [];
      const got = await settle(apply(t.eng, c));
      expect(await settle(apply(t.engPg, c)), `${where}: engram's two backends`).toEqual(got);
      const want = await settle(apply(t.ref, c));
      expect("ok" in got, `${where}: refused by both or neither (${j(want)} / ${j(got)})`).toBe("ok" in want);
      tally.compared += 1;
      if (!("ok" in got) || !("ok" in want)) {
        tally.refusedBoth += 1;
        continue;
      }
      if (c.kind === "get") expect(seen(got.ok as Item | null), where).toEqual(seen(want.ok as Item | null));
      if (c.kind === "search") await compareSearch(t, c.prefix, c.options, got.ok as Item[], tally, where);
      if (c.kind === "list") await compareList(t, c.options, got.ok as string[][], tally, where);
      if (c.kind === "batch") compareBatch(c.ops, got.ok as unknown[], want.ok as unknown[], before, tally, where);
      if (i % STATE_EVERY === STATE_EVERY - 1) await compareState(t, where);
    }
    await compareState(t, `seed ${seed} end`);
  } finally {
    await t.engine.close();
    await t.onPg.close();
    await ref.stop();
  }
  return tally;
}

describe("EngramStore against LangGraph's PostgresStore", () => {
  it.skipIf(PG_SKIP !== null)(`${OPS} random calls per seed (${SEEDS.join(", ")}) answer as PostgresStore, but for the listed departures${skipNote}`, async () => {
    const total: Record<string, number> = {};
    for (const seed of SEEDS) {
      const tally = await runSeed(seed);
      for (const [k, v] of Object.entries(tally)) total[k] = (total[k] ?? 0) + v;
    }
    console.log(`langgraph-postgres-reference: ${JSON.stringify(total)}`);
    expect(total["compared"]).toBe(OPS * SEEDS.length);
    expect(total["refusedBoth"]).toBeGreaterThan(0);
    expect(total["searchPrefixOvermatch"]).toBeGreaterThan(0);
    expect(total["listEmptyNamespaces"]).toBeGreaterThan(0);
    expect(total["listOrderDiffers"]).toBeGreaterThan(0);
    expect(total["searchPageDiffers"]).toBeGreaterThan(0);
    expect(total["listPgAnswerDiffers"]).toBeGreaterThan(0);
    expect(total["batchReadsAfterWrite"]).toBeGreaterThan(0);
  });
});

/** What a call gives: its answer, or the refusal. */
async function outcome(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (ok: unknown) => ok,
    (err: unknown) => ({ refused: (err as Error).message }),
  );
}
const keysOf = (items: Item[]): string[] => items.map((i) => `${i.namespace.join("/")}#${i.key}`);

describe("each listed departure from PostgresStore, pinned", () => {
  it.skipIf(PG_SKIP !== null)(`EngramStore answers as InMemoryStore where PostgresStore answers otherwise (docs/API.md)${skipNote}`, async () => {
    vi.useRealTimers(); // PostgresStore's times are the server's; the orders below need them real.
    const engram = await Engram.open(tempDir("lgpg-departures"), { compaction: { workers: 0 } });
    const ref = new PostgresStore({ connectionOptions: PG_URL as string, schema: `${tag}_departures` });
    const eng = new EngramStore(engram);
    const both = async (f: (s: AnyStore) => Promise<unknown>): Promise<[unknown, unknown]> => [await outcome(f(eng)), await outcome(f(ref))];
    try {
      await ref.setup();
      for (const s of [eng, ref]) {
        for (const k of ["k1", "k2", "k3"]) await s.put(["users", "al"], k, { n: 1, tag: "a", text: `note ${k}` });
        await s.put(["users", "alice"], "k1", { n: 2, tag: "b", text: "pizza" });
        await s.put(["users", "al"], "k2", { n: "2", tag: "a", text: "updated" });
        await s.put(["a", "b", "c"], "k", { n: 3 });
        await s.put(["empty"], "k", { n: 4 });
        await s.delete(["empty"], "k");
      }
      // The empty prefix: every item in EngramStore; PostgresStore refuses it.
      const [all, allPg] = await both((s) => s.search([], { limit: 100 }));
      expect(keysOf(all as Item[])).toEqual(["users/al#k1", "users/al#k2", "users/al#k3", "users/alice#k1", "a/b/c#k"]);
      expect(allPg).toEqual({ refused: "Namespace cannot be empty." });
      // A prefix matches label by label; PostgresStore's LIKE on the ":"-joined path also takes ["users", "alice"].
      const [al, alPg] = await both((s) => s.search(["users", "al"]));
      expect(keysOf(al as Item[])).toEqual(["users/al#k1", "users/al#k2", "users/al#k3"]);
      expect(keysOf(alPg as Item[]).sort()).toEqual(["users/al#k1", "users/al#k2", "users/al#k3", "users/alice#k1"]);
      // Order: EngramStore by creation (an update keeps its place); PostgresStore's search() newest
      // update first, its batch search newest creation first.
      const [, byUpdate] = await both((s) => s.search(["users", "al"], { filter: { tag: "a" } }));
      expect(keysOf(byUpdate as Item[])).toEqual(["users/al#k2", "users/al#k3", "users/al#k1"]);
      const [[inBatch], [inBatchPg]] = (await both((s) => batchOn(s, [{ namespacePrefix: ["users", "al"], filter: { tag: "a" }, limit: 10, offset: 0 }]))) as [Item[][], Item[][]];
      expect(keysOf(inBatch as Item[])).toEqual(["users/al#k1", "users/al#k2", "users/al#k3"]);
      expect(keysOf(inBatchPg as Item[])).toEqual(["users/al#k3", "users/al#k2", "users/al#k1"]);
      // A null limit: search's default 10 in EngramStore; no limit (SQL LIMIT NULL) in PostgresStore.
      for (const s of [eng, ref]) for (let i = 0; i < 12; i += 1) await s.put(["many"], `m${i}`, { i });
      const [many, manyPg] = await both((s) => s.search(["many"], { limit: null as unknown as number }));
      expect([(many as Item[]).length, (manyPg as Item[]).length]).toEqual([10, 12]);
      // A query without an index: EngramStore ignores it (as InMemoryStore); PostgresStore runs a text search.
      const [q, qPg] = await both((s) => s.search(["users"], { query: "pizza" }));
      expect([(q as Item[]).length, keysOf(qPg as Item[])]).toEqual([4, ["users/alice#k1"]]);
      // Filters: a number and its string are one to PostgresStore (it compares text); a missing
      // field is never $ne there (SQL NULL); $exists is PostgresStore's own operator.
      const count = async (filter: Record<string, unknown>): Promise<number[]> => (await both((s) => s.search(["users"], { filter: filter as Record<string, string> }))).map((r) => (r as Item[]).length);
      expect(await count({ n: { $eq: 2 } })).toEqual([1, 2]);
      expect(await count({ missing: { $ne: "x" } })).toEqual([4, 0]);
      expect(await count({ text: { $exists: true } })).toEqual([0, 4]);
      // listNamespaces: EngramStore lists a namespace ever written (["empty"] too), cuts at maxDepth
      // and takes "*" as any label; PostgresStore lists live items' namespaces, drops deeper ones, takes "*" literally.
      const [nss, nssPg] = await both((s) => s.listNamespaces());
      expect(nss).toEqual([["a", "b", "c"], ["empty"], ["many"], ["users", "al"], ["users", "alice"]]);
      expect(nssPg).toEqual([["a", "b", "c"], ["many"], ["users", "al"], ["users", "alice"]]);
      expect(await both((s) => s.listNamespaces({ maxDepth: 1 }))).toEqual([[["a"], ["empty"], ["many"], ["users"]], [["many"]]]);
      expect(await both((s) => s.listNamespaces({ prefix: ["*", "b"] }))).toEqual([[["a", "b", "c"]], []]);
      expect(await both((s) => s.listNamespaces({ prefix: ["users", "al"] }))).toEqual([[["users", "al"]], [["users", "al"], ["users", "alice"]]]);
      // Labels: ":" is kept by EngramStore, split by PostgresStore; "%" "_" "\" refused there only;
      // a "langgraph" root can be read from EngramStore (as InMemoryStore), not from PostgresStore.
      await both((s) => s.put(["user:bob"], "k", { v: 1 }));
      const [colon, colonPg] = await both((s) => s.get(["user:bob"], "k"));
      expect([(colon as Item).namespace, (colonPg as Item | null)?.namespace]).toEqual([["user:bob"], ["user", "bob"]]);
      const [pct, pctPg] = await both((s) => s.put(["50%_off\\"], "k", { v: 1 }));
      expect(pct).toBeUndefined();
      expect((pctPg as { refused: string }).refused).toMatch(/SQL LIKE wildcards/);
      const [reserved, reservedPg] = await both((s) => s.get(["langgraph", "x"], "k"));
      expect(reserved).toBeNull();
      expect((reservedPg as { refused: string }).refused).toMatch(/cannot be "langgraph"/);
      const [reservedPut, reservedPutPg] = await both((s) => batchOn(s, [{ namespace: ["langgraph", "x"], key: "k", value: { v: 1 } }]));
      expect(reservedPut).toEqual([null]);
      expect((reservedPutPg as { refused: string }).refused).toMatch(/cannot be "langgraph"/);
      expect(await both((s) => s.put(["langgraph", "x"], "k", { v: 1 }).then(() => "written", () => "refused"))).toEqual(["refused", "refused"]);
      // Batches: EngramStore answers every read from the state before the batch, except an
      // existing item a later put replaces (InMemoryStore's in-place update), and commits all or
      // nothing; PostgresStore runs the operations in turn, not atomically.
      const [b, bPg] = (await both((s) =>
        batchOn(s, [
          { namespace: ["users", "al"], key: "k1" },
          { namespace: ["batch"], key: "new", value: { v: 1 } },
          { namespace: ["batch"], key: "new" },
          { namespace: ["users", "al"], key: "k1", value: { v: 2 } },
        ]),
      )) as [Array<Item | null>, Array<Item | null>];
      expect([b[0]?.value, b[2]]).toEqual([{ v: 2 }, null]);
      expect([bPg[0]?.value, bPg[2]?.value]).toEqual([{ n: 1, tag: "a", text: "note k1" }, { v: 1 }]);
      // Two writes of one item in a batch: PostgresStore applies both (a delete then a put makes
      // the item new again); EngramStore writes the last as an update of the item before the batch.
      const [again, againPg] = await both(async (s) => {
        await batchOn(s, [{ namespace: ["users", "al"], key: "k3", value: null }, { namespace: ["users", "al"], key: "k3", value: { v: 3 } }]);
        const i = await s.get(["users", "al"], "k3");
        return i === null ? null : i.createdAt.getTime() === i.updatedAt.getTime();
      });
      expect([again, againPg]).toEqual([false, true]);
      const torn = [{ namespace: ["torn"], key: "k", value: { v: 1 } }, { namespace: ["bad.label"], key: "k", value: { v: 2 } }];
      const [tornEng, tornPg] = await both((s) => batchOn(s, torn));
      expect([typeof tornEng, typeof tornPg]).toEqual(["object", "object"]);
      expect(await both((s) => s.get(["torn"], "k").then((i) => i?.value ?? null))).toEqual([null, { v: 1 }]);
      // Values: a lone surrogate (as U+0000, langgraph-nul.test.ts) is kept by EngramStore; jsonb refuses it.
      const [lone, lonePg] = await both((s) => s.put(["odd"], "k", { s: "a\ud800b" }));
      expect(lone).toBeUndefined();
      expect((lonePg as { refused: string }).refused).toMatch(/invalid input syntax for type json/);
      expect((await eng.get(["odd"], "k"))?.value).toEqual({ s: "a\ud800b" });
      // jsonb gives keys back shortest first; EngramStore as written.
      await both((s) => s.put(["order"], "k", { zzz: 1, a: 2, bb: 3 }));
      expect(await both(async (s) => Object.keys((await s.get(["order"], "k"))?.value ?? {}))).toEqual([["zzz", "a", "bb"], ["a", "bb", "zzz"]]);
    } finally {
      await engram.close();
      await ref.stop();
    }
  });
});

/** Waits, polling every 50 ms, until `cond` holds; fails past `deadlineMs`. */
async function until(what: string, cond: () => Promise<boolean>, deadlineMs = 20_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** PostgresStore's `expires_at` of an item, in ms (null: none), read from its table. */
async function pgExpiry(schema: string, ns: string[], key: string): Promise<number | null> {
  const pool = new pg.Pool({ connectionString: PG_URL as string, max: 1 });
  try {
    const r = await pool.query(`SELECT expires_at FROM "${schema}".store WHERE namespace_path = $1 AND key = $2`, [ns.join(":"), key]);
    const at = (r.rows[0] as { expires_at: Date | null } | undefined)?.expires_at;
    return at === undefined || at === null ? null : at.getTime();
  } finally {
    await pool.end();
  }
}

describe("TTL beside PostgresStore, in real time", () => {
  it.skipIf(PG_SKIP !== null)(`the same TTL scenario shows the same items before and after expiry; each TTL departure pinned${skipNote}`, async () => {
    vi.useRealTimers(); // PostgresStore expires by the server's CURRENT_TIMESTAMP: only real time moves it.
    const engram = await Engram.open(tempDir("lgpg-ttl"), { compaction: { workers: 0 } });
    const schemaA = `${tag}_ttl_a`;
    const schemaB = `${tag}_ttl_b`;
    // A: defaultTtl 3 s, no refresh (refreshOnRead left out: PostgresStore's code reads it as false).
    const eng = new EngramStore(engram, { scope: "ttla", ttl: { defaultTtl: 0.05 } });
    const ref = new PostgresStore({ connectionOptions: PG_URL as string, schema: schemaA, ttl: { defaultTtl: 0.05 } });
    // B: defaultTtl 6 s, refreshOnRead.
    const engR = new EngramStore(engram, { scope: "ttlb", ttl: { defaultTtl: 0.1, refreshOnRead: true } });
    const refR = new PostgresStore({ connectionOptions: PG_URL as string, schema: schemaB, ttl: { defaultTtl: 0.1, refreshOnRead: true } });
    const visible = async (s: AnyStore): Promise<unknown> => ({
      gets: await Promise.all(["a", "b", "c", "d"].map(async (k) => (await s.get(k === "a" ? ["ttl", "short"] : ["ttl", "long"], k))?.value ?? null)),
      search: (await s.search(["ttl"], { limit: 100 })).map((i) => i.key).sort(),
    });
    try {
      await ref.setup();
      await refR.setup();
      for (const s of [eng, ref]) {
        await s.put(["ttl", "short"], "a", { v: "a" });
        await s.put(["ttl", "long"], "b", { v: "b" }, undefined, { ttl: 1 });
        await s.put(["ttl", "long"], "c", { v: "c" }, undefined, { ttl: 0 });
        await batchOn(s, [{ namespace: ["ttl", "long"], key: "d", value: { v: "d" }, options: { ttl: 0.05 } } as Operation]);
        await s.put(["ttl", "again"], "x", { v: "x1" });
      }
      // Before expiry: both see every item (checked only while 3 s are surely not up: a stalled
      // machine would make the two views straddle the instant).
      const expA = [(await engram.probe(itemKey(["ttl", "short"], "a"), { scope: "ttla" })).expiresAt, await pgExpiry(schemaA, ["ttl", "short"], "a")];
      const before = [await visible(eng), await visible(ref)];
      if (Date.now() < Math.min(...(expA as number[])) - 500) {
        const all = { gets: [{ v: "a" }, { v: "b" }, { v: "c" }, { v: "d" }], search: ["a", "b", "c", "d", "x"] };
        expect(before).toEqual([all, all]);
      } else console.log("langgraph-postgres-reference TTL: the machine stalled past the expiry; the before-expiry view is not checked");
      // Without refreshOnRead neither store moved an expiry on those reads.
      expect([(await engram.probe(itemKey(["ttl", "short"], "a"), { scope: "ttla" })).expiresAt, await pgExpiry(schemaA, ["ttl", "short"], "a")]).toEqual(expA);
      await until("both stores to expire a", async () => (await eng.get(["ttl", "short"], "a")) === null && (await ref.get(["ttl", "short"], "a")) === null);
      await until("both stores to expire x", async () => (await eng.get(["ttl", "again"], "x")) === null && (await ref.get(["ttl", "again"], "x")) === null);
      const after = await visible(eng);
      expect(after).toEqual({ gets: [null, { v: "b" }, { v: "c" }, null], search: ["b", "c"] });
      expect(await visible(ref)).toEqual(after);
      // Namespaces of expired items: both list ["ttl", "short"] (PostgresStore until a sweep).
      expect(await eng.listNamespaces()).toEqual([["ttl", "again"], ["ttl", "long"], ["ttl", "short"]]);
      expect(await ref.listNamespaces()).toEqual([["ttl", "again"], ["ttl", "long"], ["ttl", "short"]]);
      // A put over an expired item: a new item in EngramStore; PostgresStore updates the unswept row, keeping its created_at.
      for (const s of [eng, ref]) await s.put(["ttl", "again"], "x", { v: "x2" }, undefined, { ttl: 0 });
      expect([seen(await eng.get(["ttl", "again"], "x"))?.fresh, seen(await ref.get(["ttl", "again"], "x"))?.fresh]).toEqual([true, false]);
      // The sweep deletes PostgresStore's expired rows (a, d); then it no longer lists ["ttl", "short"]. EngramStore still does.
      expect(await ref.sweepExpiredItems()).toBe(2);
      expect(await ref.listNamespaces()).toEqual([["ttl", "again"], ["ttl", "long"]]);
      expect(await eng.listNamespaces()).toEqual([["ttl", "again"], ["ttl", "long"], ["ttl", "short"]]);
      // Bad TTLs: EngramStore refuses them; PostgresStore writes a negative one as an expiry in
      // the past (the item is never seen) and NaN as no TTL (its `if (!effectiveTtl)`).
      expect(await outcome(eng.put(["ttl", "bad"], "neg", { v: 1 }, undefined, { ttl: -1 }))).toMatchObject({ refused: expect.stringMatching(/ttl must be a number of minutes/) });
      expect(await outcome(ref.put(["ttl", "bad"], "neg", { v: 1 }, undefined, { ttl: -1 }))).toBeUndefined();
      expect([await ref.get(["ttl", "bad"], "neg"), (await pgExpiry(schemaA, ["ttl", "bad"], "neg"))! < Date.now()]).toEqual([null, true]);
      expect(await outcome(eng.put(["ttl", "bad"], "nan", { v: 1 }, undefined, { ttl: NaN }))).toMatchObject({ refused: expect.stringMatching(/got NaN/) });
      expect(await outcome(ref.put(["ttl", "bad"], "nan", { v: 1 }, undefined, { ttl: NaN }))).toBeUndefined();
      expect([(await ref.get(["ttl", "bad"], "nan"))?.value, await pgExpiry(schemaA, ["ttl", "bad"], "nan")]).toEqual([{ v: 1 }, null]);

      // B: refreshOnRead. x is read 3 s after its put, y never; z was put with ttl 0.
      for (const s of [engR, refR]) {
        await s.put(["r"], "x", { k: "x" });
        await s.put(["r"], "y", { k: "y" });
        await s.put(["r"], "z", { k: "z" }, undefined, { ttl: 0 });
      }
      const t0 = Date.now();
      // Reads that refresh nothing: PostgresStore's get and search() refresh under refreshOnRead
      // whatever the call says (`refreshTtl || refreshOnRead`); its batch search never does.
      const peek = async (s: AnyStore, k?: string): Promise<Item[]> => {
        const [items] = (await batchOn(s, [{ namespacePrefix: ["r"], filter: k === undefined ? undefined : { k }, limit: 100, offset: 0, refreshTtl: false } as Operation])) as [Item[]];
        return items;
      };
      const upd = async (s: AnyStore): Promise<number | undefined> => (await peek(s, "x"))[0]?.updatedAt.getTime();
      const updatedBefore = [await upd(engR), await upd(refR)];
      await until("3 s to pass", () => Promise.resolve(Date.now() >= t0 + 3000));
      const refreshedAt = Date.now();
      for (const s of [engR, refR]) {
        expect((await s.get(["r"], "x"))?.value).toEqual({ k: "x" });
        expect((await s.search(["r"], { filter: { k: "z" } })).map((i) => i.key)).toEqual(["z"]);
      }
      // PostgresStore's refresh also moves updated_at and gives z (no TTL) defaultTtl; EngramStore's does neither.
      const updatedAfter = [await upd(engR), await upd(refR)];
      expect(updatedAfter[0]).toBe(updatedBefore[0]);
      expect(updatedAfter[1]).toBeGreaterThan(updatedBefore[1] as number);
      expect([(await engram.probe(itemKey(["r"], "z"), { scope: "ttlb" })).expiresAt, (await pgExpiry(schemaB, ["r"], "z")) !== null]).toEqual([null, true]);
      // y expires 6 s after its put in both; x, refreshed 3 s in, outlives it in both.
      await until("both stores to expire y", async () => (await peek(engR, "y")).length === 0 && (await peek(refR, "y")).length === 0);
      if (Date.now() < refreshedAt + 5500) {
        const keysNow = async (s: AnyStore): Promise<string[]> => (await peek(s)).map((i) => i.key).sort();
        expect([await keysNow(engR), await keysNow(refR)]).toEqual([["x", "z"], ["x", "z"]]);
      } else console.log("langgraph-postgres-reference TTL: the machine stalled past the refreshed expiry; x outliving y is not checked");
      await until("both stores to expire x", async () => (await peek(engR, "x")).length === 0 && (await peek(refR, "x")).length === 0);
      // z: kept by EngramStore (it had no TTL); PostgresStore's refresh gave it one, now run out.
      await until("PostgresStore to expire z", async () => (await peek(refR, "z")).length === 0);
      expect((await engR.get(["r"], "z"))?.value).toEqual({ k: "z" });
    } finally {
      await engram.close();
      await ref.stop();
      await refR.stop();
    }
  });
});
