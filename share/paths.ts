/**
 * Where a shared store's socket lives. Preferably DIR/engram.sock, inside the 0700 store
 * directory. A Unix socket name is at most 107 bytes on Linux (sun_path), so a longer store path
 * puts the socket in a private per-user runtime directory ($XDG_RUNTIME_DIR/engram, or
 * TMPDIR/engram-<uid>, created 0700 and checked to be ours) under a name derived from the
 * store's real path; the owner also records the socket path in DIR/LOCK (the pointer), which
 * clients read first.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { InvalidArgumentError } from "../rules/errors.js";
import { makeDir } from "../segments/io.js";

/** Longest socket path, in bytes, that every supported platform accepts (macOS: 103). */
export const SOCKET_PATH_BYTES_MAX = 100;
/** The socket's name inside the store directory. */
export const SOCKET_NAME = "engram.sock";

/** The uid of this process (-1 where the platform has none). */
export function myUid(): number {
  return typeof process.getuid === "function" ? process.getuid() : -1;
}

/** The socket path for the store in `dir` (which exists); creates the runtime directory if needed. */
export function socketPathFor(dir: string): string {
  const inStore = path.join(path.resolve(dir), SOCKET_NAME);
  if (Buffer.byteLength(inStore) <= SOCKET_PATH_BYTES_MAX) return inStore;
  const real = fs.realpathSync(dir);
  const name = `${createHash("sha256").update(real).digest("hex").slice(0, 24)}.sock`;
  const runtime = privateRuntimeDir();
  const p = path.join(runtime, name);
  if (Buffer.byteLength(p) > SOCKET_PATH_BYTES_MAX) {
    throw new InvalidArgumentError(`no short enough socket path for ${dir}: set XDG_RUNTIME_DIR or TMPDIR to a shorter directory`);
  }
  return p;
}

/** A 0700 directory of this user for sockets; refuses one that another user owns or can enter. */
export function privateRuntimeDir(): string {
  const xdg = process.env["XDG_RUNTIME_DIR"];
  const base = xdg !== undefined && xdg !== "" ? path.join(xdg, "engram") : path.join(os.tmpdir(), `engram-${myUid()}`);
  makeDir("io:create", base, 0o700); // one level at a time: node 20's recursive mkdir spins for ever where a parent refuses children (/proc)
  checkPrivateDir(base);
  return base;
}

/** Throws unless `dir` is a real directory owned by this user with no group/other access. */
export function checkPrivateDir(dir: string): void {
  const st = fs.lstatSync(dir);
  const uid = myUid();
  if (!st.isDirectory()) throw new InvalidArgumentError(`${dir} must be a directory (not a link) to hold a shared store's socket`);
  if (uid >= 0 && st.uid !== uid) throw new InvalidArgumentError(`${dir} belongs to uid ${st.uid}, not to this user (${uid}); refusing to share through it`);
  if ((st.mode & 0o077) !== 0) throw new InvalidArgumentError(`${dir} is reachable by other users (mode ${(st.mode & 0o777).toString(8)}); chmod 700 it to share the store`);
}

/**
 * Throws unless `socket` is a Unix socket owned by this user: a client refuses to send its calls
 * to a socket that someone else planted.
 */
export function checkSocketOwner(socket: string): void {
  const st = fs.lstatSync(socket);
  const uid = myUid();
  if (!st.isSocket()) throw new InvalidArgumentError(`${socket} is not a socket`);
  if (uid >= 0 && st.uid !== uid) throw new InvalidArgumentError(`socket ${socket} belongs to uid ${st.uid}, not to this user; refusing to connect`);
}

/**
 * Throws unless this user owns `dir`: a sharing owner serves only from its own directory (its
 * mode is the engine's 0700 when engram created it; the socket itself is 0600 either way).
 */
export function checkOwnDir(dir: string): void {
  const st = fs.statSync(dir);
  const uid = myUid();
  if (uid >= 0 && st.uid !== uid) throw new InvalidArgumentError(`${dir} belongs to uid ${st.uid}, not to this user (${uid}); refusing to share it`);
}
