/**
 * One adapter per store, all with the same interface, so every workload runs the same code on
 * every store. Peers are loaded from bench/peers/node_modules through small local interfaces
 * (their @types are not in the root project); engram is imported from ../src/index.js.
 *
 * Durable means: a put/delete/batch resolves only after the store says the data is on disk.
 * - engram: durability "sync" (resolves after the fdatasync covering the write; group commit).
 * - lmdb: default options (overlappingSync); a write resolves at commit, so the durable adapter
 *   also awaits `db.flushed` (the flush of that commit). Non-durable: `noSync: true`.
 * - classic-level: `{ sync: true }` on put/del/batch. Non-durable: `{ sync: false }`.
 * - better-sqlite3: journal_mode=WAL, synchronous=FULL, one autocommit statement per put and one
 *   transaction per batch. Non-durable: synchronous=OFF. Its API is synchronous, so "async" and
 *   "in flight" are promise wrappers around blocking calls.
 */
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Engram as RealEngram } from "../src/index.js";
import { diskUsage, errorText, type DiskUsage, type StoreName } from "./common.js";

/** A put or a delete inside an atomic batch. */
export type BatchOp = { type: "put"; key: string; value: Uint8Array } | { type: "del"; key: string };

/** An entry to put. */
export interface Entry {
  key: string;
  value: Uint8Array;
}

/** The interface every store gets benchmarked through. */
export interface StoreAdapter {
  readonly name: StoreName;
  readonly dir: string;
  readonly durable: boolean;
  put(key: string, value: Uint8Array): Promise<void>;
  /** An atomic batch of puts. */
  putMany(entries: readonly Entry[]): Promise<void>;
  /** An atomic batch of puts and deletes. */
  batch(ops: readonly BatchOp[]): Promise<void>;
  getSync(key: string): Uint8Array | undefined;
  getAsync(key: string): Promise<Uint8Array | undefined>;
  delete(key: string): Promise<void>;
  close(): Promise<void>;
  diskBytes(): DiskUsage;
  /** engram only: one compact() pass (every segment with garbage; its plan walks every name held). */
  compact?(): Promise<void>;
}

export interface OpenParams {
  durable: boolean;
}

/** Opens a store on a directory (created if missing). */
export type Opener = (dir: string, params: OpenParams) => Promise<StoreAdapter>;

const here = path.dirname(fileURLToPath(import.meta.url));
/** The bench-local package holding the peers. */
export const PEERS_DIR = path.join(here, "peers");
const peerRequire = createRequire(path.join(PEERS_DIR, "package.json"));

// ---------------------------------------------------------------------------------------------
// engram

/** The part of engram's public API (shared/API.md) the suite uses. */
export interface EngramOpenOptions {
  durability?: "sync" | "batch" | "none";
  segmentBytes?: number;
  compaction?: { mode?: "copy-on-write" | "in-place"; workers?: number; auto?: boolean; garbageRatio?: number };
}
export type EngramReadResult = { status: "OK"; value: string | Uint8Array; version: number } | { status: "NOT_FOUND" };
export type EngramBatchOp = { op: "write"; key: string; value: string | Uint8Array } | { op: "forget"; key: string };
export interface EngramCompactionReport {
  segments: number[];
  mode: string;
  bytesBefore: number;
  bytesAfter: number;
  recordsKept: number;
  recordsDropped: number;
  durationMs: number;
}
export interface EngramStats {
  liveBytes: number;
  deadBytes: number;
  totalBytes: number;
  segments: Array<{ id: number; sealed: boolean; bytes: number }>;
  compactions?: number;
}
export interface EngramStore {
  write(key: string, value: string | Uint8Array, opts?: { scope?: string }): Promise<unknown>;
  read(key: string, opts?: { scope?: string }): Promise<EngramReadResult>;
  readSync(key: string, opts?: { scope?: string }): EngramReadResult;
  forget(key: string, opts?: { scope?: string }): Promise<unknown>;
  batch(ops: EngramBatchOp[]): Promise<unknown[]>;
  compact(opts?: { mode?: "copy-on-write" | "in-place"; segments?: number[] }): Promise<EngramCompactionReport>;
  stats(): EngramStats;
  close(): Promise<void>;
}
export interface EngramClass {
  open(dir: string, options?: EngramOpenOptions): Promise<EngramStore>;
}

/** Compile-time check: the real Engram class still offers everything this suite calls. */
export const engramFitsAdapter = (e: typeof RealEngram): EngramClass => e;

