/**
 * Rows of engram_slots and engram_values as SlotFacts (rules/gc-rule.ts), and the statements
 * that read and write them. Every function takes a query-capable client (a pooled connection
 * inside a transaction, or the pool for single-statement reads) so that the caller decides the
 * transaction boundary.
 */
import type { ClientBase, Pool } from "pg";
import { ROOT_SCOPE } from "../rules/limits.js";
import { scopeLineage } from "../rules/names.js";
import type { SlotFacts } from "../rules/gc-rule.js";
import type { Tables } from "./schema.js";

/** Anything that runs a parameterized query. */
export type Queryable = Pool | ClientBase;

/** A slot row with its value's presence (and optionally its bytes). */
export interface SlotRow {
  scope: string;
  key: string;
  facts: SlotFacts;
  /** Value kind (0 string, 1 bytes) and bytes, when selected and present. */
  kind: number | null;
  bytes: Uint8Array | null;
  valueBytes: number;
}

/** The tenant of a scope: its first component ("global" for the root). The leading key column. */
export function tenantOf(scope: string): string {
  if (scope === ROOT_SCOPE) return ROOT_SCOPE;
  const cut = scope.indexOf("/");
  return cut < 0 ? scope : scope.slice(0, cut);
}

/** The columns every slot query selects, over `s` (slots) LEFT JOIN `v` (values). */
export const SLOT_COLUMNS =
  "s.scope, s.key, s.version, s.value_gen, s.generation, s.kill_seq, s.killed_gen, s.clear_seq, s.expires_at, s.reclaimed_at, s.listed_seq, s.older_values, s.tomb_seq, s.clear_gen, " +
  "(v.key IS NOT NULL) AS has_value, COALESCE(octet_length(v.bytes), 0) AS nbytes";

/** `s LEFT JOIN v` on the slot's full key. */
export function joined(t: Tables): string {
  return `${t.slots} s LEFT JOIN ${t.values} v ON v.tenant = s.tenant AND v.scope = s.scope AND v.key = s.key`;
}

/** A SQL condition (over `alias`) selecting `root` and its descendant scopes; params start at $`first`. */
export function subtreeWhere(alias: string, root: string, first: number): { sql: string; params: unknown[] } {
  if (root === ROOT_SCOPE) return { sql: "TRUE", params: [] };
  const a = `$${first}`;
  const b = `$${first + 1}`;
  const c = `$${first + 2}`;
  return {
    sql: `${alias}.tenant = ${a}::text AND (${alias}.scope = ${b}::text OR left(${alias}.scope, ${c}::int) = ${b}::text || '/')`,
    params: [tenantOf(root), root, root.length + 1],
  };
}

function num(v: unknown): number {
  return typeof v === "number" ? v : Number(v);
}

/** A selected row as a SlotRow. */
export function rowOf(r: Record<string, unknown>): SlotRow {
  const bytes = r["bytes"] instanceof Uint8Array ? (r["bytes"] as Uint8Array) : null;
  return {
    scope: r["scope"] as string,
    key: r["key"] as string,
    facts: {
      version: num(r["version"]),
      valueGeneration: num(r["value_gen"]),
      generation: num(r["generation"]),
      killSeq: num(r["kill_seq"]),
      killedGeneration: num(r["killed_gen"]),
      clearSeq: num(r["clear_seq"]),
      clearGeneration: num(r["clear_gen"]),
      expiresAt: num(r["expires_at"]),
      // The value row, and the overwritten value the engine would still hold (older_values).
      physicalRecords: r["has_value"] === true ? 1 + num(r["older_values"]) : 0,
      reclaimedAt: num(r["reclaimed_at"]),
      listedSeq: num(r["listed_seq"]),
      tombSeq: num(r["tomb_seq"]),
    },
    kind: r["kind"] === null || r["kind"] === undefined ? null : num(r["kind"]),
    bytes,
    valueBytes: num(r["nbytes"] ?? 0),
  };
}

/**
 * Reads the store-wide sequence and the slot (scope, key) in one statement: the sequence row
 * always exists, the slot columns are NULL when the slot has no retention record. The sequence
 * row is locked at once (FOR UPDATE): a concurrent mutation then waits or fails at its first
 * statement instead of after doing all its work (CockroachDB queues such locks without aborts).
 */
