/**
 * Engram: the public face of the store (API.md). A thin class over engine/store.ts so that the
 * package's surface stays small and documented while the engine evolves underneath.
 */
import * as path from "node:path";
import { initChecksum } from "../segments/checksum.js";
import { Store } from "../engine/store.js";
import { verifySegments } from "../engine/verify.js";
import { SharedStore } from "../share/handle.js";
import type { Backend, FaultPoint, Role } from "../rules/types.js";
import type * as T from "./types.js";

/** Test-facing fault controls: pause an operation at a named point, then let it go. */
export interface Faults {
  /** Resolves when some operation is paused at `point`. */
  waitFor(point: FaultPoint): Promise<void>;
  /** Lets the operations paused at `point` go on; the point stays armed. */
  release(point: FaultPoint): void;
}

/** An open engram store. */
export class Engram {
  /** The backend every call goes to: the embedded engine, a shared store's handle, ... */
  readonly #store: Backend;

  private constructor(store: Backend) {
    this.#store = store;
  }

  /**
   * Opens (creating if missing) the store in `dir`. Throws StoreLockedError when it is open
   * elsewhere — unless `share: true`, when the first opener owns the store and serves it, and
   * later openers attach to the owner (API.md "Sharing one store between processes").
   */
  static async open(dir: string, options?: T.OpenOptions): Promise<Engram> {
    if (options?.share === true) return new Engram(await SharedStore.open(dir, options));
    return new Engram(await Store.open(dir, options));
  }

  /** Wraps any Backend (rules/types.ts) in the public API, with the same type and errors. */
  static fromBackend(backend: Backend): Engram {
    return new Engram(backend);
  }

  /** "owner" when this process holds the store, "client" when attached to a sharing owner; may change at failover. */
  get role(): Role {
    return this.#store.role;
  }

  /** Fault injection controls (armed with `faults.pauseAt` at open; the owner's alone). */
  get faults(): Faults {
    return this.#store.faults;
  }

  /**
   * Checks every segment of the store in `dir` without opening it (no lock, no recovery): works
   * on a store that refuses to open because of corruption. Changes nothing.
   */
  static async verify(dir: string, options?: { onProgress?: T.ProgressFn }): Promise<T.VerifyReport> {
    await initChecksum();
    return verifySegments(path.join(dir, "segments"), options?.onProgress);
  }

  /** The directory this store lives in. */
  get dir(): string {
    return this.#store.dir;
  }

  /** Writes `value` under `key`; resolves once durable (sync mode) with its version and generation. */
  write(key: string, value: T.Value, options?: T.WriteOptions): Promise<T.WriteResult> {
    return this.#store.write(key, value, options);
  }

  /** Reads the nearest live value of `key` from `scope` up to "global" (unless inherit: false). */
  read(key: string, options?: T.ReadOptions): Promise<T.ReadResult> {
    return this.#store.read(key, options);
  }

  /** read(), synchronously: fails closed instead of waiting when a segment is being rewritten. */
  readSync(key: string, options?: T.ReadOptions): T.ReadResult {
    return this.#store.readSync(key, options);
  }

  /** Tombstones `key` in exactly `scope`; confirms the tombstone commit, not reclamation. */
  forget(key: string, options?: T.ScopeOption): Promise<T.ForgetResult> {
    return this.#store.forget(key, options);
  }

  /** Erases `scope` and every descendant scope; "eager" waits until their value bytes are gone from disk. */
  forgetScope(scope: string, options?: T.ForgetScopeOptions): Promise<T.ForgetScopeResult> {
    return this.#store.forgetScope(scope, options);
  }

  /** Clears the tombstone of `key`: the slot moves to a higher generation and is empty and writable. */
  undelete(key: string, options?: T.ScopeOption): Promise<T.UndeleteResult> {
    return this.#store.undelete(key, options);
  }

  /** Reports value-record and retention-record presence of `key` in exactly `scope`, separately. */
  probe(key: string, options?: T.ScopeOption): Promise<T.ProbeResult> {
    return this.#store.probe(key, options);
  }

  /** Live keys in key order (nearest scope wins when inheriting). */
  list(options?: T.ListOptions): AsyncIterable<T.ListEntry> {
    return this.#store.list(options);
  }

  /** Applies writes and forgets atomically: after a crash all or none are visible. */
  batch(ops: T.BatchOp[]): Promise<T.BatchResult[]> {
    return this.#store.batch(ops);
  }

  /** Compacts the given sealed segments, or every segment holding garbage. */
  compact(options?: T.CompactOptions): Promise<T.CompactionReport> {
    return this.#store.compact(options);
  }

  /** Reclaims by policy now (generation-keyed). */
  gc(): Promise<T.GcReport> {
    return this.#store.gc();
  }

  /** Segments, live and dead bytes, slots, tombstones, sequence. */
  stats(): T.StoreStats {
    return this.#store.stats();
  }

  /** Reads every header and record and checks its checksum. */
  verify(options?: { onProgress?: T.ProgressFn }): Promise<T.VerifyReport> {
    return this.#store.verify(options?.onProgress);
  }

  /** Makes every write so far durable, whatever the durability mode. */
  flush(): Promise<void> {
    return this.#store.flush();
  }

  /** Waits for in-flight writes, GC and workers, then closes; idempotent. */
  close(): Promise<void> {
    return this.#store.close();
  }
}
