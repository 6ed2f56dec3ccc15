/**
 * The parent side of the crash tests: the wire protocol spoken by test/helpers/crash-child.ts, and
 * a model that checks a directory reopened after a SIGKILL against what the child acknowledged.
 *
 * The child reports every operation twice: a "send" line written (synchronously, to a pipe) right
 * before it calls the store, and an "ack" line once the call resolved. Because the store decides
 * sequence numbers synchronously when an operation is called, the order of "send" lines is the
 * commit order. At a crash some sent operations are unacknowledged ("in flight").
 *
 * CrashModel.settle() reads every slot of the universe (scopes x keys, inherit: false) and accepts
 * the directory only if it equals the model after applying a prefix of the sent units (I2: recovery
 * yields a prefix of the commit sequence) that includes every acknowledged unit (I1) and cuts only
 * between units (batches all-or-none). Acknowledged writes must read back with their exact version;
 * in-flight writes that survived must carry a version between the acknowledged sequence numbers
 * around them; every acknowledged sequence number must exceed everything seen before (I7).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Engram } from "../../src/index.js";
import { SEALING_HINT_TMP } from "../../segments/hint.js";

/** One mutation inside a unit: write, forget, or forgetScope ("erase"). */
export type Mut =
  | { op: "w"; s: string; k: string; v: string; b: boolean }
  | { op: "f"; s: string; k: string }
  | { op: "e"; s: string };

/** What a mutation returned: a write's version, or a forget's / erase's tombstone sequence. */
export type Res = { ver: number } | { ts: number | null };

/** Lines on the child's stdout (one JSON object each). */
export type Msg =
  | { t: "standby" }
  | { t: "ready"; armed: boolean; openArrivals?: number }
  | { t: "send"; u: number; muts: Mut[] }
  | { t: "ack"; u: number; r: Res[] }
  | { t: "cstart"; n: number }
  | { t: "cdone"; n: number; segments: number[] }
  | { t: "fsevent"; name: string }
  | { t: "mark"; what: string }
  | { t: "done" }
  | { t: "error"; message: string };

/** The state of one slot: its value (with a version when known), or null when nothing is readable. */
export interface SlotVal {
  v: string;
  b: boolean;
  ver: number | null;
}
export type SlotState = SlotVal | null;

interface Unit {
  muts: Mut[];
  res: Res[] | null;
}

/** What one settle() found. */
export interface SettleReport {
  units: number;
  acked: number;
  inFlight: number;
  /** In-flight units that recovery kept (the prefix cut lies this far past the last acked unit). */
  inFlightKept: number;
  live: number;
}

/** True when `scope` is `root` or below it. */
export function scopeWithin(scope: string, root: string): boolean {
  return root === "global" || scope === root || scope.startsWith(`${root}/`);
}

/** `scope`, its parent, ..., "global". */
export function lineage(scope: string): string[] {
  const out = [scope];
  for (let s = scope; s !== "global"; ) {
    const i = s.lastIndexOf("/");
    s = i < 0 ? "global" : s.slice(0, i);
    out.push(s);
  }
  return out;
}

function slotId(s: string, k: string): string {
  return `${s}\u0000${k}`;
}

function show(st: SlotState | undefined): string {
  if (st === undefined) return "<unknown>";
  if (st === null) return "NOT_FOUND";
  return `${st.b ? "bytes" : "str"}:${JSON.stringify(st.v.length > 48 ? `${st.v.slice(0, 48)}...(${st.v.length})` : st.v)}@${st.ver ?? "?"}`;
}

/** Tracks what a sequence of child processes acknowledged and checks every reopened directory. */
export class CrashModel {
  readonly scopes: readonly string[];
  readonly keys: readonly string[];
  /** The state observed at the last settle (what the next child starts from). */
  private state = new Map<string, SlotState>();
  /** Highest version each slot ever showed (acked or read back). */
  private maxVer = new Map<string, number>();
  /** Highest sequence number ever acknowledged or read back, store-wide. */
  maxSeq = 0;
  private units: Unit[] = [];
  /** Totals over all settles. */
  readonly totals = { settles: 0, units: 0, acked: 0, inFlight: 0, inFlightKept: 0 };

  constructor(scopes: readonly string[], keys: readonly string[]) {
    this.scopes = scopes;
    this.keys = keys;
    for (const s of scopes) for (const k of keys) this.state.set(slotId(s, k), null);
  }

