/**
 * A handle on a shared store (`Engram.open(dir, { share: true })`): the same Backend whether this
 * process owns the store or is attached to the owner, and able to switch from one to the other.
 *
 * States: "owner" (holds the flock; calls go to its own Store; a ShareServer serves the others),
 * "client" (calls go over a Link), "handover" (no owner reachable: calls wait in a queue, each
 * with its own deadline of shareTimeoutMs, while a loop tries to attach or to take the lock),
 * "closed". Rules kept at each step (docs/SHARING.md):
 * - a call is answered only by an owner that ran it to completion (the owner's own ack rule);
 * - a call unanswered when the owner vanished is rejected with OwnerLostError, never resent
 *   (it may have committed); a call the owner answered "retry" or held when it said bye did not
 *   run and is resent to the next owner;
 * - whoever holds the flock owns; taking over is the ordinary open (recovery);
 * - every queued call settles by its deadline.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { InvalidArgumentError, IoError, NotSupportedError, OwnerLostError, StoreClosedError, StoreLockedError } from "../rules/errors.js";
import type * as T from "../rules/types.js";
import { assert } from "../rules/assert.js";
import { makeStoreDir, Store } from "../engine/store.js";
import { readLockNote, type LockNote } from "../engine/lock.js";
import { resolveOptions } from "../engine/options.js";
import { Link, ProtocolMismatchError, type LinkEnd, type Sent } from "./link.js";
import { OWNER_REPLY_HELD_CONNECTIONS, REPLY_HELD_FRAMES, ShareServer } from "./server.js";
import { frameBytesMaxFor } from "./protocol.js";
import { checkOwnDir, checkSocketOwner, socketPathFor } from "./paths.js";

/** Default wait of a call for a new owner (API.md). */
export const SHARE_TIMEOUT_MS_DEFAULT = 10_000;
/** Longest shareTimeoutMs accepted (one hour). */
export const SHARE_TIMEOUT_MS_MAX = 3_600_000;
/** Calls queued during a handover, at most (each also has a deadline). */
export const QUEUED_CALLS_MAX = 65_536;
/**
 * A client's stats() asks the owner for a fresh snapshot at most this often (and only when
 * called: stats() walks the owner's whole keydir, so idle clients must not poll it).
 */
export const STATS_REFRESH_MS = 250;
/** Reopens of one list() iteration at most: each one follows an owner change (docs/SHARING.md). */
export const LIST_REOPENS_MAX = 64;
/** Times one pass of a list or export opens its cursor again when an owner change cut the open (see cursorPass). */
const CURSOR_OPENS_MAX = 4;
/** Backoff bounds of the attach-or-own loop. */
const RETRY_MS_MIN = 2;
const RETRY_MS_MAX = 50;
/** A half-sent frame or a missing hello is cut off after this long (ENGRAM_SHARE_STALL_MS: tests shorten it). */
export const STALL_MS = stallMsFromEnv(process.env["ENGRAM_SHARE_STALL_MS"]);

/**
 * Longest the owner holds a client's commit call to gather a fuller commit group
 * (ENGRAM_SHARE_GATHER_MS, 0 to 100; 0 turns gathering off for A/B runs). docs/SHARING.md.
 */
export const GATHER_MS = gatherMsFromEnv(process.env["ENGRAM_SHARE_GATHER_MS"]);

function gatherMsFromEnv(raw: string | undefined): number {
  const n = Number(raw);
  return raw !== undefined && raw !== "" && Number.isInteger(n) && n >= 0 && n <= 100 ? n : 2;
}

function stallMsFromEnv(raw: string | undefined): number {
  const n = Number(raw);
  return raw !== undefined && Number.isInteger(n) && n >= 10 && n <= 600_000 ? n : 10_000;
}

type State = "owner" | "client" | "handover" | "closed";

interface Queued extends Sent {
  timer: NodeJS.Timeout;
}

