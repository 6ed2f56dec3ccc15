/**
 * Errors across the worker boundary. A structured clone keeps only an Error's message, so a
 * CorruptionError thrown in a compaction worker would arrive as a plain Error with no `code`,
 * `segment` or `errno` (issue 9, defect 8). The worker returns a plain description instead, and
 * the main thread rebuilds the same class. Every error that leaves the store is an EngramError:
 * anything else that comes back becomes an InternalError.
 * This file imports nothing from fs-ext: workers load it.
 */
import { CorruptionError, EngramError, InternalError, IoError, LimitExceededError } from "../rules/errors.js";

/** An error as plain data. */
export interface WireError {
  name: string;
  code: string;
  message: string;
  errno?: string;
  segment?: number;
  offset?: number;
}

/** A task result that is an error instead. */
export interface FailedTask {
  failed: WireError;
}

/** True when a worker's answer is an error. */
export function isFailedTask(x: unknown): x is FailedTask {
  return typeof x === "object" && x !== null && "failed" in x;
}

/** Describes `err` so that `reviveError` can rebuild it on the other side. */
export function toWire(err: unknown): WireError {
  if (err instanceof EngramError) {
    const e = err as EngramError & { errno?: string; segment?: number; offset?: number };
    return { name: e.name, code: e.code, message: e.message, errno: e.errno, segment: e.segment, offset: e.offset };
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return { name: "Error", code: "", message };
}

/** Rebuilds the EngramError `toWire` described (same class, code, fields and message). */
export function reviveError(w: WireError): EngramError {
  let e: EngramError;
  if (w.name === "CorruptionError") e = new CorruptionError(w.segment ?? 0, w.offset ?? 0, "");
  else if (w.name === "IoError") e = new IoError(w.errno ?? "EIO", "");
  else if (w.name === "LimitExceededError") e = new LimitExceededError("");
  else return new InternalError(`compaction worker: ${w.message}`);
  e.message = w.message;
  return e;
}
