/**
 * Opening a store on PostgreSQL: `Engram.open("postgresql://...")` lands here. The `pg` driver is
 * an optional dependency, loaded with a dynamic import only when a URL is opened, so that the
 * embedded default never needs it. Three query parameters are engram's own and are removed before
 * the URL reaches the driver: `schema` (the PostgreSQL schema holding this store's tables,
 * default "public"), `poolMax` (connections in the pool, default 10) and `queryTimeoutMs` (how
 * long one statement waits for the server's answer, default 60 s). The backend's own modules
 * load on the first open too: a process that opens a directory (every CLI command asks
 * isPostgresUrl) loads only this file.
 */
import type { Pool, PoolConfig } from "pg";
import { InvalidArgumentError, NotSupportedError } from "../rules/errors.js";
import type { OpenOptions } from "../rules/types.js";
import type { PgBackend } from "./backend.js";

export type { PgBackend } from "./backend.js";

/** Default connections per pool: enough for group parallelism, few enough for many app servers. */
export const POOL_MAX_DEFAULT = 10;
const POOL_MAX_LIMIT = 1000;
/** How long one statement waits for the server's answer unless the URL's `queryTimeoutMs` says otherwise (a gc over a large store is many statements, each short). */
export const QUERY_TIMEOUT_MS_DEFAULT = 60_000;
const QUERY_TIMEOUT_MS_MIN = 100;
const QUERY_TIMEOUT_MS_MAX = 3_600_000;

/** True when `location` names a PostgreSQL database rather than a directory. */
export function isPostgresUrl(location: unknown): location is string {
  return typeof location === "string" && /^postgres(ql)?:\/\//i.test(location);
}

/** The URL without its password, for messages and `store.dir`. */
export function redactUrl(url: URL): string {
  const u = new URL(url.href);
  if (u.password !== "") u.password = "***";
  return u.href;
}

interface Located {
  connectionString: string;
  shown: string;
  schema: string;
  poolMax: number;
  /** `queryTimeoutMs`: how long one statement may wait for the server's answer. */
  queryTimeoutMs: number;
}

function locate(location: string): Located {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    throw new InvalidArgumentError(`${location.replace(/:[^:@/]*@/, ":***@")} is not a valid PostgreSQL URL (postgresql://user@host:5432/db)`);
  }
  const schema = url.searchParams.get("schema") ?? "public";
  const poolRaw = url.searchParams.get("poolMax");
  const poolMax = poolRaw === null ? POOL_MAX_DEFAULT : Number(poolRaw);
  if (!Number.isSafeInteger(poolMax) || poolMax < 1 || poolMax > POOL_MAX_LIMIT) {
    throw new InvalidArgumentError(`poolMax must be an integer in [1, ${POOL_MAX_LIMIT}], got ${String(poolRaw)}`);
  }
  const timeoutRaw = url.searchParams.get("queryTimeoutMs");
  const queryTimeoutMs = timeoutRaw === null ? QUERY_TIMEOUT_MS_DEFAULT : Number(timeoutRaw);
  if (!Number.isSafeInteger(queryTimeoutMs) || queryTimeoutMs < QUERY_TIMEOUT_MS_MIN || queryTimeoutMs > QUERY_TIMEOUT_MS_MAX) {
    throw new InvalidArgumentError(`queryTimeoutMs must be an integer in [${QUERY_TIMEOUT_MS_MIN}, ${QUERY_TIMEOUT_MS_MAX}] (ms), got ${String(timeoutRaw)}`);
  }
  const shown = redactUrl(url);
  url.searchParams.delete("schema");
  url.searchParams.delete("poolMax");
  url.searchParams.delete("queryTimeoutMs");
  return { connectionString: url.href, shown, schema, poolMax, queryTimeoutMs };
}

async function loadPg(): Promise<typeof import("pg")> {
  try {
    const mod = (await import("pg")) as typeof import("pg") & { default?: typeof import("pg") };
    return mod.default ?? mod;
  } catch {
    throw new NotSupportedError("opening a PostgreSQL URL needs the optional dependency pg: run `npm install pg@8` beside engram");
  }
}

/** Opens the store at a postgres:// or postgresql:// URL (tables created if missing). */
export async function openPostgres(location: string, options?: OpenOptions): Promise<PgBackend> {
  const [{ PgBackend }, { resolvePgOptions }, { tablesOf }] = await Promise.all([import("./backend.js"), import("./options.js"), import("./schema.js")]);
  const resolved = resolvePgOptions(options);
  const where = locate(location);
  const tables = tablesOf(where.schema);
  const pg = await loadPg();
  const config: PoolConfig = {
    connectionString: where.connectionString,
    max: where.poolMax,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: 10_000,
    // A connection that goes silent (a network partition, a server that stopped answering) must
    // not hold a call for ever, nor every write queued behind it on the handle (the fifty-third
    // session's audit): each statement waits at most queryTimeoutMs and then rejects (an IoError;
    // the connection is dropped), and TCP keepalive finds a dead peer while the pool is idle.
    query_timeout: where.queryTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    application_name: "engram",
    // "batch"/"none": the server acknowledges before its WAL flush (bounded loss, never corruption),
    // set as a startup parameter of every connection.
    ...(resolved.durability === "sync" ? {} : { options: "-c synchronous_commit=off" }),
  };
  const pool: Pool = new pg.Pool(config);
  // An idle connection that the server drops must not crash the host process.
  pool.on("error", () => undefined);
  return PgBackend.open(where.shown, pool, tables, resolved);
}
