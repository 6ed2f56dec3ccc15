/**
 * The workload and the check of the in-place power-cut tests (compaction-inplace-sync,
 * journal-reuse): a store of tiny segments, inline compaction, written and partly forgotten so
 * that an in-place pass rewrites several segments; and each power-cut image opened and read key
 * by key against the acknowledged state.
 */
import { Engram, type OpenOptions } from "../../src/index.js";

/** Keys written by `loadAndForget`. */
export const INPLACE_KEYS = 240;

/** The store both tests record: 16 KiB segments, retention 0, in-place compaction inline (the io.ts observer sees every call). */
export const INPLACE_OPTS: OpenOptions = { segmentBytes: 16 * 1024, retention: { tombstoneRetentionMs: 0 }, compaction: { mode: "in-place", workers: 0, auto: false } };

/** The value of key i: 200–440 bytes, so that records differ in length. */
const valueOf = (i: number): string => `v${i}:`.padEnd(200 + (i % 7) * 40, "q");

/** The acknowledged state of every key: its value, or null once forgotten. */
export type KeyModel = Map<string, string | null>;

/** Writes INPLACE_KEYS keys in batches of 20 and forgets every third; returns what was acknowledged. */
export async function loadAndForget(store: Engram): Promise<KeyModel> {
  const model: KeyModel = new Map();
  for (let i = 0; i < INPLACE_KEYS; i += 20) {
    const ops = [];
    for (let j = i; j < i + 20; j++) {
      ops.push({ op: "write" as const, scope: "global", key: `k${j}`, value: valueOf(j) });
      model.set(`k${j}`, valueOf(j));
    }
    await store.batch(ops);
  }
  for (let i = 0; i < INPLACE_KEYS; i += 3) {
    await store.forget(`k${i}`);
    model.set(`k${i}`, null);
  }
  return model;
}

/** Keys of `model` that `store` does not read as acknowledged (each with what it read, or what it threw). */
export async function wrongKeys(store: Engram, model: ReadonlyMap<string, string | null>): Promise<string[]> {
  const out: string[] = [];
  for (const [key, want] of model) {
    try {
      const got = await store.read(key);
      const state = got.status === "OK" ? String(got.value) : null;
      if (state !== want) out.push(`${key} read ${state === null ? "NOT_FOUND" : state.slice(0, 12)}`);
    } catch (err) {
      out.push(`${key} threw ${String(err)}`);
    }
  }
  return out;
}

/** Opens the power-cut `image` and lists what does not read as `model` (an open failure is one entry, with its message). */
export async function violationsIn(image: string, model: ReadonlyMap<string, string | null>): Promise<string[]> {
  let store: Engram;
  try {
    store = await Engram.open(image, { compaction: { workers: 0, auto: false } });
  } catch (err) {
    return [`open failed: ${String(err)}`];
  }
  try {
    return await wrongKeys(store, model);
  } finally {
    await store.close();
  }
}
