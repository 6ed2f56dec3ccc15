/**
 * Seed 002's layout (test/seed-torn-read.test.ts, test/row-reads.test.ts): three records in one
 * segment — a note in SESSION1, the key K in "global", b in "user:bob" — sized so that an
 * in-place rewrite after SESSION1's erasure moves b exactly onto K's old offset.
 */
import { GROUP_FRAME_BYTES_V3 } from "../../segments/constants.js";
import { recordLengthV3 } from "../../segments/record-v3.js";

/** The erased sibling scope, and the scope whose read of K (inherited from "global") straddles the rewrite. */
export const SESSION1 = "user:alice/session:1";
export const READER = "user:alice/session:2";

/**
 * A group frame (GROUP_FRAME_BYTES_V3 in format 3) precedes each acknowledged write, and
 * compaction drops the frames. With K's and b's records two frames longer than the note's, K's old
 * offset is exactly where b's record lands after the rewrite, as in the seed (where all three were
 * equal). Format 3's record length is a function of the fields (varints), so BIG is the padded
 * size of scope + key + value whose record (seq 2 or 3, generation 0) has exactly that length.
 */
const NOTE_RECORD = recordLengthV3(SESSION1.length, 4, 96 - SESSION1.length - 4, 1, 0, 0);
export const BIG = ((): number => {
  for (let total = 96; total < 512; total++) if (recordLengthV3(6, 1, total - 7, 2, 0, 0) === NOTE_RECORD + 2 * GROUP_FRAME_BYTES_V3) return total;
  throw new Error("no padding makes K's record two frames longer than the note's");
})();

/** Pads `value` so that scope + key + value has `total` bytes: K and b are the same size. */
export function sized(scope: string, key: string, value: string, total = 96): string {
  return value + "#".repeat(total - scope.length - key.length - value.length);
}
