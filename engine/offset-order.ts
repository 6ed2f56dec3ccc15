/**
 * A compaction source's survivors put in file order. A plan lists them in the order its keydir
 * walk meets them (compaction-plan.ts), which for a segment of tombstones or rewritten keys is not
 * the file's: the worker orders them (compaction-core.ts SurvivorCopy), where this code runs warm
 * (compaction-worker.ts's warm-up orders a reversed list each round). Until the twenty-fifth
 * session the main thread sorted every plan's lists before the pass's first job, in code that ran
 * once per pass and so ran cold: ~13 ms of a 100k-key in-place pass's ~36 ms plan, for the ~25k
 * tombstones of the segment sealed during it (twenty-fourth session's profile).
 */
import { assert } from "../rules/assert.js";

/** Survivor pairs in ascending file order, and where each came from. */
export interface OrderedPairs {
  /** [offset, length] pairs, offsets strictly ascending. */
  live: Uint32Array;
  /** order[k]: the index (in the pairs given) of pair k; null when they were in order already (live is then the array given). */
  order: Uint32Array | null;
}

/**
 * `live` ([offset, length] pairs with distinct offsets) in ascending offset order, with the
 * permutation that maps back to the order given. A list already ascending is returned as is
 * (one walk). Paired check: the ordered offsets ascend strictly, and as many pairs come out as went in.
 */
export function inFileOrder(live: Uint32Array): OrderedPairs {
  assert(live.length % 2 === 0, "live locations come in [offset, length] pairs");
  const n = live.length / 2;
  if (pairsAscend(live)) return { live, order: null };
  const offs = new Uint32Array(n);
  for (let i = 0; i < n; i++) offs[i] = live[2 * i] as number;
  const order = offsetOrder(offs);
  const sorted = new Uint32Array(live.length);
  for (let k = 0; k < n; k++) {
    const i = order[k] as number;
    sorted[2 * k] = live[2 * i] as number;
    sorted[2 * k + 1] = live[2 * i + 1] as number;
  }
  assert(order.length === n && pairsAscend(sorted), `${n} survivors ordered by offset, each once`);
  return { live: sorted, order };
}

/** True when the pairs' offsets ascend strictly. */
function pairsAscend(live: Uint32Array): boolean {
  let prev = -1;
  for (let i = 0; i < live.length; i += 2) {
    const off = live[i] as number;
    if (!(prev < off)) return false;
    prev = off;
  }
  return true;
}

/** Entries up to this count are ordered by one native sort of packed (offset, index) keys; more, by a radix sort. */
const PACKED_SORT_MAX = 512;
/** The packed key: offset · 2^PACKED_INDEX_BITS + index, exact in a double for offsets below 2^32. */
const PACKED_INDEX_BITS = 12;

/**
 * The indices of `offs` in ascending order of offset (ties, which a plan never has, by index).
 * Up to PACKED_SORT_MAX entries: one native numeric sort of a Float64Array of packed
 * (offset, index) keys, no comparator call per comparison. More: a least-significant-digit radix
 * sort in two stable counting passes (radixOrder): a W5 pass sorted ~225k survivors in 26.8 ms by
 * the packed sort, which a radix sort does ~3× faster (twelfth session).
 */
export function offsetOrder(offs: Uint32Array): Uint32Array {
  const n = offs.length;
  if (n > PACKED_SORT_MAX) return radixOrder(offs);
  assert(n < 2 ** PACKED_INDEX_BITS, "a packed key holds its index");
  const scale = 2 ** PACKED_INDEX_BITS;
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = (offs[i] as number) * scale + i;
  keys.sort();
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = (keys[i] as number) % scale;
  return order;
}

/** The widest digit of a radix pass: 16 bits, two passes for any 32-bit offset. */
const DIGIT_BITS_MAX = 16;

/**
 * offsetOrder's radix sort: indices by the low digit of their offsets, then stably by the high
 * one. A digit is half the bits of the largest offset, rounded up: 11 bits (2,048 buckets) for a
 * 4 MiB segment, 13 for 64 MiB, 16 past 2^30 — the bucket walks, cold in a pass's first sort,
 * cost their length whatever the entries' count.
 */
function radixOrder(offs: Uint32Array): Uint32Array {
  const n = offs.length;
  let max = 0;
  for (let i = 0; i < n; i++) max = Math.max(max, offs[i] as number);
  const bits = 32 - Math.clz32(max);
  const low = Math.max(1, Math.ceil(bits / 2));
  assert(low <= DIGIT_BITS_MAX && bits - low <= low, "two digits cover a 32-bit offset");
  const mask = (1 << low) - 1; // low ≤ 16: a small integer
  const starts = new Uint32Array(1 << low);
  const byLow = new Uint32Array(n);
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const digit = (offs[i] as number) & mask;
    starts[digit] = (starts[digit] as number) + 1;
  }
  prefixSums(starts);
  for (let i = 0; i < n; i++) {
    const digit = (offs[i] as number) & mask;
    byLow[starts[digit] as number] = i;
    starts[digit] = (starts[digit] as number) + 1;
  }
  starts.fill(0);
  for (let i = 0; i < n; i++) {
    const digit = (offs[i] as number) >>> low;
    starts[digit] = (starts[digit] as number) + 1;
  }
  prefixSums(starts);
  for (let k = 0; k < n; k++) {
    const i = byLow[k] as number;
    const digit = (offs[i] as number) >>> low;
    order[starts[digit] as number] = i;
    starts[digit] = (starts[digit] as number) + 1;
  }
  return order;
}

/** Turns bucket counts into each bucket's first position (exclusive prefix sums, in place). */
function prefixSums(counts: Uint32Array): void {
  let sum = 0;
  for (let b = 0; b < counts.length; b++) {
    const c = counts[b] as number;
    counts[b] = sum;
    sum += c;
  }
}
