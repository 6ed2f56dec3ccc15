/**
 * Engram: the public face of the store (API.md). A thin class over one `Backend` (rules/types.ts):
 * the embedded engine (engine/store.ts) or the PostgreSQL backend (postgres/), so that every
 * backend has the same TypeScript type and the same errors, and the package's surface stays small
 * and documented while the backends evolve underneath.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { initChecksum } from "../segments/checksum.js";
import { Store } from "../engine/store.js";
import { verifySegments } from "../engine/verify.js";
import * as A from "../rules/args.js";
import { InvalidArgumentError, NotSupportedError } from "../rules/errors.js";
import { isPostgresUrl, openPostgres } from "../postgres/index.js";
import type { Backend, Faults, Role } from "../rules/types.js";
import type * as T from "./types.js";

export type { Faults } from "../rules/types.js";

/** True when `p` is a directory (false when it is missing, a file, or lies under a file). */
function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** An open engram store. */
export class Engram {
  /** The backend every call goes to: the embedded engine, a shared store's handle, or PostgreSQL. */
  readonly #store: Backend;

  private constructor(store: Backend) {
    this.#store = store;
  }

  /** Fault injection controls (armed with `faults.pauseAt` / `failAt` at open; the embedded owner's alone). */
  get faults(): Faults {
    return this.#store.faults;
  }

  /** "owner" when this process holds the store, "client" when attached to a sharing owner; may change at failover. */
  get role(): Role {
    return this.#store.role;
  }

  /**
   * Opens (creating if missing) the store in `dir`. Throws StoreLockedError when it is open
   * elsewhere — unless `share: true`, when the first opener owns the store and serves it, and
   * later openers attach to the owner (API.md "Sharing one store between processes"). A location
   * starting with postgres:// or postgresql:// is never a directory: it opens the same API on that
   * PostgreSQL database (API.md "Scale-out"), where the database arbitrates between processes.
   */
  static async open(dir: string, options?: T.OpenOptions): Promise<Engram> {
    if (isPostgresUrl(dir)) return Engram.fromBackend(await openPostgres(dir, options));
    if (options?.share === true) {
      const { SharedStore } = await import("../share/handle.js"); // msgpackr and the sharing code load only for a shared store
      return new Engram(await SharedStore.open(dir, options));
    }
    return new Engram(await Store.open(dir, options));
  }

  /** Wraps any Backend (rules/types.ts) in the public API, with the same type and errors. */
  static fromBackend(backend: Backend): Engram {
    return new Engram(backend);
  }

  /**
   * Checks every segment of the store in `dir` without opening it (no lock, no recovery): works
   * on a store that refuses to open because of corruption. Changes nothing. A `dir` that holds no
   * store (no `segments` directory: a mistyped path, say) is INVALID_ARGUMENT, not a clean report.
   */
  static async verify(dir: string, options?: { onProgress?: T.ProgressFn }): Promise<T.VerifyReport> {
    if (typeof dir !== "string" || dir.length === 0) throw new InvalidArgumentError("dir must be a non-empty path string");
    const segments = path.join(dir, "segments");
    if (!isDirectory(segments)) throw new InvalidArgumentError(`no store at ${dir} (it has no segments directory): check the path`);
    await initChecksum();
    return verifySegments(segments, options?.onProgress);
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

  /**
   * Scopes that hold at least one slot (live, forgotten, or a retention record), sorted. For
   * inspectors such as `engram ui`: ancestors without slots of their own are not listed.
   */
  async listScopes(): Promise<string[]> {
    const backend = this.#store;
    if (backend.listScopes === undefined) throw new NotSupportedError("this store cannot list its scopes here: name the scope instead");
    return backend.listScopes();
  }

  /**
   * Keys of every slot in exactly `scope`, in any state (`probe` tells which), sorted, at most
   * `limit` (default and maximum 1,000,000). For inspectors; `list()` is the live-keys view.
   */
  async listSlots(options?: { scope?: string; limit?: number }): Promise<string[]> {
    const o = A.optsOf(options, "listSlots");
    const backend = this.#store;
    if (backend.listSlots === undefined) throw new NotSupportedError("this store cannot list a scope's slots here: probe the key instead");
    return backend.listSlots(A.scopeOf(o), A.limitOf(o));
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

  /**
   * An online, consistent copy of the store in `targetDir` (new, or an empty directory) while the
   * store keeps serving: it holds every write acknowledged before the call, is verified, and opens
   * as a store. Sealed segments are hard-linked where the file system allows. NotSupportedError
   * on a backend without it.
   */
  backup(targetDir: string): Promise<T.BackupReport> {
    const backend: T.Backend = this.#store;
    if (backend.backup === undefined) return Promise.reject(new NotSupportedError("backup() applies to an embedded store; run it where the store's directory is open"));
    return backend.backup(targetDir);
  }

  /** Every slot of `scope` and below: live values and retention records (what `engram export` writes). */
  exportEntries(options?: T.ScopeOption): AsyncIterable<T.ExportEntry> {
    const backend: T.Backend = this.#store;
    if (backend.exportEntries === undefined) throw new NotSupportedError("export is not supported by this backend");
    return backend.exportEntries(options);
  }

  /** Raises the commit sequence to at least `floor`, durably: later versions are above it (`engram import`). */
  raiseSequence(floor: number): Promise<number> {
    const backend: T.Backend = this.#store;
    if (backend.raiseSequence === undefined) return Promise.reject(new NotSupportedError("raising the sequence is not supported by this backend"));
    return backend.raiseSequence(floor);
  }

  /** Makes every write so far durable, whatever the durability mode. */
  flush(): Promise<void> {
    return this.#store.flush();
  }

  /**
   * Waits for in-flight writes, GC and workers, then closes; idempotent. In `durability: "none"`
   * it syncs nothing (call flush() first for a durable close): the next open in the same boot
   * loads its boot-stamped hint, an open after a restart scans and cuts what the restart lost.
   */
  close(): Promise<void> {
    return this.#store.close();
  }
}
