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
  const erasures = await inTransaction(pool, "gc", (c) => dropErasures(c, t, rules));
  report.erasuresDropped = erasures.dropped;
  let after: [string, string, string] | null = null;
  for (;;) {
    const page: PageResult = await inTransaction(pool, "gc", (c) => reclaimPage(c, t, rules, erasures, after));
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

/** The latest erasure over `scope` (its own or an ancestor's) in `found`, or 0. */
function eraseSeqOf(found: ReadonlyMap<string, number>, scope: string): number {
  let seq = 0;
  for (let s: string | null = scope; s !== null; s = parentScope(s)) seq = Math.max(seq, found.get(s) ?? 0);
  return seq;
}

/**
 * The erasures a pass sees, by scope: `found` as it began (the slots' records are judged on
 * those, as the engine plans every record on the state before its pass), `kept` after it dropped
 * some (a slot one of those names is held: the engine drops a slot once no record names it).
 */
interface PassErasures {
  dropped: number;
  found: ReadonlyMap<string, number>;
  kept: ReadonlyMap<string, number>;
}

/** True when `found` holds an erasure of `scope` or an ancestor older than sequence `seq` (rules/gc-rule.ts olderErasureOnPath). */
function olderErasurePresent(found: ReadonlyMap<string, number>, scope: string, seq: number): boolean {
  return R.olderErasureOnPath(scope, seq, (s) => found.get(s));
}

async function reclaimPage(c: S.Queryable, t: Tables, rules: PassRules, erasures: PassErasures, after: [string, string, string] | null): Promise<PageResult> {
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
    const eraseSeq = eraseSeqOf(erasures.found, row.scope);
    const reclaim = rules.unsafeGcBySeq ? R.unsafeValueReclaimable(f, watermark) : R.valueReclaimable(f, rules.now, windowMs, eraseSeq);
    // Judged on the row as the pass finds it, as the engine plans on the slot before its pass.
    const superseded = R.killSuperseded(f.killSeq, f.version, f.physicalRecords, f.physicalRecords > 0);
    const tombSuperseded = R.killSuperseded(f.tombSeq, f.version, f.physicalRecords, f.physicalRecords > 0);
    const older = f.physicalRecords > 1;
    if (reclaim) {
      await S.deleteValue(c, t, row.scope, row.key);
      f = { ...f, physicalRecords: 0, reclaimedAt: rules.now };
      report.dropped += 1;
    } else {
      report.bytesAfter += row.valueBytes;
      if (f.physicalRecords > 0) report.kept += 1;
      // The overwritten values' records the engine held go in this pass.
      if (older) f = { ...f, physicalRecords: 1 };
    }
    // A kill a later write superseded is forgotten (the engine drops its TOMBSTONE and, with it,
    // the kill: gc-policy.ts tombstoneDropped); kept, probe's tombstoneSeq named it for ever.
    if (superseded) f = { ...f, killSeq: 0, killedGeneration: 0 };
    if (tombSuperseded) f = { ...f, tombSeq: 0 };
    const next = slotAfterPass(row.facts, f, row.scope, erasures, rules.now, windowMs);
    if (next === null) {
      await S.deleteSlot(c, t, row.scope, row.key);
      report.retentionDropped += 1;
    } else if (next !== f || reclaim || superseded || tombSuperseded || older) {
      await S.putSlot(c, t, row.scope, row.key, next);
    }
  }
  const lastRow = res.rows[res.rows.length - 1] as Record<string, unknown> | undefined;
  const full = res.rows.length === PASS_PAGE_ROWS && lastRow !== undefined;
  return { report, last: full ? [lastRow["tenant"] as string, lastRow["scope"] as string, lastRow["key"] as string] : null };
}

/**
 * The slot's row after a pass, or null when it goes: the engine's records of the slot, judged on
 * the state before the pass (`pre`; `post` is the row after its value and superseded kills were
 * decided). It stays while a value record, its forget's record (gc-policy.ts tombstoneRecordLive)
 * or an erasure that names it and outlives the pass (slotEmpty) holds it. Held by its undelete's
 * record alone (clearRecordLive), it forgets the killed value and the kill (forgetUnnamedKill):
 * "absent" with the undelete's generation until a later pass drops the undelete too (the
 * fifty-third session's audit: dropped at once, the next write took generation 1, not 2).
 */
