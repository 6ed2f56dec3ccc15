/**
 * `engram/langgraph`: a LangGraph.js `BaseStore` on an engram store.
 *
 * `new EngramStore(store, { scope, index })` answers every operation as LangGraph's own
 * `InMemoryStore` does (results, order, pagination, filters, brute-force cosine search with an
 * `index` config), but durably. The differential test runs both side by side and compares every
 * result. Where this class departs from InMemoryStore it does so on purpose:
 * - labels may contain ":" (InMemoryStore joins labels with ":" and refuses them);
 * - an item's embeddings belong to its current value: InMemoryStore keeps the vectors of fields
 *   an update no longer has, and of deleted items, and still scores by them;
 * - `delete` is engram's `forget`: a tombstone that `probe` explains;
 * - a key that is not a string, a namespace that is not an array, and a value JSON cannot hold
 *   are refused with a typed error before anything is written (InMemoryStore keeps them as given
 *   or fails later with a TypeError);
 * - a `maxDepth`, `limit` or `offset` that is not a whole number ≥ 0 (or Infinity) is refused
 *   with INVALID_ARGUMENT (InMemoryStore slices with it: negative counts from the end), except a
 *   null `limit` or `offset`, which both read as the operation's default (InMemoryStore's `??`);
 * - a value comes back as JSON made it, as from LangGraph's PostgresStore (NaN is null, a Date
 *   its ISO string, a Map `{}`); InMemoryStore hands back the objects it was given. Unlike
 *   PostgresStore, a string holding U+0000 is kept (its jsonb column refuses `\u0000`; engram
 *   stores the JSON as bytes on both backends), as InMemoryStore keeps it.
 *
 * Layout, all in one engram scope (default "langgraph"): an item is the key
 * `i<label>/<label>/|<key>` (each part escaped so that the mapping is injective and a label
 * prefix never matches a longer label), a namespace marker is `n<label>/.../`, written when a
 * namespace is first touched (InMemoryStore lists a namespace from then on, even when empty);
 * a key longer than engram's 1024-byte limit becomes `hi<sha256>` / `hn<sha256>`. Values are
 * JSON carrying the namespace and key, so nothing depends on decoding key strings.
 *
 * Nothing in the package's main entry imports this module: `@langchain/langgraph-checkpoint` is
 * an optional peer.
 */
