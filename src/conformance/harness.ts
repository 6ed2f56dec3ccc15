/**
 * The harness of the conformance suite: what a caller hands to `conformance()` (its store factory,
 * its runner's functions, its `supports` manifest) and what every case file receives (the same,
 * plus helpers that register a test as skipped — visibly, with the reason in its name — when the
 * backend lacks what the test needs).
 */
import type * as T from "../../rules/types.js";

/** The API a store must offer to be judged (API.md "Operations"); `Engram` satisfies it. */
export interface ConformanceStore {
  /** Engram.write: writes `value` under `key`, resolving with its version and generation once committed. */
  write(key: string, value: T.Value, options?: T.WriteOptions): Promise<T.WriteResult>;
  /** Engram.read: the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, options?: T.ReadOptions): Promise<T.ReadResult>;
  /** Engram.readSync: read(), synchronously; without `supports.readSync` it must throw NotSupportedError. */
  readSync(key: string, options?: T.ReadOptions): T.ReadResult;
  /** Engram.forget: tombstones `key` in exactly `scope`, resolving once the tombstone is committed. */
  forget(key: string, options?: T.ScopeOption): Promise<T.ForgetResult>;
  /** Engram.forgetScope: erases `scope` and every descendant scope; "eager" resolves once their value bytes are gone. */
  forgetScope(scope: string, options?: T.ForgetScopeOptions): Promise<T.ForgetScopeResult>;
  /** Engram.undelete: clears the slot's tombstone by raising its generation; the slot is then empty and writable. */
  undelete(key: string, options?: T.ScopeOption): Promise<T.UndeleteResult>;
  /** Engram.probe: the value record and the retention record of `key` in exactly `scope`, reported separately. */
  probe(key: string, options?: T.ScopeOption): Promise<T.ProbeResult>;
  /** Engram.list: live keys in key order, the nearest scope's entry winning when inheriting. */
  list(options?: T.ListOptions): AsyncIterable<T.ListEntry>;
  /** Engram.batch: applies writes and forgets atomically, one result per op. */
  batch(ops: T.BatchOp[]): Promise<T.BatchResult[]>;
  /** Engram.compact: compacts the given segments, or every segment holding garbage. */
  compact(options?: T.CompactOptions): Promise<T.CompactionReport>;
  /** Engram.gc: reclaims by policy now (generation-keyed). */
  gc(): Promise<T.GcReport>;
  /** Engram.stats: segments, live and dead bytes, slots, tombstones and the commit sequence, synchronously. */
  stats(): T.StoreStats;
  /** Engram.verify: checks everything the store holds and reports the problems found. */
  verify(): Promise<T.VerifyReport>;
  /** Engram.close: waits for in-flight work, then closes; idempotent. */
  close(): Promise<void>;
}

/** What the backend under test offers beyond the common contract. Absent means false. */
export interface Supports {
  /** readSync answers; when false it must throw NotSupportedError (code NOT_SUPPORTED). */
  readSync?: boolean;
  /** The embedded engine's compaction modes (`compaction: { mode: "in-place" }` at open). */
  inPlaceCompaction?: boolean;
  /** Fault injection (`faults` at open). When false, opening with `faults` must be INVALID_ARGUMENT. */
  faults?: boolean;
  /** `unsafe.gcKeyedBy: "tombstone-seq"`: the seed-000 twin must then lose the write. */
  unsafeGc?: boolean;
  /** The engine-only OpenOptions (segmentBytes, compaction, cacheBytes) are accepted and checked. */
  engineOptions?: boolean;
  /** stats() counts (slots, liveSlots) are exact after every call, not a snapshot. */
  liveStats?: boolean;
}

/** A test body; it may return a promise. */
export type TestFn = () => void | Promise<void>;

/** How the caller's runner registers things: vitest, node:test and mocha all fit. */
export interface Runner {
  /** The runner's `describe`: registers a named group of tests. */
  describe: (name: string, fn: () => void) => unknown;
  /** `it` or `test` of the runner. */
  it: ((name: string, fn: TestFn) => unknown) & { skip?: (name: string, fn: TestFn) => unknown };
  /** Registers a skipped test; defaults to `it.skip`. */
  skip?: (name: string, fn: TestFn) => unknown;
  /** The runner's `afterAll`; optional, and the suite registers no hook with it at present. */
  afterAll?: (fn: () => void | Promise<void>) => unknown;
}