  /** An independent copy (same state, versions and universe; no pending units). */
  clone(): CrashModel {
    if (this.units.length > 0) throw new Error("clone() with units pending: settle first");
    const c = new CrashModel(this.scopes, this.keys);
    c.state = new Map(this.state);
    c.maxVer = new Map(this.maxVer);
    c.maxSeq = this.maxSeq;
    return c;
  }

  /** The units of the current round (sent since the last settle). */
  get pending(): number {
    return this.units.length;
  }

  /** The number of units of the current round that were acknowledged. */
  get ackedCount(): number {
    return this.units.filter((u) => u.res !== null).length;
  }

  /** Feeds one child message; throws on a protocol violation. */
  onMessage(m: Msg): void {
    if (m.t === "send") {
      if (m.u !== this.units.length) throw new Error(`child sent unit ${m.u}, expected ${this.units.length}`);
      for (const mut of m.muts) {
        if (!this.scopes.includes(mut.s) || (mut.op !== "e" && !this.keys.includes(mut.k))) throw new Error(`unit ${m.u} leaves the universe: ${JSON.stringify(mut)}`);
      }
      this.units.push({ muts: m.muts, res: null });
    } else if (m.t === "ack") {
      const unit = this.units[m.u];
      if (unit === undefined) throw new Error(`ack of unit ${m.u} that was never sent`);
      if (unit.res !== null) throw new Error(`unit ${m.u} acknowledged twice`);
      unit.res = m.r;
    }
  }

  /** The expected state of every slot after units [0, upTo) of this round. */
  private apply(upTo: number): { state: Map<string, SlotState>; writer: Map<string, number> } {
    const state = new Map(this.state);
    const writer = new Map<string, number>();
    for (let i = 0; i < upTo; i++) {
      const unit = this.units[i] as Unit;
      unit.muts.forEach((m, j) => {
        if (m.op === "w") {
          const r = unit.res?.[j];
          state.set(slotId(m.s, m.k), { v: m.v, b: m.b, ver: r !== undefined && "ver" in r ? r.ver : null });
          writer.set(slotId(m.s, m.k), i);
        } else if (m.op === "f") {
          state.set(slotId(m.s, m.k), null);
          writer.delete(slotId(m.s, m.k));
        } else {
          for (const s of this.scopes) {
            if (!scopeWithin(s, m.s)) continue;
            for (const k of this.keys) {
              state.set(slotId(s, k), null);
              writer.delete(slotId(s, k));
            }
          }
        }
      });
    }
    return { state, writer };
  }

  /** Checks the acknowledgements themselves: shapes, forget results, and growing sequence numbers (I7). */
  private checkAcks(): { lo: number[]; hi: number[] } {
    const problems: string[] = [];
    const logical = new Map(this.state);
    let last = this.maxSeq;
    const seqsOf: number[][] = [];
    this.units.forEach((unit, i) => {
      const seqs: number[] = [];
      unit.muts.forEach((m, j) => {
        const id = m.op === "e" ? "" : slotId(m.s, m.k);
        const r = unit.res?.[j];
        if (unit.res !== null && r === undefined) problems.push(`unit ${i}: ${unit.res.length} results for ${unit.muts.length} ops`);
        if (m.op === "w") {
          if (r !== undefined) {
            if (!("ver" in r) || !Number.isSafeInteger(r.ver)) problems.push(`unit ${i} op ${j}: write acked without a version: ${JSON.stringify(r)}`);
            else {
              seqs.push(r.ver);
              const prev = this.maxVer.get(id) ?? 0;
              if (r.ver <= prev) problems.push(`unit ${i} op ${j}: ${m.s}/${m.k} acked version ${r.ver} <= ${prev} seen before (I7)`);
            }
          }
          logical.set(id, { v: m.v, b: m.b, ver: null });
        } else if (m.op === "f") {
          if (r !== undefined) {
            if (!("ts" in r)) problems.push(`unit ${i} op ${j}: forget acked without tombstoneSeq`);
            else {
              const wasLive = logical.get(id) !== null;
              if (wasLive && r.ts === null) problems.push(`unit ${i} op ${j}: forget of live ${m.s}/${m.k} returned tombstoneSeq null`);
              if (!wasLive && r.ts !== null) problems.push(`unit ${i} op ${j}: forget of absent ${m.s}/${m.k} wrote tombstone ${r.ts}`);
              if (r.ts !== null) seqs.push(r.ts);
            }
          }
          logical.set(id, null);
        } else {
          if (r !== undefined) {
            if (!("ts" in r) || r.ts === null) problems.push(`unit ${i}: forgetScope acked without tombstoneSeq`);
            else seqs.push(r.ts);
          }
          for (const s of this.scopes) if (scopeWithin(s, m.s)) for (const k of this.keys) logical.set(slotId(s, k), null);
        }
      });
      for (const q of seqs) {
        if (q <= last) problems.push(`unit ${i}: sequence ${q} does not exceed ${last} (commit order or I7 broken)`);
        last = Math.max(last, q);
      }
      seqsOf.push(seqs);
    });
    if (problems.length > 0) throw new Error(`acknowledgements are inconsistent:\n  ${problems.slice(0, 20).join("\n  ")}`);
    // Bounds of the version an in-flight write of unit i may carry: strictly between the acked
    // sequence numbers issued before and after it.
    const lo: number[] = [];
    const hi: number[] = [];
    let before = this.maxSeq;
    for (let i = 0; i < this.units.length; i++) {
      lo.push(before);
      for (const q of seqsOf[i] as number[]) before = Math.max(before, q);
    }
    let after = Number.POSITIVE_INFINITY;
    for (let i = this.units.length - 1; i >= 0; i--) {
      hi[i] = after;
      for (const q of seqsOf[i] as number[]) after = Math.min(after, q);
    }
    return { lo, hi };
  }

