/**
 * What compaction would keep: one pass over the keydir that sorts every record a segment holds
 * into the ones that survive (by gc-policy.ts) and the retention records that may go. The
 * compactor hands the survivors to a worker; stats() counts them as live bytes. Pure reads of the
 * keydir: nothing here changes state, so a plan stays safe while compactions run (records only ever
 * die, and the compactor moves or clears a pointer only if it still names the planned place).
 */
import * as P from "./gc-policy.js";
import { assert, fail } from "../rules/assert.js";
import { isReserved, unsafeCompactForTests, type Keydir, type Slot } from "./keydir.js";
import { ROW_HELD, type RowColumns } from "./compact-slots.js";
import { versionSurvivesKill } from "../rules/gc-rule.js";
import type { ScopeRule } from "../rules/scope-rules.js";
import { WARM_RETENTION_MS, warmKeydir } from "./plan-warm.js";

/** What kind of record a plan entry is (who points at it: a slot's PUT, TOMBSTONE or CLEAR; an erasure's scope). */
export const KIND_PUT = 0;
export const KIND_TOMB = 1;
export const KIND_CLEAR = 2;
export const KIND_ERASE = 3;
/**
 * A held compact row's PUT (engine/compact-slots.ts): a live value of generation 1 that never
 * expires, pointed at by the row whose number the entry holds — or, if the row was made a Slot
 * while the pass ran, by that Slot (Keydir.forwardedSlot).
 */
export const KIND_ROW = 4;

/**
 * Records of one segment as parallel arrays — no object per record (a pass plans every record of
 * the store): entry i (i < length) is a record of kind kindAt(i) at offAt(i), lenAt(i) bytes
 * long, pointed at by refAt(i) (the slot; for KIND_ERASE the erased scope; for KIND_ROW the row's number). The arrays are kept
 * in chunks of CHUNK entries (the first one grows by doubling up to that size), so that the list
 * grows without copying what it holds: a plan's lists doubled and copied their typed arrays (and
 * grew their refs by copy) until the nineteenth session, which touched about twice the memory
 * the entries need — fresh pages at ~12 µs each on the machines measured — and left the copies
 * to the scavenger. Earlier still, plain arrays: a W5 pass pushed ~325k entries into them in
 * 111 ms of its main thread (twelfth session).
 */
export class RecordList {
  private kinds: Uint8Array[] = [];
  private offs: Uint32Array[] = [];
  private lens: Uint32Array[] = [];
  private refs: Array<Slot | string | number>[] = [];
  /** Entries held. */
  length = 0;

  /** Appends one entry (offsets and lengths below 2^32, as a segment's are). */
  push(kind: number, ref: Slot | string | number, off: number, len: number): void {
    const n = this.length;
    const c = n >>> CHUNK_BITS;
    const i = n & CHUNK_MASK;
    if (c === this.offs.length || (c === 0 && i === (this.offs[0] as Uint32Array).length)) this.grow(c);
    const offs = this.offs[c] as Uint32Array;
    const lens = this.lens[c] as Uint32Array;
    (this.kinds[c] as Uint8Array)[i] = kind;
    (this.refs[c] as Array<Slot | string | number>)[i] = ref;
    offs[i] = off;
    lens[i] = len;
    this.length = n + 1;
    assert(offs[i] === off && lens[i] === len, "a record list holds an offset and a length exactly (below 2^32)");
  }

  /** Makes room at chunk `c`: the first chunk doubled (its entries kept), or a new full chunk after it. */
  private grow(c: number): void {
    if (c > 0) {
      this.kinds.push(new Uint8Array(CHUNK));
      this.offs.push(new Uint32Array(CHUNK));
      this.lens.push(new Uint32Array(CHUNK));
      this.refs.push(new Array<Slot | string | number>(CHUNK));
      return;
    }
    const first = this.offs[0];
    const room = first === undefined ? FIRST_ROOM : 2 * first.length;
    assert(room <= CHUNK, "only the first chunk grows, up to a chunk's size");
    const kinds = new Uint8Array(room);
    const offs = new Uint32Array(room);
    const lens = new Uint32Array(room);
    const refs = new Array<Slot | string | number>(room);
    if (first !== undefined) {
      kinds.set(this.kinds[0] as Uint8Array);
      offs.set(first);
      lens.set(this.lens[0] as Uint32Array);
      const old = this.refs[0] as Array<Slot | string | number>;
      for (let i = 0; i < old.length; i++) refs[i] = old[i] as Slot | string | number;
    }
    this.kinds[0] = kinds;
    this.offs[0] = offs;
    this.lens[0] = lens;
    this.refs[0] = refs;
  }