const NO_FAULTS: T.Faults = {
  waitFor: () => Promise.reject(new NotSupportedError("fault injection belongs to the shared store's owner; this handle is a client")),
  release: () => {
    throw new NotSupportedError("fault injection belongs to the shared store's owner; this handle is a client");
  },
};

/** Whether process `pid` exists (EPERM: it does, under another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** `options` without its limit (a reopened list counts the limit itself). */
function withoutLimit(options: T.ListOptions | undefined): T.ListOptions {
  const { limit: _limit, ...rest } = options ?? {};
  return rest;
}

/** The entries of `it` whose key sorts after `after` (all of them when null): a list reopened past its last key. */
async function* keysAfter(it: AsyncIterable<T.ListEntry>, after: string | null): AsyncGenerator<T.ListEntry> {
  for await (const e of it) if (after === null || e.key > after) yield e;
}

/** The error of a call unanswered when its link ended without a bye: the owner vanished, or stalled past the deadline. */
function lostError(op: string, link: Link, end: LinkEnd): OwnerLostError {
  const err = new OwnerLostError(op);
  if (end.silentMs > 0) {
    err.message =
      `the owner of the shared store (pid ${link.welcome.pid}) did not answer for ${end.silentMs} ms (shareTimeoutMs) while ${op} was in flight: ` +
      `it may be stopped or stalled; the outcome is unknown: read or probe the key to learn whether it committed`;
  }
  return err;
}

/** The checked shareTimeoutMs of `options`. */
function timeoutOf(options: T.OpenOptions): number {
  const t = options.shareTimeoutMs ?? SHARE_TIMEOUT_MS_DEFAULT;
  if (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > SHARE_TIMEOUT_MS_MAX) {
    throw new InvalidArgumentError(`shareTimeoutMs must be an integer from 1 to ${SHARE_TIMEOUT_MS_MAX} (ms), got ${String(t)}`);
  }
  return t;
}

/** A shared store handle: owner or client, switching at failover. */
export class SharedStore implements T.Backend {
  readonly dir: string;
  readonly timeoutMs: number;
  /** Called on every role change and cut-off connection (logs, tests). */
  onEvent: ((event: string) => void) | null = null;
  private readonly options: T.OpenOptions;
  private state: State = "handover";
  private store: Store | null = null;
  private server: ShareServer | null = null;
  private link: Link | null = null;
  private readonly queue: Queued[] = [];
  private snapshot: T.StoreStats | null = null;
  private statsAskedAt = 0;
  private statsAsking = false;
  private acquiring: Promise<void> | null = null;
  /** Why this process could not take the store itself (no write access), if it tried. */
  private cannotOwn: unknown = null;
  private closing: Promise<void> | null = null;
  /**
   * Counts owner changes seen by this handle: a link ending, a new link, taking the store. A list
   * iteration reopens its cursor only when a call failed across such a change.
   */
  private epoch = 0;

  private constructor(dir: string, options: T.OpenOptions) {
    this.dir = dir;
    this.options = options;
    this.timeoutMs = timeoutOf(options);
  }

  /**
   * Attaches to the owner of `dir`, or becomes it. Throws StoreLockedError when an exclusive
   * opener holds the directory, or when no owner appears within shareTimeoutMs.
   */
  static async open(dir: string, options: T.OpenOptions = {}): Promise<SharedStore> {
    if (typeof dir !== "string" || dir.length === 0) throw new InvalidArgumentError("dir must be a non-empty path string");
    resolveOptions(options); // every option is checked even when this opener ends up a client
    const ack = options.unsafe?.shareAckBeforeCommit;
    if (ack !== undefined && typeof ack !== "boolean") throw new InvalidArgumentError(`unsafe.shareAckBeforeCommit must be a boolean, got ${String(ack)}`);
    const h = new SharedStore(dir, options);
    await h.acquire(Date.now() + h.timeoutMs, true);
    if (h.state === "client" && (options.faults !== undefined || options.unsafe !== undefined)) {
      await h.close();
      throw new NotSupportedError(`faults and unsafe options belong to the owner of ${dir}, and another process owns it: open without them`);
    }
    return h;
  }

