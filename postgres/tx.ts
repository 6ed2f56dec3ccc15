/**
 * Transactions: every mutation runs in one SERIALIZABLE transaction, retried on SQLSTATE 40001
 * (serialization failure, CockroachDB's ordinary answer to contention) and 40P01 (deadlock) with
 * jittered exponential backoff, a bounded number of times; after the last try the call rejects
 * with a clear IoError and nothing of it is committed. Errors of the connection or the server map
 * to IoError with the SQLSTATE or errno as `errno`; an EngramError thrown by the body (a version
 * conflict, a bad argument) rolls back and passes through unchanged.
 */
import type { Pool, PoolClient } from "pg";
import { EngramError, InternalError, IoError } from "../rules/errors.js";

/**
 * Most attempts of one transaction before giving up. Every mutation of a store takes the one
 * sequence row, so k concurrent writers each win a round with odds near 1/k: 200 attempts keep
 * the chance that a writer among 8 loses them all below 1e-11, and bound its time to ~4 s.
 */
export const TX_ATTEMPTS_MAX = 200;
/** Longest backoff between attempts, in ms (jittered: the wait is uniform below it). */
const BACKOFF_MS_MAX = 20;
const RETRYABLE = new Set(["40001", "40P01"]);

/** The SQLSTATE (or Node errno name) of a driver error, or undefined. */
function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** True when the transaction may simply be run again. */
export function retryable(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && RETRYABLE.has(code);
}

/**
 * An engram error for a driver or server error (EngramErrors pass through): the connection, the
 * server's resources or its operator (SQLSTATE classes 08, 53, 57, 58, and Node errnos) are
 * IoError with that code as `errno`; anything else is a statement the server refused, a bug.
 */
export function mapError(err: unknown, operation: string): Error {
  if (err instanceof EngramError) return err;
  const code = codeOf(err) ?? "EIO";
  const message = err instanceof Error ? err.message : String(err);
  if (code === "53100") return new IoError("ENOSPC", `PostgreSQL ${operation}`, message); // disk_full
  if (/^(08|53|57|58)/.test(code) || code.startsWith("E")) return new IoError(code, `PostgreSQL ${operation}`, message);
  return new InternalError(`PostgreSQL ${operation} failed with SQLSTATE ${code}: ${message}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The message of the pg driver's Error when a statement passes the pool's query_timeout (pg 8's client.js). */
const PG_QUERY_TIMEOUT_MESSAGE = "Query read timeout";

/**
 * Runs `body` in a SERIALIZABLE transaction on a pooled connection and commits; retries the
 * whole body on a serialization failure. `body` must be safe to run again (it only reads and
 * writes through `client`, and decides from what it reads).
 */
export async function inTransaction<R>(pool: Pool, operation: string, body: (client: PoolClient) => Promise<R>): Promise<R> {
  for (let attempt = 1; ; attempt += 1) {
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw mapError(err, `${operation}: connect`);
    }
    let broken = false;
    // The pool listens for errors on idle connections only: a connection that drops while this
    // transaction holds it (the server restarted, the backend terminated) emits 'error' here, and
    // with no listener Node throws it and the host process dies (the fifty-third session's audit).
    // The query in flight rejects with the same error, which the catch below maps to an IoError.
    const onError = (): void => {
      broken = true;
    };
    client.on("error", onError);
    try {
      await client.query("BEGIN ISOLATION LEVEL SERIALIZABLE");
      const result = await body(client);
      await client.query("COMMIT");
      return result;
    } catch (err) {
      // A statement that timed out (the pool's query_timeout: postgres/index.ts) leaves its
      // connection waiting for an answer that may never come, and a ROLLBACK would wait behind
      // it: the connection is dropped instead, which rolls the transaction back on the server.
      if (err instanceof Error && err.message === PG_QUERY_TIMEOUT_MESSAGE) broken = true;
      else {
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
      }
      if (!retryable(err)) throw mapError(err, operation);
      if (attempt >= TX_ATTEMPTS_MAX) {
        throw new IoError(codeOf(err) ?? "40001", `PostgreSQL ${operation}`, `still conflicting after ${attempt} serializable attempts; the slot is too contended: retry later or spread the load`);
      }
    } finally {
      client.off("error", onError);
      client.release(broken);
    }
    await sleep(Math.random() * Math.min(BACKOFF_MS_MAX, 2 ** attempt));
  }
}

/** Runs one read-only statement outside a transaction (a single statement sees one snapshot). */
export async function query<R extends Record<string, unknown>>(pool: Pool, operation: string, text: string, values: unknown[]): Promise<R[]> {
  try {
    const res = await pool.query<R>(text, values);
    return res.rows;
  } catch (err) {
    throw mapError(err, operation);
  }
}