  /** The kind of entry i (i < length). */
  kindAt(i: number): number {
    return (this.kinds[i >>> CHUNK_BITS] as Uint8Array)[i & CHUNK_MASK] as number;
  }

  /** The file offset of entry i. */
  offAt(i: number): number {
    return (this.offs[i >>> CHUNK_BITS] as Uint32Array)[i & CHUNK_MASK] as number;
  }

  /** The length in bytes of entry i. */
  lenAt(i: number): number {
    return (this.lens[i >>> CHUNK_BITS] as Uint32Array)[i & CHUNK_MASK] as number;
  }

  /** What entry i is pointed at by: its slot, for KIND_ERASE its scope, for KIND_ROW its row's number. */
  refAt(i: number): Slot | string | number {
    return (this.refs[i >>> CHUNK_BITS] as Array<Slot | string | number>)[i & CHUNK_MASK] as Slot | string | number;
  }

  /** The slot of entry i (which is neither KIND_ERASE nor KIND_ROW). */
  slotAt(i: number): Slot {
    return this.refAt(i) as Slot;
  }

  /** The row number of entry i (which is KIND_ROW). */
  rowAt(i: number): number {
    return this.refAt(i) as number;
  }

  /** The offsets of the entries, in one new array (in the list's order). */
  offsets(): Uint32Array {
    const out = new Uint32Array(this.length);
    for (let c = 0, at = 0; at < this.length; c++) {
      const chunk = this.offs[c] as Uint32Array;
      const n = Math.min(chunk.length, this.length - at);
      out.set(n === chunk.length ? chunk : chunk.subarray(0, n), at);
      at += n;
    }
    return out;
  }

  /** The entries as [offset, length] pairs in one new array (a worker task's `live`). */
  pairs(): Uint32Array {
    const out = new Uint32Array(2 * this.length);
    for (let i = 0; i < this.length; i++) {
      out[2 * i] = this.offAt(i);
      out[2 * i + 1] = this.lenAt(i);
    }
    return out;
  }

  /** Total bytes of the entries. */
  bytes(): number {
    let n = 0;
    for (let i = 0; i < this.length; i++) n += this.lenAt(i);
    return n;
  }
}

/** Entries per chunk of a record list: 2^CHUNK_BITS. */
const CHUNK_BITS = 10;
const CHUNK = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK - 1;
/** Entries a record list's first chunk has room for before it first doubles. */
const FIRST_ROOM = 16;

/**
 * What one compaction of a segment keeps (survivors, in the order the keydir walk met them: the
 * worker puts them in file order, engine/offset-order.ts), which retention records it may
 * drop (droppable), and which current PUT records are dead (deadPuts: the slot still points at
 * them, so the worker need not name them and the main thread need not look them up). Rows are
 * only ever survivors (a row the rules kill is made a Slot first); `rowScopes` holds their scopes
 * (a row has no Slot to carry one), for the segment's `scopes`.
 */
export interface SegmentPlan {
  survivors: RecordList;
  droppable: RecordList;
  deadPuts: RecordList;
  rowScopes: Set<string>;
}

/**
 * The lowest sequence of the records in `list` as the keydir names them now (0: none): a slot's
 * PUT, TOMBSTONE or CLEAR sequence, an erasure's. A copy-on-write output's hint is packed as its
 * records are copied from this prediction of their lowest sequence (compaction-core.ts
 * OutputFile); a slot that moved since the plan only makes it wrong, which costs time, not bytes.
 */
