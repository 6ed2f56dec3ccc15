/**
 * An eager forgetScope that a close() overtakes never claims bytes it did not remove (I8: "eager"
 * resolves only after every value byte of the scope is gone from the segment files).
 *
 * Method: a store of 64 KiB segments holds 200 values of scope `victim`, each carrying a marker,
 * beside 400 values of `other` of which every second is forgotten. compact() starts and its
 * worker is held at a fault point (`compaction:before-swap` copy-on-write, `compaction:after-
 * journal` in place); forgetScope("victim", { reclaim: "eager" }) is called — its erasure commits,
 * its pass queues behind the held one — and then close(), which lets no later job start. Released,
 * the held pass ends, the erasure's pass starts no job, and forgetScope must reject with a
 * StoreClosedError (code CLOSED) saying what is left to do, within a deadline; close() resolves.
 * The marker is then still in a segment file (the bytes the call did not remove), every read of
 * `victim` after a reopen finds nothing (the erasure is committed), and a second eager erasure
 * after the reopen leaves no file holding the marker. The twin (`unsafeEagerEraseForTests.
 * trustPass`, the rule before the fifty-third session) resolves forgetScope with ok and
 * reclaimedBytes 0 while a file still holds the marker.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, StoreClosedError, type OpenOptions } from "../src/index.js";
import { unsafeEagerEraseForTests } from "../engine/compactor.js";
import { settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE_MS = 20_000;
const MARK = "SECRETBYTES";
type Mode = "copy-on-write" | "in-place";
const HOLD: Record<Mode, "compaction:before-swap" | "compaction:after-journal"> = { "copy-on-write": "compaction:before-swap", "in-place": "compaction:after-journal" };

afterEach(() => {
  unsafeEagerEraseForTests.trustPass = false;
});

/** The segment files of `dir` whose bytes hold MARK. */
function filesWithMark(dir: string): string[] {
  const segs = path.join(dir, "segments");
  return fs.readdirSync(segs).filter((name) => fs.readFileSync(path.join(segs, name)).includes(MARK));
}

/** Fills a store, holds a compact() at its worker's fault point, calls the eager erasure, then close(); returns the erasure's outcome. */
async function eraseAcrossClose(dir: string, mode: Mode): Promise<Awaited<ReturnType<typeof settle>>> {
  const options: OpenOptions = { durability: "sync", segmentBytes: 64 * 1024, compaction: { mode, workers: 1, auto: false }, faults: { pauseAt: [HOLD[mode]] } };
  const s = await Engram.open(dir, options);
  for (let i = 0; i < 200; i++) await s.write(`k${i}`, `${MARK}${i}`.padEnd(300, "x"), { scope: "victim" });
  for (let i = 0; i < 400; i++) await s.write(`o${i}`, `other${i}`.padEnd(300, "y"), { scope: "other" });
  for (let i = 0; i < 400; i += 2) await s.forget(`o${i}`, { scope: "other" });
  const pass = s.compact({ mode });
  pass.catch(() => undefined);
  await within(DEADLINE_MS, s.faults.waitFor?.(HOLD[mode]) ?? Promise.reject(new Error("no pause")), "the held pass");
  const erased = s.forgetScope("victim", { reclaim: "eager" });
  erased.catch(() => undefined);
  const closed = s.close();
  // Every job of the held pass that reaches the point is let go (an in-place pass has two in
  // flight); the erasure's pass starts none, since close began.
  const releasing = setInterval(() => s.faults.release?.(HOLD[mode]), 5);
  try {
    const outcome = await settle(DEADLINE_MS, erased, "the eager erasure");
    await within(DEADLINE_MS, closed, "close");
    await settle(DEADLINE_MS, pass, "the held pass");
    return outcome;
  } finally {
    clearInterval(releasing);
  }
}

describe("an eager forgetScope overtaken by close()", () => {
  for (const mode of ["copy-on-write", "in-place"] as const) {
    it(`${mode}: rejects with CLOSED, leaves the erasure committed, and a second eager erasure after a reopen removes the bytes`, async () => {
      const dir = tempDir(`eager-close-${mode}`);
      const outcome = await eraseAcrossClose(dir, mode);
      expect(outcome.ok, "the erasure does not claim bytes it left").toBe(false);
      const err = outcome.ok ? null : outcome.error;
      expect(err).toBeInstanceOf(StoreClosedError);
      expect((err as StoreClosedError).code).toBe("CLOSED");
      expect((err as Error).message).toMatch(/open the store again/);
      expect(filesWithMark(dir).length, "the bytes the call did not remove are still there").toBeGreaterThan(0);
      const s = await Engram.open(dir, { compaction: { mode, workers: 1, auto: false } });
      for (let i = 0; i < 200; i += 37) expect((await s.read(`k${i}`, { scope: "victim" })).status, `victim k${i}`).toBe("NOT_FOUND");
      const again = await within(DEADLINE_MS, s.forgetScope("victim", { reclaim: "eager" }), "the second eager erasure");
      expect(again.reclaimedBytes).toBeGreaterThan(0);
      await s.close();
      expect(filesWithMark(dir), "no file holds the erased values").toEqual([]);
    });
  }

  it("twin: trusting the pass, forgetScope resolves with reclaimedBytes 0 while a file still holds the erased values", async () => {
    unsafeEagerEraseForTests.trustPass = true;
    const dir = tempDir("eager-close-twin");
    const outcome = await eraseAcrossClose(dir, "copy-on-write");
    expect(outcome.ok).toBe(true);
    expect(outcome.ok ? (outcome.value as { reclaimedBytes?: number }).reclaimedBytes : null).toBe(0);
    expect(filesWithMark(dir).length).toBeGreaterThan(0);
  });
});
