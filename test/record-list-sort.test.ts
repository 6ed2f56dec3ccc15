/**
 * A plan's record list sorted by offset (engine/compaction-plan.ts `RecordList.sortByOffset`)
 * keeps every entry whole: the worker copies the survivors at offs[i], lens[i] long, and
 * publication moves refs[i]'s pointer to where that record went, so an entry whose four fields
 * come from different records would move a key onto another key's bytes. The sort permutes the
 * four parallel arrays in place by following the permutation's cycles (twelfth session: no
 * copy of each array per pass).
 *
 * Method: seeded lists of 0 to 20,000 entries (up to 4,096 sorted by packed float keys, more by
 * a radix sort; offsets up to ~2^32) — shuffled, reversed, sorted already, one long cycle, many
 * 2-cycles — each entry's kind, ref and length derived from its offset, are sorted and
 * checked: offsets ascending, every entry's fields still derived from its own offset, and the
 * multiset of entries unchanged. The checker's twin: the same check run on a sorted list with two
 * refs swapped (what a permutation that moved one array differently from the others leaves) finds it.
 */
import { describe, expect, it } from "vitest";
import { KIND_ERASE, KIND_PUT, KIND_TOMB, RecordList } from "../engine/compaction-plan.js";
import { rng } from "./helpers/rng.js";

/** An entry's fields as a function of its offset: a permutation that splits an entry shows. */
function entryOf(off: number): { kind: number; ref: string; len: number } {
  return { kind: [KIND_PUT, KIND_TOMB, KIND_ERASE][off % 3] as number, ref: `r${off}`, len: 40 + (off % 97) };
}

/** A list holding `offsets` in the given order. */
function listOf(offsets: readonly number[]): RecordList {
  const list = new RecordList();
  for (const off of offsets) {
    const e = entryOf(off);
    list.push(e.kind, e.ref, off, e.len);
  }
  return list;
}

/** Problems with a list that should be `offsets` sorted: order, entries split, entries lost. */
function problems(list: RecordList, offsets: readonly number[]): string[] {
  const found: string[] = [];
  const want = [...offsets].sort((a, b) => a - b);
  if (list.length !== want.length) found.push(`length ${list.length} != ${want.length}`);
  for (let i = 0; i < list.length; i++) {
    const off = list.offs[i] as number;
    if (off !== want[i]) found.push(`offs[${i}] ${off} != ${want[i]}`);
    const e = entryOf(off);
    if (list.kinds[i] !== e.kind || list.refs[i] !== e.ref || list.lens[i] !== e.len) found.push(`entry ${i} split`);
  }
  return found;
}

/** Offset sets in the orders a keydir walk meets (distinct offsets, multiples of 8 like records'). */
function cases(): number[][] {
  const r = rng(20261203);
  const out: number[][] = [];
  for (const n of [0, 1, 2, 3, 17, 1000, 5000, 20000]) {
    // Up to 4,096 entries the packed float sort; more, the radix sort over both 16-bit halves
    // (the 20,000-entry lists reach offsets near 2^32, so the high half orders them too).
    const stride = n === 20000 ? 214_741 : 24;
    const base = Array.from({ length: n }, (_, i) => 64 + stride * i);
    const shuffled = [...base];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j] as number, shuffled[i] as number];
    }
    const rotated = n > 0 ? [...base.slice(1), base[0] as number] : []; // one cycle through every entry
    const pairs = base.map((_, i) => base[i % 2 === 0 ? Math.min(i + 1, n - 1) : i - 1] as number); // 2-cycles
    out.push(shuffled, [...base].reverse(), base, rotated, n % 2 === 0 ? pairs : shuffled);
  }
  return out;
}

describe("RecordList.sortByOffset", () => {
  it("sorts by offset and keeps every entry whole, for shuffles, reversals, one long cycle and many 2-cycles", () => {
    let checked = 0;
    for (const offsets of cases()) {
      const list = listOf(offsets);
      list.sortByOffset();
      expect(problems(list, offsets)).toEqual([]);
      checked += offsets.length;
    }
    expect(checked).toBeGreaterThan(100_000);
  });

  it("twin: the checker finds a sorted list whose refs were moved apart from their offsets", () => {
    const offsets = cases()[25] as number[];
    const list = listOf(offsets);
    list.sortByOffset();
    expect(problems(list, offsets)).toEqual([]);
    const a = list.refs[3] as string;
    list.refs[3] = list.refs[700] as string;
    list.refs[700] = a;
    expect(problems(list, offsets).length).toBe(2);
  });
});