import { createHash } from "node:crypto";
import { BaseStore, InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import type { IndexConfig, Item, ListNamespacesOperation, MatchCondition, Operation, OperationResults, PutOperation, SearchItem, SearchOperation } from "@langchain/langgraph-checkpoint";
import type { BatchOp, BatchResult, ForgetResult, ListEntry, ListOptions, ReadOptions, ReadResult, ScopeOption, Value, WriteOptions, WriteResult } from "../types.js";
import { compareValues, cosineSimilarity, getTextAtPath, tokenizePath } from "./langgraph-paths.js";
import { elementAt } from "../../rules/assert.js";
import { InvalidArgumentError } from "../../rules/errors.js";

/** The calls of an engram store this class uses (an `Engram` has them all). */
export interface LangGraphBackingStore {
  /** Engram.read: the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, options?: ReadOptions): Promise<ReadResult>;
  /** Engram.write: writes `value` under `key`, resolving with its version and generation once committed. */
  write(key: string, value: Value, options?: WriteOptions): Promise<WriteResult>;
  /** Engram.forget: tombstones `key` in exactly `scope`, resolving once the tombstone is committed. */
  forget(key: string, options?: ScopeOption): Promise<ForgetResult>;
  /** Engram.batch: applies writes and forgets atomically (after a crash all or none are visible), one result per op. */
  batch(ops: BatchOp[]): Promise<BatchResult[]>;
  /** Engram.list: live keys in key order, the nearest scope's entry winning when inheriting. */
  list(options?: ListOptions): AsyncIterable<ListEntry>;
}

/** Options of `new EngramStore(store, options)`. */
export interface EngramStoreOptions {
  /** The engram scope holding every item (default "langgraph"); `forgetScope` of it erases the store. */
  scope?: string;
  /** Semantic search, as InMemoryStore's `index` option: `{ dims, embeddings, fields }`. */
  index?: IndexConfig;
}

/**
 * Tests only. `queuePerInstance`: each EngramStore queues only its own batches (the behaviour
 * before the fifty-fourth session), so instances over one engram store race on hot items.
 */
export const unsafeLangGraphForTests = { queuePerInstance: false };

/** Most engram bytes in a key; longer encodings are hashed. */
const KEY_BYTES_MAX = 1024;
/** How often a batch is retried when another writer changed an item between its read and its commit. */
const BATCH_RETRIES_MAX = 8;

/** An item as stored: JSON in one engram value. */
interface StoredItem {
  ns: string[];
  key: string;
  value: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** Creation order (kept across updates); absent until the first update: then the first write's version. */
  order?: number;
  /** [field, embedding] in the order InMemoryStore would score them. */
  vectors?: Array<[string, number[]]>;
}

/** A namespace marker as stored. */
interface StoredNamespace {
  ns: string[];
}

/** An item read back, with what ordering and compare-and-set need. */
interface Loaded {
  stored: StoredItem;
  version: number;
  order: number;
}

/** Escapes the characters the key layout uses ("%", "/", "|"), NUL and lone surrogates. */
function esc(s: string): string {
  let out = "";
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch === "%") out += "%25";
    else if (ch === "/") out += "%2F";
    else if (ch === "|") out += "%7C";
    else if (ch === "\u0000") out += "%00";
    else if (ch.length === 1 && c >= 0xd800 && c <= 0xdfff) out += `%u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out;
}

/** The encoded namespace: every label escaped and followed by "/". */
function nsPart(ns: readonly string[]): string {
  return ns.map((l) => `${esc(l)}/`).join("");
}

/** A key that fits engram's limit: `plain`, or its hash under `hashedPrefix`. */
function fit(plain: string, hashedPrefix: string): string {
  if (Buffer.byteLength(plain, "utf8") <= KEY_BYTES_MAX) return plain;
  return hashedPrefix + createHash("sha256").update(plain, "utf8").digest("hex");
}

/** The engram key of an item. */
export function itemKey(ns: readonly string[], key: string): string {
  return fit(`i${nsPart(ns)}|${esc(key)}`, "hi");
}

/** The engram key of a namespace marker. */
export function namespaceKey(ns: readonly string[]): string {
  return fit(`n${nsPart(ns)}`, "hn");
}

/** The reference's label checks (LangGraph's validateNamespace) without its ban on ":". */
function validateNamespace(namespace: unknown, options: { allowEmpty?: boolean; allowReservedRoot?: boolean } = {}): asserts namespace is string[] {
  // The reference reads a string as its characters and fails later with a TypeError; refuse it here.
  if (!Array.isArray(namespace)) throw new InvalidNamespaceError(`Namespace must be an array of strings, got ${namespace === null ? "null" : typeof namespace}.`);
  if (namespace.length === 0) {
    if (options.allowEmpty) return;
    throw new InvalidNamespaceError("Namespace cannot be empty.");
  }
  for (const label of namespace) {
    if (typeof label !== "string") {
      throw new InvalidNamespaceError(`Invalid namespace label '${String(label)}' found in ${String(namespace)}. Namespace labels must be strings, but got ${typeof label}.`);
    }
    if (label.includes(".")) {
      throw new InvalidNamespaceError(`Invalid namespace label '${label}' found in ${String(namespace)}. Namespace labels cannot contain periods ('.').`);
    }
    if (label.includes("\0")) throw new InvalidNamespaceError("Namespace labels cannot contain NUL bytes.");
    if (label === "") throw new InvalidNamespaceError(`Namespace labels cannot be empty strings. Got ${label} in ${String(namespace)}`);
  }
  if (namespace[0] === "langgraph" && !options.allowReservedRoot) {
    throw new InvalidNamespaceError(`Root label for namespace cannot be "langgraph". Got: ${String(namespace)}`);
  }
}

/** Refuses a key that is not a string (the reference takes any value; engram keys are strings). */
function validateKey(key: unknown): asserts key is string {
  if (typeof key !== "string") throw new InvalidArgumentError(`LangGraph store: key must be a string, got ${key === null ? "null" : typeof key}`);
}

/**
 * Refuses a value that cannot be stored as JSON (a BigInt, a cycle) or that JSON would lose whole
 * (`undefined`, a function, a symbol), before anything is written; the reference keeps such values
 * in memory as given. Inside a value, JSON's own conversions apply, as in LangGraph's PostgresStore
 * (JSON.stringify into jsonb): NaN and ±Infinity become null, a Date its ISO string, a Map or Set
 * `{}`, an undefined or function field is dropped (null in an array) — docs/API.md "Integrations".
 */
function validateValue(value: unknown): void {
  if (value === undefined) throw new InvalidArgumentError("LangGraph store: value must be an object (or null to delete), got undefined");
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new InvalidArgumentError(`LangGraph store: value cannot be stored as JSON (${err instanceof Error ? err.message : String(err)}); convert BigInts and cycles first`);
  }
  if (json === undefined) throw new InvalidArgumentError(`LangGraph store: value must be an object (or null to delete), got a ${typeof value}, which JSON cannot hold`);
}

/**
 * Refuses a `maxDepth`, `limit` or `offset` (of `what`) that is neither absent nor a whole number
 * ≥ 0 (or Infinity: no cut, no limit), before anything is read or written. A null `limit` or
 * `offset` counts as absent, as the reference reads it (`op.limit ?? default`): search's limit is
 * then 10, listNamespaces' no limit (BaseStore's default of 100 applies only to a limit left out,
 * as in the reference), an offset 0. The reference slices with whatever else it is given: a
 * negative maxDepth cuts labels from the end and lists namespaces of one empty label, a null
 * maxDepth cuts to no label (`[[""]]`, as 0), a negative limit or offset counts from the end, a
 * fraction is truncated, and NaN and strings act as 0 or as a number.
 */
function validateCount(what: string, name: "maxDepth" | "limit" | "offset", x: unknown): void {
  if (x === undefined || x === Infinity || (typeof x === "number" && Number.isInteger(x) && x >= 0)) return;
  if (x === null && name !== "maxDepth") return;
  const got = typeof x === "number" ? String(x) : x === null ? "null" : `${typeof x} ${JSON.stringify(x)}`;
  const absent = name === "maxDepth" ? "leave it out for no cut" : "leave it out (or pass null) for the default";
  throw new InvalidArgumentError(`LangGraph store: ${what} ${name} must be a whole number ≥ 0 (or Infinity), got ${got}; pass an integer such as 0, 1, 10, or ${absent}`);
}

/** The tail of the batches run on each backing store: batches of every EngramStore over one store run one at a time. */
const chains = new WeakMap<LangGraphBackingStore, Promise<unknown>>();

/** True when `ns` starts with `prefix`, label by label. */
function hasPrefix(ns: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= ns.length && prefix.every((l, i) => ns[i] === l);
}

/** InMemoryStore's namespace match condition (prefix or suffix, "*" matches any label). */
function matches(cond: MatchCondition, ns: readonly string[]): boolean {
  const { matchType, path } = cond;
  if (path.length > ns.length) return false;
  if (matchType === "prefix") return path.every((p, i) => p === "*" || ns[i] === p);
  if (matchType === "suffix") return path.every((p, i) => p === "*" || ns[ns.length - path.length + i] === p);
  throw new Error(`Unsupported match type: ${String(matchType)}`);
}

/** Compares namespaces label by label (a shorter prefix first). */
function labelwise(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i += 1) {
    const c = (a[i] as string).localeCompare(b[i] as string);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

/** A stable identity for a (namespace, key) pair. */
function idOf(ns: readonly string[], key: string): string {
  return JSON.stringify([ns, key]);
}

/** The public shape of a stored item. */
function toItem(s: StoredItem): Item {
  return { value: s.value, key: s.key, namespace: [...s.ns], createdAt: new Date(s.createdAt), updatedAt: new Date(s.updatedAt) };
}

/** A LangGraph.js BaseStore whose items live in an engram store. */
export class EngramStore extends BaseStore {
  /** The engram scope holding every item (`options.scope`, default "langgraph"); reads and lists never inherit from its parents. */
  readonly scope: string;
  readonly #store: LangGraphBackingStore;
  readonly #index: (IndexConfig & { tokenized: Array<[string, string[]]> }) | undefined;

  constructor(store: LangGraphBackingStore, options: EngramStoreOptions = {}) {
    super();
    this.#store = store;
    this.scope = options.scope ?? "langgraph";
    const index = options.index;
    this.#index = index === undefined ? undefined : { ...index, tokenized: (index.fields ?? ["$"]).map((p) => [p, p === "$" ? [p] : tokenizePath(p)]) };
  }

  /** The index configuration (as InMemoryStore's `indexConfig`). */
  get indexConfig(): IndexConfig | undefined {
    return this.#index;
  }

  /** get(): the item, or null. Labels may contain ":". */
  override async get(namespace: string[], key: string): Promise<Item | null> {
    validateNamespace(namespace, { allowEmpty: true, allowReservedRoot: true });
    return elementAt(await this.batch([{ namespace, key }]), 0, "batch answers every op");
  }

  /** search(): items under a namespace prefix, filtered, paginated, ranked by `query` when indexed. */
  override async search(namespacePrefix: string[], options: { filter?: Record<string, unknown>; limit?: number; offset?: number; query?: string } = {}): Promise<SearchItem[]> {
    validateNamespace(namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
    const { filter, limit = 10, offset = 0, query } = options;
    return elementAt(await this.batch([{ namespacePrefix, filter, limit, offset, query }]), 0, "batch answers every op");
  }

  /** put(): stores or replaces an item; createdAt survives updates. */
  override async put(namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[]): Promise<void> {
    validateNamespace(namespace);
    await this.batch([{ namespace, key, value, index }]);
  }

  /** delete(): engram's forget of the item (a tombstone). */
  override async delete(namespace: string[], key: string): Promise<void> {
    validateNamespace(namespace, { allowEmpty: true, allowReservedRoot: true });
    await this.batch([{ namespace, key, value: null }]);
  }

  /** listNamespaces(): namespaces ever written, filtered by prefix/suffix, cut at maxDepth, sorted, paginated. */
  override async listNamespaces(options: { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit?: number; offset?: number } = {}): Promise<string[][]> {
    const { prefix, suffix, maxDepth, limit = 100, offset = 0 } = options;
    const matchConditions: MatchCondition[] = [];
    if (prefix) {
      validateNamespace(prefix, { allowEmpty: true, allowReservedRoot: true });
      matchConditions.push({ matchType: "prefix", path: prefix });
    }
    if (suffix) {
      validateNamespace(suffix, { allowEmpty: true, allowReservedRoot: true });
      matchConditions.push({ matchType: "suffix", path: suffix });
    }
    return elementAt(await this.batch([{ matchConditions: matchConditions.length ? matchConditions : undefined, maxDepth, limit, offset }]), 0, "batch answers every op");
  }

  /**
   * batch(): results in order. Every read in a batch sees the state before it (as InMemoryStore:
   * its puts apply at the end); puts and deletes commit as one atomic engram batch, the last put
   * to a key winning.
   */
  batch<Op extends readonly Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    // One queue per backing store, not per instance: two EngramStores over one engram store (two
    // graphs, two workers) would otherwise keep failing each other's compare-and-set on a hot
    // item until a put gave up with VERSION_CONFLICT, an error BaseStore callers never expect.
    const tail = unsafeLangGraphForTests.queuePerInstance ? this.#ownTail : (chains.get(this.#store) ?? Promise.resolve());
    const next = tail.then(() => this.#batchWithRetry(operations));
    const settled = next.catch(() => undefined);
    if (unsafeLangGraphForTests.queuePerInstance) this.#ownTail = settled;
    else chains.set(this.#store, settled);
    return next as Promise<OperationResults<Op>>;
  }

  /** The twin's queue (unsafeLangGraphForTests.queuePerInstance): this instance's batches only. */
  #ownTail: Promise<unknown> = Promise.resolve();

  async #batchWithRetry(operations: readonly Operation[]): Promise<unknown[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.#batchOnce(operations);
      } catch (err) {
        if ((err as { code?: unknown }).code !== "VERSION_CONFLICT" || attempt >= BATCH_RETRIES_MAX) throw err;
      }
    }
  }

  async #batchOnce(operations: readonly Operation[]): Promise<unknown[]> {
    const results: unknown[] = [];
    const puts = new Map<string, PutOperation>();
    const searches: Array<[number, SearchOperation]> = [];
    for (const op of operations) {
      if ("namespace" in op) {
        validateNamespace(op.namespace, { allowReservedRoot: true });
        validateKey(op.key);
      }
      if ("namespacePrefix" in op) {
        validateNamespace(op.namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
        for (const name of ["limit", "offset"] as const) validateCount("search", name, op[name]);
      }
      if ("matchConditions" in op) for (const name of ["maxDepth", "limit", "offset"] as const) validateCount("listNamespaces", name, op[name]);
      if ("value" in op && op.value !== null) validateValue(op.value);
    }
    for (const op of operations) {
      if ("key" in op && "namespace" in op && !("value" in op)) {
        results.push(await this.#getOne(op.namespace, op.key));
      } else if ("namespacePrefix" in op) {
        if (op.namespacePrefix.length > 0) validateNamespace(op.namespacePrefix, { allowReservedRoot: true });
        searches.push([results.length, op]);
        results.push(null);
      } else if ("value" in op) {
        puts.set(idOf(op.namespace, op.key), op);
        results.push(null);
      } else if ("matchConditions" in op) {
        results.push(await this.#listNamespacesOne(op));
      }
    }
    for (const [i, op] of searches) results[i] = await this.#searchOne(op);
    if (puts.size === 0) return results;
    const updated = await this.#commitPuts([...puts.values()]);
    // InMemoryStore hands out its live item objects and updates them in place at the end of the
    // batch: a get of an item that existed and that the same batch puts shows the update.
    for (const [i, op] of operations.entries()) {
      if (!("key" in op && "namespace" in op && !("value" in op)) || results[i] === null) continue;
      const after = updated.get(idOf(op.namespace, op.key));
      if (after !== undefined) results[i] = toItem(after);
    }
    return results;
  }

  /** The item at (ns, key) with its version and order, or null. */
  async #load(ns: readonly string[], key: string): Promise<Loaded | null> {
    const r = await this.#store.read(itemKey(ns, key), { scope: this.scope, inherit: false });
    if (r.status !== "OK") return null;
    const stored = JSON.parse(String(r.value)) as StoredItem;
    if (idOf(stored.ns, stored.key) !== idOf(ns, key)) throw new Error(`engram key ${itemKey(ns, key)} holds another item (hash collision?)`);
    return { stored, version: r.version, order: stored.order ?? r.version };
  }

  async #getOne(ns: string[], key: string): Promise<Item | null> {
    const found = await this.#load(ns, key);
    return found === null ? null : toItem(found.stored);
  }

  /** Every key under `prefix` in this store's scope. */
  async #keys(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const e of this.#store.list({ scope: this.scope, prefix, inherit: false })) keys.push(e.key);
    return keys;
  }

  /** Every namespace marker: namespace and first-touch order, in that order. */
  async #namespaces(): Promise<Array<{ ns: string[]; order: number }>> {
    const out: Array<{ ns: string[]; order: number }> = [];
    for (const key of [...(await this.#keys("n")), ...(await this.#keys("hn"))]) {
      const r = await this.#store.read(key, { scope: this.scope, inherit: false });
      if (r.status === "OK") out.push({ ns: (JSON.parse(String(r.value)) as StoredNamespace).ns, order: r.version });
    }
    return out.sort((a, b) => a.order - b.order);
  }

  async #listNamespacesOne(op: ListNamespacesOperation): Promise<string[][]> {
    let namespaces = (await this.#namespaces()).map((n) => n.ns);
    const conds = op.matchConditions;
    if (conds && conds.length > 0) namespaces = namespaces.filter((ns) => conds.every((c) => matches(c, ns)));
    if (op.maxDepth !== undefined) {
      const cut = new Map<string, string[]>();
      for (const ns of namespaces) {
        // The reference joins labels with ":" and splits them back: a cut to no label comes back
        // as one empty label, [""]; kept for parity (listNamespaces({ maxDepth: 0 }) is [[""]]).
        const s = op.maxDepth === 0 ? [""] : ns.slice(0, op.maxDepth);
        if (!cut.has(JSON.stringify(s))) cut.set(JSON.stringify(s), s);
      }
      namespaces = [...cut.values()];
    }
    // InMemoryStore's order; labels with ":" can tie there, and then compare label by label.
    namespaces.sort((a, b) => a.join(":").localeCompare(b.join(":")) || labelwise(a, b));
    const offset = op.offset ?? 0;
    return namespaces.slice(offset, offset + (op.limit ?? namespaces.length));
  }

  /** The items under `prefix` in InMemoryStore's order: namespaces by first touch, then by creation. */
  async #candidates(prefix: readonly string[]): Promise<StoredItem[]> {
    const keys = [...(await this.#keys(`i${nsPart(prefix)}`)), ...(await this.#keys("hi"))];
    const found: Loaded[] = [];
    for (const key of keys) {
      const r = await this.#store.read(key, { scope: this.scope, inherit: false });
      if (r.status !== "OK") continue;
      const stored = JSON.parse(String(r.value)) as StoredItem;
      if (hasPrefix(stored.ns, prefix)) found.push({ stored, version: r.version, order: stored.order ?? r.version });
    }
    const nsOrder = new Map((await this.#namespaces()).map((n) => [JSON.stringify(n.ns), n.order]));
    const rank = (l: Loaded): number => nsOrder.get(JSON.stringify(l.stored.ns)) ?? Number.MAX_SAFE_INTEGER;
    found.sort((a, b) => rank(a) - rank(b) || a.order - b.order);
    return found.map((l) => l.stored);
  }

  async #searchOne(op: SearchOperation): Promise<SearchItem[]> {
    let candidates = await this.#candidates(op.namespacePrefix);
    const filter = op.filter;
    if (filter) candidates = candidates.filter((s) => Object.entries(filter).every(([k, v]) => compareValues(s.value[k], v)));
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    if (op.query && this.#index?.embeddings) {
      const vector = await this.#index.embeddings.embedQuery(op.query);
      if (vector) return this.#score(candidates, vector, offset, limit);
    }
    return candidates.slice(offset, offset + limit).map((s) => ({ ...toItem(s), score: undefined }));
  }

  /** InMemoryStore's scoreResults: best vector per item, deduplicated, then scoreless items to fill. */
  #score(candidates: StoredItem[], query: number[], offset: number, limit: number): SearchItem[] {
    const flatItems: StoredItem[] = [];
    const flatVectors: number[][] = [];
    const scoreless: StoredItem[] = [];
    for (const item of candidates) {
      const vectors = (item.vectors ?? []).map(([, v]) => v);
      if (vectors.length) {
        for (const v of vectors) {
          flatItems.push(item);
          flatVectors.push(v);
        }
      } else scoreless.push(item);
    }
    const sorted = cosineSimilarity(query, flatVectors)
      .map((score, i) => [score, flatItems[i] as StoredItem] as const)
      .sort((a, b) => b[0] - a[0]);
    const seen = new Set<string>();
    const kept: Array<[number | undefined, StoredItem]> = [];
    for (const [score, item] of sorted) {
      const id = idOf(item.ns, item.key);
      if (seen.has(id)) continue;
      const ix = seen.size;
      if (ix >= offset + limit) break;
      seen.add(id);
      if (ix < offset) continue;
      kept.push([score, item]);
    }
    if (scoreless.length && kept.length < limit) {
      for (const item of scoreless.slice(0, limit - kept.length)) {
        const id = idOf(item.ns, item.key);
        if (!seen.has(id)) {
          seen.add(id);
          kept.push([undefined, item]);
        }
      }
    }
    return kept.map(([score, item]) => ({ ...toItem(item), score }));
  }

  /** Embeddings of every put's texts, as InMemoryStore extracts and batches them. */
  async #embed(puts: PutOperation[]): Promise<Map<string, Array<[string, number[]]>>> {
    const out = new Map<string, Array<[string, number[]]>>();
    const index = this.#index;
    if (!index?.embeddings) return out;
    const toEmbed: Record<string, Array<[string, string]>> = {};
    for (const op of puts) {
      if (op.value === null || op.index === false) continue;
      const paths: Array<[string, string[]]> = op.index === null || op.index === undefined ? index.tokenized : op.index.map((ix) => [ix, tokenizePath(ix)]);
      for (const [path, field] of paths) {
        const texts = getTextAtPath(op.value, field);
        const id = idOf(op.namespace, op.key);
        texts.forEach((text, i) => {
          (toEmbed[text] ??= []).push([id, texts.length > 1 ? `${path}.${i}` : path]);
        });
      }
    }
    const texts = Object.keys(toEmbed);
    if (texts.length === 0) return out;
    const vectors = await index.embeddings.embedDocuments(texts);
    for (const [i, text] of texts.entries()) {
      const v = vectors[i];
      if (!v) throw new Error(`No embedding found for text: ${text}`);
      for (const [id, field] of toEmbed[text] ?? []) {
        const list = out.get(id) ?? [];
        const at = list.findIndex(([f]) => f === field);
        if (at >= 0) list[at] = [field, v];
        else list.push([field, v]);
        out.set(id, list);
      }
    }
    return out;
  }

  /**
   * Commits the batch's puts and deletes in one engram batch, compare-and-set on every item;
   * returns the items that existed before and were replaced, as stored now.
   */
  async #commitPuts(puts: PutOperation[]): Promise<Map<string, StoredItem>> {
    const updated = new Map<string, StoredItem>();
    const vectors = await this.#embed(puts);
    const now = Date.now();
    const ops: BatchOp[] = [];
    const touched = new Set<string>();
    for (const op of puts) {
      const nsId = JSON.stringify(op.namespace);
      if (!touched.has(nsId)) {
        touched.add(nsId);
        const marker = namespaceKey(op.namespace);
        const r = await this.#store.read(marker, { scope: this.scope, inherit: false });
        if (r.status !== "OK") ops.push({ op: "write", key: marker, value: JSON.stringify({ ns: op.namespace } satisfies StoredNamespace), scope: this.scope, expectedVersion: null });
      }
      const key = itemKey(op.namespace, op.key);
      const old = await this.#load(op.namespace, op.key);
      if (op.value === null) {
        if (old !== null) ops.push({ op: "forget", key, scope: this.scope });
        continue;
      }
      const stored: StoredItem = { ns: [...op.namespace], key: op.key, value: op.value, createdAt: old?.stored.createdAt ?? now, updatedAt: now };
      if (old !== null) stored.order = old.order;
      const v = vectors.get(idOf(op.namespace, op.key));
      if (v !== undefined) stored.vectors = v;
      const json = JSON.stringify(stored);
      ops.push({ op: "write", key, value: json, scope: this.scope, expectedVersion: old?.version ?? null });
      // As a later get reads it (JSON's conversions applied: a Date is its string), not as given.
      if (old !== null) updated.set(idOf(op.namespace, op.key), JSON.parse(json) as StoredItem);
    }
    if (ops.length > 0) await this.#store.batch(ops);
    return updated;
  }

  /** start(): nothing to do; the engram store is opened and closed by its owner. */
  override start(): void {}

  /** stop(): nothing to do; close the engram store itself when done with it. */
  override stop(): void {}
}
