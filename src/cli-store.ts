/**
 * How the CLI opens a store, prints results and turns failures into exit codes.
 */
import { randomUUID } from "node:crypto";
import { accessSync, constants as fsConstants, existsSync, lstatSync, mkdirSync, readlinkSync, rmdirSync, statSync } from "node:fs";
import * as path from "node:path";
import { EngramError } from "../rules/errors.js";
import { isPostgresUrl } from "../postgres/index.js";
import { readLockNote } from "../engine/lock.js";
import { alive, SHARE_TIMEOUT_MS_DEFAULT } from "../share/handle.js";
import { Engram } from "./engram.js";
import type { OpenOptions } from "./types.js";
import { hintFor } from "./cli-format.js";
import { faultsFromEnv } from "./cli-faults.js";
import { errnoOf, Interrupted, signalExit } from "./cli-io.js";
import { isWireError } from "./tools.js";
import type { WireResult } from "./tools.js";

/**
 * Exit codes: 0 ok; 1 usage (the command line, or a `--dir` that names no store) or an unexpected
 * failure; 2 an engram error, its code printed (INVALID_ARGUMENT for a refused argument value,
 * IO_ERROR when the disk or device failed, CORRUPTION for damage, ...); 3 key not found.
 */
export const EXIT = { OK: 0, USAGE: 1, ENGRAM: 2, NOT_FOUND: 3 } as const;

/** Options every store command receives (global `--dir`, `--json`, `--quiet`). */
export interface GlobalOptions {
  dir?: string;
  json?: boolean;
  /** `--quiet` / `-q`: no progress on stderr; results and errors still print. */
  quiet?: boolean;
}

/** A usage problem found by the CLI itself (exit 1). */
export class UsageError extends Error {}

/** The store directory (or postgres:// URL) from `--dir` or ENGRAM_DIR, or a UsageError. */
export function requireDir(opts: GlobalOptions): string {
  const dir = opts.dir ?? process.env["ENGRAM_DIR"];
  if (dir === undefined || dir === "") throw new UsageError("--dir DIR is required (or set ENGRAM_DIR)");
  return dir;
}

/**
 * Opens the store of `--dir`, shared (`share: true`): when an MCP server or another command holds
 * the directory, this one attaches to it instead of failing with STORE_LOCKED. With `mustExist`,
 * a missing directory is a usage error rather than a new empty store (so a typo in a read command
 * does not create one); without it, a `--dir` that cannot hold a store is the same usage error.
 */
export async function openStore(opts: GlobalOptions, mustExist: boolean, extra: OpenOptions = {}): Promise<Engram> {
  const dir = requireDir(opts);
  const options = withEnvFaults(extra); // a bad ENGRAM_FAULTS is refused before anything is opened
  if (!isPostgresUrl(dir)) {
    if (mustExist) requireStoreDir(dir);
    else requireStorableDir(dir);
    if (opts.quiet !== true) noticeIfCannotOwn(dir);
  }
  // Every command shares the directory (API.md "Sharing"): it attaches when an MCP server or another command holds it.
  return Engram.open(dir, isPostgresUrl(dir) ? options : { share: true, ...options });
}

/** Errnos of a directory this process may not write, where its shared open can only attach to an owner. */
const CANNOT_OWN_ERRNOS: ReadonlySet<string> = new Set(["EROFS", "EACCES", "EPERM"]);

/**
 * Says on stderr, before the shared open, when this process cannot write the store at `dir` (a
 * read-only mount, no permission) and no live owner serves it now: the open then waits its
 * shareTimeoutMs for a process that can write it to start serving, and would otherwise sit
 * silent for those 10 s before it fails (fifty-seventh session).
 */
function noticeIfCannotOwn(dir: string): void {
  if (!existsSync(path.join(dir, "segments"))) return; // a new store: requireStorableDir judged the place
  try {
    accessSync(dir, fsConstants.W_OK);
    return;
  } catch (err) {
    if (!CANNOT_OWN_ERRNOS.has(errnoOf(err))) return;
    const note = readLockNote(dir);
    if (note?.mode === "shared" && alive(note.pid)) return; // an owner serves it: the open attaches at once
    process.stderr.write(`engram: this process cannot write ${dir} (${errnoOf(err)}); waiting up to ${SHARE_TIMEOUT_MS_DEFAULT / 1000} s for a process that can to serve it\n`);
  }
}

/** `extra` with the `faults` of ENGRAM_FAULTS (for tests; docs/CLI-MCP.md), or `extra` itself when it is unset. */
export function withEnvFaults(extra: OpenOptions = {}): OpenOptions {
  const faults = faultsFromEnv();
  return faults === undefined ? extra : { ...extra, faults };
}

/**
 * Throws a UsageError (exit 1) unless `dir` is a store's directory: one with segments/ in it. Every
 * command that reads says the same of a missing path, a file and a directory that is no store —
 * verify too. An existing directory that is not a store is left untouched: opening would create
 * LOCK and segments/ in it.
 */
export function requireStoreDir(dir: string): void {
  const target = danglingTarget(dir);
  if (target !== null) throw new UsageError(`no store at ${dir}: it is a symbolic link to ${target}, which does not exist; point --dir at a store's directory`);
  if (!existsSync(dir)) throw new UsageError(`no store at ${dir} (nothing to read; \`engram put\` creates one)`);
  if (!statSync(dir).isDirectory()) throw new UsageError(`${dir} is a file, not an engram store; --dir names a store's directory`);
  if (!existsSync(path.join(dir, "segments"))) throw new UsageError(`${dir} is not an engram store (no segments/ in it); \`engram put\` creates one in an empty or new directory`);
}

