/**
 * What the GC keeps: pure rules over the keydir, unit-tested on their own (test/gc-policy.test.ts).
 *
 * A value record is garbage when its slot points elsewhere, when its generation is at or below
 * the generation its slot's tombstone killed, when it expired (and nothing older of its slot could
 * resurrect), or when its scope was erased after it was written. It is never garbage because the
 * slot's tombstone sequence is below some watermark (I5) — that is the phantom-write-loss GC of
 * the seed note, available only as `unsafe.gcKeyedBy: "tombstone-seq"` (unsafeSweep below).
 *
 * A TOMBSTONE, CLEAR or SCOPE_ERASE record is kept while any value record of its slot / scope
 * remains in any segment, and for `tombstoneRetentionMs` after the last one went (I6): dropping it
 * earlier could resurrect an older value at the next recovery. A TOMBSTONE a later PUT superseded
 * goes once that PUT is the only value record left (tombstoneRecordLive).
 *
 * The keydir points at each slot's latest TOMBSTONE and CLEAR and each scope's latest SCOPE_ERASE
 * only; older ones stay on disk, named by no pointer, until their segments are compacted, and a
 * restart replays them. So the latest record of each kind stays while an older record of the same
 * kind and slot (scope) is on disk (olderKillOnDisk: Slot.tombRecords, clearRecords,
 * EraseRecord.records count them), and an expired value stays while a TOMBSTONE of its slot is:
 * the next recovery then always finds the latest record, which wins over the older ones by
 * sequence, and builds what memory holds (fifty-fifth session).
 */
import { isExpired, type EraseRecord, type Keydir, type Slot } from "./keydir.js";
import { parentScope } from "../rules/names.js";
import { clearRecordHeld, erasureHeldByOlderOverlapping, heldByListingErasure, killSuperseded, olderErasureOnPath, retentionWindowOpen, tombstoneHeldByErasure, versionSurvivesKill } from "../rules/gc-rule.js";

/** True when the slot's current PUT record (at slot.seg/off) must survive compaction. */
export function valueRecordLive(keydir: Keydir, slot: Slot, now: number, retentionMs: number): boolean {
  return slot.seg !== 0 && valueRecordLiveUnder(slot, keydir.eraseSeq(slot.scope), now, retentionMs);
}

/**
 * valueRecordLive with the latest erasure of the slot's scope or an ancestor (`scopeEraseSeq`,
 * keydir.eraseSeq of its scope) given: a plan asks it once per scope, not once per slot. The
 * one definition of the rule: valueRecordLive is this with the keydir's answer.
 */
export function valueRecordLiveUnder(slot: Slot, scopeEraseSeq: number, now: number, retentionMs: number): boolean {
  if (slot.seg === 0) return false;
  if (!versionSurvivesKill(slot.putSeq, scopeEraseSeq > slot.tombSeq ? scopeEraseSeq : slot.tombSeq)) return false;
  // The generation rule (I5), checked as a pair with the sequence rule above: a surviving PUT is
  // always of a generation above the one its tombstone killed.
  if (slot.tombSeq > 0 && slot.tombSeq < slot.putSeq && slot.putGen <= slot.tombGen) {
    throw new Error(`I5 violated: ${slot.scope}/${slot.key} PUT gen ${slot.putGen} <= killed gen ${slot.tombGen}`);
  }
  // An expired value may go only when it is the slot's last PUT record (dropping it while an older
  // PUT survives elsewhere would let that older value win at the next recovery), and only once the
  // retention window after its expiry has passed: until then it is the slot's retention record.
  if (isExpired(slot, now) && slot.physical <= 1 && now >= slot.expiresAt + retentionMs) return listedByRetainedErasure(slot, scopeEraseSeq) || tombstoneUnder(slot);
  return true;
}

/**
 * True when a TOMBSTONE record of the slot, older than its expired value (a later one would have
 * killed it), is still on disk: the latest, which a later PUT superseded and which goes once that
 * PUT is the only value record, or an older one no pointer names. Without the value the next
 * recovery would rebuild the slot from that tombstone: tombstoned at its older version and
 * generation, while memory holds the value's version, not tombstoned (fifty-fifth session).
 */
function tombstoneUnder(slot: Slot): boolean {
  return slot.tombRecords > 0 && !unsafeTombstoneForTests.ignoreOlder;
}