export function lowestSeq(list: RecordList, keydir: Keydir): number {
  let low = 0;
  for (let i = 0; i < list.length; i++) {
    const kind = list.kindAt(i);
    const ref = list.refAt(i);
    let seq: number;
    if (typeof ref === "string") seq = keydir.erases.get(ref)?.seq ?? 0;
    else if (typeof ref === "number") seq = rowPutSeq(keydir, ref);
    else seq = kind === KIND_PUT ? ref.putSeq : kind === KIND_TOMB ? ref.tombSeq : ref.clearSeq;
    if (seq > 0 && (low === 0 || seq < low)) low = seq;
  }
  return low;
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

/** An empty plan. */
export function emptyPlan(): SegmentPlan {
  return { survivors: new RecordList(), droppable: new RecordList(), deadPuts: new RecordList(), rowScopes: new Set() };
}

/** The PUT sequence of the name a plan filed as row `row`, as the keydir holds it now: the row's, the Slot's it became, or 0 (freed). */
function rowPutSeq(keydir: Keydir, row: number): number {
  const slot = keydir.forwardedSlot(row);
  if (slot !== undefined) return slot.putSeq;
  const rows = keydir.rowColumns;
  return rows.state[row] === ROW_HELD ? (rows.putSeq[row] as number) : 0;
}

/**
 * The earliest time (ms, the store's clock) after `now` at which a record the walk found live may
 * die by time alone — a value's expiry plus its scope's retention window, a valueless slot's
 * retention window, an erasure's — with no write, forget or pass to tell the compactor (`at`:
 * Infinity when none). A lower bound: a record may still be held then by an older one of its slot.
 */
export interface Soonest {
  at: number;
}

/**
 * Per segment (all of them, or those in `only`), the records that survive — in walk order — and
 * the retention records (tombstones, clears, erasures) that do not, as of `now`. With
 * `tally`, the same walk also counts what survives in every other segment into it (what
 * tallySegments would say of them): no record list is built for those. With `soonest`, the walk
 * also lowers `soonest.at` to the earliest later time a surviving record may die by time alone.
 */
export function planSegments(host: PlanHost, now: number, only: ReadonlySet<number> | null, tally?: Map<number, LiveTally>, soonest?: Soonest): Map<number, SegmentPlan> {
  if (!planWarm.done && !planWarm.skip) warmPlanWalks(now);
  planWalks.count += 1;
  const keydir = host.keydir;
  const walk = new PlanWalk(now, only, tally ?? null, soonest ?? null);
  const rules = host.options.scopeRules.length > 0;
  const fixedRetention = host.options.tombstoneRetentionMs;
  // Per scope, not per slot: its retention window and the latest erasure over it (both fixed
  // while the plan runs: a plan is one synchronous pass). A slot walk over Maps, no generator.
  // Compact rows are walked as they are (KIND_ROW): a pass publishing this plan pinned them first (Keydir.pinRows).
  const rows = keydir.rowColumns;
  // Map.forEach, not for-of: an iterator's next() makes a result object per name until the walk
  // is optimized, which a fresh process's first plans are not (~1.3 MB a 100k-name walk).
  const visit = (ref: Slot | number): void => {
    if (typeof ref === "number") walk.row(rows, ref);
    else if (!isReserved(ref)) walk.slot(keydir, ref); // a reserved slot has no record yet
  };
  for (const [scope, keys] of keydir.scopesWithRows()) {
    const eraseSeq = keydir.eraseSeq(scope);
    walk.scope(rules ? host.retentionMsFor(scope) : fixedRetention, eraseSeq, scope);
    if (eraseSeq > 0) slotsOfKilledRows(keydir, scope, keys, eraseSeq);
    keys.forEach(visit);
  }
  for (const [scope, e] of keydir.erases) {
    const parts = [e, ...(e.more ?? [])].filter((x) => walk.covers(x.seg));
    if (parts.length === 0) continue;
    const retentionMs = host.retentionMsFor(scope);
    const live = P.eraseRecordLive(keydir, scope, e, now, retentionMs);
    if (live) walk.diesAt(e.committedAt + retentionMs);
    for (const x of parts) walk.file(x.seg, live, KIND_ERASE, scope, x.off, x.len); // every chunk lives or goes together
  }
  return walk.out;
}

/**
 * Makes a Slot of every held row of `scope` (its map `keys`) whose PUT the erasure of sequence
 * `eraseSeq` over the scope killed: the rules for a dead value (its drop, its slot's retention)
 * work on Slots. A Map's entry set to another value keeps its place in an iteration under way.
 */
function slotsOfKilledRows(keydir: Keydir, scope: string, keys: ReadonlyMap<string, Slot | number>, eraseSeq: number): void {
  const rows = keydir.rowColumns;
  for (const [key, ref] of keys) {
    if (typeof ref !== "number" || rows.state[ref] !== ROW_HELD) continue;
    if (!versionSurvivesKill(rows.putSeq[ref] as number, eraseSeq)) keydir.slotOfHeldRow(scope, key, ref);
  }
}

/**
 * The state of one planSegments pass: the plans made so far (the last one looked up kept at
 * hand: consecutive slots mostly lie in one segment), and the current scope's retention window
 * and erasure sequence.
 */
class PlanWalk {
  readonly out = new Map<number, SegmentPlan>();
  private lastSeg = -1;
  private last: SegmentPlan = emptyPlan();
  private retention = 0;
  private scopeEraseSeq = 0;
  private scopeName = "";

  /** The segment asked about last and whether it is planned (consecutive slots mostly lie in one segment). */
  private wantSeg = -1;
  private wantIs = false;
  /** The tally of the segment counted last. */
  private lastTallySeg = -1;
  private lastTally: LiveTally = { liveBytes: 0, records: 0, tombstones: 0 };

  constructor(
    private readonly now: number,
    private readonly only: ReadonlySet<number> | null,
    private readonly tallies: Map<number, LiveTally> | null,
    private readonly soonest: Soonest | null,
  ) {}

  /** A record found live may die by time alone at `at`: lowers soonest when that is later than now (an earlier time holds it for another reason). */
  diesAt(at: number): void {
    const s = this.soonest;
    if (s !== null && at > this.now && at < s.at) s.at = at;
  }

  /** True when segment `seg` is planned (a record there, in the set asked for). */
  wanted(seg: number): boolean {
    if (seg !== this.wantSeg) {
      this.wantSeg = seg;
      this.wantIs = seg !== 0 && (this.only === null || this.only.has(seg));
    }
    return this.wantIs;
  }

  /** True when a record in segment `seg` is planned or, with a tally asked for, counted. */
  covers(seg: number): boolean {
    return seg !== 0 && (this.tallies !== null || this.wanted(seg));
  }

  /**
   * Files the record of `kind` at (seg, off, len), pointed at by `ref`, as surviving (`live`) or
   * not: into the segment's plan when it is planned, else into its tally (covers(seg) held).
   */
  file(seg: number, live: boolean, kind: number, ref: Slot | string | number, off: number, len: number): void {
    if (this.wanted(seg)) {
      const p = this.planOf(seg);
      (live ? p.survivors : kind === KIND_PUT ? p.deadPuts : p.droppable).push(kind, ref, off, len);
      if (kind === KIND_ROW) p.rowScopes.add(this.scopeName);
      return;
    }
    if (this.tallies === null || seg === 0) fail(`segment ${seg} is neither planned nor counted`);
    const t = this.tallyOf(seg); // a segment with only dead records is counted too: 0 live bytes
    if (!live && !unsafeTallyForTests.countDead) return;
    t.liveBytes += len;
    t.records += 1;
    if (kind !== KIND_PUT && kind !== KIND_ROW) t.tombstones += 1;
  }

  /** The tally of segment `seg`, made on first use. */
  private tallyOf(seg: number): LiveTally {
    if (seg === this.lastTallySeg) return this.lastTally;
    const tallies = this.tallies as Map<number, LiveTally>; // covers(seg) held, seg not planned
    let t = tallies.get(seg);
    if (t === undefined) {
      t = { liveBytes: 0, records: 0, tombstones: 0 };
      tallies.set(seg, t);
    }
    this.lastTallySeg = seg;
    this.lastTally = t;
    return t;
  }

  /** The plan of segment `seg`, made on first use. */
  planOf(seg: number): SegmentPlan {
    if (seg === this.lastSeg) return this.last;
    let p = this.out.get(seg);
    if (p === undefined) {
      p = emptyPlan();
      this.out.set(seg, p);
    }
    this.lastSeg = seg;
    this.last = p;
    return p;
  }

  /** The slots that follow are of scope `name`, with this retention window and latest erasure over it. */
  scope(retentionMs: number, scopeEraseSeq: number, name: string): void {
    this.retention = retentionMs;
    this.scopeEraseSeq = scopeEraseSeq;
    this.scopeName = name;
  }

  /**
   * Files held row `row`'s PUT (in a planned or counted segment) as surviving: a value of
   * generation 1 that never expires (compact-slots.ts), which only an erasure of its scope can
   * kill — and the walk made every row an erasure killed a Slot first. A reserved row has no record yet.
   */
  row(rows: RowColumns, row: number): void {
    if (rows.state[row] !== ROW_HELD || unsafeCompactForTests.skipRows) return;
    const seg = rows.seg[row] as number;
    if (!this.covers(seg)) return;
    assert(versionSurvivesKill(rows.putSeq[row] as number, this.scopeEraseSeq), "a row the plan files is a value no erasure killed");
    this.file(seg, true, KIND_ROW, row, rows.off[row] as number, rows.len[row] as number);
  }

  /** Files the slot's PUT, TOMBSTONE and CLEAR records (those in planned segments) as surviving or not. */
  slot(keydir: Keydir, slot: Slot): void {
    const seg = slot.seg;
    if (this.covers(seg)) {
      const live = P.valueRecordLiveUnder(slot, this.scopeEraseSeq, this.now, this.retention);
      if (live && slot.expiresAt !== 0) this.diesAt(slot.expiresAt + this.retention);
      this.file(seg, live, KIND_PUT, slot, slot.off, slot.len);
    }
    const tombSeg = slot.tombSeg;
    if (this.covers(tombSeg)) {
      const live = P.tombstoneRecordLive(slot, this.now, this.retention, keydir);
      if (live) this.retentionEnds(slot);
      this.file(tombSeg, live, KIND_TOMB, slot, slot.tombOff, slot.tombLen);
    }
    const clearSeg = slot.clearSeg;
    if (this.covers(clearSeg)) {
      const live = P.clearRecordLive(slot, this.now, this.retention, keydir);
      if (live) this.retentionEnds(slot);
      this.file(clearSeg, live, KIND_CLEAR, slot, slot.clearOff, slot.clearLen);
    }
  }

  /** A live retention record of a slot whose values are all reclaimed may go when its window ends. */
  private retentionEnds(slot: Slot): void {
    if (this.soonest !== null && slot.physical === 0 && slot.reclaimedAt !== 0) this.diesAt(slot.reclaimedAt + this.retention);
  }
}

/**
 * Per segment id, the bytes and records that would survive a compaction now (retention records
 * count as tombstones): planSegments' walk with no segment planned, so no record list is built
 * (compact-13: the lists' growth alone faulted in ~4 MB of fresh memory per 100k
 * records, at ~10 µs a page on the machines measured). test/plan-tally.test.ts checks it against
 * the sums of a full plan. With `soonest`, as planSegments.
 */
export function tallySegments(host: PlanHost, now: number, soonest?: Soonest): Map<number, LiveTally> {
  const out = new Map<number, LiveTally>();
  planSegments(host, now, NONE, out, soonest);
  return out;
}

/**
 * Test switch, never set by the engine or any option (test/plan-tally.test.ts): `countDead` files
 * a tallied segment's dead records as live — a count the full plan's sums then contradict.
 */
export const unsafeTallyForTests = { countDead: false };

/** Walks of every name made so far (planSegments, tallySegments), for tests: a count, never reset. The warm-up's walks are not counted. */
export const planWalks = { count: 0 };

/**
 * Whether this thread's walks were warmed (warmPlanWalks: once, before its first walk), how many
 * times the warm-up ran (tests: once per thread), and the switch that leaves them cold (`skip`:
 * bench/ and tests compare the two; it changes no answer).
 */
export const planWarm = { done: false, skip: false, runs: 0 };

/**
 * A plan host over the warm-up keydir (engine/plan-warm.ts) at time `now`: a store's options'
 * shape (no scope rules, the default retention) and no store behind it.
 */
export function warmPlanHost(now: number): PlanHost {
  return { keydir: warmKeydir(now), options: { scopeRules: [], tombstoneRetentionMs: WARM_RETENTION_MS }, retentionMsFor: () => WARM_RETENTION_MS };
}

/**
 * Runs every kind of walk — a pass's plan of every segment (with the soonest death), a plan of
 * chosen segments, one that also tallies the others, stats()' tally with and without the soonest
 * death — with a task's reads of the plans (lowestSeq, pairs, bytes, offsets), over a small keydir
 * of every kind of name (warmPlanHost): the type feedback that V8 compiles the walk's functions
 * with then holds every branch, and the first walk of a kind this process had not made yet does
 * not throw away the code compiled for the walks before it. Changes nothing outside that keydir;
 * its walks are not counted in planWalks.
 */
function warmPlanWalks(now: number): void {
  planWarm.done = true;
  const host = warmPlanHost(now);
  const counted = planWalks.count;
  for (const p of planSegments(host, now, null, undefined, { at: Infinity }).values()) {
    lowestSeq(p.survivors, host.keydir);
    p.survivors.pairs();
    p.survivors.bytes();
    p.droppable.offsets();
    p.deadPuts.offsets();
  }
  planSegments(host, now, new Set([1]));
  planSegments(host, now, new Set([2]), new Map());
  tallySegments(host, now, { at: Infinity });
  tallySegments(host, now);
  planWarm.runs += 1;
  planWalks.count = counted;
}

/** The empty set of segments: planSegments plans none of them. */
const NONE: ReadonlySet<number> = new Set();

