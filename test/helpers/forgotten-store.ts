/**
 * A store for compaction tests: `keys` keys written in batches of `perBatch` into scope "s"
 * (`k0`, `k1`, …, values from `valueOf`), then every third key forgotten in one batch. Returns the
 * store (opened with `opts` and fault injection on: `opts.faults`, else none armed) and the live content, key → value.
 */
import { Engram } from "../../src/index.js";
import type { OpenOptions } from "../../src/index.js";

export async function storeWithEveryThirdForgotten(dir: string, opts: OpenOptions, keys: number, perBatch: number, valueOf: (i: number) => string): Promise<{ store: Engram; live: Map<string, string> }> {
  const store = await Engram.open(dir, { faults: {}, ...opts }); // opts' own faults (pause points) kept
  const live = new Map<string, string>();
  for (let i = 0; i < keys; i += perBatch) {
    const ops = [];
    for (let j = i; j < Math.min(keys, i + perBatch); j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: valueOf(j) });
    await store.batch(ops);
  }
  const forgets = [];
  for (let i = 0; i < keys; i++) {
    if (i % 3 === 0) forgets.push({ op: "forget" as const, scope: "s", key: `k${i}` });
    else live.set(`k${i}`, valueOf(i));
  }
  await store.batch(forgets);
  return { store, live };
}