export async function loadSlotAndSeq(c: Queryable, t: Tables, scope: string, key: string): Promise<{ seq: number; slot: SlotRow | null }> {
  const res = await c.query(
    `SELECT m.seq AS meta_seq, x.* FROM ${t.meta} m LEFT JOIN (SELECT ${SLOT_COLUMNS} FROM ${joined(t)}
       WHERE s.tenant = $1 AND s.scope = $2 AND s.key = $3) x ON TRUE WHERE m.id = 1 FOR UPDATE OF m`,
    [tenantOf(scope), scope, key],
  );
  const r = res.rows[0] as Record<string, unknown> | undefined;
  if (r === undefined) throw new Error("engram_meta has no sequence row");
  return { seq: num(r["meta_seq"]), slot: r["scope"] === null ? null : rowOf(r) };
}

/** Reads the slot (scope, key) alone, or null. */
export async function loadSlot(c: Queryable, t: Tables, scope: string, key: string): Promise<SlotRow | null> {
  const res = await c.query(`SELECT ${SLOT_COLUMNS} FROM ${joined(t)} WHERE s.tenant = $1 AND s.scope = $2 AND s.key = $3`, [tenantOf(scope), scope, key]);
  const r = res.rows[0] as Record<string, unknown> | undefined;
  return r === undefined ? null : rowOf(r);
}

/**
 * Reads the slot (scope, key) or null, and the sequence of the latest retained erasure of its
 * scope or an ancestor (0 for none), in one statement (one snapshot).
 */
export async function loadSlotAndErasure(c: Queryable, t: Tables, scope: string, key: string): Promise<{ row: SlotRow | null; erasedAt: number }> {
  const lineage = scopeLineage(scope);
  const res = await c.query(
    `SELECT e.erased, x.* FROM (SELECT COALESCE(max(seq), 0) AS erased FROM ${t.erasures} WHERE tenant = ANY($4) AND scope = ANY($5)) e
       LEFT JOIN (SELECT ${SLOT_COLUMNS} FROM ${joined(t)} WHERE s.tenant = $1 AND s.scope = $2 AND s.key = $3) x ON TRUE`,
    [tenantOf(scope), scope, key, [...new Set(lineage.map(tenantOf))], lineage],
  );
  const r = res.rows[0] as Record<string, unknown>;
  return { row: r["scope"] === null || r["scope"] === undefined ? null : rowOf(r), erasedAt: num(r["erased"]) };
}

/** Records the erasure of `scope` at `seq` (replacing an older one of the same scope). */
export async function putErasure(c: Queryable, t: Tables, scope: string, seq: number, committedAt: number): Promise<void> {
  await c.query(
    `INSERT INTO ${t.erasures} (tenant, scope, seq, committed_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant, scope) DO UPDATE SET seq = EXCLUDED.seq, committed_at = EXCLUDED.committed_at`,
    [tenantOf(scope), scope, seq, committedAt],
  );
}

/** older_values of facts `f`: 1 while a record of an overwritten value would remain (physicalRecords above 1). */
export function olderOf(f: SlotFacts): number {
  return f.physicalRecords > 1 ? 1 : 0;
}

/** Writes a slot's retention record (insert or replace every column). */
export async function putSlot(c: Queryable, t: Tables, scope: string, key: string, f: SlotFacts): Promise<void> {
  await c.query(
    `INSERT INTO ${t.slots} (tenant, scope, key, version, value_gen, generation, kill_seq, killed_gen, clear_seq, expires_at, reclaimed_at, listed_seq, older_values, tomb_seq, clear_gen)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, value_gen = EXCLUDED.value_gen,
       generation = EXCLUDED.generation, kill_seq = EXCLUDED.kill_seq, killed_gen = EXCLUDED.killed_gen,
       clear_seq = EXCLUDED.clear_seq, expires_at = EXCLUDED.expires_at, reclaimed_at = EXCLUDED.reclaimed_at,
       listed_seq = EXCLUDED.listed_seq, older_values = EXCLUDED.older_values, tomb_seq = EXCLUDED.tomb_seq, clear_gen = EXCLUDED.clear_gen`,
    [tenantOf(scope), scope, key, f.version, f.valueGeneration, f.generation, f.killSeq, f.killedGeneration, f.clearSeq, f.expiresAt, f.reclaimedAt, f.listedSeq, olderOf(f), f.tombSeq, f.clearGeneration],
  );
}

