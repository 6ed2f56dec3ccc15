/**
 * The reclamation pass of gc() and compact() on PostgreSQL: pages through every retention record
 * in primary-key order, one SERIALIZABLE transaction per page, and applies the shared GC rule
 * (rules/gc-rule.ts) to each: a value row goes when its generation is at or below the generation
 * its kill killed (or it expired past its window); a retention row goes only after its window.
 * Under `unsafe.gcKeyedBy: "tombstone-seq"` the value rule is the phantom-write-loss sweep instead.
 */
import type { Pool } from "pg";
import * as R from "../rules/gc-rule.js";
import { parentScope } from "../rules/names.js";
import type { Tables } from "./schema.js";
import * as S from "./slots.js";
import { inTransaction } from "./tx.js";

/** Retention records examined per transaction. */
export const PASS_PAGE_ROWS = 500;

/** What a pass did. */
export interface PassReport {
  bytesBefore: number;
  bytesAfter: number;
  kept: number;
  dropped: number;
  retentionDropped: number;
  /** Erasure records dropped (their window passed and no older value row is left under them). */
  erasuresDropped: number;
  durationMs: number;
}

/** Inputs of a pass. */
export interface PassRules {
  now: number;
  retentionMsFor: (scope: string) => number;
  unsafeGcBySeq: boolean;
}

/** Runs one pass over the whole store. */
export async function reclaimPass(pool: Pool, t: Tables, rules: PassRules): Promise<PassReport> {
  const started = performance.now();
  const report: PassReport = { bytesBefore: 0, bytesAfter: 0, kept: 0, dropped: 0, retentionDropped: 0, erasuresDropped: 0, durationMs: 0 };
  // Erasures first, judged on the rows as the pass finds them (the engine plans a pass on the
  // state before it: an erasure whose killed values this pass reclaims goes at the next one).
  report.erasuresDropped = await inTransaction(pool, "gc", (c) => dropErasures(c, t, rules));
  let after: [string, string, string] | null = null;
  for (;;) {
    const page: PageResult = await inTransaction(pool, "gc", (c) => reclaimPage(c, t, rules, after));
    report.bytesBefore += page.report.bytesBefore;
    report.bytesAfter += page.report.bytesAfter;
    report.kept += page.report.kept;
    report.dropped += page.report.dropped;
    report.retentionDropped += page.report.retentionDropped;
    if (page.last === null) break;
    after = page.last;
  }
  report.durationMs = performance.now() - started;
  return report;
}

interface PageResult {
  report: PassReport;
  /** The primary key of the page's last row, or null when this was the last page. */
  last: [string, string, string] | null;
}

async function reclaimPage(c: S.Queryable, t: Tables, rules: PassRules, after: [string, string, string] | null): Promise<PageResult> {
  const report: PassReport = { bytesBefore: 0, bytesAfter: 0, kept: 0, dropped: 0, retentionDropped: 0, erasuresDropped: 0, durationMs: 0 };
  const meta = await c.query(`SELECT seq FROM ${t.meta} WHERE id = 1`);
  const watermark = Number((meta.rows[0] as { seq: string }).seq);
  const res = await c.query(
    `SELECT s.tenant, ${S.SLOT_COLUMNS} FROM ${S.joined(t)} ${after === null ? "" : "WHERE (s.tenant, s.scope, s.key) > ($2, $3, $4)"}
     ORDER BY s.tenant, s.scope, s.key LIMIT $1`,
    after === null ? [PASS_PAGE_ROWS] : [PASS_PAGE_ROWS, ...after],
  );
  for (const r of res.rows as Record<string, unknown>[]) {
    const row = S.rowOf(r);
    const windowMs = rules.retentionMsFor(row.scope);
    let f = row.facts;
    report.bytesBefore += row.valueBytes;
    const reclaim = rules.unsafeGcBySeq ? R.unsafeValueReclaimable(f, watermark) : R.valueReclaimable(f, rules.now, windowMs);
    if (reclaim) {
      await S.deleteValue(c, t, row.scope, row.key);
      f = { ...f, physicalRecords: 0, reclaimedAt: rules.now };
      report.dropped += 1;
    } else {
      report.bytesAfter += row.valueBytes;
      if (f.physicalRecords > 0) report.kept += 1;
    }
    if (R.retentionDroppable(f, rules.now, windowMs) && undeletedKill(f)) {
      // The engine's CLEAR outlives the older kill it cancels (gc-policy.ts clearRecordLive): the
      // pass that drops the kill keeps the undelete, and the slot forgets the killed value and
      // the kill (forgetUnnamedKill) — "absent" with the undelete's generation — until the next
      // pass drops it. Dropped together, the slot's next write took generation 1 on PostgreSQL
      // and 2 on the engine (the fifty-third session's audit).
      await S.putSlot(c, t, row.scope, row.key, { ...f, version: 0, valueGeneration: 0, killSeq: 0, killedGeneration: 0, expiresAt: 0 });
    } else if (R.retentionDroppable(f, rules.now, windowMs)) {
      await S.deleteSlot(c, t, row.scope, row.key);
      report.retentionDropped += 1;
    } else if (reclaim) {
      await S.putSlot(c, t, row.scope, row.key, f);
    }
  }
  const lastRow = res.rows[res.rows.length - 1] as Record<string, unknown> | undefined;
  const full = res.rows.length === PASS_PAGE_ROWS && lastRow !== undefined;
  return { report, last: full ? [lastRow["tenant"] as string, lastRow["scope"] as string, lastRow["key"] as string] : null };
}

/** True when the slot holds both a kill and a later undelete that cancelled it. */
function undeletedKill(f: R.SlotFacts): boolean {
  return f.killSeq > 0 && f.clearSeq > f.killSeq;
}

/**
 * Drops the erasure records the engine's rule lets go (engine/gc-policy.ts eraseRecordLive): one
 * an ancestor's later erasure supersedes, or one whose retention window (its scope's) after its
 * commit has passed while no value row older than it is left in its subtree. Returns how many.
 */
async function dropErasures(c: S.Queryable, t: Tables, rules: PassRules): Promise<number> {
  const res = await c.query(`SELECT tenant, scope, seq, committed_at FROM ${t.erasures}`);
  const erasures = (res.rows as Array<Record<string, unknown>>).map((r) => ({ tenant: r["tenant"] as string, scope: r["scope"] as string, seq: Number(r["seq"]), at: Number(r["committed_at"]) }));
  const seqOf = new Map(erasures.map((e) => [e.scope, e.seq]));
  let dropped = 0;
  for (const e of erasures) {
    if (!superseded(e.scope, e.seq, seqOf)) {
      if (rules.now < e.at + rules.retentionMsFor(e.scope)) continue;
      const w = S.subtreeWhere("v", e.scope, 2);
      const older = await c.query(`SELECT 1 FROM ${t.values} v WHERE v.version < $1 AND ${w.sql} LIMIT 1`, [e.seq, ...w.params]);
      if (older.rows.length > 0) continue;
    }
    await c.query(`DELETE FROM ${t.erasures} WHERE tenant = $1 AND scope = $2`, [e.tenant, e.scope]);
    dropped += 1;
  }
  return dropped;
}

/** True when an ancestor of `scope` has an erasure later than `seq`. */
function superseded(scope: string, seq: number, seqOf: ReadonlyMap<string, number>): boolean {
  for (let s = parentScope(scope); s !== null; s = parentScope(s)) if ((seqOf.get(s) ?? 0) > seq) return true;
  return false;
}
