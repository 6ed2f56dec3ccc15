/**
 * The space tests' workload and measure: a store filled and then 40% forgotten, and its segment
 * bytes over what the live records need, polled with a deadline while the background works.
 */
import type { Engram } from "../../src/index.js";

/** Writes keys `k0…k{keys-1}` with `value(i)` in batches of `batch`, then forgets 40% of them (i % 5 < 2) in batches of `batch`; returns the forgotten indexes. */
export async function churn(store: Engram, keys: number, value: (i: number) => string, batch: number): Promise<Set<number>> {
  for (let i = 0; i < keys; i += batch) await store.batch(Array.from({ length: Math.min(batch, keys - i) }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: value(i + j) })));
  const gone = new Set<number>();
  for (let i = 0; i < keys; i++) if (i % 5 < 2) gone.add(i);
  const order = [...gone];
  for (let b = 0; b < order.length; b += batch) await store.batch(order.slice(b, b + batch).map((i) => ({ op: "forget" as const, key: `k${i}` })));
  await store.flush();
  return gone;
}

/** Segment bytes over what the live records need (1 = no garbage). */
export function amplification(store: Engram): number {
  const st = store.stats();
  return st.totalBytes / Math.max(1, st.liveBytes);
}

/** Polls `cond` every 20 ms until it holds or `ms` pass; returns whether it held. */
export async function eventually(cond: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}
