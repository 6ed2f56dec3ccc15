/**
 * The directory lock: an exclusive, non-blocking flock on DIR/LOCK, held while the store is open.
 * A second open — in this process or another — gets EAGAIN and becomes StoreLockedError.
 *
 * This is the only module that loads fs-ext, a native addon that must stay on the main thread
 * (STACK.md trap 2): nothing a compaction worker imports may import this file.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { StoreLockedError } from "../rules/errors.js";
import { FILE_MODE } from "../segments/file.js";

interface FsExt {
  flockSync(fd: number, flags: "exnb" | "un"): void;
}
const require = createRequire(import.meta.url);
let fsExt: FsExt | null = null;

function loadFsExt(): FsExt {
  fsExt ??= require("fs-ext") as FsExt;
  return fsExt;
}

/** A held directory lock; release() unlocks and closes it (idempotent). */
export interface DirLock {
  release(): void;
}

/** Takes the exclusive lock of `dir`, or throws StoreLockedError when someone holds it. */
export function lockDirectory(dir: string): DirLock {
  const fd = fs.openSync(path.join(dir, "LOCK"), "a+", FILE_MODE);
  try {
    loadFsExt().flockSync(fd, "exnb");
  } catch (err) {
    fs.closeSync(fd);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EAGAIN" || code === "EWOULDBLOCK") throw new StoreLockedError(dir);
    throw err;
  }
  let held = true;
  return {
    release(): void {
      if (!held) return;
      held = false;
      try {
        loadFsExt().flockSync(fd, "un");
      } finally {
        fs.closeSync(fd);
      }
    },
  };
}
