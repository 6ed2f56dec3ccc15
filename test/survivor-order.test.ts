/**
 * A compaction source's survivors put in file order by the worker (engine/offset-order.ts
 * `inFileOrder`, used by compaction-core.ts's SurvivorCopy): a plan lists them in the order its
 * keydir walk meets them, the worker copies them in file order, and the new offsets it returns
 * must come back in the plan's order — publication moves the plan's i-th survivor's pointer to
 * the i-th new offset, so an offset returned in another order moves a key onto another key's
 * record.
 *
 * Method: (1) seeded lists of 0 to 20,000 [offset, length] pairs (up to 512 ordered by packed
 * float keys, more by a radix sort whose digit is half the largest offset's bits; offsets from
 * 64 up to ~2^32) — shuffled, reversed, sorted already, one long cycle, many 2-cycles — each
 * length derived from its offset, come out ascending, every pair whole and from the index the
 * order names; a list in order comes back as is. The checker's twin: pairs with two lengths
 * swapped are found. (2) Real stores (compaction inline, `workers: 0`, both modes): keys written
 * in one order and written again in the reverse order fill segments whose records the keydir
 * walk meets from the last to the first; some are forgotten, every segment is compacted, and
 * every key reads its value, before and after a reopen. Twin: with the worker returning its new
 * offsets in file order (`unsafeLiveOrderForTests.fileOrder`), the same reads find keys on other
 * keys' records. (3) A plan's record list reads back what was pushed across its chunks.
 */
import * as fs from "node:fs";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { KIND_ERASE, KIND_PUT, KIND_TOMB, RecordList } from "../engine/compaction-plan.js";
import { survivorOrders, unsafeLiveOrderForTests } from "../engine/compaction-core.js";
import { inFileOrder } from "../engine/offset-order.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";
import { within } from "./helpers/io-faults.js";

const DEADLINE = 60_000;

/** A record's length as a function of its offset: a pair split from its offset shows. */
const lengthOf = (off: number): number => 40 + (off % 97);

/** `offsets` as [offset, length] pairs, in the given order. */
function pairsOf(offsets: readonly number[]): Uint32Array {
  const live = new Uint32Array(2 * offsets.length);
  offsets.forEach((off, i) => {
    live[2 * i] = off;
    live[2 * i + 1] = lengthOf(off);
  });
  return live;
}

/** Problems with inFileOrder's answer for `given`: order, pairs split, pairs lost, wrong origin. */
function problems(given: Uint32Array, ordered: Uint32Array, order: Uint32Array | null): string[] {
  const found: string[] = [];
  const n = given.length / 2;
  if (ordered.length !== given.length) found.push(`length ${ordered.length} != ${given.length}`);
  const seen = new Set<number>();
  for (let k = 0; k < ordered.length / 2; k++) {
    const off = ordered[2 * k] as number;
    if (k > 0 && !((ordered[2 * k - 2] as number) < off)) found.push(`pair ${k} out of order`);
    if (ordered[2 * k + 1] !== lengthOf(off)) found.push(`pair ${k} split`);
    const from = order === null ? k : (order[k] as number);
    if (!(from < n) || given[2 * from] !== off || given[2 * from + 1] !== ordered[2 * k + 1]) found.push(`pair ${k} is not pair ${from} given`);
    seen.add(from);
  }
  if (seen.size !== n) found.push(`${n - seen.size} pairs lost`);
  return found;
}

