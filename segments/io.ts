/**
 * Every system call of engine/ and segments/ that changes the file system goes through here:
 * open for writing, write/writev, ftruncate, fdatasync/fsync, rename, link, copy, mkdir, unlink,
 * directory fsync and close (backup.ts's calls too, since the twentieth session: before, a full
 * backup volume came back as a bare Node error, not an IoError). Each call names its fault
 * point, so that one place can (a) make it fail as the file system would (`failAt`: EIO or
 * ENOSPC, on any thread, through the shared fault table of engine/faults.ts), (b) turn a failed
 * call into an IoError that names the errno, the operation and the file, and (c) report each
 * successful call to a test observer (the power-loss harness).
 *
 * Fault tables are found by directory: a store (or a compaction worker) registers its segments
 * directory; a path-based call looks up its own directory, an fd-based call the directory of the
 * path the fd was opened on (this module keeps that map; it never holds data).
 * Each call catches its own system call's error inline (a try/catch in the function itself, no
 * closure per call: a closure around every pwritev cost 2–3 µs on the write path).
 * Reads of the bytes a store holds — a record or block a read serves, a compaction's source, the
 * scans of recovery, a journal — come here too (readAt, fault point `io:read`, since the
 * forty-seventh session): a read changes nothing, but one that fails must reach the caller as an
 * IoError, never as a bare Node error nor as a short read taken for the file's end. Headers, hint
 * files and the LOCK note are read elsewhere: a hint that cannot be read is one that is missing.
 * This file imports nothing from fs-ext: workers load it.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { assert } from "../rules/assert.js";
import { EngramError, IoError } from "../rules/errors.js";
import { crashIfIoArmed, takeFailure } from "./io-faults.js";
import type { FaultPoint } from "../rules/types.js";

const writevAsync = promisify(fs.writev);
const fdatasyncAsync = promisify(fs.fdatasync);

/** One successful state-changing call, as the observer sees it. */
export type IoEvent =
  | { op: "open"; fd: number; path: string; flags: string }
  | { op: "write"; fd: number; path: string; offset: number; data: readonly Uint8Array[]; bytes: number }
  | { op: "truncate"; fd: number; path: string; bytes: number }
  | { op: "sync"; fd: number; path: string }
  | { op: "rename"; path: string; to: string }
  | { op: "link"; path: string; to: string }
  | { op: "copy"; path: string; to: string }
  | { op: "mkdir"; path: string }
  | { op: "unlink"; path: string }
  | { op: "rmdir"; path: string }
  | { op: "dir-sync"; path: string }
  | { op: "close"; fd: number; path: string };

/** Receives every successful call (synchronously, before the call returns); tests only. */
export type IoObserver = (event: IoEvent) => void;

let observer: IoObserver | null = null;
const faultTables = new Map<string, SharedArrayBuffer>();
const fdPaths = new Map<number, string>();

/** Installs (or with null removes) the observer of this thread. */
export function setIoObserver(next: IoObserver | null): void {
  observer = next;
}

/** Routes injected failures of files in `dir` to `buffer` (null unregisters). */
export function registerFaultTable(dir: string, buffer: SharedArrayBuffer | null): void {
  const key = path.resolve(dir);
  if (buffer === null) faultTables.delete(key);
  else faultTables.set(key, buffer);
}

/** The path an fd of this module was opened on ("" when unknown). */
export function pathOfFd(fd: number): string {
  return fdPaths.get(fd) ?? "";
}

/** The fault table registered for `file`'s directory (or for the file itself), if any. */
function tableFor(file: string): SharedArrayBuffer | null {
  if (faultTables.size === 0) return null;
  const abs = path.resolve(file);
  return faultTables.get(abs) ?? faultTables.get(path.dirname(abs)) ?? null;
}

/** Crashes the process if `point` is the armed crash point for `file`; else throws the injected failure armed there, if any. */
function inject(point: FaultPoint, file: string, operation: string): void {
  const table = tableFor(file);
  crashIfIoArmed(table, point);
  const errno = takeFailure(table, point);
  if (errno !== null) throw new IoError(errno, operation, `${file}, injected at ${point}`);
}

/** An error of a system call as an IoError; EngramErrors and programming errors pass through. */
export function asIoError(err: unknown, operation: string, file: string): unknown {
  if (err instanceof EngramError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && /^E[A-Z0-9]+$/.test(code)) return new IoError(code, operation, file);
  return err;
}