/**
 * True when more records of one kind of a slot (a scope) are on disk, `onDisk`, than the latest
 * ones the keydir points at, `latest`: an older one would be what the next recovery finds if the
 * latest went first — a tombstone at an older version and generation, a CLEAR at an older
 * generation, an erasure's older list — where memory, which forgets a slot's kill or undelete (a
 * scope's erasure) with its latest record, has none. The latest stays until the older ones went
 * at their segments' compactions (fifty-fifth session; `unsafeTombstoneForTests.ignoreOlder`
 * restores the rule before).
 */
export function olderKillOnDisk(onDisk: number, latest: number): boolean {
  return onDisk > latest && !unsafeTombstoneForTests.ignoreOlder;
}

/**
 * True when an erasure record still on disk lists an older version of the slot (its erase list
 * names the slot: listedSeq), so that the slot's expired value, written after that erasure, must
 * stay its retention record: without it the next recovery would rebuild the slot from the list,
 * killed at that older version and generation (the fifty-third session's audit). It goes once
 * the erasure has.
 */
function listedByRetainedErasure(slot: Slot, scopeEraseSeq: number): boolean {
  return heldByListingErasure(slot.listedSeq, scopeEraseSeq) && !unsafeTombstoneForTests.keepUnnamed;
}

/** True while the slot's retention record must survive: records remain, or the window is open. */
export function retentionLive(slot: Slot, now: number, retentionMs: number): boolean {
  return retentionWindowOpen(slot.physical, slot.reclaimedAt, now, retentionMs);
}

/**
 * True when the slot's latest TOMBSTONE record must survive compaction: while its window is open
 * (retentionLive), unless a later PUT superseded it and no value record older than that PUT
 * remains. Such a tombstone guards nothing (I6: no value it killed is left to resurrect), and
 * kept past the PUT — an expired value reclaimed after its window, while the slot's window
 * still held the tombstone — it was all the next recovery found of the slot, which came back
 * tombstoned at its old version and generation (the fifty-third session's audit).
 */
export function tombstoneRecordLive(slot: Slot, now: number, retentionMs: number, keydir?: Keydir): boolean {
  if (slot.tombSeg === 0) return false;
  // Before supersession: a superseded kill dropped while an older one is on disk comes back at the
  // next recovery as the slot's tombstoneSeq (and, its PUT expired and gone, as a standing kill).
  if (olderKillOnDisk(slot.tombRecords, 1)) return true;
  if (tombstoneSuperseded(slot) && !unsafeTombstoneForTests.keepSuperseded) return false;
  // An older erasure still on disk that lists the slot would, without this tombstone, be what the
  // next recovery rebuilds the slot from: at that erasure's older version and generation.
  if (keydir !== undefined && !unsafeTombstoneForTests.keepUnnamed && tombstoneHeldByErasure(slot.listedSeq, slot.tombSeq, olderErasurePresent(keydir, slot.scope, slot.tombSeq))) return true;
  return retentionLive(slot, now, retentionMs);
}

/** True when a PUT later than the slot's tombstone exists and is its only value record left (or none is left). */
export function tombstoneSuperseded(slot: Slot): boolean {
  return killSuperseded(slot.tombSeq, slot.putSeq, slot.physical, slot.seg !== 0);
}

/**
 * The slot's TOMBSTONE record is gone from disk (a compaction dropped it): the kill is forgotten
 * with it, as the next recovery, which no longer finds the record, forgets it, so probe's
 * tombstoneSeq reads the same before and after a restart. The version it killed stays the slot's
 * version while an erasure's list still names it (forgetUnnamedKill drops it otherwise). Until
 * the fifty-fourth session only a kill a later PUT superseded was forgotten: a kill whose record
 * went with the value it killed stayed in memory, under an erasure that listed the slot, and
 * showed as tombstoneSeq after a later write, which a restart did not (`keepDroppedKill`).
 */
export function tombstoneDropped(slot: Slot): void {
  slot.tombSeg = 0;
  if (slot.putSeq > slot.tombSeq || !unsafeTombstoneForTests.keepDroppedKill) {
    slot.tombSeq = 0;
    slot.tombGen = 0;
  }
}

/**
 * A slot that outlives its kill's records (an undelete's CLEAR holds it) forgets what only those
 * records named, as the next recovery, which finds none of them, forgets it: with no PUT record,
 * no TOMBSTONE record and no erasure listing it left on disk, the killed value's version and the
 * kill are gone from the slot too, and probe answers the same before and after a restart
 * ("absent" with the CLEAR's generation). Until the fifty-third session the slot kept the killed
 * version with no kill over it once the kill's record went, and probe said "reclaimed" (and
 * safeRewrite refused the slot) until a restart said "absent".
 */
