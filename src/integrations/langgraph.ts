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
 * TTL, as LangGraph's PostgresStore (InMemoryStore has none): `ttl: { defaultTtl, refreshOnRead }`
 * and `put(…, { ttl })` in minutes, 0 never expiring; an expired item is gone from get and search
 * at its instant on engram's clock (engram's per-write `ttlMs`; nothing to sweep). A refresh
 * (`refreshOnRead`, or `refreshTtl` per get / search) renews the item's own TTL from now by a
 * compare-and-set rewrite of the item as read. Where PostgresStore 1.0.5 differs (docs/API.md):
 * a refresh keeps updatedAt (PostgresStore sets it), renews the TTL the item was put with and
 * never gives one to an item without (PostgresStore sets `defaultTtl` on every item read, and
 * refreshes nothing without one), applies to every search (PostgresStore: search() without a
 * query or with a text query, not batch or vector search) and a per-call `refreshTtl: false`
 * wins over `refreshOnRead`; a negative, NaN or over-100-year TTL is refused.
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
import type { GetOperation, IndexConfig, Item, ListNamespacesOperation, MatchCondition, Operation, OperationResults, PutOperation, SearchItem, SearchOperation } from "@langchain/langgraph-checkpoint";
import type { BatchOp, BatchResult, ForgetResult, ListEntry, ListOptions, ReadOptions, ReadResult, ScopeOption, Value, WriteOptions, WriteResult } from "../types.js";
import { compareValues, cosineSimilarity, getTextAtPath, tokenizePath } from "./langgraph-paths.js";
import { elementAt } from "../../rules/assert.js";
import { InvalidArgumentError } from "../../rules/errors.js";
import { TTL_MS_MAX } from "../../rules/limits.js";

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
  /** Expiry of items, as PostgresStore's `ttl` option (`TTLConfig`): see EngramStoreTtlConfig. */
  ttl?: EngramStoreTtlConfig;
}

/**
 * EngramStore's TTL configuration, PostgresStore's `TTLConfig`: times in minutes (fractions
 * allowed), expiry kept by engram itself (a per-write `ttlMs` on engram's clock).
 */
export interface EngramStoreTtlConfig {
  /** TTL in minutes of a put that gives none (0 or absent: such items never expire); at most TTL_MINUTES_MAX. */
  defaultTtl?: number;
  /**
   * Whether get and search refresh the TTL of the items they return (default false, as
   * PostgresStore 1.0.5 does: its type says `@default true`, its code refreshes only when set).
   */
  refreshOnRead?: boolean;
  /** Accepted and ignored: engram hides and reclaims expired items itself, there is nothing to sweep. */
  sweepIntervalMinutes?: number;
}

/** Options of EngramStore's `put` (PostgresStore's `PutOptions`). */
export interface EngramPutOptions {
  /** TTL of this item in minutes, overriding `defaultTtl`; 0 never expires (as PostgresStore); at most TTL_MINUTES_MAX. */
  ttl?: number;
}

/** A batch put: LangGraph's PutOperation with PostgresStore's `options: { ttl }` (minutes). */
export type EngramPutOperation = PutOperation & { options?: EngramPutOptions };

/** A batch get: LangGraph's GetOperation with `refreshTtl` (default: the store's `refreshOnRead`). */
export type EngramGetOperation = GetOperation & { refreshTtl?: boolean };

/** A batch search: LangGraph's SearchOperation with `refreshTtl` (default: the store's `refreshOnRead`). */
export type EngramSearchOperation = SearchOperation & { refreshTtl?: boolean };

/** Longest TTL in minutes: engram's TTL_MS_MAX (100 years); a longer one is INVALID_ARGUMENT. */
export const TTL_MINUTES_MAX = TTL_MS_MAX / 60_000;

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
  /** The TTL in minutes the item was put with (absent: it never expires); a refresh renews it. */
  ttl?: number;
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

/**
 * Refuses a TTL (of `what`, in minutes) that is neither absent (undefined or null, which read as
 * the default, PostgresStore's `ttl ?? defaultTtl`) nor a finite number in [0, TTL_MINUTES_MAX],
 * before anything is written. PostgresStore takes a negative TTL as an expiry in the past (the
 * item is written and never seen) and NaN as no TTL at all (NaN is falsy there).
 */
function validateTtl(what: string, x: unknown): void {
  if (x === undefined || x === null) return;
  if (typeof x === "number" && Number.isFinite(x) && x >= 0 && x <= TTL_MINUTES_MAX) return;
  const got = typeof x === "number" ? String(x) : `${typeof x} ${JSON.stringify(x)}`;
  throw new InvalidArgumentError(`LangGraph store: ${what} must be a number of minutes in [0, ${TTL_MINUTES_MAX}] (0: never expires), got ${got}; leave it out for the default`);
}