  /** "owner" while this process holds the store, "client" otherwise (also during a handover). */
  get role(): T.Role {
    return this.state === "owner" ? "owner" : "client";
  }

  /** The owner's fault controls; a client has none (its methods throw NotSupportedError). */
  get faults(): T.Faults {
    return this.store?.faults ?? NO_FAULTS;
  }

  /**
   * Commit groups committed by this process's store since it took it, and the operations they
   * carried (null while not the owner): a debug counter (bench/share.ts shows puts per group).
   */
  get commitCounts(): { groups: number; ops: number } | null {
    const c = this.store?.log.committed;
    return c === undefined ? null : { groups: c.groups, ops: c.ops };
  }

  /** The socket server while owner (tests observe it). */
  get shareServer(): ShareServer | null {
    return this.server;
  }

  /**
   * Attach-or-own loop: until `deadline` (null: until attached, owner or closed). `first`: the
   * initial open, which fails at once when the directory is held exclusively.
   */
  private acquire(deadline: number | null, first: boolean): Promise<void> {
    this.acquiring ??= this.acquireLoop(deadline, first).finally(() => (this.acquiring = null));
    return this.acquiring;
  }

  private async acquireLoop(deadline: number | null, first: boolean): Promise<void> {
    let wait = RETRY_MS_MIN;
    let exclusiveSeen = 0;
    while (this.closing === null) {
      const note = readLockNote(this.dir);
      if (await this.tryAttach(note)) return;
      if (await this.tryOwn()) return;
      const held = readLockNote(this.dir);
      if (held?.mode === "exclusive" && alive(held.pid)) {
        exclusiveSeen += 1; // seen three times, ms apart: not a sharing owner that has not yet written its note
        if (first && exclusiveSeen >= 3) throw new StoreLockedError(this.dir, `opened exclusively by pid ${held.pid}: close that handle first, or have every opener use share: true`);
      }
      if (deadline !== null && Date.now() >= deadline) {
        if (this.cannotOwn !== null) throw this.cannotOwn; // no owner to attach to, and no right to become one
        throw new StoreLockedError(this.dir, `its lock is held but no sharing owner answered within ${this.timeoutMs} ms`);
      }
      await sleep(wait + Math.random() * wait);
      wait = Math.min(wait * 2, RETRY_MS_MAX);
    }
    throw new StoreClosedError();
  }

  /** Connects to the owner named by the lock note (or at the usual path); false when none answers. */
  private async tryAttach(note: LockNote | null): Promise<boolean> {
    let socket: string;
    try {
      socket = note?.mode === "shared" && note.socket !== undefined ? note.socket : socketPathFor(this.dir);
      checkSocketOwner(socket);
    } catch {
      return false;
    }
    let link: Link;
    try {
      link = await Link.connect(socket, Math.min(this.timeoutMs, 2000), this.timeoutMs);
    } catch (err) {
      if (err instanceof ProtocolMismatchError) throw err; // waiting cannot help: another engram version owns the store
      return false;
    }
    if (this.closing !== null) {
      link.close();
      return false;
    }
    this.link = link;
    this.epoch += 1;
    this.snapshot = link.welcome.stats as T.StoreStats;
    this.state = "client";
    link.whenEnded((end) => this.onLinkEnd(link, end));
    this.statsAskedAt = Date.now();
    this.onEvent?.(`client of pid ${link.welcome.pid}`);
    this.drainQueue();
    return true;
  }

