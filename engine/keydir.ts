/**
 * The keydir: for every slot (scope, key) its value location and its retention record, plus the
 * latest scope-erasure record per scope. Everything a read, a probe or the GC needs is here.
 *
 * The apply* functions are the single way state changes from records, used both by recovery
 * (replaying segments, possibly out of order after copy-on-write compaction) and by the commit
 * path (after a group is written): each is guarded by sequence numbers, so order does not matter
 * and replay is idempotent except for the physical-record count, which counts every PUT seen.
 */
import type { ErasedSlot } from "../segments/erase-list.js";
import { expiredAt, killStands, versionSurvivesKill } from "../rules/gc-rule.js";
import { lineageMax, scopeWithin } from "../rules/names.js";

/**
 * The fields of a slot that most slots never set: its tombstone, its undelete, its erase-list
 * mention and its reclamation time. Kept apart so that a slot that was only ever written costs
 * one small object (issue 11: heap per key); Slot's accessors read them as 0 while absent.
 */
class SlotRare {
  tombSeq = 0;
  tombGen = 0;
  tombSeg = 0;
  tombOff = 0;
  tombLen = 0;
  clearSeq = 0;
  clearSeg = 0;
  clearOff = 0;
  clearLen = 0;
  listedSeq = 0;
  reclaimedAt = 0;

  constructor() {
    // A time (ms since epoch) is no small integer: had the field started as one, the first real
    // time stored would change its representation and make every SlotRare made before migrate on
    // its next touch (~2.7 µs each: 68 ms of a 25k-key compaction publish, compact-5's profile).
    // Storing a fraction first makes it a double field from the start.
    this.reclaimedAt = 0.5;
    this.reclaimedAt = 0;
  }
}

/**
 * One slot: its latest PUT (possibly dead) and its retention record. The fields every slot has
 * are plain; the rest live in a SlotRare made on the first non-zero write (writing 0 to an absent
 * one is a no-op, so reading and writing them reads exactly as if they were plain fields).
 */
export class Slot {
  readonly scope: string;
  readonly key: string;
  /** Latest PUT: sequence (= version), generation, location (seg 0 = no record), expiry. */
  putSeq = 0;
  putGen = 0;
  seg = 0;
  off = 0;
  len = 0;
  expiresAt = 0;
  /** The slot's current generation: the highest of its PUT and CLEAR generations. */
  generation = 0;
  /** PUT records of this slot still physically present in segment files (any generation). */
  physical = 0;
  private rare: SlotRare | null = null;

  constructor(scope: string, key: string) {
    this.scope = scope;
    this.key = key;
  }

  /** The rare fields, made on first use. */
  private more(): SlotRare {
    return (this.rare ??= new SlotRare());
  }

  /** Latest TOMBSTONE: sequence, generation it killed, location. */
  get tombSeq(): number { return this.rare === null ? 0 : this.rare.tombSeq; }
  set tombSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().tombSeq = v; }
  get tombGen(): number { return this.rare === null ? 0 : this.rare.tombGen; }
  set tombGen(v: number) { if (v !== 0 || this.rare !== null) this.more().tombGen = v; }
  get tombSeg(): number { return this.rare === null ? 0 : this.rare.tombSeg; }
  set tombSeg(v: number) { if (v !== 0 || this.rare !== null) this.more().tombSeg = v; }
  get tombOff(): number { return this.rare === null ? 0 : this.rare.tombOff; }
  set tombOff(v: number) { if (v !== 0 || this.rare !== null) this.more().tombOff = v; }
  get tombLen(): number { return this.rare === null ? 0 : this.rare.tombLen; }
  set tombLen(v: number) { if (v !== 0 || this.rare !== null) this.more().tombLen = v; }
  /** Latest CLEAR (undelete): sequence and location. */
  get clearSeq(): number { return this.rare === null ? 0 : this.rare.clearSeq; }
  set clearSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().clearSeq = v; }
  get clearSeg(): number { return this.rare === null ? 0 : this.rare.clearSeg; }
  set clearSeg(v: number) { if (v !== 0 || this.rare !== null) this.more().clearSeg = v; }
  get clearOff(): number { return this.rare === null ? 0 : this.rare.clearOff; }
  set clearOff(v: number) { if (v !== 0 || this.rare !== null) this.more().clearOff = v; }
  get clearLen(): number { return this.rare === null ? 0 : this.rare.clearLen; }
  set clearLen(v: number) { if (v !== 0 || this.rare !== null) this.more().clearLen = v; }
  /**
   * Highest sequence of a SCOPE_ERASE whose erase list names this slot (committed or replayed);
   * 0 when none does. Only such a slot must outlive its own records while a covering erasure is
   * retained: a restart would rebuild it from that list (issue 9 defect 6).
   */
  get listedSeq(): number { return this.rare === null ? 0 : this.rare.listedSeq; }
  set listedSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().listedSeq = v; }
  /** When `physical` last reached zero (ms, engine clock); 0 while records remain. */
  get reclaimedAt(): number { return this.rare === null ? 0 : this.rare.reclaimedAt; }
  set reclaimedAt(v: number) { if (v !== 0 || this.rare !== null) this.more().reclaimedAt = v; }
}