/** open(2) for writing (or for reading a file this store may change); returns the fd. */
export function openFile(point: FaultPoint, file: string, flags: string, mode?: number): number {
  inject(point, file, `open ${flags}`);
  let fd: number;
  try {
    fd = fs.openSync(file, flags, mode);
  } catch (err) {
    throw asIoError(err, `open ${flags}`, file);
  }
  fdPaths.set(fd, file);
  observer?.({ op: "open", fd, path: file, flags });
  return fd;
}

/**
 * open(2) read-only of a file whose bytes the store reads (a compaction's source or journal, a
 * published output): a failure is an IoError. Not injected: `io:read` fails the reads that follow,
 * where a failure lands in the middle of the work (a pass's output already begun).
 */
export function openRead(file: string): number {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (err) {
    throw asIoError(err, "open r", file);
  }
  fdPaths.set(fd, file); // the observer sees state changes only: a read-only open is none
  return fd;
}

/** close(2). Never injected: a store must always be able to let go of a file. */
export function closeFile(fd: number): void {
  const file = pathOfFd(fd);
  fdPaths.delete(fd);
  try {
    fs.closeSync(fd);
  } catch (err) {
    throw asIoError(err, "close", file);
  }
  observer?.({ op: "close", fd, path: file });
}

/** Closes `fd` and swallows any error: for cleanup after another failure, which is what gets reported. */
export function closeQuietly(fd: number): void {
  try {
    closeFile(fd);
  } catch {
    // the first failure is the one the caller reports
  }
}

/** Descriptors closed in the background whose close(2) has not returned yet, and who waits for them. */
let closesPending = 0;
let closesSettled: Array<() => void> = [];

/**
 * close(2) on libuv's pool, for a descriptor no one uses any more (the caller forgets it now): the
 * last close of an unlinked file frees its blocks — 1.6–4.5 ms each on the ext4 (mounted with
 * discard) measured, docs/performance-history.md, twelfth session — which a compaction's publication
 * would otherwise pay on the main thread, once per retired source. The number is not reused
 * before the kernel has closed it. A failure is ignored, as closeQuietly does; backgroundCloses()
 * waits for every close started.
 */
export function closeInBackground(fd: number): void {
  const file = pathOfFd(fd);
  fdPaths.delete(fd);
  closesPending += 1;
  fs.close(fd, () => {
    closesPending -= 1;
    assert(closesPending >= 0, "background closes are counted once each");
    if (closesPending > 0) return;
    const waiting = closesSettled;
    closesSettled = [];
    for (const resolve of waiting) resolve();
  });
  observer?.({ op: "close", fd, path: file });
}

/** Resolves on the event loop's next turn, after the I/O callbacks due: a call issued before it has reached the thread pool. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Resolves once no background close is pending — every one called so far has returned, and any started meanwhile (store close waits: no descriptor of it outlives it). */
export function backgroundCloses(): Promise<void> {
  if (closesPending === 0) return Promise.resolve();
  return new Promise((resolve) => closesSettled.push(resolve));
}

/** Total bytes of `buffers`. */
function sum(buffers: readonly Uint8Array[]): number {
  let n = 0;
  for (let i = 0; i < buffers.length; i++) n += (buffers[i] as Uint8Array).byteLength; // indexed: a cold for-of costs an iterator per call (segments/writer.ts totalBytes)
  return n;
}

/** Writes every byte of `buffers` contiguously at `offset` (pwritev, repeated after a short write). */
export function writeAllSync(point: FaultPoint, fd: number, buffers: readonly Uint8Array[], offset: number): void {
  const file = pathOfFd(fd);
  inject(point, file, "write");
  const want = sum(buffers);
  try {
    let done = fs.writevSync(fd, buffers as Uint8Array[], offset);
    if (done < want) {
      const all = Buffer.concat(buffers as Uint8Array[]);
      while (done < want) done += fs.writevSync(fd, [all.subarray(done)], offset + done);
    }
  } catch (err) {
    throw asIoError(err, "write", file);
  }
  observer?.({ op: "write", fd, path: file, offset, data: buffers, bytes: want });
}

/** writeAllSync through libuv's thread pool. */
export async function writeAll(point: FaultPoint, fd: number, buffers: readonly Uint8Array[], offset: number): Promise<void> {
  const file = pathOfFd(fd);
  inject(point, file, "write");
  const want = sum(buffers);
  try {
    let done = (await writevAsync(fd, buffers as Uint8Array[], offset)).bytesWritten;
    if (done < want) {
      const all = Buffer.concat(buffers as Uint8Array[]);
      while (done < want) done += (await writevAsync(fd, [all.subarray(done)], offset + done)).bytesWritten;
    }
  } catch (err) {
    throw asIoError(err, "write", file);
  }
  observer?.({ op: "write", fd, path: file, offset, data: buffers, bytes: want });
}