  /**
   * Takes the lock, recovers and serves; false when someone else holds the lock, or when this
   * process may not write the directory (then it can only be a client: a read-only opener such
   * as `engram mcp --read-only` without write access keeps waiting for an owner).
   */
  private async tryOwn(): Promise<boolean> {
    makeStoreDir(this.dir); // a directory that cannot be made has no owner to wait for: InvalidArgumentError
    let store: Store;
    let socket: string;
    try {
      checkOwnDir(this.dir);
      socket = socketPathFor(this.dir);
      const { share: _s, shareTimeoutMs: _t, ...own } = this.options;
      store = await Store.open(this.dir, own, { mode: "shared", pid: process.pid, socket });
    } catch (err) {
      if (err instanceof StoreLockedError) return false;
      const code = err instanceof IoError ? err.errno : (err as NodeJS.ErrnoException).code; // Store.open's IoError keeps the errno
      if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
        this.cannotOwn = err;
        return false;
      }
      throw err;
    }
    try {
      const frameBytesMax = frameBytesMaxFor(store.options.valueBytesMax);
      const unsafeAckBeforeCommit = this.options.unsafe?.shareAckBeforeCommit === true;
      const replyBytesHeldMax = REPLY_HELD_FRAMES * frameBytesMax;
      const ownerReplyBytesHeldMax = OWNER_REPLY_HELD_CONNECTIONS * replyBytesHeldMax;
      const limits = { frameBytesMax, maxValueBytes: store.options.valueBytesMax, writeBufferBytesMax: 2 * frameBytesMax, replyBytesHeldMax, ownerReplyBytesHeldMax, stallMs: STALL_MS, unsafeAckBeforeCommit, gatherMs: GATHER_MS };
      this.server = await ShareServer.listen(store, socket, limits);
      this.server.onReject = (why) => this.onEvent?.(`cut off a client: ${why}`);
    } catch (err) {
      await store.close();
      throw err;
    }
    if (this.closing !== null) {
      await this.server.close();
      await store.close();
      return false;
    }
    this.store = store;
    this.epoch += 1;
    this.state = "owner";
    this.onEvent?.("owner");
    this.drainQueue();
    return true;
  }

  /** The owner went: unanswered calls are resent (after bye) or lost (vanished); then re-acquire. */
  private onLinkEnd(link: Link, end: LinkEnd): void {
    const current = this.link === link;
    if (current) this.link = null;
    this.epoch += 1;
    if (!current || this.closing !== null) {
      // This handle is closing: nothing is resent; what the owner held unrun is simply refused.
      for (const s of end.unanswered) s.reject(end.bye ? new StoreClosedError() : lostError(s.op, link, end));
      return;
    }
    this.state = "handover";
    this.onEvent?.(end.bye ? "owner closed: handover" : end.silentMs > 0 ? `owner silent for ${end.silentMs} ms: handover` : "owner lost: handover");
    for (const s of end.unanswered) {
      if (end.bye && s.bound === undefined) this.enqueue(s);
      else s.reject(lostError(s.op, link, end));
    }
    this.keepAcquiring();
  }

  /**
   * Runs the attach-or-own loop in the background while in handover. If taking over fails for a
   * reason other than the lock (the recovery found corruption, the disk refused), the queued
   * calls reject with that error, and the next call starts the loop again.
   */
  private keepAcquiring(): void {
    if (this.acquiring !== null || this.closing !== null || this.state !== "handover") return;
    void this.acquire(null, false).catch((err: unknown) => {
      if (this.closing !== null) return;
      this.onEvent?.(`takeover failed: ${err instanceof Error ? err.message : String(err)}`);
      for (const q of this.queue.splice(0)) {
        clearTimeout(q.timer);
        q.reject(err);
      }
    });
  }

  /** Queues a call until an owner is reachable; it rejects with OwnerLostError at its deadline. */
  private enqueue(s: Sent): void {
    if (this.queue.length >= QUEUED_CALLS_MAX) return s.reject(new OwnerLostError(s.op));
    const q: Queued = {
      ...s,
      timer: setTimeout(() => {
        const i = this.queue.indexOf(q);
        if (i >= 0) this.queue.splice(i, 1);
        const err = new OwnerLostError(s.op);
        err.message = `no owner of the shared store answered within ${this.timeoutMs} ms; ${s.op} was not run: retry later`;
        s.reject(err);
      }, this.timeoutMs),
    };
    this.queue.push(q);
    this.keepAcquiring();
  }

  private drainQueue(): void {
    const waiting = this.queue.splice(0);
    for (const q of waiting) {
      clearTimeout(q.timer);
      this.dispatch(q);
    }
  }

  /** Routes one call by state. */
  private dispatch(s: Sent): void {
    if (this.state === "closed") return s.reject(new StoreClosedError());
    // a cursor lives in one connection at one owner: its next page is asked there or nowhere
    if (s.bound !== undefined && (this.state !== "client" || this.link !== s.bound)) return s.reject(new OwnerLostError(s.op));
    if (this.state === "owner") {
      const store = this.store as Store;
      try {
        const fn = (store as unknown as Record<string, unknown>)[s.op];
        // a list cursor of the old owner does not survive a takeover by this process
        if (typeof fn !== "function") return s.reject(new OwnerLostError(s.op));
        Promise.resolve(fn.apply(store, s.args)).then(s.resolve, s.reject);
      } catch (err) {
        s.reject(err);
      }
      return;
    }
    if (this.state === "client" && this.link !== null && this.link.open) {
      try {
        this.link.call(s);
      } catch (err) {
        s.reject(err);
      }
      return;
    }
    this.enqueue(s);
  }

  /** One API call, wherever the owner is (`bound`: only on that link, see Sent). */
  private call<R>(op: string, args: unknown[], bound?: Link): Promise<R> {
    if (this.closing !== null) return Promise.reject(new StoreClosedError());
    return new Promise<R>((resolve, reject) => this.dispatch({ op, args, resolve: resolve as (v: unknown) => void, reject, ...(bound !== undefined ? { bound } : {}) }));
  }

  write(key: string, value: T.Value, options?: T.WriteOptions): Promise<T.WriteResult> {
    return this.call("write", [key, value, options]);
  }

  async read(key: string, options?: T.ReadOptions): Promise<T.ReadResult> {
    const r = await this.call<T.ReadResult>("read", [key, options]);
    // msgpackr decodes bytes as Buffer: hand back a plain Uint8Array, as the owner's read does.
    if (r.status === "OK" && typeof r.value !== "string" && Buffer.isBuffer(r.value)) r.value = new Uint8Array(r.value);
    return r;
  }

  /** Synchronous reads need the keydir in this process: only the owner has it. */
  readSync(key: string, options?: T.ReadOptions): T.ReadResult {
    if (this.state === "owner" && this.store !== null) return this.store.readSync(key, options);
    if (this.state === "closed") throw new StoreClosedError();
    throw new NotSupportedError("readSync needs the store in this process, and another process owns it: use await read()");
  }

  forget(key: string, options?: T.ScopeOption): Promise<T.ForgetResult> {
    return this.call("forget", [key, options]);
  }

  forgetScope(scope: string, options?: T.ForgetScopeOptions): Promise<T.ForgetScopeResult> {
    return this.call("forgetScope", [scope, options]);
  }

  undelete(key: string, options?: T.ScopeOption): Promise<T.UndeleteResult> {
    return this.call("undelete", [key, options]);
  }

  probe(key: string, options?: T.ScopeOption): Promise<T.ProbeResult> {
    return this.call("probe", [key, options]);
  }

  /**
   * Live keys in key order: the owner's iterator when owner, else pages of a cursor at the owner.
   * The iteration survives an owner change: when a page is lost with its owner (or the cursor's
   * connection is gone), the list is reopened at the next owner (or locally, if this process took
   * over) after the last key returned, keeping the caller's limit. Keys come in key order and none
   * twice; those after the change come from the new owner's state (docs/SHARING.md "list() across
   * a handover").
   */
  list(options?: T.ListOptions): AsyncIterable<T.ListEntry> {
    const self = this;
    const limit = typeof options?.limit === "number" ? options.limit : Number.POSITIVE_INFINITY;
    return (async function* () {
      let after: string | null = null;
      let yielded = 0;
      for (let reopens = 0; yielded < limit; reopens++) {
        // a reopen lists past `after` with no limit at the owner: the limit is counted here
        const opts: T.ListOptions | undefined = after === null ? options : withoutLimit(options);
        const from: string | null = after;
        const pass: AsyncGenerator<T.ListEntry, "done" | "lost"> = self.cursorPass<T.ListEntry>("listOpen", opts, from, (store) => keysAfter(store.list(opts), from));
        try {
          for (let r: IteratorResult<T.ListEntry, "done" | "lost"> = await pass.next(); ; r = await pass.next()) {
            if (r.done === true) {
              if (r.value === "done") return;
              break;
            }
            if (yielded >= limit) return;
            after = r.value.key;
            yielded += 1;
            yield r.value;
          }
        } finally {
          await pass.return("done"); // a caller that stops early (or the limit) closes the cursor at the owner
        }
        if (reopens + 1 >= LIST_REOPENS_MAX) throw new OwnerLostError("list");
      }
    })();
  }

  /**
   * Every slot of a subtree (export): the owner's iterator when owner, else pages of a cursor at
   * the owner. An export does not survive an owner change (its entries are slots of several
   * scopes, and a restart would repeat or skip some): it rejects with OwnerLostError.
   */
  exportEntries(options?: T.ScopeOption): AsyncIterable<T.ExportEntry> {
    const self = this;
    return (async function* () {
      const pass = self.cursorPass<T.ExportEntry>("exportOpen", options, null, (store) => store.exportEntries(options));
      try {
        for (let r = await pass.next(); ; r = await pass.next()) {
          if (r.done === true) {
            if (r.value === "done") return;
            throw new OwnerLostError("exportEntries");
          }
          yield r.value;
        }
      } finally {
        await pass.return("done"); // a caller that stops early closes the cursor at the owner
      }
    })();
  }

  /** Inspectors: scopes holding a slot (the owner's). */
  listScopes(): Promise<string[]> {
    return this.call("listScopes", []);
  }

  /** Inspectors: keys of every slot of exactly `scope` (the owner's). */
  listSlots(scope: string, limit: number): Promise<string[]> {
    return this.call("listSlots", [scope, limit]);
  }

  /** backup() runs at the owner, into `targetDir` (same user, same machine). */
  backup(targetDir: string): Promise<T.BackupReport> {
    return this.call("backup", [targetDir]);
  }

  /** raiseSequence() at the owner (import). */
  raiseSequence(floor: number): Promise<number> {
    return this.call("raiseSequence", [floor]);
  }

  /**
   * One pass of a cursor: the local iterator when this process owns, else pages of a cursor at
   * the owner (opened with `openOp` on `options` and `after`). Returns "done" at the end, or
   * "lost" when a page failed with OwnerLostError across an owner change (the caller may reopen);
   * any other error is thrown. An open lost across an owner change is tried again (up to
   * CURSOR_OPENS_MAX times) before any entry is yielded: where the store is now — in this
   * process when it took the store over while the open was queued (the open then finds no
   * cursor operation in its own store), else at the new owner.
   */
  private async *cursorPass<E>(openOp: string, options: unknown, after: string | null, local: (store: Store) => AsyncIterable<E>): AsyncGenerator<E, "done" | "lost"> {
    type Page = { cursor: number; entries: E[]; done: boolean };
    let opened: { page: Page; link: Link | null } | null = null;
    for (let opens = 1; opened === null; opens++) {
      if (this.state === "owner" && this.store !== null) {
        yield* local(this.store);
        return "done";
      }
      const epoch = this.epoch;
      try {
        const first = await this.call<Page>(openOp, after === null ? [options] : [options, after]);
        opened = { page: first, link: this.state === "client" ? this.link : null }; // the cursor lives in the connection that answered
      } catch (err) {
        if (!(err instanceof OwnerLostError) || this.epoch === epoch) throw err;
        if (opens >= CURSOR_OPENS_MAX || unsafeHandoverForTests.noReopenLostOpen) return "lost";
      }
    }
    const link = opened.link;
    let page = opened.page;
    let open = !page.done;
    try {
      for (;;) {
        yield* page.entries;
        if (page.done) return "done";
        if (link === null) return "lost";
        const before = this.epoch;
        try {
          page = await this.call<Page>("listNext", [page.cursor], link);
        } catch (err) {
          if (err instanceof OwnerLostError && (this.epoch !== before || link !== this.link)) {
            open = false;
            return "lost";
          }
          throw err;
        }
        open = !page.done;
      }
    } finally {
      if (open && link !== null && link === this.link && this.closing === null) await this.call("listClose", [page.cursor], link).catch(() => undefined);
    }
  }

  batch(ops: T.BatchOp[]): Promise<T.BatchResult[]> {
    return this.call("batch", [ops]);
  }

  async compact(options?: T.CompactOptions): Promise<T.CompactionReport> {
    const r = await this.call<T.CompactionReport>("compact", [options]);
    await this.refreshStats();
    return r;
  }

  async gc(): Promise<T.GcReport> {
    const r = await this.call<T.GcReport>("gc", []);
    await this.refreshStats();
    return r;
  }

  /**
   * The owner's stats. A client cannot ask synchronously: it returns the latest snapshot it has
   * (taken at attach, and after compact(), gc() and flush()), and asks for a fresh one in the
   * background — at most every STATS_REFRESH_MS — so a caller polling stats() sees figures at
   * most one poll behind.
   */
  stats(): T.StoreStats {
    if (this.state === "owner" && this.store !== null) return this.store.stats();
    if (this.snapshot === null) throw new StoreClosedError();
    if (this.state === "client" && !this.statsAsking && Date.now() - this.statsAskedAt >= STATS_REFRESH_MS) void this.refreshStats(false);
    return this.snapshot;
  }

  /** verify() at the owner; a client's onProgress is called once, at the end. */
  async verify(onProgress?: T.ProgressFn): Promise<T.VerifyReport> {
    if (this.state === "owner" && this.store !== null) return this.store.verify(onProgress);
    const r = await this.call<T.VerifyReport>("verify", []);
    onProgress?.(r.bytes, r.bytes);
    return r;
  }

  async flush(): Promise<void> {
    await this.call("flush", []);
    await this.refreshStats();
  }

  /** Asks the owner for its stats (`fresh`: not its shared cache; after compact, gc, flush). */
  private async refreshStats(fresh = true): Promise<void> {
    if (this.state !== "client" || this.closing !== null) return;
    this.statsAsking = true;
    this.statsAskedAt = Date.now();
    try {
      this.snapshot = await this.call<T.StoreStats>("stats", [fresh]);
    } catch {
      // keep the last snapshot: stats() is advice, and the call that asked already succeeded
    } finally {
      this.statsAsking = false;
    }
  }

  /**
   * Closes this handle; idempotent. An owner first answers every call it accepted, tells its
   * clients bye (one of them takes over), then closes its store. A client waits for its calls in
   * flight, then disconnects; calls still queued reject with StoreClosedError.
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    await this.acquiring?.catch(() => undefined);
    for (const q of this.queue.splice(0)) {
      clearTimeout(q.timer);
      q.reject(new StoreClosedError());
    }
    if (this.server !== null) await this.server.close();
    if (this.store !== null) await this.store.close();
    if (this.link !== null) await this.drainLink(this.link);
    this.state = "closed";
    this.link?.close();
    this.link = null;
    this.server = null;
    this.store = null;
    assert(this.queue.length === 0, "no call stays queued after close");
  }

  /** Waits (bounded by shareTimeoutMs) until the link has no call in flight. */
  private async drainLink(link: Link): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    while (link.inFlight > 0 && link.open && Date.now() < deadline) await sleep(2);
  }
}

/**
 * Test switch, never set by the engine or any option (test/share-list-handover.test.ts):
 * `noReopenLostOpen` gives up a list or export whose cursor open was cut by an owner change, as
 * before the fifty-fifth session (an export retried during a handover its process wins failed
 * with OWNER_LOST a second time).
 */
export const unsafeHandoverForTests = { noReopenLostOpen: false };