/** Offset sets in the orders a keydir walk meets (distinct offsets, multiples of 8 like records'). */
function cases(): number[][] {
  const r = rng(20261203);
  const out: number[][] = [];
  for (const n of [0, 1, 2, 3, 17, 1000, 1024, 1025, 5000, 20000]) {
    // Up to 512 entries the packed float sort; more, the radix sort, whose digit is half the
    // largest offset's bits (the 20,000-entry lists reach offsets near 2^32: 16-bit digits).
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

describe("inFileOrder", () => {
  it("orders pairs by offset, each whole and from the index its order names, for shuffles, reversals, cycles and lists in order", () => {
    let checked = 0;
    let inOrder = 0;
    for (const offsets of cases()) {
      const given = pairsOf(offsets);
      const { live, order } = inFileOrder(given);
      expect(problems(given, live, order)).toEqual([]);
      if (order === null) {
        expect(live).toBe(given); // a list in order is not copied
        inOrder += 1;
      }
      checked += offsets.length;
    }
    expect(checked).toBeGreaterThan(100_000);
    expect(inOrder).toBeGreaterThanOrEqual(10);
  });

  it("twin: the checker finds an ordered list whose lengths were swapped between two pairs", () => {
    const offsets = cases()[25] as number[];
    const given = pairsOf(offsets);
    const { live, order } = inFileOrder(given);
    expect(problems(given, live, order)).toEqual([]);
    const broken = live.slice();
    [broken[7], broken[1401]] = [broken[1401] as number, broken[7] as number];
    expect(problems(given, broken, order).length).toBeGreaterThanOrEqual(2);
  });
});

const KEYS = 3000;
const VALUE = (i: number, round: number): string => `v${i}.${round}:`.padEnd(120 + (i % 50), "x");

/**
 * A store whose segments' records the keydir walk meets in reverse file order: KEYS keys written
 * in key order (the keydir's order), then again in the reverse order, then every third forgotten
 * (those tombstones too come in reverse); returns the content a reader must see.
 */
async function reversed(store: Engram): Promise<Map<string, string | undefined>> {
  const want = new Map<string, string | undefined>();
  for (const round of [1, 2]) {
    for (let b = 0; b < KEYS; b += 250) {
      const ops = [];
      for (let j = b; j < b + 250; j++) {
        const i = round === 1 ? j : KEYS - 1 - j;
        ops.push({ op: "write" as const, scope: "s", key: `k${i}`, value: VALUE(i, round) });
        want.set(`k${i}`, VALUE(i, round));
      }
      await store.batch(ops);
    }
  }
  for (let i = KEYS - 1; i >= 0; i -= 3) {
    await store.forget(`k${i}`, { scope: "s" });
    want.set(`k${i}`, undefined);
  }
  return want;
}

/** The keys whose read differs from `want` (a read that throws counts as wrong). */
function wrongReads(store: Engram, want: ReadonlyMap<string, string | undefined>): string[] {
  const wrong: string[] = [];
  for (const [key, value] of want) {
    try {
      const got = store.readSync(key, { scope: "s" });
      const text = got.status === "OK" ? Buffer.from(got.value as Uint8Array).toString() : undefined;
      if (text !== value) wrong.push(key);
    } catch {
      wrong.push(key);
    }
  }
  return wrong;
}

/** Fills a store in `mode`, compacts every segment, and returns the wrong reads after the pass and after a reopen. */
async function compactReversed(mode: "copy-on-write" | "in-place"): Promise<{ afterPass: string[]; afterReopen: string[]; compacted: number; reordered: number }> {
  const dir = tempDir(`order-${mode}`);
  const opts: OpenOptions = { durability: "none", segmentBytes: 96 * 1024, compaction: { workers: 0, auto: false, mode }, retention: { tombstoneRetentionMs: 0 } };
  const store = await within(DEADLINE, Engram.open(dir, opts), "open");
  let afterPass: string[];
  let compacted: number;
  let reordered: number;
  try {
    const want = await reversed(store);
    const reorderedBefore = survivorOrders.reordered;
    const report = await within(DEADLINE, store.compact({ mode }), "compact");
    compacted = report.segments.length;
    reordered = survivorOrders.reordered - reorderedBefore;
    afterPass = wrongReads(store, want);
    await store.close();
    const again = await within(DEADLINE, Engram.open(dir, opts), "reopen");
    try {
      return { afterPass, afterReopen: wrongReads(again, want), compacted, reordered };
    } finally {
      await again.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

describe.each(["copy-on-write", "in-place"] as const)("%s compaction of segments the keydir walk meets in reverse", (mode) => {
  it("leaves every key reading its own value, before and after a reopen", async () => {
    const r = await compactReversed(mode);
    expect(r.compacted).toBeGreaterThan(3);
    expect(r.reordered).toBeGreaterThan(3); // the worker met plans out of file order
    expect(r.afterPass).toEqual([]);
    expect(r.afterReopen).toEqual([]);
  }, DEADLINE);

  it("twin: new offsets returned in file order put keys on other keys' records", async () => {
    unsafeLiveOrderForTests.fileOrder = true;
    let r: { afterPass: string[]; reordered: number };
    try {
      r = await compactReversed(mode);
    } finally {
      unsafeLiveOrderForTests.fileOrder = false;
    }
    expect(r.reordered).toBeGreaterThan(3);
    expect(r.afterPass.length).toBeGreaterThan(100); // the files are right (a reopen reads them right); the pointers are not
  }, DEADLINE);
});

describe("RecordList", () => {
  it("reads back what was pushed across the first chunk's doublings and later chunks", () => {
    const offsets = Array.from({ length: 3000 }, (_, i) => 64 + 24 * i);
    const kinds = [KIND_PUT, KIND_TOMB, KIND_ERASE];
    const list = new RecordList();
    offsets.forEach((off, i) => list.push(kinds[i % 3] as number, `r${off}`, off, lengthOf(off)));
    expect(list.length).toBe(3000);
    expect(Array.from(list.offsets())).toEqual(offsets);
    expect(Array.from(list.pairs())).toEqual(Array.from(pairsOf(offsets)));
    expect(list.bytes()).toBe(offsets.reduce((n, off) => n + lengthOf(off), 0));
    for (const i of [0, 1023, 1024, 2999]) {
      expect(list.kindAt(i)).toBe(kinds[i % 3]);
      expect(list.refAt(i)).toBe(`r${offsets[i] as number}`);
    }
  });
});