/** Refuses a `refreshTtl` or `refreshOnRead` (named `what`) that is neither absent nor a boolean. */
function validateFlag(what: string, x: unknown): void {
  if (x === undefined || x === null || typeof x === "boolean") return;
  throw new InvalidArgumentError(`LangGraph store: ${what} must be true or false, got ${typeof x} ${JSON.stringify(x)}`);
}

/** Refuses a bad `ttl` option of the constructor (a plain object of checked fields) before the store is used. */
function validateTtlConfig(ttl: unknown): void {
  if (ttl === undefined) return;
  if (typeof ttl !== "object" || ttl === null || Array.isArray(ttl)) throw new InvalidArgumentError(`LangGraph store: option ttl must be an object such as { defaultTtl: 60, refreshOnRead: true }, got ${ttl === null ? "null" : typeof ttl}`);
  const c = ttl as Record<string, unknown>;
  validateTtl("ttl.defaultTtl", c["defaultTtl"]);
  validateFlag("ttl.refreshOnRead", c["refreshOnRead"]);
}

/** The TTL in ms engram writes for a TTL in minutes; 0 or absent is none (PostgresStore's `if (!effectiveTtl)`). */
function ttlMsOf(minutes: number | undefined): number | undefined {
  if (minutes === undefined || minutes === 0) return undefined;
  // A fraction of a millisecond still expires, after engram's shortest TTL.
  return Math.max(1, Math.round(minutes * 60_000));
}

/** The tail of the batches run on each backing store: batches of every EngramStore over one store run one at a time. */
const chains = new WeakMap<LangGraphBackingStore, Promise<unknown>>();

/** True when `err` is engram's VERSION_CONFLICT: another writer changed an item since it was read. */
function isConflict(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "VERSION_CONFLICT";
}

/**
 * True when a refresh lost a race: the item changed since it was read (VERSION_CONFLICT), or
 * was deleted and the store refuses writes to deleted slots (TOMBSTONED, tombstoneWrites
 * "require-clear", should that check answer before the compare-and-set: docs/API.md leaves the
 * order open; the engine answers VERSION_CONFLICT today).
 */
