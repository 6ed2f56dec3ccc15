/**
 * A plan's record list sorted by offset (engine/compaction-plan.ts `RecordList.sortByOffset`)
 * keeps every entry whole: the worker copies the survivors at offs[i], lens[i] long, and
 * publication moves refs[i]'s pointer to where that record went, so an entry whose four fields
 * come from different records would move a key onto another key's bytes. The sort permutes the
 * four parallel arrays in place by following the permutation's cycles (twelfth session: no
 * copy of each array per pass); the arrays are chunks of 1,024 entries (the first one grown by
 * doubling), so a cycle crosses chunks (nineteenth session).
 *
 * Method: seeded lists of 0 to 20,000 entries (up to 4,096 sorted by packed float keys, more by
 * a radix sort; offsets up to ~2^32) — shuffled, reversed, sorted already, one long cycle, many
 * 2-cycles — each entry's kind, ref and length derived from its offset, are sorted and
 * checked: offsets ascending, every entry's fields still derived from its own offset, and the
 * multiset of entries unchanged. The checker's twin: the same check run on a list whose entries
 * had two refs swapped before the sort (what a permutation that moved one array differently from
 * the others leaves) finds it.
 */
import { describe, expect, it } from "vitest";
import { KIND_ERASE, KIND_PUT, KIND_TOMB, RecordList } from "../engine/compaction-plan.js";
import { rng } from "./helpers/rng.js";

/** An entry's fields as a function of its offset: a permutation that splits an entry shows. */
function entryOf(off: number): { kind: number; ref: string; len: number } {
  return { kind: [KIND_PUT, KIND_TOMB, KIND_ERASE][off % 3] as number, ref: `r${off}`, len: 40 + (off % 97) };
}

/** A list holding `offsets` in the given order (`refOf` gives each entry's ref: its own by default). */
function listOf(offsets: readonly number[], refOf: (off: number, i: number) => string = (off) => entryOf(off).ref): RecordList {
  const list = new RecordList();
  offsets.forEach((off, i) => {
    const e = entryOf(off);
    list.push(e.kind, refOf(off, i), off, e.len);
  });
  return list;
}

/** Problems with a list that should be `offsets` sorted: order, entries split, entries lost. */
function problems(list: RecordList, offsets: readonly number[]): string[] {
  const found: string[] = [];
  const want = [...offsets].sort((a, b) => a - b);
  if (list.length !== want.length) found.push(`length ${list.length} != ${want.length}`);
  for (let i = 0; i < list.length; i++) {
    const off = list.offAt(i);
    if (off !== want[i]) found.push(`offs[${i}] ${off} != ${want[i]}`);
    const e = entryOf(off);
    if (list.kindAt(i) !== e.kind || list.refAt(i) !== e.ref || list.lenAt(i) !== e.len) found.push(`entry ${i} split`);
  }
  return found;
}

/** Offset sets in the orders a keydir walk meets (distinct offsets, multiples of 8 like records'). */
function cases(): number[][] {
  const r = rng(20261203);
  const out: number[][] = [];
  for (const n of [0, 1, 2, 3, 17, 1000, 1024, 1025, 5000, 20000]) {
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

/** `list` after sortByOffset. */
function sorted(list: RecordList): RecordList {
  list.sortByOffset();
  return list;
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
    expect(problems(sorted(listOf(offsets)), offsets)).toEqual([]);
    // Entries 3 and 700 trade refs: each keeps its own kind, offset and length.
    const swapped = (off: number, i: number): string => entryOf(i === 3 ? (offsets[700] as number) : i === 700 ? (offsets[3] as number) : off).ref;
    expect(problems(sorted(listOf(offsets, swapped)), offsets).length).toBe(2);
  });

  it("reads back what was pushed across the first chunk's doublings and later chunks", () => {
    const offsets = Array.from({ length: 3000 }, (_, i) => 64 + 24 * i);
    const list = listOf(offsets);
    expect(list.length).toBe(3000);
    expect(Array.from(list.offsets())).toEqual(offsets);
    expect(list.pairs().length).toBe(6000);
    expect(list.pairs()[2 * 2999 + 1]).toBe(entryOf(offsets[2999] as number).len);
    expect(list.bytes()).toBe(offsets.reduce((n, off) => n + entryOf(off).len, 0));
    expect(problems(list, offsets)).toEqual([]);
  });
});
