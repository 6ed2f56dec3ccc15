/**
 * The directory lock: an exclusive, non-blocking flock on DIR/LOCK, held while the store is open.
 * A second open — in this process or another — gets EAGAIN and becomes StoreLockedError.
 *
 * The holder writes a one-line note into DIR/LOCK right after taking the lock: whether it opened
 * exclusively or shares the store (and then where its socket is). The note is only advice for
 * the error message and for sharing clients looking for the socket — the flock alone decides who
 * holds the store; a note left by a dead holder is overwritten by the next one.
 *
 * This is the only module that loads fs-ext, a native addon that must stay on the main thread
 * (STACK.md trap 2): nothing a compaction worker imports may import this file.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { StoreLockedError } from "../rules/errors.js";
import { FILE_MODE } from "../segments/file-names.js";

interface FsExt {
  flockSync(fd: number, flags: "exnb" | "un"): void;
}
const require = createRequire(import.meta.url);
let fsExt: FsExt | null = null;

/** fs-ext, loaded on first use (main thread only: STACK.md trap 2). */
function loadFsExt(): FsExt {
  fsExt ??= require("fs-ext") as FsExt;
  return fsExt;
}

/** Who holds a directory, as its holder wrote it into DIR/LOCK. */
export interface LockNote {
  mode: "exclusive" | "shared";
  pid: number;
  /** The sharing owner's socket path. */
  socket?: string;
}

/** Most bytes of a lock note read back (a note is one short JSON line). */
const NOTE_BYTES_MAX = 4096;

/** A held directory lock; release() unlocks and closes it (idempotent). */
export interface DirLock {
  release(): void;
}

/** Reads the note in DIR/LOCK; null when absent or unreadable (it is advice, never trusted for safety). */
export function readLockNote(dir: string): LockNote | null {
  try {
    const fd = fs.openSync(path.join(dir, "LOCK"), "r");
    try {
      const buf = Buffer.alloc(NOTE_BYTES_MAX);
      const n = fs.readSync(fd, buf, 0, NOTE_BYTES_MAX, 0);
      const note = JSON.parse(buf.subarray(0, n).toString("utf8")) as Partial<LockNote>;
      if ((note.mode !== "exclusive" && note.mode !== "shared") || typeof note.pid !== "number") return null;
      return { mode: note.mode, pid: note.pid, ...(typeof note.socket === "string" ? { socket: note.socket } : {}) };
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
}

/** The StoreLockedError for `dir`, saying who holds it when the note tells. */
function lockedError(dir: string): StoreLockedError {
  const note = readLockNote(dir);
  if (note === null) return new StoreLockedError(dir);
  if (note.mode === "shared") return new StoreLockedError(dir, `shared by its owner, pid ${note.pid}: open it with share: true to attach`);
  return new StoreLockedError(dir, `opened exclusively by pid ${note.pid}: close that handle first, or have every opener use share: true`);
}

/**
 * Takes the exclusive lock of `dir`, or throws StoreLockedError when someone holds it; then
 * records `note` (default: exclusive, this pid) in DIR/LOCK.
 */
export function lockDirectory(dir: string, note: LockNote = { mode: "exclusive", pid: process.pid }): DirLock {
  const fd = fs.openSync(path.join(dir, "LOCK"), "a+", FILE_MODE);
  try {
    loadFsExt().flockSync(fd, "exnb");
  } catch (err) {
    fs.closeSync(fd);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EAGAIN" || code === "EWOULDBLOCK") throw lockedError(dir);
    throw err;
  }
  try {
    fs.ftruncateSync(fd, 0);
    fs.writeSync(fd, `${JSON.stringify(note)}\n`);
  } catch {
    // The note is advice only: a read-only LOCK file must not stop an open that holds the lock.
  }
  let held = true;
  return {
    release(): void {
      if (!held) return;
      held = false;
      try {
        try {
          fs.ftruncateSync(fd, 0); // the note describes a holder: there is none after this
        } catch {
          // advice only (see lockDirectory)
        }
        loadFsExt().flockSync(fd, "un");
      } finally {
        fs.closeSync(fd);
      }
    },
  };
}
