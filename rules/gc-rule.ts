/**
 * The GC rule and probe's state function as pure functions over plain numbers, shared by every
 * backend (postgres/ decides with them; engine/gc-policy.ts imports the record-level decisions it
 * shares with PostgreSQL: killSuperseded, heldByListingErasure, tombstoneHeldByErasure, erasureHeldByOlderOverlapping,
 * clearRecordHeld, versionSurvivesKill, retentionWindowOpen).
 *
 * The rule, exactly as engine/gc-policy.ts and DESIGN.md state it: a value record is garbage when
 * its slot points elsewhere, when its generation is at or below the generation its slot's
 * tombstone killed, when it expired (and nothing older of its slot could resurrect), or when its
 * scope was erased after it was written. It is never garbage because the slot's tombstone
 * sequence is below some watermark (I5) — that is the phantom-write-loss GC of the seed note,
 * available only as `unsafe.gcKeyedBy: "tombstone-seq"` (unsafeValueReclaimable below).
 * A TOMBSTONE, CLEAR or SCOPE_ERASE record is kept while any value record of its slot / scope
 * remains, and for `tombstoneRetentionMs` after the last one went (I6): dropping it earlier could
 * resurrect an older value, and would forget the slot's version (I7's retention record). The
 * engine drops a TOMBSTONE a later PUT superseded once no older value is left (its records are
 * several; a PostgreSQL slot is one row, which holds no superseded kill to bring back).
 */
import { InternalError } from "./errors.js";
import { parentScope, scopeWithin } from "./names.js";
import type { SlotState } from "./types.js";

/** A slot's retention record and its value's presence, as plain numbers (0 = none). */
export interface SlotFacts {
  /** Version (commit sequence) of the slot's latest value, live or killed; 0 for none. */
  version: number;
  /** Generation of that value. */
  valueGeneration: number;
  /** The slot's current generation (highest of its value, tombstone and clear generations). */
  generation: number;
  /** Sequence of the latest kill (tombstone or an erasure of its scope or an ancestor); 0 for none. */
  killSeq: number;
  /** The generation that kill killed. */
  killedGeneration: number;
  /** Sequence of the latest undelete (clear); 0 for none. */
  clearSeq: number;
  /**
   * The generation that undelete moved the slot to (0 for none): a slot left with only the
   * undelete's record takes it, as the engine's recovery does (the engine's Slot.clearGen).
   */
  clearGeneration: number;
  /** Expiry of the latest value in ms since epoch; 0 for never. */
  expiresAt: number;
  /**
   * Value records of the slot still physically present: the latest value's and, until the next
   * pass, those of values it overwrote (the engine counts them; PostgreSQL counts the one an
   * engine would still hold, so that the rules below wait for the same pass).
   */
  physicalRecords: number;
  /** When physicalRecords last reached zero (ms); 0 while records remain. */
  reclaimedAt: number;
  /** Sequence of the latest erasure whose list named the slot (killed it); 0 for none. */
  listedSeq: number;
  /**
   * Sequence of the slot's own latest forget while its record is kept (the engine's TOMBSTONE:
   * forgotten once a later value superseded it); 0 for none. An erasure's kill is not one.
   */
  tombSeq: number;
}

// The rule in plain numbers: the engine's keydir (engine/keydir.ts, engine/gc-policy.ts) and the
// PostgreSQL backend (through SlotFacts below) both decide with these same functions.

/** True when a value of `version` outlives the slot's latest kill at `killSeq` (0: none). */
export function versionSurvivesKill(version: number, killSeq: number): boolean {
  // I5: a value above its slot's kill survives GC; the kill, never a sequence watermark, decides.
  return version > 0 && version > killSeq;
}

/** True when a kill at `killSeq` stands: no later value (`version`) and no later undelete (`clearSeq`). */
export function killStands(killSeq: number, version: number, clearSeq: number): boolean {
  return killSeq > 0 && killSeq >= version && killSeq > clearSeq;
}

/**
 * True when a kill at `killSeq` is superseded: a later value (`version`) cleared it and that value
 * is the slot's only value record left (`currentPresent`, `physicalRecords` 1), or none is left.
 * Such a kill guards no older value (I6: nothing it killed is left to resurrect), so gc forgets it:
 * the engine drops its TOMBSTONE record (and the next recovery, which no longer finds it, forgets
 * the kill), and PostgreSQL clears the slot's kill columns at the same pass.
 */
