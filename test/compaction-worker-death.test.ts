/**
 * A compaction worker thread that dies in the middle of an in-place rewrite leaves no call
 * waiting: the pass rejects with an IoError, every read settles (a read of the cut-short segment
 * throws that IoError; the others answer), later passes skip the segment, close() settles, and
 * the next open replays the rewrite's journal and reads every value. The IoError's message says
 * that nothing was lost and to open the store again, not the device's advice (free space).
 *
 * Method: a durable store of 64 KiB segments, 400 keys of ~300 B in scope `s` with every third
 * forgotten, compacts in place with one worker; the worker is held at `compaction:mid-rewrite`
 * (the segment's generation is odd and half its bytes rewritten) and its thread is terminated,
 * as an out-of-memory kill or a crash of the thread would end it. Then every live key is read
 * with read() under a deadline, readSync() of one on the cut-short segment, a second pass is
 * run, the store is closed and reopened, and every live key must read its value. An eager erasure
 * of the scope rejects with the given-up segment's IoError (not an assertion), and after a reopen
 * a second one removes the values. The twin
 * (`unsafeCutShortForTests.keepWaiting`, the rule before the fifty-third session) leaves the
 * segment odd and not given up: a read of its keys misses the deadline.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeCutShortForTests } from "../engine/compactor.js";
import { IoError } from "../rules/errors.js";
import { settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE_MS = 5_000;
const READ_DEADLINE_MS = 1_000;
const KEYS = 400;
const HOLD = "compaction:mid-rewrite" as const;
const valueOf = (i: number): string => `v${i}`.padEnd(300, "x");

afterEach(() => {
  unsafeCutShortForTests.keepWaiting = false;
});

/** A store whose in-place pass's worker was terminated mid-rewrite; returns it and the pass's outcome. */
async function cutShort(dir: string): Promise<{ s: Store; pass: Awaited<ReturnType<typeof settle>> }> {
  const s = await Store.open(dir, { durability: "sync", segmentBytes: 64 * 1024, compaction: { mode: "in-place", workers: 1, auto: false }, faults: { pauseAt: [HOLD] } });
  for (let i = 0; i < KEYS; i++) await s.write(`k${i}`, valueOf(i), { scope: "s" });
  for (let i = 0; i < KEYS; i += 3) await s.forget(`k${i}`, { scope: "s" });
  const pass = s.compact({ mode: "in-place" });
  pass.catch(() => undefined);
  await within(DEADLINE_MS, s.faults.waitFor(HOLD), "the rewrite's hold");
  const threads = s.compactor.workerThreadsForTests();
  expect(threads.length, "the pass runs on a worker thread").toBeGreaterThan(0);
  await Promise.all(threads.map((t) => t.terminate()));
  return { s, pass: await settle(DEADLINE_MS, pass, "the pass") };
}

/** Reads every live key once under a deadline: counts answers, IoErrors, and the keys that did not settle. */
async function readAll(s: Store): Promise<{ ok: number; lost: number; waiting: number; wrong: number }> {
  const out = { ok: 0, lost: 0, waiting: 0, wrong: 0 };
  for (let i = 1; i < KEYS; i++) {
    if (i % 3 === 0) continue;
    const r = await settle(READ_DEADLINE_MS, s.read(`k${i}`, { scope: "s" }), `read k${i}`).catch(() => null);
    if (r === null) {
      out.waiting += 1;
      if (out.waiting >= 2) break; // enough to tell; each waiting read costs the whole deadline
    } else if (!r.ok) out[r.error instanceof IoError ? "lost" : "wrong"] += 1;
    else out[(r.value as { value?: unknown }).value === valueOf(i) ? "ok" : "wrong"] += 1;
  }
  return out;
}

describe("a compaction worker that dies mid-rewrite in place", () => {
  it("leaves no call waiting, and the next open replays the journal", async () => {
    const dir = tempDir("worker-death");
    const { s, pass } = await cutShort(dir);
    expect(pass.ok ? null : pass.error, "the pass reports a typed error").toBeInstanceOf(IoError);
    const said = pass.ok ? "" : (pass.error as IoError).message;
    expect(said, "says what to do").toMatch(/Nothing was lost: close the store and open it again/);
    expect(said, "not the device's advice").not.toMatch(/free space|fix the device/);
    const reads = await readAll(s);
    expect(reads.waiting).toBe(0);
    expect(reads.wrong).toBe(0);
    expect(reads.lost, "reads of the cut-short segment throw").toBeGreaterThan(0);
    expect(reads.ok, "the other segments still answer").toBeGreaterThan(0);
    expect(() => s.readSync("k1", { scope: "s" })).toThrow(IoError);
    const releasing = setInterval(() => s.faults.release(HOLD), 5); // the later pass's rewrites reach the hold too
    try {
      const later = await settle(DEADLINE_MS, s.compact({ mode: "in-place" }), "a later pass");
      expect(later.ok, "a later pass skips the cut-short segment and finishes").toBe(true);
    } finally {
      clearInterval(releasing);
    }
    await within(DEADLINE_MS, s.close(), "close");
    const r = await Store.open(dir, { compaction: { auto: false, workers: 0 } });
    for (let i = 1; i < KEYS; i++) {
      if (i % 3 !== 0) expect(r.readSync(`k${i}`, { scope: "s" }), `k${i} after the reopen`).toMatchObject({ status: "OK", value: valueOf(i) });
    }
    await r.close();
  });

  it("an eager erasure of the cut-short segment's scope rejects with its IoError; after a reopen a second one removes the values", async () => {
    const dir = tempDir("worker-death-erase");
    const { s } = await cutShort(dir);
    const releasing = setInterval(() => s.faults.release(HOLD), 5); // the erasure's own rewrites reach the hold too
    try {
      const erased = await settle(DEADLINE_MS, s.forgetScope("s", { reclaim: "eager" }), "the eager erasure");
      expect(erased.ok ? null : erased.error, "not an assertion: the segment's own error").toBeInstanceOf(IoError);
    } finally {
      clearInterval(releasing);
    }
    await within(DEADLINE_MS, s.close(), "close");
    const r = await Store.open(dir, { compaction: { auto: false, workers: 0 } });
    expect(r.readSync("k1", { scope: "s" }).status, "the erasure is committed").toBe("NOT_FOUND");
    const again = await within(DEADLINE_MS, r.forgetScope("s", { reclaim: "eager" }), "the second eager erasure");
    expect(again.reclaimedBytes).toBeGreaterThan(0);
    await r.close();
  });

  it("twin: not given up, the segment's reads wait for a generation no one will change", async () => {
    unsafeCutShortForTests.keepWaiting = true;
    const { s } = await cutShort(tempDir("worker-death-twin"));
    const reads = await readAll(s);
    expect(reads.waiting, "a read of the cut-short segment did not settle").toBeGreaterThan(0);
  });
});
