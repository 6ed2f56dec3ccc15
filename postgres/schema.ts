/**
 * The SQL schema of the PostgreSQL backend (docs/SCALE-OUT.md). Written for what the distributed
 * engines that speak PostgreSQL accept (CockroachDB, YugabyteDB): plain tables, no triggers, no
 * extensions, no SERIAL or sequence objects (the store-wide sequence is a row updated inside the
 * transaction that uses it), no server-side timestamps (the application's clock sets every one),
 * and the tenant — the first scope component — as the leading primary-key column of every table
 * keyed by scope, so that a distributed engine can shard by tenant.
 */
import { InvalidArgumentError } from "../rules/errors.js";

/** Qualified table names of one store (one PostgreSQL schema holds one store). */
export interface Tables {
  schema: string;
  meta: string;
  slots: string;
  values: string;
  erasures: string;
}

/** PostgreSQL identifiers we create: lower case, so that they never need case-sensitive quoting. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The table names inside `schema` ("public" by default); refuses a name that is not a plain identifier. */
export function tablesOf(schema: string): Tables {
  if (!SCHEMA_NAME.test(schema)) {
    throw new InvalidArgumentError(`schema ${JSON.stringify(schema)} must match [a-z_][a-z0-9_]{0,62}`);
  }
  const q = `"${schema}"`;
  return { schema, meta: `${q}.engram_meta`, slots: `${q}.engram_slots`, values: `${q}.engram_values`, erasures: `${q}.engram_erasures` };
}

/**
 * The DDL, idempotent. engram_meta holds the store-wide commit sequence in one row (id 1): every
 * mutation increments it in its own transaction, so versions strictly grow and are never reused,
 * even after every row of a slot is gone. engram_slots holds the retention records (version,
 * generations, kill and clear sequences, expiry, when the value went); engram_values the value
 * rows, at most one per slot (PostgreSQL's MVCC replaces a superseded value in place);
 * engram_erasures the latest erasure of each erased scope (its sequence and commit time), kept as
 * long as the engine keeps its SCOPE_ERASE record: probe reports it as the tombstoneSeq of every
 * slot under it, written before or after it, as the engine does. Added after format 1's first
 * stores: CREATE ... IF NOT EXISTS adds it to an older store at its next open. Three slot columns
 * came with them (upgrade() below adds them to an older store at its next open): listed_seq, the
 * latest erasure that killed the slot (rules/gc-rule.ts heldByListingErasure), tomb_seq, the
 * slot's own latest forget while the engine would keep its TOMBSTONE record, and older_values,
 * 1 while the engine would still hold a record of a value the current one overwrote (until the
 * next gc pass: the rules that wait for "the only value record" wait for the same pass). The
 * third round added clear_gen, the generation the slot's latest undelete moved it to: a slot left
 * with only its undelete takes it (the engine's Slot.clearGen).
 */
export function ddl(t: Tables): string[] {
  return [
    `CREATE SCHEMA IF NOT EXISTS "${t.schema}"`,
    `CREATE TABLE IF NOT EXISTS ${t.meta} (id INT PRIMARY KEY, seq BIGINT NOT NULL, format INT NOT NULL)`,
    `CREATE TABLE IF NOT EXISTS ${t.slots} (
      tenant TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL,
      version BIGINT NOT NULL, value_gen BIGINT NOT NULL, generation BIGINT NOT NULL,
      kill_seq BIGINT NOT NULL, killed_gen BIGINT NOT NULL, clear_seq BIGINT NOT NULL,
      expires_at BIGINT NOT NULL, reclaimed_at BIGINT NOT NULL,
      listed_seq BIGINT NOT NULL, older_values SMALLINT NOT NULL, tomb_seq BIGINT NOT NULL, clear_gen BIGINT NOT NULL,
      PRIMARY KEY (tenant, scope, key))`,
    `CREATE TABLE IF NOT EXISTS ${t.values} (
      tenant TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL,
      version BIGINT NOT NULL, generation BIGINT NOT NULL, kind SMALLINT NOT NULL, bytes BYTEA NOT NULL,
      PRIMARY KEY (tenant, scope, key))`,
    `CREATE TABLE IF NOT EXISTS ${t.erasures} (
      tenant TEXT NOT NULL, scope TEXT NOT NULL, seq BIGINT NOT NULL, committed_at BIGINT NOT NULL,
      PRIMARY KEY (tenant, scope))`,
    `INSERT INTO ${t.meta} (id, seq, format) VALUES (1, 0, 1) ON CONFLICT (id) DO NOTHING`,
  ];
}

/** The slot columns added after format 1's first stores (upgrade() adds them). */
const ADDED_COLUMNS = ["listed_seq", "older_values", "tomb_seq", "clear_gen"];

/**
 * Selects a row when engram_slots has every added column and none of them has a default (as a
 * fresh store's: else the store needs upgrade(), which a store upgraded before the fifty-fifth
 * session also needs — it kept the defaults, and rows written without the columns got -1).
 */
export function upgradedQuery(t: Tables): { sql: string; params: unknown[] } {
  return {
    sql: `SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'engram_slots' AND column_name::text = ANY($2::text[]) AND column_default IS NULL HAVING count(*) = $3`,
    params: [t.schema, ADDED_COLUMNS, ADDED_COLUMNS.length],
  };
}

/**
 * Adds the slot columns of the fifty-fourth session to a store made before, with the values the
 * rules need, and leaves the table as a fresh store's (idempotent, so racing openers may both run
 * it). A column is added NOT NULL with a default only to fill the rows already there: listed_seq
 * and older_values 0; tomb_seq and clear_gen -1, "not known yet", which the backfill then
 * replaces — tomb_seq by the row's kill_seq (an older store's kills count as the slot's own
 * forgets: kept the longer, never dropped early), clear_gen by the row's generation where it was
 * undeleted (its undelete's record counts as present), else 0. The defaults are dropped before
 * the backfill, so that no row can keep -1 — no code reads -1 as "unknown": as tomb_seq it would
 * drop the forget's record early, as clear_gen it would be a generation — and a row that a writer
 * of an older version inserts without the columns is refused (NOT NULL), not silently given one.
 * Separate statements, with no transaction around them (a distributed engine may not run a
 * schema change and a write of the new column in one): a row inserted between an ADD COLUMN and
 * its DROP DEFAULT is caught by the backfill after it.
 */
export function upgrade(t: Tables): string[] {
  return [
    `ALTER TABLE ${t.slots} ADD COLUMN IF NOT EXISTS listed_seq BIGINT NOT NULL DEFAULT 0`,
    `ALTER TABLE ${t.slots} ADD COLUMN IF NOT EXISTS older_values SMALLINT NOT NULL DEFAULT 0`,
    `ALTER TABLE ${t.slots} ADD COLUMN IF NOT EXISTS tomb_seq BIGINT NOT NULL DEFAULT -1`,
    `ALTER TABLE ${t.slots} ADD COLUMN IF NOT EXISTS clear_gen BIGINT NOT NULL DEFAULT -1`,
    ...ADDED_COLUMNS.map((c) => `ALTER TABLE ${t.slots} ALTER COLUMN ${c} DROP DEFAULT`),
    `UPDATE ${t.slots} SET tomb_seq = kill_seq WHERE tomb_seq = -1`,
    `UPDATE ${t.slots} SET clear_gen = CASE WHEN clear_seq > 0 THEN generation ELSE 0 END WHERE clear_gen = -1`,
  ];
}
