/**
 * W5's operations, shared by the side-by-side workload (bench/workloads.ts w5) and the floor store
 * that measures what W5 costs at the least (bench/w5-floor.ts): on keys 0..n-1, forget every even
 * key, then rewrite every 8th at version 2 (atomic batches of 1000 in one seeded random order),
 * then read all n and count the values that are not what W5 expects.
 */
import type { BatchOp } from "./adapters.js";
import { keyOf, permutation, sameValue, valueOf } from "./common.js";

/** The seed of the order W5's keys are loaded in (version 1, atomic batches of W5_BATCH_OPS, untimed). */
export const W5_LOAD_SEED = 51;
/** The seed of W5's order of forgets and rewrites. */
const W5_ORDER_SEED = 52;
/** Operations in one of W5's atomic batches. */
export const W5_BATCH_OPS = 1000;

/** What W5 expects of key i: version 2 (rewritten), undefined (forgotten) or version 1. */
export function w5Expect(i: number): number | undefined {
  if (i % 8 === 0) return 2;
  if (i % 2 === 0) return undefined;
  return 1;
}

/** W5's two write phases as atomic batches: the forgets of every even key, then the rewrites of every 8th. */
export function w5Batches(n: number): { dels: BatchOp[][]; puts: BatchOp[][] } {
  const perm = permutation(n, W5_ORDER_SEED);
  const dels: BatchOp[][] = [];
  const puts: BatchOp[][] = [];
  let cur: BatchOp[] = [];
  const cut = (into: BatchOp[][], force: boolean): void => {
    if (cur.length === W5_BATCH_OPS || (force && cur.length > 0)) {
      into.push(cur);
      cur = [];
    }
  };
  for (const i of perm) {
    if (i % 2 !== 0) continue;
    cur.push({ type: "del", key: keyOf(i) });
    cut(dels, false);
  }
  cut(dels, true);
  for (const i of perm) {
    if (i % 8 !== 0) continue;
    cur.push({ type: "put", key: keyOf(i), value: valueOf(i, 2) });
    cut(puts, false);
  }
  cut(puts, true);
  return { dels, puts };
}

/** Reads keys 0..n-1 through `get` and counts the answers that are not what W5 expects. */
export function w5Verify(get: (key: string) => Uint8Array | undefined, n: number): number {
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const want = w5Expect(i);
    const got = get(keyOf(i));
    if (want === undefined ? got !== undefined : !sameValue(got, i, want)) bad++;
  }
  return bad;
}