  /** Reads the exact-scope state of every slot of the universe. */
  private async observe(store: Engram): Promise<Map<string, SlotState>> {
    const out = new Map<string, SlotState>();
    for (const s of this.scopes) {
      for (const k of this.keys) {
        const r = await store.read(k, { scope: s, inherit: false });
        if (r.status === "NOT_FOUND") out.set(slotId(s, k), null);
        else {
          if (r.scope !== s) throw new Error(`read(${k}, {scope: ${s}, inherit: false}) answered from scope ${r.scope}`);
          const b = typeof r.value !== "string";
          out.set(slotId(s, k), { v: b ? Buffer.from(r.value as Uint8Array).toString("utf8") : (r.value as string), b, ver: r.version });
        }
      }
    }
    return out;
  }

  private mismatches(expected: Map<string, SlotState>, writer: Map<string, number>, observed: Map<string, SlotState>, lo: number[], hi: number[]): string[] {
    const out: string[] = [];
    for (const [id, want] of expected) {
      const got = observed.get(id);
      const [s, k] = id.split("\u0000");
      let ok: boolean;
      if (want === null || got === null || got === undefined) ok = want === got;
      else if (want.v !== got.v || want.b !== got.b) ok = false;
      else if (want.ver !== null) ok = got.ver === want.ver;
      else {
        const i = writer.get(id) as number;
        ok = got.ver !== null && got.ver > (lo[i] as number) && got.ver < (hi[i] as number);
      }
      if (!ok) out.push(`${s}/${k}: expected ${show(want)}, read ${show(got)}`);
    }
    return out;
  }

