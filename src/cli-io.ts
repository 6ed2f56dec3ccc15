/**
 * The CLI's own input and output: stdin read to its end without blocking reads (and no further
 * than a limit), stdout that a reader may close (`engram export | head -1`) or a full disk may
 * refuse, an output file that appears complete or not at all, and SIGINT / SIGTERM turned into an
 * AbortSignal that long commands check between batches and pending output writes obey.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { EngramError, ErrorCode, InvalidArgumentError } from "../rules/errors.js";

/**
 * Reads the whole of stdin as bytes, refusing (INVALID_ARGUMENT) once it passes `max` bytes
 * without reading the rest: memory stays bounded whatever is piped in. Asynchronous on purpose:
 * once process.stdin exists its pipe is non-blocking, and a synchronous read of an empty pipe
 * whose writer is still going fails with EAGAIN (`(sleep 1; echo v) | engram put k` used to fail
 * that way).
 */
export async function readStdinBytes(max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of process.stdin) {
    const b = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Buffer);
    bytes += b.length;
    if (bytes > max) {
      process.stdin.destroy();
      throw new InvalidArgumentError(`the value on stdin is more than ${max} bytes, more than any store accepts (valueBytesMax is at most ${max}); nothing was written`);
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks);
}

/** Writing the command's output failed (its reader closed it, or its disk is full): code IO_ERROR. */
export class OutputError extends EngramError {
  /** The system's error code name, such as "EPIPE" or "ENOSPC". */
  readonly errno: string;
  constructor(errno: string, where: string, what: string) {
    super(ErrorCode.IO_ERROR, `writing ${where} failed with ${errno}${errno === "EPIPE" ? " (its reader closed it)" : ""}; ${what}`);
    this.errno = errno;
  }
}

/** The system code of an error thrown by a stream or the file system ("EPIPE", "ENOSPC"...). */
export function errnoOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "EIO";
}

/**
 * Keeps a failing stdout from crashing the process: without an 'error' listener an EPIPE or
 * ENOSPC is an uncaught exception with a stack trace. A reader that closed the pipe
 * (`engram ls | head -1`) only ends the output; any other failure (a full disk under `> file`)
 * makes a command that would have exited 0 exit 2 with IO_ERROR, since its output is incomplete.
 * The commands that stream (export) also see the failure through their write callbacks.
 */
export function guardStdout(): void {
  let failed: string | null = null;
  process.stdout.on("error", (err) => {
    failed ??= errnoOf(err);
  });
  process.once("exit", (code) => {
    if (failed === null || failed === "EPIPE" || code !== 0) return;
    process.stderr.write(`engram: IO_ERROR: writing stdout failed with ${failed}; the output is incomplete: free space and run the command again\n`);
    process.exitCode = 2;
  });
}

/**
 * Writes `chunk` and resolves once the stream took it; rejects with the stream's error, or with
 * the interrupt when `stop` aborts first (a reader that stopped reading must not keep an
 * interrupted export waiting).
 */
export function writeChunk(out: NodeJS.WritableStream, chunk: string, stop?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: unknown): void => {
      out.removeListener("error", done);
      stop?.removeEventListener("abort", onAbort);
      if (err === undefined || err === null) resolve();
      else reject(err);
    };
    const onAbort = (): void => done(stop?.reason);
    out.once("error", done);
    stop?.addEventListener("abort", onAbort, { once: true });
    out.write(chunk, done);
  });
}

/**
 * A file written under a temporary name beside `target` and renamed onto it once complete and
 * synced, so that `target` never holds a partial file (a full disk, an interrupt, a crash leave
 * the old `target`, or none, and at most the temporary file).
 */
export class AtomicFile {
  readonly temp: string;
  readonly stream: fs.WriteStream;
  private constructor(readonly target: string) {
    this.temp = path.join(path.dirname(target), `.${path.basename(target)}.${randomUUID().slice(0, 8)}.engram-tmp`);
    this.stream = fs.createWriteStream(this.temp, { flags: "wx", mode: 0o600 });
  }

  /** Opens the temporary file of `target` (its directory must exist). */
  static async open(target: string): Promise<AtomicFile> {
    const f = new AtomicFile(target);
    await new Promise<void>((resolve, reject) => {
      f.stream.once("open", () => resolve());
      f.stream.once("error", reject);
    });
    return f;
  }

  /** Ends, syncs and renames the file onto its target, then syncs the directory. */
  async commit(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.stream.once("error", reject);
      this.stream.end(() => resolve());
    });
    const fd = fs.openSync(this.temp, "r");
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(this.temp, this.target);
    const dir = fs.openSync(path.dirname(this.target), "r");
    try {
      fs.fsyncSync(dir);
    } finally {
      fs.closeSync(dir);
    }
  }

  /** Removes the temporary file (after a failure or an interrupt); the target is untouched. */
  discard(): void {
    this.stream.destroy();
    fs.rmSync(this.temp, { force: true });
  }
}

/** Thrown by a long command that stopped at a SIGINT or SIGTERM; `detail` says what it left. */
export class Interrupted extends Error {
  constructor(
    readonly signal: NodeJS.Signals,
    detail?: string,
  ) {
    super(`interrupted by ${signal}${detail === undefined ? "" : `; ${detail}`}`);
  }
}

/** Exit code of a command stopped by `signal` (the shell's 128 + signal number). */
export function signalExit(signal: NodeJS.Signals): number {
  return signal === "SIGINT" ? 130 : 143;
}

/**
 * Turns SIGINT and SIGTERM into an aborted signal for the duration of `fn`: the command stops at
 * its next `stop.throwIfAborted()` or pending output write (the reason is an Interrupted) and
 * cleans up — closes the store, which releases the lock, and removes a temporary file. A second
 * signal exits at once.
 */
export async function interruptible<T>(fn: (stop: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(signalExit(signal));
    controller.abort(new Interrupted(signal));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  }
}