export function killSuperseded(killSeq: number, version: number, physicalRecords: number, currentPresent: boolean): boolean {
  if (killSeq === 0 || version <= killSeq) return false;
  return physicalRecords === 0 || (physicalRecords === 1 && currentPresent);
}

/**
 * True when an erasure still retained over the slot's scope (`scopeEraseSeq`, 0: none) may list an
 * older version of the slot (`listedSeq`: an erasure once named it). Such a slot keeps its expired
 * value and its retention record: without them the next recovery would rebuild the slot from the
 * erasure's list, killed at that older version and generation. Both go once the erasure has.
 */
export function heldByListingErasure(listedSeq: number, scopeEraseSeq: number): boolean {
  return listedSeq !== 0 && scopeEraseSeq !== 0;
}

/**
 * True when the slot's own forget at `tombSeq` must be kept whatever its window says: an erasure
 * older than it (`olderErasurePresent`) is still retained and once named the slot (`listedSeq`
 * below `tombSeq`). Without the forget's record the next recovery would rebuild the slot from
 * that erasure's list, at an older version and generation.
 */
export function tombstoneHeldByErasure(listedSeq: number, tombSeq: number, olderErasurePresent: boolean): boolean {
  return listedSeq !== 0 && listedSeq < tombSeq && olderErasurePresent;
}

/**
 * True when an undelete's record at `clearSeq` must be kept: the forget it cancelled still has its
 * record (`tombRecord`, at `tombSeq` below it), or a retained erasure older than it
 * (`olderErasurePresent`) could otherwise come back un-cancelled after a restart (an undelete lost
 * after GC, issue 9 defect 5); with no such kill left, while its slot's window is open (`windowOpen`).
 * An undelete that a later value superseded (`superseded`: killSuperseded of its sequence) guards
 * nothing against the forget — the later value outlives that kill at a restart, and while a
 * TOMBSTONE is on disk the engine keeps an expired value (tombstoneUnder) — so neither the
 * forget's record nor the window holds it. Held by the later value's records, it outlived the value
 * by a window, the slot "absent" at the undelete's older generation: kept or not depending on
 * whether a pass ran between the window's end and the write, which a restart's later reclaim time
 * moved on the engine (backend-diff --reopen seed 32, fifty-sixth session).
 */
export function clearRecordHeld(tombRecord: boolean, tombSeq: number, clearSeq: number, olderErasurePresent: boolean, windowOpen: boolean, superseded: boolean): boolean {
  if (tombRecord && tombSeq < clearSeq && !superseded) return true;
  return olderErasurePresent || (clearSeq > tombSeq && windowOpen && !superseded);
}

/**
 * True when an erasure of `otherScope` at `otherSeq`, still retained, keeps the erasure of `scope`
 * at `seq` on disk: it is older and of an ancestor or descendant scope, so its list may name
 * slots the newer list names too, at older versions, or none of them; dropped first, the newer
 * erasure would leave the older list as what a restart rebuilds those slots from (the engine's
 * olderOverlappingErasure, fifty-fourth session). The newer one goes in the pass after the older.
 */
export function erasureHeldByOlderOverlapping(otherScope: string, otherSeq: number, scope: string, seq: number): boolean {
  if (otherSeq >= seq || otherScope === scope) return false;
  return scopeWithin(scope, otherScope) || scopeWithin(otherScope, scope);
}

/** True when a value expiring at `expiresAt` (0: never) has expired at `now`. */
export function expiredAt(expiresAt: number, now: number): boolean {
  return expiresAt !== 0 && now >= expiresAt;
}

/** True while a slot's retention record must survive: value records remain, or its window is open. */
export function retentionWindowOpen(physicalRecords: number, reclaimedAt: number, now: number, retentionMs: number): boolean {
  // I6: a retention record outlives every value record of its slot (and the window after the last): nothing resurrects.
  return physicalRecords > 0 || reclaimedAt === 0 || now < reclaimedAt + retentionMs;
}

/** True when the slot's latest value is not killed: it is readable unless expired or reclaimed. */
export function valueSurvives(s: SlotFacts): boolean {
  return versionSurvivesKill(s.version, s.killSeq);
}