  /**
   * Checks an open store (just reopened after the child died) against this round's units, then
   * makes what it read the starting state of the next round. Throws with a full report on failure.
   */
  async settle(store: Engram, label: string): Promise<SettleReport> {
    const { lo, hi } = this.checkAcks();
    const observed = await this.observe(store);
    const n = this.units.length;
    // The cut must keep every acknowledged unit that committed something. A unit acknowledged with
    // nothing written (forgets of slots that were not live: tombstoneSeq null) is no commit, but
    // its answer must hold after the crash too: its slots read NOT_FOUND whatever the cut.
    let lastAcked = -1;
    this.units.forEach((u, i) => {
      if (u.res !== null && u.res.some((r) => "ver" in r || r.ts !== null)) lastAcked = i;
    });
    let kept = -1;
    const tried: string[] = [];
    for (let p = lastAcked + 1; p <= n; p++) {
      const { state, writer } = this.apply(p);
      for (let i = p; i < n; i++) {
        const u = this.units[i] as Unit;
        if (u.res === null) continue;
        for (const m of u.muts) {
          if (m.op !== "f") continue;
          state.set(slotId(m.s, m.k), null);
          writer.delete(slotId(m.s, m.k));
        }
      }
      const bad = this.mismatches(state, writer, observed, lo, hi);
      if (bad.length === 0) {
        kept = p;
        break;
      }
      tried.push(`  prefix of ${p}/${n} units: ${bad.length} slots differ, e.g.\n      ${bad.slice(0, 6).join("\n      ")}`);
    }
    if (kept < 0) {
      const flight = this.units
        .map((u, i) => ({ u, i }))
        .filter(({ u, i }) => u.res === null || i > lastAcked - 3)
        .map(({ u, i }) => `  unit ${i} ${u.res === null ? "IN FLIGHT" : `acked ${JSON.stringify(u.res)}`}: ${JSON.stringify(u.muts.map((m) => ({ ...m, v: "v" in m ? m.v.slice(0, 40) : undefined })))}`);
      throw new Error(
        `${label}: the reopened store is not any prefix of the commit sequence that keeps every acknowledged unit ` +
          `(${n} units sent, last acked commit #${lastAcked}; an acked forget with tombstoneSeq null must stay NOT_FOUND too):\n${tried.join("\n")}\nunits near the cut:\n${flight.slice(-12).join("\n")}`,
      );
    }
    // Inherited reads must agree with the exact-scope states just read.
    for (const s of this.scopes) {
      for (const k of this.keys) {
        const r = await store.read(k, { scope: s });
        const from = lineage(s).find((x) => observed.get(slotId(x, k)) !== null && observed.get(slotId(x, k)) !== undefined);
        const want = from === undefined ? null : (observed.get(slotId(from, k)) as SlotVal);
        if (r.status === "NOT_FOUND") {
          if (want !== null) throw new Error(`${label}: inherited read of ${k} in ${s} is NOT_FOUND, but ${from} holds ${show(want)}`);
        } else {
          const v = typeof r.value === "string" ? r.value : Buffer.from(r.value).toString("utf8");
          if (want === null || r.scope !== from || v !== want.v || r.version !== want.ver) {
            throw new Error(`${label}: inherited read of ${k} in ${s} returned ${r.scope}:${show({ v, b: typeof r.value !== "string", ver: r.version })}, expected ${from ?? "-"}:${show(want)}`);
          }
        }
      }
      const listed: string[] = [];
      for await (const e of store.list({ scope: s, inherit: false })) listed.push(e.key);
      const live = this.keys.filter((k) => observed.get(slotId(s, k)) !== null).sort();
      if (JSON.stringify(listed) !== JSON.stringify(live)) throw new Error(`${label}: list(${s}) = ${JSON.stringify(listed)}, live slots are ${JSON.stringify(live)}`);
    }
    // The observed state becomes the durable truth; remember every version seen (I7 across restarts).
    for (const u of this.units) for (const r of u.res ?? []) this.maxSeq = Math.max(this.maxSeq, "ver" in r ? r.ver : (r.ts ?? 0));
    for (const [id, st] of observed) {
      if (st?.ver != null) {
        this.maxVer.set(id, Math.max(this.maxVer.get(id) ?? 0, st.ver));
        this.maxSeq = Math.max(this.maxSeq, st.ver);
      }
    }
    for (const u of this.units) {
      u.muts.forEach((m, j) => {
        const r = u.res?.[j];
        if (m.op === "w" && r !== undefined && "ver" in r) this.maxVer.set(slotId(m.s, m.k), Math.max(this.maxVer.get(slotId(m.s, m.k)) ?? 0, r.ver));
      });
    }
    this.state = observed;
    const report: SettleReport = {
      units: n,
      acked: this.units.filter((u) => u.res !== null).length,
      inFlight: this.units.filter((u) => u.res === null).length,
      inFlightKept: this.units.slice(0, kept).filter((u) => u.res === null).length,
      live: [...observed.values()].filter((x) => x !== null).length,
    };
    this.totals.settles += 1;
    this.totals.units += report.units;
    this.totals.acked += report.acked;
    this.totals.inFlight += report.inFlight;
    this.totals.inFlightKept += report.inFlightKept;
    this.units = [];
    return report;
  }

  /** Live slots of the current state (after a settle). */
  liveCount(): number {
    return [...this.state.values()].filter((x) => x !== null).length;
  }
}

/** Names in DIR/segments that an open or a reopened store must not leave behind. */
export function leftovers(dir: string): string[] {
  const segs = path.join(dir, "segments");
  if (!fs.existsSync(segs)) return [];
  return fs.readdirSync(segs).filter((n) => n.endsWith(".journal") || n.endsWith(".tmp"));
}

/**
 * Whether `name` (in DIR/segments) is a file of a compaction's protocol in progress — a journal, an
 * output or a hint being written — and not a sealed segment's hint written off the commit turn
 * (`.hint.sealing.tmp`, engine/hints.ts writeSealedHintAsync), which every rotation makes.
 */
export function isCompactionFile(name: string): boolean {
  return name.endsWith(".journal") || (name.endsWith(".tmp") && !name.endsWith(SEALING_HINT_TMP));
}