/** Imports engram's Engram class, or throws saying why it is not there. */
export async function loadEngram(): Promise<EngramClass> {
  // The built package when there is one (npm ci builds it): compiled code and compaction workers
  // that start without tsx, as users run it. The sources otherwise.
  const built = path.join(here, "..", "dist", "src", "index.js");
  const entry: string = fs.existsSync(built) ? pathToFileURL(built).href : "../src/index.js";
  const mod = (await import(entry)) as { Engram?: unknown };
  const E = mod.Engram as { open?: unknown } | undefined;
  if (E === undefined || typeof E.open !== "function") throw new Error("src/index.ts does not export Engram yet");
  return E as EngramClass;
}

function engramValue(r: EngramReadResult): Uint8Array | undefined {
  if (r.status !== "OK") return undefined;
  return typeof r.value === "string" ? Buffer.from(r.value, "utf8") : r.value;
}

/** Wraps an open engram store (used by the engram-only workloads too). */
export function wrapEngram(store: EngramStore, dir: string, durable: boolean): StoreAdapter {
  return {
    name: "engram",
    dir,
    durable,
    async put(key, value) {
      await store.write(key, value);
    },
    async putMany(entries) {
      await store.batch(entries.map((e) => ({ op: "write", key: e.key, value: e.value })));
    },
    async batch(ops) {
      await store.batch(ops.map((o): EngramBatchOp => (o.type === "put" ? { op: "write", key: o.key, value: o.value } : { op: "forget", key: o.key })));
    },
    getSync: (key) => engramValue(store.readSync(key)),
    getAsync: async (key) => engramValue(await store.read(key)),
    async delete(key) {
      await store.forget(key);
    },
    close: () => store.close(),
    diskBytes: () => diskUsage(dir),
    async compact() {
      await store.compact();
    },
  };
}

const openEngram: Opener = async (dir, { durable }) => {
  const Engram = await loadEngram();
  const store = await Engram.open(dir, { durability: durable ? "sync" : "none" });
  return wrapEngram(store, dir, durable);
};

// ---------------------------------------------------------------------------------------------
// lmdb

interface LmdbDb {
  put(key: string, value: Uint8Array): Promise<boolean>;
  remove(key: string): Promise<boolean>;
  get(key: string): Uint8Array | undefined;
  batch(action: () => void): Promise<boolean>;
  readonly flushed: Promise<boolean>;
  close(): Promise<void>;
}
interface LmdbModule {
  open(path: string, options: Record<string, unknown>): LmdbDb;
}

const openLmdb: Opener = async (dir, { durable }) => {
  const lmdb = peerRequire("lmdb") as LmdbModule;
  fs.mkdirSync(dir, { recursive: true });
  const db = lmdb.open(dir, { encoding: "binary", ...(durable ? {} : { noSync: true }) });
  const settle = async (): Promise<void> => {
    if (durable) await db.flushed;
  };
  return {
    name: "lmdb",
    dir,
    durable,
    async put(key, value) {
      await db.put(key, value);
      await settle();
    },
    async putMany(entries) {
      await db.batch(() => {
        for (const e of entries) void db.put(e.key, e.value);
      });
      await settle();
    },
    async batch(ops) {
      await db.batch(() => {
        for (const o of ops) {
          if (o.type === "put") void db.put(o.key, o.value);
          else void db.remove(o.key);
        }
      });
      await settle();
    },
    getSync: (key) => db.get(key),
    getAsync: (key) => Promise.resolve(db.get(key)),
    async delete(key) {
      await db.remove(key);
      await settle();
    },
    close: () => db.close(),
    diskBytes: () => diskUsage(dir),
  };
};

// ---------------------------------------------------------------------------------------------
// classic-level

interface LevelOptions {
  sync?: boolean;
}
type LevelOp = { type: "put"; key: string; value: Uint8Array } | { type: "del"; key: string };
interface LevelDb {
  open(): Promise<void>;
  put(key: string, value: Uint8Array, options?: LevelOptions): Promise<void>;
  del(key: string, options?: LevelOptions): Promise<void>;
  batch(ops: LevelOp[], options?: LevelOptions): Promise<void>;
  get(key: string): Promise<Uint8Array | undefined>;
  getSync(key: string): Uint8Array | undefined;
  close(): Promise<void>;
}
interface ClassicLevelModule {
  ClassicLevel: new (location: string, options: Record<string, unknown>) => LevelDb;
}

