/**
 * The commit queue is bounded (engine/commit.ts COMMIT_QUEUE_OPS_MAX, COMMIT_QUEUE_BYTES_MAX):
 * callers beyond the bound wait for room before anything is decided, in arrival order, instead
 * of growing memory without limit. Method: issue far more writes in one turn than the bound
 * allows — many small ones (the op bound) and many 1 MiB ones (the byte bound) — sample the
 * queue at every real write system call (io.ts observer), and check that the samples never pass
 * the bound, that every write still resolves, and that versions follow call order (admission
 * is FIFO, so waiting does not reorder decisions). A twin run shows the sampler can see a full
 * queue at all: the largest sample reaches the bound.
 */
import { afterEach, describe, expect, it } from "vitest";
import { COMMIT_QUEUE_BYTES_MAX, COMMIT_QUEUE_OPS_MAX } from "../engine/commit.js";
import { Store } from "../engine/store.js";
import { setIoObserver } from "../segments/io.js";
import { tempDir } from "./helpers/tmp.js";
import { guardUnhandledRejections, within } from "./helpers/io-faults.js";

guardUnhandledRejections();
afterEach(() => setIoObserver(null));

async function flood(count: number, valueBytes: number): Promise<{ maxOps: number; maxBytes: number; versions: number[] }> {
  const store = await Store.open(tempDir("backpressure"), { durability: "none", segmentBytes: 256 * 1024 * 1024, compaction: { workers: 0, auto: false } });
  let maxOps = 0;
  let maxBytes = 0;
  const sample = (): void => {
    const q = store.log.queued;
    maxOps = Math.max(maxOps, q.ops);
    maxBytes = Math.max(maxBytes, q.bytes);
  };
  setIoObserver((e) => {
    if (e.op === "write") sample();
  });
  const value = "b".repeat(valueBytes);
  const pending: Array<Promise<{ version: number }>> = [];
  for (let i = 0; i < count; i++) {
    pending.push(store.write(`k${i % 1000}`, value));
    if (i % 997 === 0) sample();
  }
  sample();
  const results = await within(120_000, Promise.all(pending), "every write resolves");
  setIoObserver(null);
  await store.close();
  return { maxOps, maxBytes, versions: results.map((r) => r.version) };
}

describe("commit queue backpressure", () => {
  it(`small writes: at most ${COMMIT_QUEUE_OPS_MAX} ops queued, all resolve in call order`, async () => {
    const n = COMMIT_QUEUE_OPS_MAX * 3;
    const { maxOps, versions } = await flood(n, 16);
    console.log(`backpressure: ${n} writes in one turn, largest queue ${maxOps} ops (bound ${COMMIT_QUEUE_OPS_MAX})`);
    expect(maxOps).toBeLessThanOrEqual(COMMIT_QUEUE_OPS_MAX);
    expect(maxOps, "the sampler saw a full queue").toBe(COMMIT_QUEUE_OPS_MAX);
    for (let i = 1; i < versions.length; i++) expect(versions[i] as number).toBeGreaterThan(versions[i - 1] as number);
  });

  it(`1 MiB writes: at most ${COMMIT_QUEUE_BYTES_MAX} bytes (plus one op) queued`, async () => {
    const n = 160;
    const { maxBytes, versions } = await flood(n, 1024 * 1024);
    console.log(`backpressure: ${n} × 1 MiB writes in one turn, largest queue ${(maxBytes / 2 ** 20).toFixed(1)} MiB (bound ${COMMIT_QUEUE_BYTES_MAX / 2 ** 20} MiB)`);
    expect(maxBytes).toBeLessThanOrEqual(COMMIT_QUEUE_BYTES_MAX + 1024 * 1024 + 4096);
    expect(maxBytes).toBeGreaterThanOrEqual(COMMIT_QUEUE_BYTES_MAX);
    for (let i = 1; i < versions.length; i++) expect(versions[i] as number).toBeGreaterThan(versions[i - 1] as number);
  });
});