function lostRace(err: unknown): boolean {
  return isConflict(err) || (err as { code?: unknown } | null)?.code === "TOMBSTONED";
}

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
  /** TTL in minutes of a put that gives none (undefined: none). */
  readonly #defaultTtl: number | undefined;
  /** Whether reads refresh TTLs when the call does not say. */
  readonly #refreshOnRead: boolean;

  /** Wraps `store`; a bad `options.ttl` is an InvalidArgumentError. */
  constructor(store: LangGraphBackingStore, options: EngramStoreOptions = {}) {
    super();
    validateTtlConfig(options.ttl);
    this.#store = store;
    this.scope = options.scope ?? "langgraph";
    this.#defaultTtl = options.ttl?.defaultTtl ?? undefined;
    this.#refreshOnRead = options.ttl?.refreshOnRead ?? false;
    const index = options.index;
    this.#index = index === undefined ? undefined : { ...index, tokenized: (index.fields ?? ["$"]).map((p) => [p, p === "$" ? [p] : tokenizePath(p)]) };
  }

  /** The index configuration (as InMemoryStore's `indexConfig`). */
  get indexConfig(): IndexConfig | undefined {
    return this.#index;
  }

  /**
   * get(): the item, or null (also once it expired). Labels may contain ":". With `refreshTtl`
   * (default: `ttl.refreshOnRead`) an item put with a TTL gets that TTL again from now.
   */
  override async get(namespace: string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<Item | null> {
    validateNamespace(namespace, { allowEmpty: true, allowReservedRoot: true });
    const op: EngramGetOperation = { namespace, key, refreshTtl: options.refreshTtl };
    return elementAt(await this.batch([op]), 0, "batch answers every op");
  }

  /**
   * search(): live items under a namespace prefix, filtered, paginated, ranked by `query` when
   * indexed. With `refreshTtl` (default: `ttl.refreshOnRead`) each item returned that was put
   * with a TTL gets that TTL again from now.
   */
  override async search(namespacePrefix: string[], options: { filter?: Record<string, unknown>; limit?: number; offset?: number; query?: string; refreshTtl?: boolean } = {}): Promise<SearchItem[]> {
    validateNamespace(namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
    const { filter, limit = 10, offset = 0, query, refreshTtl } = options;
    const op: EngramSearchOperation = { namespacePrefix, filter, limit, offset, query, refreshTtl };
    return elementAt(await this.batch([op]), 0, "batch answers every op");
  }

  /**
   * put(): stores or replaces an item; createdAt survives updates. `options.ttl` (minutes, 0:
   * never) overrides `ttl.defaultTtl`; the item then expires that long after this put.
   */
  override async put(namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[], options?: EngramPutOptions): Promise<void> {
    validateNamespace(namespace);
    const op: EngramPutOperation = { namespace, key, value, index };
    if (options !== undefined) op.options = options;
    await this.batch([op]);
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
        if (!isConflict(err) || attempt >= BATCH_RETRIES_MAX) throw err;
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
      if ("value" in op && op.value !== null) {
        validateValue(op.value);
        validateTtl("put options.ttl", (op as EngramPutOperation).options?.ttl);
      }
      if (!("value" in op)) validateFlag("refreshTtl", (op as EngramGetOperation | EngramSearchOperation).refreshTtl);
    }
    const refreshes = new Map<string, Loaded>();
    for (const op of operations) {
      if ("key" in op && "namespace" in op && !("value" in op)) {
        const found = await this.#load(op.namespace, op.key);
        if (found !== null && this.#refreshes(op)) refreshes.set(idOf(op.namespace, op.key), found);
        results.push(found === null ? null : toItem(found.stored));
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
    for (const [i, op] of searches) results[i] = await this.#searchOne(op, this.#refreshes(op) ? refreshes : undefined);
    // A put of the batch sets its item's TTL itself; refreshing the old value would undo it.
    for (const id of puts.keys()) refreshes.delete(id);
    if (puts.size === 0) {
      await this.#refresh([...refreshes.values()]);
      return results;
    }
    const updated = await this.#commitPuts([...puts.values()]);
    await this.#refresh([...refreshes.values()]);
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

  /** Whether a get or search refreshes the TTLs of what it returns: its `refreshTtl`, else `refreshOnRead`. */
  #refreshes(op: Operation): boolean {
    return (op as EngramGetOperation | EngramSearchOperation).refreshTtl ?? this.#refreshOnRead;
  }

  /**
   * Rewrites each item read (that has a TTL) unchanged but for a TTL counted from now, each
   * compare-and-set on the version read, so that a refresh never brings back an item deleted or
   * expired since, nor overwrites a newer put (that write's value and TTL stand). A refresh that
   * loses such a race is dropped, not retried: it never fails the read that asked for it.
   */
  async #refresh(read: Loaded[]): Promise<void> {
    const ops: BatchOp[] = [];
    for (const l of read) {
      const ttlMs = ttlMsOf(l.stored.ttl);
      if (ttlMs === undefined) continue;
      // createdAt, updatedAt and the creation order stay: a read is not an update.
      const value = JSON.stringify({ ...l.stored, order: l.order } satisfies StoredItem);
      ops.push({ op: "write", key: itemKey(l.stored.ns, l.stored.key), value, scope: this.scope, expectedVersion: l.version, ttlMs });
    }
    if (ops.length === 0) return;
    try {
      await this.#store.batch(ops);
    } catch (err) {
      if (!lostRace(err)) throw err;
      // One lost race fails the whole atomic batch: refresh the others one by one.
      for (const op of ops) await this.#store.batch([op]).catch((e: unknown) => (lostRace(e) ? undefined : Promise.reject(e)));
    }
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
  async #candidates(prefix: readonly string[]): Promise<Loaded[]> {
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
    return found;
  }

  /** One search's answer; the items it returns are added to `refreshes` when given (by id). */
  async #searchOne(op: SearchOperation, refreshes?: Map<string, Loaded>): Promise<SearchItem[]> {
    const loaded = await this.#candidates(op.namespacePrefix);
    const byId = new Map(loaded.map((l) => [idOf(l.stored.ns, l.stored.key), l]));
    let candidates = loaded.map((l) => l.stored);
    const filter = op.filter;
    if (filter) candidates = candidates.filter((s) => Object.entries(filter).every(([k, v]) => compareValues(s.value[k], v)));
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    let answer: SearchItem[] | undefined;
    if (op.query && this.#index?.embeddings) {
      const vector = await this.#index.embeddings.embedQuery(op.query);
      if (vector) answer = this.#score(candidates, vector, offset, limit);
    }
    answer ??= candidates.slice(offset, offset + limit).map((s) => ({ ...toItem(s), score: undefined }));
    for (const item of answer) {
      const id = idOf(item.namespace, item.key);
      const l = byId.get(id);
      if (refreshes !== undefined && l !== undefined) refreshes.set(id, l);
    }
    return answer;
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
      // PostgresStore's `ttl ?? defaultTtl`, where 0 (either) means no expiry.
      const ttl = (op as EngramPutOperation).options?.ttl ?? this.#defaultTtl;
      const ttlMs = ttlMsOf(ttl ?? undefined);
      if (ttlMs !== undefined) stored.ttl = ttl as number;
      const v = vectors.get(idOf(op.namespace, op.key));
      if (v !== undefined) stored.vectors = v;
      const json = JSON.stringify(stored);
      // No ttlMs without a TTL: engram's own retention for the scope (none by default) applies.
      ops.push({ op: "write", key, value: json, scope: this.scope, expectedVersion: old?.version ?? null, ...(ttlMs === undefined ? {} : { ttlMs }) });
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