function slotAfterPass(pre: R.SlotFacts, post: R.SlotFacts, scope: string, erasures: PassErasures, now: number, windowMs: number): R.SlotFacts | null {
  const open = R.retentionWindowOpen(pre.physicalRecords, pre.reclaimedAt, now, windowMs);
  const tombLive = post.tombSeq > 0 && (open || R.tombstoneHeldByErasure(pre.listedSeq, post.tombSeq, olderErasurePresent(erasures.found, scope, post.tombSeq)));
  // An undelete a later value superseded goes, as the engine's (gc-policy.ts clearSuperseded).
  const clearSuperseded = R.killSuperseded(pre.clearSeq, pre.version, pre.physicalRecords, pre.physicalRecords > 0) && !unsafeReclaimForTests.keepSupersededClear;
  const clearLive = clearRecordPresent(pre) && R.clearRecordHeld(pre.tombSeq > 0, pre.tombSeq, pre.clearSeq, olderErasurePresent(erasures.found, scope, pre.clearSeq), open, clearSuperseded);
  if (post.physicalRecords > 0 || tombLive || R.heldByListingErasure(post.listedSeq, eraseSeqOf(erasures.kept, scope))) {
    // The forget's record goes while the slot stays: the slot forgets it, as a restarted engine,
    // which finds no record of it, does (probe's tombstoneSeq; the undelete's record then follows
    // its window). The kill itself stays in kill_seq: the value it killed is still dead.
    const kept = tombLive || post.tombSeq === 0 ? post : { ...post, tombSeq: 0 };
    // So does the undelete's record (the engine's CLEAR, clearRecordLive), while something else
    // holds the slot: clear_gen 0 says it went, and the slot, emptied later, no longer waits for it
    // (before, the row outlived the engine's slot by a pass, at the undelete's generation).
    // clear_seq stays, as the engine's in-memory clearSeq does: no answer reads it once the
    // record went (a kill it cancelled is held by a record that holds the CLEAR too).
    return clearLive || !clearRecordPresent(post) || unsafeReclaimForTests.keepClear ? kept : { ...kept, clearGeneration: 0 };
  }
  if (!clearLive) return null;
  // Only the undelete's record is left: the slot takes its generation, not that of a value or an
  // erasure list whose records went (the engine's forgetUnnamedKill, fifty-fourth session).
  const generation = unsafeReclaimForTests.keepGeneration ? post.generation : post.clearGeneration;
  return { ...post, generation, version: 0, valueGeneration: 0, killSeq: 0, killedGeneration: 0, expiresAt: 0, listedSeq: 0, tombSeq: 0 };
}

/**
 * Drops the erasure records the engine's rule lets go (engine/gc-policy.ts eraseRecordLive): one
 * an ancestor's later erasure supersedes, or one whose retention window (its scope's) after its
 * commit has passed while no value older than it may be left in its subtree (a value row older
 * than it, or a newer one over an overwritten value the engine still holds: gc-policy.ts
 * mayHoldRecordBefore). Returns how many it dropped, and the sequences it found and kept.
 */
async function dropErasures(c: S.Queryable, t: Tables, rules: PassRules): Promise<PassErasures> {
  const res = await c.query(`SELECT tenant, scope, seq, committed_at FROM ${t.erasures}`);
  const erasures = (res.rows as Array<Record<string, unknown>>).map((r) => ({ tenant: r["tenant"] as string, scope: r["scope"] as string, seq: Number(r["seq"]), at: Number(r["committed_at"]) }));
  const seqOf = new Map(erasures.map((e) => [e.scope, e.seq]));
  let dropped = 0;
  const kept = new Map(seqOf);
  for (const e of erasures) {
    if (!superseded(e.scope, e.seq, seqOf)) {
      if (rules.now < e.at + rules.retentionMsFor(e.scope)) continue;
      const w = S.subtreeWhere("v", e.scope, 2);
      const older = await c.query(
        `SELECT 1 FROM ${t.values} v JOIN ${t.slots} s ON s.tenant = v.tenant AND s.scope = v.scope AND s.key = v.key
         WHERE (v.version < $1 OR s.older_values > 0) AND ${w.sql} LIMIT 1`,
        [e.seq, ...w.params],
      );
      if (older.rows.length > 0) continue;
      if (heldByOlderOverlapping(e.scope, e.seq, seqOf)) continue;
    }
    await c.query(`DELETE FROM ${t.erasures} WHERE tenant = $1 AND scope = $2`, [e.tenant, e.scope]);
    kept.delete(e.scope);
    dropped += 1;
  }
  return { dropped, found: seqOf, kept };
}

/**
 * True when an erasure older than `seq` of an ancestor or descendant of `scope` was retained as
 * the pass began (`found`): the erasure of `scope` then stays (rules/gc-rule.ts
 * erasureHeldByOlderOverlapping, the engine's eraseRecordLive), and goes in the pass after it.
 */
function heldByOlderOverlapping(scope: string, seq: number, found: ReadonlyMap<string, number>): boolean {
  if (unsafeReclaimForTests.dropOverlapping) return false;
  for (const [s, other] of found) if (R.erasureHeldByOlderOverlapping(s, other, scope, seq)) return true;
  return false;
}

/**
 * Test switches, never set by the backend or any option (the conformance suite's backend-parity
 * cases, run on PostgreSQL): `dropOverlapping` lets an erasure go while an older one of an
 * ancestor or descendant scope is retained, and `keepGeneration` leaves a slot held by its
 * undelete alone at the generation of values and erasures gone (the rules before the engine's
 * fifty-fourth session; each makes a parity case fail); `keepClear` keeps an undelete's record
 * (clear_gen) while something else holds its slot, after the engine's rule let it go (the rule
 * before the fifty-fifth session: the row then outlived the engine's slot by a pass);
 * `keepSupersededClear` holds an undelete that a later value superseded by the forget's record
 * and the window, as before the fifty-sixth session (the engine's `keepSupersededClear`).
 */
export const unsafeReclaimForTests = { dropOverlapping: false, keepGeneration: false, keepClear: false, keepSupersededClear: false };

/**
 * True while the slot's undelete has its record (the engine's CLEAR on disk): an undelete sets
 * clear_gen to the generation it moved the slot to (at least 1); a pass sets it to 0 when the
 * record would go while the slot stays (slotAfterPass).
 */
function clearRecordPresent(f: R.SlotFacts): boolean {
  return f.clearSeq > 0 && f.clearGeneration > 0;
}

/** True when an ancestor of `scope` has an erasure later than `seq`. */
function superseded(scope: string, seq: number, seqOf: ReadonlyMap<string, number>): boolean {
  for (let s = parentScope(scope); s !== null; s = parentScope(s)) if ((seqOf.get(s) ?? 0) > seq) return true;
  return false;
}