/** Writes a slot's value row (insert or replace: a slot holds at most one value row). */
export async function putValue(c: Queryable, t: Tables, scope: string, key: string, version: number, generation: number, value: string | Uint8Array): Promise<void> {
  const kind = typeof value === "string" ? 0 : 1;
  const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  await c.query(
    `INSERT INTO ${t.values} (tenant, scope, key, version, generation, kind, bytes) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, generation = EXCLUDED.generation,
       kind = EXCLUDED.kind, bytes = EXCLUDED.bytes`,
    [tenantOf(scope), scope, key, version, generation, kind, bytes],
  );
}

/** Deletes a slot's value row; returns how many bytes it held (0 when there was none). */
export async function deleteValue(c: Queryable, t: Tables, scope: string, key: string): Promise<number> {
  const res = await c.query(`DELETE FROM ${t.values} WHERE tenant = $1 AND scope = $2 AND key = $3 RETURNING octet_length(bytes) AS n`, [tenantOf(scope), scope, key]);
  return res.rows.reduce((sum: number, r: Record<string, unknown>) => sum + num(r["n"]), 0);
}

/** Deletes a slot's retention record. */
export async function deleteSlot(c: Queryable, t: Tables, scope: string, key: string): Promise<void> {
  await c.query(`DELETE FROM ${t.slots} WHERE tenant = $1 AND scope = $2 AND key = $3`, [tenantOf(scope), scope, key]);
}

/** Reads and locks the store-wide sequence (the first statement of a mutation). */
export async function lockSeq(c: Queryable, t: Tables): Promise<number> {
  const res = await c.query(`SELECT seq FROM ${t.meta} WHERE id = 1 FOR UPDATE`);
  return num((res.rows[0] as { seq: unknown }).seq);
}

/** Sets the store-wide sequence to `seq` (always above what it was: the caller allocated from it). */
export async function setSeq(c: Queryable, t: Tables, seq: number): Promise<void> {
  await c.query(`UPDATE ${t.meta} SET seq = $1 WHERE id = 1`, [seq]);
}

