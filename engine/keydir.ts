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

/** One slot: its latest PUT (possibly dead) and its retention record. Fields are flat to stay small. */
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
  /** Latest TOMBSTONE: sequence, generation it killed, location. */
  tombSeq = 0;
  tombGen = 0;
  tombSeg = 0;
  tombOff = 0;
  tombLen = 0;
  /** Latest CLEAR (undelete): sequence and location. */
  clearSeq = 0;
  clearSeg = 0;
  clearOff = 0;
  clearLen = 0;
  /** PUT records of this slot still physically present in segment files (any generation). */
  physical = 0;
  /** When `physical` last reached zero (ms, engine clock); 0 while records remain. */
  reclaimedAt = 0;
  /**
   * Highest sequence of a SCOPE_ERASE whose erase list names this slot (committed or replayed);
   * 0 when none does. Only such a slot must outlive its own records while a covering erasure is
   * retained: a restart would rebuild it from that list (issue 9 defect 6).
   */
  listedSeq = 0;

  constructor(scope: string, key: string) {
    this.scope = scope;
    this.key = key;
  }
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

/** Slots by scope then key, and erasures by scope. */
export class Keydir {
  readonly scopes = new Map<string, Map<string, Slot>>();
  readonly erases = new Map<string, EraseRecord>();
  private count = 0;

  /** Number of slots (retention records) held. */
  get size(): number {
    return this.count;
  }

  /** The slot of (scope, key), or undefined. */
  get(scope: string, key: string): Slot | undefined {
    return this.scopes.get(scope)?.get(key);
  }

  /** The slot of (scope, key), created empty when missing. */
  ensure(scope: string, key: string): Slot {
    let keys = this.scopes.get(scope);
    if (keys === undefined) {
      keys = new Map();
      this.scopes.set(scope, keys);
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
    const keys = this.scopes.get(slot.scope);
    if (keys?.get(slot.key) !== slot) return;
    keys.delete(slot.key);
    this.count -= 1;
    if (keys.size === 0) this.scopes.delete(slot.scope);
  }

  /** Highest erasure sequence that covers `scope` (its own or an ancestor's), 0 for none. */
  eraseSeq(scope: string): number {
    if (this.erases.size === 0) return 0;
    return lineageMax(scope, (s) => this.erases.get(s)?.seq ?? 0);
  }

  /** Every slot, in no particular order. */
  *all(): Generator<Slot> {
    for (const keys of this.scopes.values()) yield* keys.values();
  }

  /** Every slot in `root` and its descendant scopes. */
  *subtree(root: string): Generator<Slot> {
    for (const [scope, keys] of this.scopes) if (scopeWithin(scope, root)) yield* keys.values();
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