/** True when the slot is killed and not undeleted since: a write must clear the tombstone. */
export function slotTombstoned(s: SlotFacts): boolean {
  return killStands(s.killSeq, s.version, s.clearSeq);
}

/** True when the value expired at `now`. */
export function valueExpired(s: SlotFacts, now: number): boolean {
  return expiredAt(s.expiresAt, now);
}

/** True when a read at `now` returns the slot's value. */
export function valueReadable(s: SlotFacts, now: number): boolean {
  return s.physicalRecords > 0 && valueSurvives(s) && !valueExpired(s, now);
}

/**
 * True when the slot's value record may be reclaimed at `now` (the safe, generation-keyed rule):
 * it was killed at a generation at or above its own, or it expired, is the slot's only value
 * record, the retention window after its expiry has passed and no retained erasure
 * (`scopeEraseSeq`: the latest over its scope, 0 for none) may list an older version of it
 * (heldByListingErasure). Checked as a pair: a value that survives its kill by sequence must be of
 * a generation above the killed one (I5), else the state itself is corrupt.
 */
export function valueReclaimable(s: SlotFacts, now: number, retentionMs: number, scopeEraseSeq = 0): boolean {
  if (s.physicalRecords === 0) return false;
  const killed = s.killSeq > 0 && s.valueGeneration <= s.killedGeneration;
  if (killed !== !valueSurvives(s) && s.killSeq > 0) {
    throw new InternalError(`I5: value v${s.version} gen ${s.valueGeneration} against kill ${s.killSeq} of gen ${s.killedGeneration}`);
  }
  if (killed) return true;
  // An expired value goes only as its slot's last value record: an older one would win at recovery.
  if (!valueExpired(s, now) || s.physicalRecords > 1 || now < s.expiresAt + retentionMs) return false;
  return !heldByListingErasure(s.listedSeq, scopeEraseSeq);
}

/**
 * The phantom-write-loss rule (unsafe, reproduction only): a slot whose tombstone sequence is at
 * or below `watermark` loses its value, whatever that value's generation.
 */
export function unsafeValueReclaimable(s: SlotFacts, watermark: number): boolean {
  return s.physicalRecords > 0 && s.killSeq > 0 && s.killSeq <= watermark;
}

/** True while the slot's retention record must survive: values remain, or the window is open. */
export function retentionLive(s: SlotFacts, now: number, retentionMs: number): boolean {
  return retentionWindowOpen(s.physicalRecords, s.reclaimedAt, now, retentionMs);
}

/**
 * True when the slot's retention record may be dropped at `now`: no value remains, and either
 * nothing but the (gone) value held it — no forget of its own, no clear: a slot an erasure alone
 * killed is held by that erasure (heldByListingErasure), as the engine's is by its record — or
 * its window has passed.
 */
export function retentionDroppable(s: SlotFacts, now: number, retentionMs: number): boolean {
  if (s.physicalRecords > 0) return false;
  if (s.tombSeq === 0 && s.clearSeq === 0) return true;
  return !retentionLive(s, now, retentionMs);
}

/** probe()'s state of a slot that has a retention record (API.md's five states; "absent" otherwise). */
export function slotState(s: SlotFacts, now: number): SlotState {
  if (valueReadable(s, now)) return "live";
  if (valueSurvives(s)) return s.physicalRecords > 0 && valueExpired(s, now) ? "expired" : "reclaimed";
  if (slotTombstoned(s)) return s.physicalRecords > 0 ? "tombstoned" : "reclaimed";
  return "absent";
}

/**
 * True when an erasure of `scope` or of an ancestor older than sequence `seq` is retained:
 * `erasureOf(s)` is the sequence of the retained erasure of exactly `s`, or undefined. Such an
 * erasure's list may name the slot at an older version, so the record that supersedes it stays
 * (tombstoneHeldByErasure, clearRecordHeld). Both backends ask it: the engine of its keydir's
 * erasures, PostgreSQL of the erasures a pass began with.
 */
export function olderErasureOnPath(scope: string, seq: number, erasureOf: (s: string) => number | undefined): boolean {
  for (let s: string | null = scope; s !== null; s = parentScope(s)) {
    const e = erasureOf(s);
    if (e !== undefined && e < seq) return true;
  }
  return false;
}