const openClassicLevel: Opener = async (dir, { durable }) => {
  const { ClassicLevel } = peerRequire("classic-level") as ClassicLevelModule;
  const db = new ClassicLevel(dir, { keyEncoding: "utf8", valueEncoding: "view" });
  await db.open();
  const wo: LevelOptions = { sync: durable };
  return {
    name: "classic-level",
    dir,
    durable,
    put: (key, value) => db.put(key, value, wo),
    putMany: (entries) => db.batch(entries.map((e): LevelOp => ({ type: "put", key: e.key, value: e.value })), wo),
    batch: (ops) => db.batch(ops.map((o): LevelOp => (o.type === "put" ? { type: "put", key: o.key, value: o.value } : { type: "del", key: o.key })), wo),
    getSync: (key) => db.getSync(key),
    getAsync: (key) => db.get(key),
    delete: (key) => db.del(key, wo),
    close: () => db.close(),
    diskBytes: () => diskUsage(dir),
  };
};

// ---------------------------------------------------------------------------------------------
// better-sqlite3

interface SqliteStatement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  pluck(toggle?: boolean): SqliteStatement;
}
interface SqliteDb {
  pragma(source: string): unknown;
  exec(source: string): unknown;
  prepare(source: string): SqliteStatement;
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): unknown;
}
type SqliteCtor = new (file: string) => SqliteDb;

const openSqlite: Opener = async (dir, { durable }) => {
  const Database = peerRequire("better-sqlite3") as SqliteCtor;
  fs.mkdirSync(dir, { recursive: true });
  const db = new Database(path.join(dir, "kv.sqlite"));
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${durable ? "FULL" : "OFF"}`);
  db.exec("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID");
  const put = db.prepare("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)");
  const del = db.prepare("DELETE FROM kv WHERE k = ?");
  const get = db.prepare("SELECT v FROM kv WHERE k = ?").pluck(true);
  const putMany = db.transaction((entries: readonly Entry[]) => {
    for (const e of entries) put.run(e.key, e.value);
  });
  const batch = db.transaction((ops: readonly BatchOp[]) => {
    for (const o of ops) {
      if (o.type === "put") put.run(o.key, o.value);
      else del.run(o.key);
    }
  });
  const getSync = (key: string): Uint8Array | undefined => {
    const v = get.get(key);
    return v instanceof Uint8Array ? v : undefined;
  };
  return {
    name: "better-sqlite3",
    dir,
    durable,
    put: async (key, value) => {
      put.run(key, value);
    },
    putMany: async (entries) => {
      putMany(entries);
    },
    batch: async (ops) => {
      batch(ops);
    },
    getSync,
    getAsync: async (key) => getSync(key),
    delete: async (key) => {
      del.run(key);
    },
    close: async () => {
      db.close();
    },
    diskBytes: () => diskUsage(dir),
  };
};

// ---------------------------------------------------------------------------------------------

export const OPENERS: Record<StoreName, Opener> = {
  engram: openEngram,
  lmdb: openLmdb,
  "classic-level": openClassicLevel,
  "better-sqlite3": openSqlite,
};

/** What "durable" means for each store, for the report. */
export const DURABILITY_NOTES: Record<StoreName, string> = {
  engram: 'durability "sync": a write resolves after the fdatasync covering it (group commit); non-durable rows use "none"',
  lmdb: "default options (overlappingSync); each durable write also awaits db.flushed; non-durable rows use noSync",
  "classic-level": "{ sync: true } on put/del/batch; non-durable rows use { sync: false }",
  "better-sqlite3": "journal_mode=WAL, synchronous=FULL, autocommit per put, one transaction per batch; non-durable rows use synchronous=OFF; synchronous API (async = promise-wrapped)",
};

/** Opens, writes, reads back and closes a store once: null when it works, else why not. */
export async function probeStore(name: StoreName, dir: string): Promise<string | null> {
  try {
    const s = await OPENERS[name](dir, { durable: true });
    const v = new Uint8Array([1, 2, 3]);
    await s.put("probe", v);
    const got = s.getSync("probe");
    const got2 = await s.getAsync("probe");
    await s.close();
    if (got === undefined || got2 === undefined || Buffer.compare(Buffer.from(got), Buffer.from(v)) !== 0) return "read back a wrong value";
    return null;
  } catch (err) {
    return errorText(err);
  }
}