export function forgetUnnamedKill(keydir: Keydir, slot: Slot): void {
  if (slot.seg !== 0 || slot.physical !== 0 || slot.tombSeg !== 0) return;
  if (heldByListingErasure(slot.listedSeq, keydir.eraseSeq(slot.scope))) return; // an erasure's list still names it
  // Only the CLEAR is left (slotEmpty dropped a slot with none): its generation is the slot's, as
  // recovery computes it, not one that the dropped PUT or erasure list carried (`keepGeneration`).
  if (slot.clearSeg !== 0 && !unsafeTombstoneForTests.keepGeneration) slot.generation = slot.clearGen;
  slot.putSeq = 0;
  slot.putGen = 0;
  slot.expiresAt = 0;
  slot.tombSeq = 0;
  slot.tombGen = 0;
  slot.listedSeq = 0;
}

/**
 * Test switches, never set by the engine or any option (test/tombstone-superseded.test.ts):
 * `keepSuperseded` keeps a superseded tombstone for its slot's window (the rule before the
 * fifty-third session): an expired value that had cleared it is reclaimed first, and a reopen
 * then finds the slot tombstoned again. `keepUnnamed` leaves forgetUnnamedKill out (an undeleted
 * slot whose kill's record went keeps the killed version, and probe changes across a restart),
 * lets an expired value go while an erasure's list still names an older version of its slot, and
 * lets a tombstone go while such an older erasure remains (the rules before that session).
 * The fifty-fourth session's (test/reopen-kill-records.test.ts): `keepDroppedKill` keeps a kill
 * in memory after its TOMBSTONE record went with the value it killed (tombstoneDropped);
 * `keepGeneration` leaves a slot held by its CLEAR alone at the
 * generation of records gone (forgetUnnamedKill); `dropOverlapping` lets an erasure go while an
 * older one of an ancestor or descendant scope remains (eraseRecordLive). The fifty-fifth
 * session's (test/older-kill-records.test.ts): `ignoreOlder` lets a slot's latest TOMBSTONE or
 * CLEAR, or a scope's latest SCOPE_ERASE, go while an older one of the same slot or scope is on
 * disk, an expired value go while a TOMBSTONE of its slot is (olderKillOnDisk, tombstoneUnder), and
 * an erasure go while a TOMBSTONE older than it of a slot in its subtree is (tombstoneBefore).
 * The fifty-sixth session's (test/reopen-kill-records.test.ts): `keepSupersededClear` holds an
 * undelete's CLEAR that a later value superseded by that value's records and a window after them
 * (clearSuperseded).
 */
export const unsafeTombstoneForTests = { keepSuperseded: false, keepUnnamed: false, keepDroppedKill: false, keepGeneration: false, dropOverlapping: false, ignoreOlder: false, keepSupersededClear: false };

/**
 * True when the slot's latest CLEAR record must survive. A CLEAR lives as long as any older kill
 * of its slot whose record is still on disk — its tombstone, or a retained erasure of its scope or
 * an ancestor — whatever the retention window says: dropping the CLEAR first would make the
 * restarted store see the kill un-cancelled (an undelete lost after GC, issue 9 defect 5). With
 * no such kill left, it follows the slot's retention window like a tombstone.
 */
export function clearRecordLive(slot: Slot, now: number, retentionMs: number, keydir?: Keydir): boolean {
  if (slot.clearSeg === 0) return false;
  if (olderKillOnDisk(slot.clearRecords, 1)) return true;
  const olderErasure = keydir !== undefined && olderErasurePresent(keydir, slot.scope, slot.clearSeq);
  return clearRecordHeld(slot.tombSeg !== 0, slot.tombSeq, slot.clearSeq, olderErasure, retentionLive(slot, now, retentionMs), clearSuperseded(slot));
}

/**
 * True when a value written after the slot's latest undelete is its only value record left (or
 * none is left): the undelete guards nothing more (rules/gc-rule.ts clearRecordHeld), and goes
 * unless an older erasure over the slot, or an older CLEAR of it, is still on disk (fifty-sixth
 * session; `keepSupersededClear` restores the rule before, which held it by the forget's older
 * record and by the later value's records and a window after them).
 */
function clearSuperseded(slot: Slot): boolean {
  return killSuperseded(slot.clearSeq, slot.putSeq, slot.physical, slot.seg !== 0) && !unsafeTombstoneForTests.keepSupersededClear;
}