/** Decodes a value row's bytes into the kind that was written. */
export function valueOf(kind: number, bytes: Uint8Array): string | Uint8Array {
  if (kind === 0) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  return new Uint8Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** Reads many slots in one statement; the map is keyed by scope NUL key. */
export async function loadSlots(c: Queryable, t: Tables, ids: Array<{ scope: string; key: string }>): Promise<Map<string, SlotRow>> {
  const out = new Map<string, SlotRow>();
  if (ids.length === 0) return out;
  const res = await c.query(
    `SELECT ${SLOT_COLUMNS} FROM ${joined(t)} WHERE (s.tenant, s.scope, s.key) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`,
    [ids.map((i) => tenantOf(i.scope)), ids.map((i) => i.scope), ids.map((i) => i.key)],
  );
  for (const r of res.rows as Record<string, unknown>[]) {
    const row = rowOf(r);
    out.set(`${row.scope}\u0000${row.key}`, row);
  }
  return out;
}

/** Writes many retention records in one statement (each slot at most once). */
export async function putSlots(c: Queryable, t: Tables, rows: Array<{ scope: string; key: string; facts: SlotFacts }>): Promise<void> {
  if (rows.length === 0) return;
  const col = (f: (x: SlotFacts) => number): number[] => rows.map((r) => f(r.facts));
  await c.query(
    `INSERT INTO ${t.slots} (tenant, scope, key, version, value_gen, generation, kill_seq, killed_gen, clear_seq, expires_at, reclaimed_at, listed_seq, older_values, tomb_seq, clear_gen)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::smallint[], $14::bigint[], $15::bigint[])
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, value_gen = EXCLUDED.value_gen,
       generation = EXCLUDED.generation, kill_seq = EXCLUDED.kill_seq, killed_gen = EXCLUDED.killed_gen,
       clear_seq = EXCLUDED.clear_seq, expires_at = EXCLUDED.expires_at, reclaimed_at = EXCLUDED.reclaimed_at,
       listed_seq = EXCLUDED.listed_seq, older_values = EXCLUDED.older_values, tomb_seq = EXCLUDED.tomb_seq, clear_gen = EXCLUDED.clear_gen`,
    [
      rows.map((r) => tenantOf(r.scope)), rows.map((r) => r.scope), rows.map((r) => r.key),
      col((f) => f.version), col((f) => f.valueGeneration), col((f) => f.generation), col((f) => f.killSeq),
      col((f) => f.killedGeneration), col((f) => f.clearSeq), col((f) => f.expiresAt), col((f) => f.reclaimedAt),
      col((f) => f.listedSeq), col(olderOf), col((f) => f.tombSeq), col((f) => f.clearGeneration),
    ],
  );
}

/** Writes many value rows in one statement (each slot at most once). */
export async function putValues(c: Queryable, t: Tables, rows: Array<{ scope: string; key: string; version: number; generation: number; value: string | Uint8Array }>): Promise<void> {
  if (rows.length === 0) return;
  const bytes = rows.map((r) => (typeof r.value === "string" ? Buffer.from(r.value, "utf8") : Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength)));
  await c.query(
    `INSERT INTO ${t.values} (tenant, scope, key, version, generation, kind, bytes)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::smallint[], $7::bytea[])
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, generation = EXCLUDED.generation,
       kind = EXCLUDED.kind, bytes = EXCLUDED.bytes`,
    [rows.map((r) => tenantOf(r.scope)), rows.map((r) => r.scope), rows.map((r) => r.key), rows.map((r) => r.version), rows.map((r) => r.generation), rows.map((r) => (typeof r.value === "string" ? 0 : 1)), bytes],
  );
}

/**
 * One mutation's rows in one statement (data-modifying CTEs): the new store-wide sequence, the
 * slot's retention record and, when given, its value row — one round trip instead of three.
 */
export async function commitSlot(c: Queryable, t: Tables, seq: number, scope: string, key: string, f: SlotFacts, value: string | Uint8Array | null): Promise<void> {
  const params: unknown[] = [seq, tenantOf(scope), scope, key, f.version, f.valueGeneration, f.generation, f.killSeq, f.killedGeneration, f.clearSeq, f.expiresAt, f.reclaimedAt, f.listedSeq, olderOf(f), f.tombSeq, f.clearGeneration];
  const slot = `INSERT INTO ${t.slots} (tenant, scope, key, version, value_gen, generation, kill_seq, killed_gen, clear_seq, expires_at, reclaimed_at, listed_seq, older_values, tomb_seq, clear_gen)
     VALUES ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, value_gen = EXCLUDED.value_gen,
       generation = EXCLUDED.generation, kill_seq = EXCLUDED.kill_seq, killed_gen = EXCLUDED.killed_gen,
       clear_seq = EXCLUDED.clear_seq, expires_at = EXCLUDED.expires_at, reclaimed_at = EXCLUDED.reclaimed_at,
       listed_seq = EXCLUDED.listed_seq, older_values = EXCLUDED.older_values, tomb_seq = EXCLUDED.tomb_seq, clear_gen = EXCLUDED.clear_gen`;
  const meta = `UPDATE ${t.meta} SET seq = $1 WHERE id = 1`;
  if (value === null) {
    await c.query(`WITH m AS (${meta} RETURNING 1) ${slot}`, params);
    return;
  }
  const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  params.push(typeof value === "string" ? 0 : 1, bytes);
  await c.query(
    `WITH m AS (${meta} RETURNING 1), s AS (${slot} RETURNING 1)
     INSERT INTO ${t.values} (tenant, scope, key, version, generation, kind, bytes) VALUES ($2, $3, $4, $5, $6, $17, $18)
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, generation = EXCLUDED.generation,
       kind = EXCLUDED.kind, bytes = EXCLUDED.bytes`,
    params,
  );
}