/**
 * pread(2) of up to `length` bytes at file offset `position` into `buf` from `offset`: returns the
 * bytes read (fewer only at the file's end). Fault point `io:read`; a failure is an IoError naming
 * the file. The fault table is looked up only while some store has one (a read is on the hot path).
 */
export function readAt(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
  if (faultTables.size !== 0) inject("io:read", pathOfFd(fd), "read");
  try {
    return fs.readSync(fd, buf, offset, length, position);
  } catch (err) {
    throw asIoError(err, "read", pathOfFd(fd));
  }
}

/** ftruncate(2) to `bytes`. */
export function truncate(point: FaultPoint, fd: number, bytes: number): void {
  const file = pathOfFd(fd);
  inject(point, file, "ftruncate");
  try {
    fs.ftruncateSync(fd, bytes);
  } catch (err) {
    throw asIoError(err, "ftruncate", file);
  }
  observer?.({ op: "truncate", fd, path: file, bytes });
}

/** fdatasync(2): everything written to `fd` before the call is durable when it returns. */
export function datasyncSync(point: FaultPoint, fd: number): void {
  const file = pathOfFd(fd);
  inject(point, file, "fdatasync");
  try {
    fs.fdatasyncSync(fd);
  } catch (err) {
    throw asIoError(err, "fdatasync", file);
  }
  observer?.({ op: "sync", fd, path: file });
}

/** fdatasync(2) through libuv's thread pool. */
export async function datasync(point: FaultPoint, fd: number): Promise<void> {
  const file = pathOfFd(fd);
  inject(point, file, "fdatasync");
  try {
    await fdatasyncAsync(fd);
  } catch (err) {
    throw asIoError(err, "fdatasync", file);
  }
  observer?.({ op: "sync", fd, path: file });
}

/** rename(2); durable only after the directory is synced. */
export function rename(point: FaultPoint, from: string, to: string): void {
  inject(point, from, "rename");
  try {
    fs.renameSync(from, to);
  } catch (err) {
    throw asIoError(err, "rename", from);
  }
  for (const [fd, p] of fdPaths) if (p === from) fdPaths.set(fd, to);
  observer?.({ op: "rename", path: from, to });
}

/** link(2): a second name `to` for the file `from`. Durable only after the directory is synced. */
export function link(point: FaultPoint, from: string, to: string): void {
  inject(point, to, "link");
  try {
    fs.linkSync(from, to);
  } catch (err) {
    throw asIoError(err, "link", to);
  }
  observer?.({ op: "link", path: from, to });
}

/** Copies the whole of `from` into a new file `to` (which must not exist; the kernel copies). Not durable until `to` is fsynced. */
export function copyFile(point: FaultPoint, from: string, to: string): void {
  inject(point, to, "copy");
  try {
    fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL);
  } catch (err) {
    throw asIoError(err, "copy", to);
  }
  observer?.({ op: "copy", path: from, to });
}

/**
 * mkdir(2) of `dir` and of each missing parent, one level at a time, with `mode`. Not node's
 * `mkdirSync(dir, { recursive: true })`: on Node 20 that loops for ever, at full CPU, where a
 * parent exists but refuses children with ENOENT (a path under /proc). Durable only after each
 * parent is synced.
 */
export function makeDir(point: FaultPoint, dir: string, mode: number): void {
  const missing: string[] = [];
  for (let d = path.resolve(dir); !fs.existsSync(d) && path.dirname(d) !== d; d = path.dirname(d)) missing.push(d); // ends at "/": a path has finitely many parents
  for (const d of missing.reverse()) {
    inject(point, d, "mkdir");
    try {
      fs.mkdirSync(d, { mode });
    } catch (err) {
      if ((err as { code?: unknown }).code !== "EEXIST") throw asIoError(err, "mkdir", d);
      continue; // made meanwhile by another opener: not this call's, so not observed
    }
    observer?.({ op: "mkdir", path: d });
  }
}

/** unlink(2); a missing file is not an error. Durable only after the directory is synced. */
export function unlink(point: FaultPoint, file: string): void {
  inject(point, file, "unlink");
  try {
    fs.rmSync(file, { force: true });
  } catch (err) {
    throw asIoError(err, "unlink", file);
  }
  observer?.({ op: "unlink", path: file });
}

