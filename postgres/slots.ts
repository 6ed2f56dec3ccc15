/**
 * Rows of engram_slots and engram_values as SlotFacts (rules/gc-rule.ts), and the statements
 * that read and write them. Every function takes a query-capable client (a pooled connection
 * inside a transaction, or the pool for single-statement reads) so that the caller decides the
 * transaction boundary.
 */
import type { ClientBase, Pool } from "pg";
import { ROOT_SCOPE } from "../rules/limits.js";
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
  "s.scope, s.key, s.version, s.value_gen, s.generation, s.kill_seq, s.killed_gen, s.clear_seq, s.expires_at, s.reclaimed_at, " +
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
      expiresAt: num(r["expires_at"]),
      physicalRecords: r["has_value"] === true ? 1 : 0,
      reclaimedAt: num(r["reclaimed_at"]),
    },
    kind: r["kind"] === null || r["kind"] === undefined ? null : num(r["kind"]),
    bytes,
    valueBytes: num(r["nbytes"] ?? 0),
  };
}

/**
 * Reads the store-wide sequence and the slot (scope, key) in one statement: the sequence row
 * always exists, the slot columns are NULL when the slot has no retention record.
 */
export async function loadSlotAndSeq(c: Queryable, t: Tables, scope: string, key: string): Promise<{ seq: number; slot: SlotRow | null }> {
  const res = await c.query(
    `SELECT m.seq AS meta_seq, x.* FROM ${t.meta} m LEFT JOIN (SELECT ${SLOT_COLUMNS} FROM ${joined(t)}
       WHERE s.tenant = $1 AND s.scope = $2 AND s.key = $3) x ON TRUE WHERE m.id = 1`,
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

/** Writes a slot's retention record (insert or replace every column). */
export async function putSlot(c: Queryable, t: Tables, scope: string, key: string, f: SlotFacts): Promise<void> {
  await c.query(
    `INSERT INTO ${t.slots} (tenant, scope, key, version, value_gen, generation, kill_seq, killed_gen, clear_seq, expires_at, reclaimed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (tenant, scope, key) DO UPDATE SET version = EXCLUDED.version, value_gen = EXCLUDED.value_gen,
       generation = EXCLUDED.generation, kill_seq = EXCLUDED.kill_seq, killed_gen = EXCLUDED.killed_gen,
       clear_seq = EXCLUDED.clear_seq, expires_at = EXCLUDED.expires_at, reclaimed_at = EXCLUDED.reclaimed_at`,
    [tenantOf(scope), scope, key, f.version, f.valueGeneration, f.generation, f.killSeq, f.killedGeneration, f.clearSeq, f.expiresAt, f.reclaimedAt],
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

/** Sets the store-wide sequence to `seq` (always above what it was: the caller allocated from it). */
export async function setSeq(c: Queryable, t: Tables, seq: number): Promise<void> {
  await c.query(`UPDATE ${t.meta} SET seq = $1 WHERE id = 1`, [seq]);
}

/** Decodes a value row's bytes into the kind that was written. */
export function valueOf(kind: number, bytes: Uint8Array): string | Uint8Array {
  if (kind === 0) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  return new Uint8Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}