/** The argument of `conformance()`. */
export interface ConformanceOptions<S extends ConformanceStore = ConformanceStore> extends Runner {
  /** A name for the top-level describe (default "engram conformance"). */
  name?: string;
  /** Opens a fresh, empty store with these contract options (the backend may add its own). */
  open: (options?: T.OpenOptions) => Promise<S>;
  /** Opens again the store that `previous` (already closed) was, with these options. Without it, restart tests are skipped. */
  reopen?: (previous: S, options?: T.OpenOptions) => Promise<S>;
  /** What the backend offers beyond the common contract; a test that needs more is registered as skipped, with the reason in its name. */
  supports: Supports;
  /**
   * A digest of everything the store holds (the engine: its segment files' bytes; a database:
   * every row), to show that a refused call changed nothing. Without it those checks compare "".
   */
  fingerprint?: (store: S) => Promise<string>;
  /** Runs of the model-based random test (default 20; ENGRAM_MODEL_RUNS overrides). */
  modelRuns?: number;
  /**
   * How long the model-based test may run, in ms, before fast-check stops it and reports: a
   * failure found by then, shrunk as far as the time allowed; with none, the stop itself fails
   * the test (fewer runs than asked never pass). Set it below your runner's per-test timeout, so
   * that the report is not cut off (default: max(90 s, 1.5 s a run)).
   */
  modelTimeLimitMs?: number;
  /** The seed of the model-based test's random runs, to replay one (default: a fresh seed each time; ENGRAM_MODEL_SEED overrides). */
  modelSeed?: number;
  /** The fast-check module, for the model-based random test (skipped without it). */
  fastCheck?: unknown;
}

/** What every case file receives. */
export interface Harness {
  describe: (name: string, fn: () => void) => void;
  it: (name: string, fn: TestFn) => void;
  /** Registers the test only when every named capability is supported; otherwise as skipped with the reason. */
  itWith: (needs: Array<keyof Supports | "reopen" | "fastCheck">, name: string, fn: TestFn) => void;
  supports: Required<Supports> & { reopen: boolean; fastCheck: boolean };
  /** A fresh store with `options`; `dir` is its handle for `reopen`. */
  fresh: (options?: T.OpenOptions) => Promise<{ store: ConformanceStore; dir: ConformanceStore; options: T.OpenOptions }>;
  open: (options?: T.OpenOptions) => Promise<ConformanceStore>;
  /** Reopens the (closed) store that `dir` was opened as. */
  reopen: (dir: ConformanceStore, options?: T.OpenOptions) => Promise<ConformanceStore>;
  modelRuns: number;
  /** ConformanceOptions.modelTimeLimitMs, or its default for modelRuns. */
  modelTimeLimitMs: number;
  /** ENGRAM_MODEL_SEED, else ConformanceOptions.modelSeed; undefined: fast-check picks one. */
  modelSeed: number | undefined;
  fingerprint: (store: ConformanceStore) => Promise<string>;
}

/** Builds the harness from the caller's options. */
export function harnessOf(o: ConformanceOptions): Harness {
  const supports = {
    readSync: o.supports.readSync === true,
    inPlaceCompaction: o.supports.inPlaceCompaction === true,
    faults: o.supports.faults === true,
    unsafeGc: o.supports.unsafeGc === true,
    engineOptions: o.supports.engineOptions === true,
    liveStats: o.supports.liveStats === true,
    reopen: o.reopen !== undefined,
    fastCheck: o.fastCheck !== undefined,
  };
  const skip = o.skip ?? o.it.skip?.bind(o.it);
  const it = (name: string, fn: TestFn): void => void o.it(name, fn);
  const itWith = (needs: Array<keyof typeof supports>, name: string, fn: TestFn): void => {
    const missing = needs.filter((n) => !supports[n]);
    if (missing.length === 0) return it(name, fn);
    const label = `${name} [skipped: the backend lacks ${missing.join(", ")}]`;
    if (skip !== undefined) void skip(label, fn);
    else it(label, () => undefined);
  };
  const open = (options?: T.OpenOptions): Promise<ConformanceStore> => o.open(options);
  const modelRuns = Number(process.env["ENGRAM_MODEL_RUNS"] ?? o.modelRuns ?? 20);
  if (!Number.isSafeInteger(modelRuns) || modelRuns < 0) throw new Error(`modelRuns (or ENGRAM_MODEL_RUNS) must be a whole number of runs, got ${String(modelRuns)}`);
  const modelTimeLimitMs = o.modelTimeLimitMs ?? Math.max(90_000, modelRuns * 1_500);
  if (!Number.isFinite(modelTimeLimitMs) || modelTimeLimitMs <= 0) throw new Error(`modelTimeLimitMs must be a positive number of ms, got ${String(modelTimeLimitMs)}`);
  const seedGiven = process.env["ENGRAM_MODEL_SEED"] ?? o.modelSeed;
  const modelSeed = seedGiven === undefined ? undefined : Number(seedGiven);
  if (modelSeed !== undefined && !Number.isSafeInteger(modelSeed)) throw new Error(`modelSeed (or ENGRAM_MODEL_SEED) must be an integer, got ${String(seedGiven)}`);
  return {
    describe: (name, fn) => void o.describe(name, fn),
    it,
    itWith,
    supports,
    fresh: async (options = {}) => {
      const store = await o.open(options);
      return { store, dir: store, options };
    },
    open,
    reopen: (dir, options) => {
      if (o.reopen === undefined) throw new Error("reopen is not supported by this backend (register the test with itWith([\"reopen\"], ...))");
      return o.reopen(dir, options);
    },
    fingerprint: (store) => (o.fingerprint === undefined ? Promise.resolve("") : o.fingerprint(store)),
    modelRuns,
    modelTimeLimitMs,
    modelSeed,
  };
}
