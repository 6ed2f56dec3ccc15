/**
 * A small keydir that holds every kind of name a plan's walk files — held compact rows, live
 * values, forgotten values (some of them reclaimed, their retention window running or ended),
 * undeleted ones, an erased scope — for the walk's warm-up (compaction-plan.ts warmPlanWalks).
 * It lives only for that warm-up: nothing of a store is in it.
 *
 * Why (thirty-eighth session): V8 compiles the walk's functions (the Map.forEach visitor, the
 * walk's row, slot and file) with the type feedback the walks before gave them. A process's first
 * walks meet only some kinds of names and some kinds of walk (stats()' tally, a pass over chosen
 * segments), so the first walk that meets a tombstone or plans every segment deoptimized that code
 * and ran unoptimized while it was compiled again: 26–46 ms for a 100k-name walk against 11–20 for
 * the same walk just after. Feedback of every branch, given once, lets the code compiled during
 * the first large walk serve the later ones.
 */
import { applyClear, applyErase, applyPut, applyTombstone, Keydir } from "./keydir.js";
import { assert } from "../rules/assert.js";

/** Names in the warm-up keydir: a few dozen of each kind (a branch needs to run once for its feedback). */
export const WARM_NAMES = 120;

/** The retention window of the warm-up keydir's scopes (ms): the default 24 h. */
export const WARM_RETENTION_MS = 24 * 60 * 60 * 1000;

/** Segments the warm-up keydir's records lie in (1..WARM_SEGMENTS). */
export const WARM_SEGMENTS = 3;

/**
 * The kinds of name the warm-up keydir holds, by name number modulo their count (1: a live value,
 * nothing more). None expires: a time in a Slot's expiresAt, a small integer in every Slot made
 * before, would change that field's representation and make every Slot of the store migrate on
 * its next touch (~2.7 µs each: engine/keydir.ts SlotRare). A store that writes TTLs pays that
 * once anyway, at its first such write.
 */
const KIND_HELD_ROW = 0;
const KIND_FORGOTTEN = 2;
const KIND_UNDELETED = 3;
const KIND_RECLAIMED = 4;
const KINDS = 5;

/** The erased scope of the warm-up keydir (its names are killed by the erasure). */
const ERASED_SCOPE = "warm:c";

/** A new keydir of WARM_NAMES names of every kind, as of time `now`, under WARM_RETENTION_MS. */
export function warmKeydir(now: number): Keydir {
  const keydir = new Keydir();
  let seq = 1;
  for (let i = 0; i < WARM_NAMES; i++) {
    const scope = i % 3 === 0 ? "warm:a" : i % 3 === 1 ? "warm:b" : ERASED_SCOPE;
    const key = `k${i}`;
    const kind = i % KINDS;
    const loc = { seg: 1 + (i % WARM_SEGMENTS), off: 64 + 128 * i, len: 100 };
    if (kind === KIND_HELD_ROW && keydir.loadedSlot(scope, key, true, seq++, loc) === null) continue; // held as a row
    const slot = keydir.ensure(scope, key);
    applyPut(slot, seq++, 1, 0, loc);
    if (kind === KIND_FORGOTTEN || kind === KIND_UNDELETED || kind === KIND_RECLAIMED) {
      applyTombstone(slot, seq++, 1, slot.putSeq, { seg: WARM_SEGMENTS, off: 64 + 128 * WARM_NAMES + 64 * i, len: 40 });
    }
    if (kind === KIND_UNDELETED) applyClear(slot, seq++, 2, { seg: 2, off: 64 + 192 * WARM_NAMES + 64 * i, len: 40 });
    if (kind === KIND_RECLAIMED) {
      // Its value record reclaimed, as a publication leaves it: its retention window runs from reclaimedAt.
      // Every other one's window ended: its tombstone may go (a plan's droppable list).
      slot.seg = 0;
      slot.physical = 0;
      slot.reclaimedAt = i % 2 === 0 ? now - 1_000 : now - 2 * WARM_RETENTION_MS;
    }
    assert(slot.putSeq > 0 && (slot.seg > 0) === (kind !== KIND_RECLAIMED), "every warm-up name but a reclaimed one points at a value record");
  }
  applyErase(keydir, ERASED_SCOPE, seq++, now, { seg: 2, off: 64 + 256 * WARM_NAMES, len: 60 }, []);
  return keydir;
}