/** The latest SCOPE_ERASE record of one scope. */
export interface EraseRecord {
  seq: number;
  /** When the erasure was committed (ms, engine clock): its retention window runs from here. */
  committedAt: number;
  seg: number;
  off: number;
  len: number;
  /** The other records of a chunked erasure (same sequence, same batch), if any. */
  more?: Location[];
}

/** Where a record lies. */
export interface Location {
  seg: number;
  off: number;
  len: number;
}

/**
 * Retention records not applied yet (engine/hint-index.ts: the entries of valid hint files, looked
 * up by slot). The keydir asks it before it answers for a slot it does not hold, and has it apply
 * everything before any pass over all slots, so every answer is the one an eager open would give.
 */
export interface DeferredSlots {
  /** Applies every entry of (scope, key) not applied yet, through `keydir.ensureApplied`. */
  load(keydir: Keydir, scope: string, key: string): void;
  /** Applies every entry not applied yet. The keydir forgets the source afterwards. */
  loadAll(keydir: Keydir): void;
}

/**
 * Slots by scope then key, and erasures by scope. Invariant (with a deferred source): a slot held
 * in the maps has every deferred entry of its (scope, key) applied, because nothing creates or
 * returns one without asking the source first; `erases` is always complete (applied at open).
 */
export class Keydir {
  private readonly byScope = new Map<string, Map<string, Slot>>();
  readonly erases = new Map<string, EraseRecord>();
  private count = 0;
  private deferred: DeferredSlots | null = null;

  /** Installs the source of entries not applied yet (recovery, before it applies anything else). */
  defer(source: DeferredSlots): void {
    this.deferred = source;
  }

  /**
   * Drops every slot, erasure and deferred entry (close(): a closed store that its caller still
   * references must not keep its whole index alive on the JS heap).
   */
  release(): void {
    this.byScope.clear();
    this.erases.clear();
    this.count = 0;
    this.deferred = null;
  }

  /** True while some entries are not applied yet. */
  get isDeferred(): boolean {
    return this.deferred !== null;
  }

  /** Applies every deferred entry now (before any pass over all slots). */
  loadAll(): void {
    const source = this.deferred;
    if (source === null) return;
    this.deferred = null;
    try {
      source.loadAll(this);
    } catch (err) {
      this.deferred = source; // a source that refuses (a malformed hint) keeps refusing every lookup
      throw err;
    }
  }

  /** Slots by scope then key (every deferred entry applied first). */
  get scopes(): ReadonlyMap<string, ReadonlyMap<string, Slot>> {
    this.loadAll();
    return this.byScope;
  }

  /** Number of slots (retention records) held. */
  get size(): number {
    this.loadAll();
    return this.count;
  }

  /** The slot of (scope, key), or undefined. */
  get(scope: string, key: string): Slot | undefined {
    const slot = this.byScope.get(scope)?.get(key);
    if (slot !== undefined || this.deferred === null) return slot;
    this.deferred.load(this, scope, key);
    return this.byScope.get(scope)?.get(key);
  }

  /** The slot of (scope, key), created empty when missing. */
  ensure(scope: string, key: string): Slot {
    const slot = this.byScope.get(scope)?.get(key);
    if (slot !== undefined) return slot;
    if (this.deferred !== null) this.deferred.load(this, scope, key);
    return this.ensureApplied(scope, key);
  }

  /**
   * ensure() for a deferred source applying its own entries (it has the slot's entries in hand):
   * never asks the source again.
   */
  ensureApplied(scope: string, key: string): Slot {
    let keys = this.byScope.get(scope);
    if (keys === undefined) {
      keys = new Map();
      this.byScope.set(scope, keys);
    }
    let slot = keys.get(key);
    if (slot === undefined) {
      slot = new Slot(scope, key);
      keys.set(key, slot);
      this.count += 1;
    }
    return slot;
  }

  /** Forgets a slot entirely: its retention record is gone ("absent"). */
  delete(slot: Slot): void {
    const keys = this.byScope.get(slot.scope);
    if (keys?.get(slot.key) !== slot) return;
    keys.delete(slot.key);
    this.count -= 1;
    if (keys.size === 0) this.byScope.delete(slot.scope);
  }

  /** Highest erasure sequence that covers `scope` (its own or an ancestor's), 0 for none. */
  eraseSeq(scope: string): number {
    if (this.erases.size === 0) return 0;
    return lineageMax(scope, (s) => this.erases.get(s)?.seq ?? 0);
  }