/** rmdir(2) of an empty directory; a missing one is not an error. Durable only after its parent is synced. */
export function removeDir(point: FaultPoint, dir: string): void {
  inject(point, dir, "rmdir");
  try {
    fs.rmdirSync(dir);
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return; // gone already: nothing removed, so not observed
    throw asIoError(err, "rmdir", dir);
  }
  observer?.({ op: "rmdir", path: dir });
}

/** fsyncs a directory so that creates, renames and unlinks in it are durable. */
export function syncDir(point: FaultPoint, dir: string): void {
  inject(point, dir, "directory fsync");
  try {
    const fd = fs.openSync(dir, "r");
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (err) {
    throw asIoError(err, "directory fsync", dir);
  }
  observer?.({ op: "dir-sync", path: dir });
}

/** syncDir with the fsync on libuv's pool (the directory is opened and closed there too). */
export async function syncDirAsync(point: FaultPoint, dir: string): Promise<void> {
  inject(point, dir, "directory fsync");
  try {
    const handle = await fs.promises.open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    throw asIoError(err, "directory fsync", dir);
  }
  observer?.({ op: "dir-sync", path: dir });
}

/** fsyncs a directory so that creates, renames and unlinks in it are durable. */
export function fsyncDir(dir: string): void {
  syncDir("io:dir-sync", dir);
}

/** Removes a file and ignores any error: cleanup after another failure, which is what gets reported. */
export function unlinkQuietly(file: string): void {
  try {
    unlink("io:unlink", file);
  } catch {
    // the first failure is the one the caller reports
  }
}

/** `bytes` as the list of buffers writeAllSync takes (a file given in parts is written with one writev). */
function partsOf(bytes: Uint8Array | readonly Uint8Array[]): readonly Uint8Array[] {
  return bytes instanceof Uint8Array ? [bytes] : bytes;
}

/**
 * Writes `bytes` (one buffer, or the file's parts in order) as the whole of `file` (created or
 * truncated, with `mode`) and fdatasyncs it; the fd is closed either way. Durable content, not yet
 * a durable name: see replaceFileDurably.
 */
export function writeFileSynced(point: FaultPoint, file: string, bytes: Uint8Array | readonly Uint8Array[], mode: number): void {
  const fd = openFile(point, file, "w", mode);
  try {
    writeAllSync(point, fd, partsOf(bytes), 0);
    datasyncSync(point, fd);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * writeFileSynced with the fdatasync on libuv's pool (the calling thread runs meanwhile). The open
 * and the write (a copy into the page cache) are made in the call's synchronous part, so that the
 * sync starts at once: through the pool as well, the sync waited until the calling thread, busy
 * with other work, saw the write complete. The fd is closed either way.
 */
export async function writeFileSyncedAsync(point: FaultPoint, file: string, bytes: Uint8Array | readonly Uint8Array[], mode: number): Promise<void> {
  const fd = openFile(point, file, "w", mode);
  try {
    writeAllSync(point, fd, partsOf(bytes), 0);
    await datasync(point, fd);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * Replaces `file` with `bytes` in the durability order: `${file}.tmp` written and fdatasynced,
 * renamed over `file`, the directory fsynced. Throws IoError at the step that failed (the .tmp
 * may remain: recovery removes *.tmp); `file` is then either the old content or the new.
 */
export function replaceFileDurably(point: FaultPoint, file: string, bytes: Uint8Array | readonly Uint8Array[], mode: number): void {
  const tmp = `${file}.tmp`;
  writeFileSynced(point, tmp, bytes, mode);
  rename(point, tmp, file);
  syncDir(point, path.dirname(file));
}

/**
 * replaceFileDurably with the temporary file's write (the copy into the page cache), its
 * fdatasync and the directory fsync on libuv's pool: the calling thread only opens, closes and
 * renames. The same order, the same IoErrors at the step that failed. `tmp` names the temporary
 * file (it must end in ".tmp": recovery deletes every *.tmp). `bytes` must not change until it
 * resolves.
 */
export async function replaceFileDurablyAsync(point: FaultPoint, file: string, tmp: string, bytes: Uint8Array | readonly Uint8Array[], mode: number): Promise<void> {
  assert(tmp.endsWith(".tmp") && tmp !== file, "a temporary file's name ends in .tmp");
  const fd = openFile(point, tmp, "w", mode);
  try {
    await writeAll(point, fd, partsOf(bytes), 0);
    await datasync(point, fd);
  } finally {
    closeQuietly(fd);
  }
  rename(point, tmp, file);
  await syncDirAsync(point, path.dirname(file));
}