/** True when a retained erasure of `scope` or an ancestor is older than sequence `seq` (the rule both backends share). */
function olderErasurePresent(keydir: Keydir, scope: string, seq: number): boolean {
  if (keydir.erases.size === 0) return false; // the common case, without a closure
  return olderErasureOnPath(scope, seq, (s) => keydir.erases.get(s)?.seq);
}

/**
 * True when the erasure of `scope` must survive: an older erasure of the scope is on disk, or no
 * ancestor's later erasure supersedes it and a value record, or a tombstone older than it, in its
 * subtree remains or its retention window is open.
 */
export function eraseRecordLive(keydir: Keydir, scope: string, erase: EraseRecord, now: number, retentionMs: number): boolean {
  // Even when an ancestor's later erasure supersedes it: dropped first, the older erasure of the
  // same scope would come back at the next recovery as the scope's, with its list.
  if (olderKillOnDisk(erase.records, 1 + (erase.more?.length ?? 0))) return true;
  for (let s = parentScope(scope); s !== null; s = parentScope(s)) {
    if ((keydir.erases.get(s)?.seq ?? 0) > erase.seq) return false;
  }
  if (now < erase.committedAt + retentionMs) return true;
  if (keydir.anyInSubtree(scope, (ref) => mayHoldRecordBefore(keydir, ref, erase.seq))) return true; // rows read as they are: no Slot made
  return olderOverlappingErasure(keydir, scope, erase.seq);
}

/**
 * True when an erasure older than sequence `seq` of `scope`'s ancestor or descendant is still on
 * disk: its list may name slots that the erasure of `scope` at `seq` lists too, at older
 * versions, or none of them. Dropped first, the newer erasure would leave the older list as what
 * the next recovery rebuilds those slots from (killed at its older version and sequence, or not
 * at all), which memory, knowing only each slot's latest listing, cannot follow (fifty-fourth session;
 * `unsafeTombstoneForTests.dropOverlapping` restores the rule before). An older erasure of a
 * descendant is superseded (it goes at its segment's next compaction); an older one of an
 * ancestor goes by its own rule; the newer one follows in the pass after.
 */
function olderOverlappingErasure(keydir: Keydir, scope: string, seq: number): boolean {
  if (keydir.erases.size <= 1 || unsafeTombstoneForTests.dropOverlapping) return false;
  for (const [s, e] of keydir.erases) if (erasureHeldByOlderOverlapping(s, e.seq, scope, seq)) return true; // the rule PostgreSQL shares
  return false;
}

/**
 * True when a PUT record of `ref` (a Slot, or a held compact row) older than sequence `seq` may
 * remain in some segment, or a Slot's TOMBSTONE older than it does (tombstoneBefore; a row has
 * none). A name whose only physical record is its current value, written after
 * `seq`, holds none: so a reused scope does not keep its old erasure (and every slot under it)
 * alive forever (defect 6).
 */
function mayHoldRecordBefore(keydir: Keydir, ref: Slot | number, seq: number): boolean {
  const row = typeof ref === "number";
  if (!row && tombstoneBefore(ref, seq)) return true;
  const physical = row ? keydir.rowPhysical(ref) : ref.physical;
  if (physical === 0) return false;
  const seg = row ? keydir.rowSeg(ref) : ref.seg;
  const putSeq = row ? keydir.rowPutSeq(ref) : ref.putSeq;
  return !(physical === 1 && seg !== 0 && putSeq > seq);
}

/**
 * True when the slot's TOMBSTONE record, older than sequence `seq` (an erasure over its scope), is
 * still on disk and a value written after it (`putSeq`) superseded it: the erasure's list then
 * names the slot at a later version than the one that tombstone killed, and dropped first it
 * would leave the tombstone as what the next recovery rebuilds the slot from — at the tombstone's
 * older version and generation, and tombstoned — while memory keeps the list's (found by the
 * partial-compaction variant of test/reopen-probe-check.test.ts, seed 119). Superseded, with the
 * values the erasure killed gone, the tombstone goes at its segment's next compaction, and the
 * erasure at the pass after (fifty-fifth session; `ignoreOlder` off). A tombstone no later value
 * superseded names the version the list names: the erasure goes with it, as on PostgreSQL.
 */
