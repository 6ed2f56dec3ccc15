/**
 * What compaction would keep: one pass over the keydir that sorts every record a segment holds
 * into the ones that survive (by gc-policy.ts) and the retention records that may go. The
 * compactor hands the survivors to a worker; stats() counts them as live bytes. Pure reads of the
 * keydir: nothing here changes state, so a plan stays safe while compactions run (records only ever
 * die, and the compactor moves or clears a pointer only if it still names the planned place).
 */
import * as P from "./gc-policy.js";
import type { Keydir, Slot } from "./keydir.js";
import type { ScopeRule } from "../rules/scope-rules.js";

/** A record that survives, and who points at it. */
export type PlannedRecord =
  | { kind: "put" | "tomb" | "clear"; slot: Slot; off: number; len: number }
  | { kind: "erase"; scope: string; off: number; len: number };

/**
 * What one compaction of a segment keeps (survivors, by offset), which retention records it may
 * drop (droppable), and which current PUT records are dead (deadPuts: the slot still points at
 * them, so the worker need not name them and the main thread need not look them up).
 */
export interface SegmentPlan {
  survivors: PlannedRecord[];
  droppable: PlannedRecord[];
  deadPuts: PlannedRecord[];
}

/** Per-segment live accounting from one pass over the keydir. */
export interface LiveTally {
  liveBytes: number;
  records: number;
  tombstones: number;
}

/** What a plan reads: the keydir and the retention rules. */
export interface PlanHost {
  readonly keydir: Keydir;
  readonly options: { readonly scopeRules: readonly ScopeRule[]; readonly tombstoneRetentionMs: number };
  /** Retention window of tombstones in `scope` (its scope rule, else the store's). */
  retentionMsFor(scope: string): number;
}

/**
 * Per segment (all of them, or those in `only`), the records that survive — sorted by offset —
 * and the retention records (tombstones, clears, erasures) that do not, as of `now`.
 */
export function planSegments(host: PlanHost, now: number, only: ReadonlySet<number> | null): Map<number, SegmentPlan> {
  const keydir = host.keydir;
  const out = new Map<number, SegmentPlan>();
  const planOf = (seg: number): SegmentPlan => {
    let p = out.get(seg);
    if (p === undefined) {
      p = { survivors: [], droppable: [], deadPuts: [] };
      out.set(seg, p);
    }
    return p;
  };
  const add = (seg: number, k: PlannedRecord, keep: boolean): void => {
    const p = planOf(seg);
    (keep ? p.survivors : p.droppable).push(k);
  };
  const wanted = (seg: number): boolean => seg !== 0 && (only === null || only.has(seg));
  const rules = host.options.scopeRules.length > 0;
  const fixedRetention = host.options.tombstoneRetentionMs;
  for (const slot of keydir.all()) {
    if (!wanted(slot.seg) && !wanted(slot.tombSeg) && !wanted(slot.clearSeg)) continue;
    const retention = rules ? host.retentionMsFor(slot.scope) : fixedRetention;
    if (wanted(slot.seg)) {
      const put: PlannedRecord = { kind: "put", slot, off: slot.off, len: slot.len };
      if (P.valueRecordLive(keydir, slot, now, retention)) add(slot.seg, put, true);
      else planOf(slot.seg).deadPuts.push(put);
    }
    if (wanted(slot.tombSeg)) add(slot.tombSeg, { kind: "tomb", slot, off: slot.tombOff, len: slot.tombLen }, P.tombstoneRecordLive(slot, now, retention));
    if (wanted(slot.clearSeg)) add(slot.clearSeg, { kind: "clear", slot, off: slot.clearOff, len: slot.clearLen }, P.clearRecordLive(slot, now, retention, keydir));
  }
  for (const [scope, e] of keydir.erases) {
    const parts = [e, ...(e.more ?? [])].filter((x) => wanted(x.seg));
    if (parts.length === 0) continue;
    const live = P.eraseRecordLive(keydir, scope, e, now, host.retentionMsFor(scope));
    for (const x of parts) add(x.seg, { kind: "erase", scope, off: x.off, len: x.len }, live); // every chunk lives or goes together
  }
  for (const p of out.values()) p.survivors.sort((a, b) => a.off - b.off);
  return out;
}

/** Per segment id, the bytes and records that would survive a compaction now (retention records count as tombstones). */
export function tallySegments(host: PlanHost, now: number): Map<number, LiveTally> {
  const out = new Map<number, LiveTally>();
  for (const [seg, { survivors }] of planSegments(host, now, null)) {
    const t: LiveTally = { liveBytes: 0, records: survivors.length, tombstones: 0 };
    for (const k of survivors) {
      t.liveBytes += k.len;
      if (k.kind !== "put") t.tombstones += 1;
    }
    out.set(seg, t);
  }
  return out;
}