  /** Calls `visit` with every slot held now, deferred entries left deferred (recovery's pass at open). */
  forEachHeld(visit: (slot: Slot) => void): void {
    for (const keys of this.byScope.values()) for (const slot of keys.values()) visit(slot);
  }

  /** Calls `visit` with every slot, in no particular order. */
  forEach(visit: (slot: Slot) => void): void {
    this.loadAll();
    this.forEachHeld(visit);
  }

  /** Every slot, in no particular order. */
  *all(): Generator<Slot> {
    this.loadAll();
    for (const keys of this.byScope.values()) yield* keys.values();
  }

  /** Every slot in `root` and its descendant scopes. */
  *subtree(root: string): Generator<Slot> {
    this.loadAll();
    for (const [scope, keys] of this.byScope) if (scopeWithin(scope, root)) yield* keys.values();
  }
}

/** Applies a PUT record. */
export function applyPut(slot: Slot, seq: number, gen: number, expiresAt: number, loc: Location): void {
  slot.physical += 1;
  slot.reclaimedAt = 0;
  // Equal sequence with no location: a tombstone replayed first already named this version.
  if (seq > slot.putSeq || (seq === slot.putSeq && slot.seg === 0)) {
    slot.putSeq = seq;
    slot.putGen = gen;
    slot.seg = loc.seg;
    slot.off = loc.off;
    slot.len = loc.len;
    slot.expiresAt = expiresAt;
  }
  if (gen > slot.generation) slot.generation = gen;
}

/**
 * Applies a TOMBSTONE record that killed generation `gen` and version `version`. The version is
 * kept even after the PUT record it killed is reclaimed: it is part of the retention record, and
 * versions must survive restarts.
 */
export function applyTombstone(slot: Slot, seq: number, gen: number, version: number, loc: Location): void {
  if (version > slot.putSeq) {
    slot.putSeq = version;
    slot.putGen = gen;
    slot.seg = 0;
  }
  if (seq <= slot.tombSeq) return;
  slot.tombSeq = seq;
  slot.tombGen = gen;
  slot.tombSeg = loc.seg;
  slot.tombOff = loc.off;
  slot.tombLen = loc.len;
  if (gen > slot.generation) slot.generation = gen;
}

/** Applies a CLEAR (undelete) record that moved the slot to generation `gen`. */
export function applyClear(slot: Slot, seq: number, gen: number, loc: Location): void {
  if (gen > slot.generation) slot.generation = gen;
  if (seq <= slot.clearSeq) return;
  slot.clearSeq = seq;
  slot.clearSeg = loc.seg;
  slot.clearOff = loc.off;
  slot.clearLen = loc.len;
}

/** Applies a SCOPE_ERASE record of `scope`, with the retention records of the slots it killed. */
export function applyErase(keydir: Keydir, scope: string, seq: number, committedAt: number, loc: Location, killed: readonly ErasedSlot[]): void {
  for (const k of killed) {
    const slot = keydir.ensure(k.scope, k.key);
    if (seq > slot.listedSeq) slot.listedSeq = seq;
    if (k.version > slot.putSeq) {
      slot.putSeq = k.version;
      slot.putGen = k.generation;
      slot.seg = 0;
    }
    if (k.generation > slot.generation) slot.generation = k.generation;
  }
  const old = keydir.erases.get(scope);
  if (old !== undefined && old.seq === seq) {
    // Another chunk of the same erasure (segments/erase-list.ts): keep its location too.
    if (old.seg !== loc.seg || old.off !== loc.off) (old.more ??= []).push({ seg: loc.seg, off: loc.off, len: loc.len });
    return;
  }
  if (old !== undefined && old.seq > seq) return;
  keydir.erases.set(scope, { seq, committedAt, seg: loc.seg, off: loc.off, len: loc.len });
}

/** The sequence of the latest kill (tombstone or erasure) of a slot, 0 for none. */
export function killSeq(keydir: Keydir, slot: Slot): number {
  const erased = keydir.eraseSeq(slot.scope);
  return erased > slot.tombSeq ? erased : slot.tombSeq;
}

/** True when the slot's latest PUT is not killed: it has a value unless it expired. */
export function putSurvives(keydir: Keydir, slot: Slot): boolean {
  return versionSurvivesKill(slot.putSeq, killSeq(keydir, slot));
}

/** True when the slot is killed and not undeleted since: a write must clear the tombstone. */
export function isTombstoned(keydir: Keydir, slot: Slot): boolean {
  return killStands(killSeq(keydir, slot), slot.putSeq, slot.clearSeq);
}

/** True when the value expired at `now`. */
export function isExpired(slot: Slot, now: number): boolean {
  return expiredAt(slot.expiresAt, now);
}

/** True when a read at `now` returns the slot's value. */
export function isReadable(keydir: Keydir, slot: Slot, now: number): boolean {
  return slot.seg !== 0 && putSurvives(keydir, slot) && !isExpired(slot, now);
}