function tombstoneBefore(slot: Slot, seq: number): boolean {
  return slot.tombSeg !== 0 && slot.tombSeq < seq && slot.putSeq > slot.tombSeq && !unsafeTombstoneForTests.ignoreOlder;
}

/**
 * The phantom-write-loss GC (unsafe, for reproduction only): every slot whose tombstone sequence
 * is at or below `watermark` loses its value, whatever its generation. Returns the slots swept.
 */
export function unsafeSweep(keydir: Keydir, watermark: number): number {
  let swept = 0;
  for (const slot of keydir.all()) {
    if (slot.tombSeq > 0 && slot.tombSeq <= watermark && slot.seg !== 0) {
      slot.seg = 0;
      swept += 1;
    }
  }
  return swept;
}

/**
 * True when a slot holds nothing any more — no record of it remains and no retained erasure whose
 * list names it covers it — so its retention record goes.
 */
export function slotEmpty(keydir: Keydir, slot: Slot): boolean {
  if (slot.physical !== 0 || slot.seg !== 0 || slot.tombSeg !== 0 || slot.clearSeg !== 0) return false;
  // A covering erasure holds the slot only if its erase list names it (a restart would rebuild the
  // slot from that list); a slot created after the erasure goes like any other (defect 6).
  return !heldByListingErasure(slot.listedSeq, keydir.eraseSeq(slot.scope));
}

/**
 * The store-wide space rule (issue 11): a per-segment garbage ratio alone lets every segment stay
 * just under it — half garbage at the default 0.5, forever. So the automatic pass also looks at
 * the sealed segments together: once their dead bytes pass STORE_GARBAGE_HIGH of their bytes, it
 * compacts segments, the highest dead share first, until what it leaves dead is at most
 * STORE_GARBAGE_LOW of them — skipping segments under SEGMENT_GARBAGE_MIN dead, whose rewrite
 * would copy more than nine live bytes per byte reclaimed. Dead bytes here
 * are value records known dead (overwritten, forgotten, erased); retention records (tombstones)
 * are live while the contract keeps them (I6) and are not garbage.
 */
export const STORE_GARBAGE_HIGH = 0.25;
/** Where a store-wide pass stops: the dead share of the sealed bytes it leaves. */
export const STORE_GARBAGE_LOW = 0.05;
/** A segment less dead than this is not rewritten by the store-wide rule (write amplification ≤ 9×). */
export const SEGMENT_GARBAGE_MIN = 0.1;

/**
 * The store-wide part waits until no value has died for this long: during a stream of deletes or
 * overwrites it would rewrite the same large segment once per 25% of new garbage, while one pass
 * after the stream reclaims it all (the per-segment ratio still acts at once).
 */
export const STORE_QUIET_MS = 200;

/** A sealed segment as the space rule sees it. */
export interface SpaceCandidate {
  id: number;
  /** Record bytes in the segment (its data, header excluded). */
  bytes: number;
  /** Of those, bytes of records known dead. */
  deadBytes: number;
}

/**
 * The segments the automatic pass compacts: every one over its own `garbageRatio`, and, once the
 * store-wide dead share passed STORE_GARBAGE_HIGH, the highest dead shares next (each at least
 * SEGMENT_GARBAGE_MIN) until the dead bytes left are at most STORE_GARBAGE_LOW of the total.
 * `storeWide` false: the per-segment part only (the compactor passes false while values are still
 * dying fast: see STORE_QUIET_MS). Pure; ids in the order chosen.
 */
export function chooseForSpace(candidates: readonly SpaceCandidate[], garbageRatio: number, storeWide = true): number[] {
  let total = 0;
  let dead = 0;
  for (const c of candidates) {
    total += c.bytes;
    dead += c.deadBytes;
  }
  const share = (c: SpaceCandidate): number => c.deadBytes / Math.max(1, c.bytes);
  const chosen = candidates.filter((c) => c.deadBytes > 0 && share(c) > garbageRatio);
  if (!storeWide || dead <= STORE_GARBAGE_HIGH * total) return chosen.map((c) => c.id);
  let left = dead - chosen.reduce((n, c) => n + c.deadBytes, 0);
  const rest = candidates
    .filter((c) => share(c) >= SEGMENT_GARBAGE_MIN && share(c) <= garbageRatio)
    .sort((a, b) => share(b) - share(a) || a.id - b.id);
  for (const c of rest) {
    if (left <= STORE_GARBAGE_LOW * total) break;
    chosen.push(c);
    left -= c.deadBytes;
  }
  return chosen.map((c) => c.id);
}