/** What `dir` points at when it is a symbolic link whose target does not exist (a dangling link), else null. */
function danglingTarget(dir: string): string | null {
  try {
    return lstatSync(dir).isSymbolicLink() && !existsSync(dir) ? readlinkSync(dir) : null;
  } catch {
    return null; // no such path at all, or one we may not look at: the callers' other checks judge it
  }
}

/** System errors of a failing device, not of a bad path: the command goes on and reports them itself (IO_ERROR). */
const DEVICE_ERRNOS: ReadonlySet<string> = new Set(["ENOSPC", "EDQUOT", "EIO"]);

/**
 * Why `parent` cannot take a new directory ("it does not exist", "it is a file", "a directory
 * cannot be made in it: EROFS"), or null when it can. A directory made and removed there tells
 * (/proc, a read-only mount, no permission); a failing device answers null, for the command to
 * report as IO_ERROR.
 */
export function whyNoNewDirectory(parent: string): string | null {
  let isDir: boolean;
  try {
    isDir = statSync(parent).isDirectory();
  } catch (err) {
    return errnoOf(err) === "ENOENT" ? "it does not exist" : errnoOf(err);
  }
  if (!isDir) return "it is a file";
  const probe = path.join(parent, `.engram-probe-${randomUUID().slice(0, 8)}`);
  try {
    mkdirSync(probe, { mode: 0o700 }); // not recursive: node 20's recursive mkdir spins for ever under /proc
  } catch (err) {
    return DEVICE_ERRNOS.has(errnoOf(err)) ? null : `a directory cannot be made in it: ${errnoOf(err)}`;
  }
  rmdirSync(probe);
  return null;
}

/** The nearest path at or above `dir` that exists (the store's open makes the missing ones). */
function nearestExisting(dir: string): string {
  let at = path.resolve(dir);
  while (!existsSync(at) && path.dirname(at) !== at) at = path.dirname(at);
  return at;
}

/**
 * Throws a UsageError (exit 1), as requireStoreDir does for a read, unless a command that may
 * create a store (put, import, mcp) can open one at `dir`: a store's directory, or a directory (or
 * a new path) where one can be made. A plain file, a path under one, a symbolic link to nothing
 * and a place that takes no new directory (/proc, a read-only mount) are refused before the open,
 * which would call them INVALID_ARGUMENT (exit 2), IO_ERROR (an existing directory such as /proc)
 * or, for the link, print the system's ENOENT.
 */
export function requireStorableDir(dir: string): void {
  const what = "give --dir a store's directory, or a new or empty directory in a place you can write to";
  // A link to nothing: the open's mkdir would meet the link itself (EEXIST), and following it to make its target is a guess.
  const target = danglingTarget(dir);
  if (target !== null) throw new UsageError(`cannot make a store at ${dir}: it is a symbolic link to ${target}, which does not exist; make ${target} a directory, or ${what}`);
  const at = nearestExisting(dir);
  if (at === path.resolve(dir)) {
    if (!statSync(at).isDirectory()) throw new UsageError(`${dir} is a file, not an engram store; ${what}`);
    if (existsSync(path.join(at, "segments"))) return; // a store (or one being made): the open decides
  }
  const why = whyNoNewDirectory(at);
  if (why !== null) throw new UsageError(`cannot make a store at ${dir}: ${at} is not a writable directory (${why}); ${what}`);
}

/** Opens the store, runs `fn`, and always closes the store afterwards. */
export async function withStore<T>(
  opts: GlobalOptions,
  mustExist: boolean,
  fn: (store: Engram) => Promise<T>,
  extra: OpenOptions = {},
): Promise<T> {
  const store = await openStore(opts, mustExist, extra);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** Prints a JSON document on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints an error code, message and hint (stderr, or a wire error on stdout with --json); returns the exit code. */
export function reportError(code: string, message: string, json: boolean): number {
  if (json) {
    printJson({ ok: false, error: code, message });
  } else {
    process.stderr.write(`engram: ${code}: ${message}\n`);
    const hint = hintFor(code, message);
    if (hint !== "") process.stderr.write(`hint: ${hint}\n`);
  }
  return EXIT.ENGRAM;
}

/**
 * Maps any thrown value to printed output and an exit code: an engram error exits 2, an interrupt
 * 130 (SIGINT) or 143 (SIGTERM) as a shell reports a killed command, anything else 1.
 */
export function reportFailure(err: unknown, json: boolean): number {
  if (err instanceof EngramError) return reportError(err.code, err.message, json);
  if (err instanceof Interrupted) {
    if (json) printJson({ ok: false, error: "INTERRUPTED", message: err.message });
    else process.stderr.write(`engram: ${err.message}\n`);
    return signalExit(err.signal);
  }
  const message = err instanceof Error ? err.message : String(err);
  if (json) printJson({ ok: false, error: err instanceof UsageError ? "USAGE" : "INTERNAL", message });
  else process.stderr.write(`engram: ${message}\n`);
  return EXIT.USAGE;
}

/** Prints a wire error result and returns its exit code, or null when `wire` is not an error. */
export function reportWireError(wire: WireResult, json: boolean): number | null {
  if (!isWireError(wire)) return null;
  if (!json) return reportError(wire.error, wire.message, false);
  printJson(wire); // with its details (expected / actual, tombstone_seq, ...)
  return EXIT.ENGRAM;
}
