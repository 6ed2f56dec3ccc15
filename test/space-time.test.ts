/**
 * Garbage that only time makes (issue 11, space): a value whose TTL ran out, and a retention
 * record (a forgotten key's tombstone) whose window ended after its value was reclaimed. No write,
 * forget or pass reports either, and the automatic pass chooses segments by the dead bytes those
 * report: before the time checks (engine/compactor.ts noteDeathAt), 2,000 expired values stayed
 * on disk until the store was closed, and so did 2,000 tombstones past their window. The compactor
 * now notes when the soonest such death comes (a TTL write, a reclaimed slot, the open, each walk)
 * and recounts then; the automatic pass follows.
 *
 * Method: a real store (engine Store, for the compactor's check counters), 32 KiB segments, the
 * default automatic compaction, the real clock with short windows (TTL 3 s, retention 0 or
 * 400 ms); the background is polled with a deadline until the segment files hold what the live
 * records need, and every key is then read back after a reopen. Each case has a twin under
 * `unsafeTimeCheckForTests.off` (the check walks and re-arms, but sets no dead bytes and asks for
 * no pass: the store before the fix). The twin waits for the event that proves a check ran whose
 * walk found the garbage (`timeChecks.deadSeen` > 0), then must find it all still on disk. A
 * third case checks the rate bound: a thousand staggered expiries cost a few walks, not a thousand.
 * Property stressed: garbage made by the clock alone is reclaimed by the background, in bounded work.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeTimeCheckForTests } from "../engine/compactor.js";
import { unsafeReclaimClockForTests } from "../engine/reclaim-clock.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { eventually } from "./helpers/space.js";

const T = 30_000;
const KEYS = 2000;
const KEPT = 200;
// Longer than STORE_QUIET_MS: the one count of dead bytes after the open (compactor.ts
// countAfterOpen) runs before the values expire, so only a time check can find them dead.
const TTL_MS = 3000;
const value = (i: number): string => `v${i}:${"t".repeat(240)}`;

afterEach(() => {
  unsafeTimeCheckForTests.off = false;
  unsafeReclaimClockForTests.ignoreFile = false;
});

/** Segment bytes of the store (headers included). */
function totalBytes(store: Store): number {
  return store.stats().totalBytes;
}

/** Writes KEPT keys without a TTL (`keep…`), then KEYS keys with one (`ttl…`), in batches of 100. */
async function writeExpiring(store: Store): Promise<void> {
  for (let i = 0; i < KEPT; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `keep${i + j}`, value: value(i + j) })));
  for (let i = 0; i < KEYS; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `ttl${i + j}`, value: value(i + j), ttlMs: TTL_MS })));
  await store.flush();
}

/** Writes KEYS keys, compacts them into sealed segments, then forgets every one (their values die: the automatic pass reclaims them). */
async function writeThenForget(store: Store): Promise<void> {
  for (let i = 0; i < KEYS; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: value(i + j) })));
  for (let i = 0; i < KEYS; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "forget" as const, key: `k${i + j}` })));
  await store.flush();
}

/** Reopens `dir` without compaction: the TTL keys are gone, the kept ones read back exactly. */
async function checkExpired(dir: string, options: OpenOptions): Promise<void> {
  const again = await Store.open(dir, { ...options, compaction: { auto: false } });
  try {
    for (let i = 0; i < KEPT; i++) expect(await again.read(`keep${i}`), `keep${i}`).toMatchObject({ value: value(i) });
    for (let i = 0; i < KEYS; i += 37) expect(await again.read(`ttl${i}`), `ttl${i}`).toMatchObject({ status: "NOT_FOUND" });
  } finally {
    await again.close();
  }
}

describe("values whose TTL ran out", () => {
  const OPTS: OpenOptions = { segmentBytes: 32 * 1024, durability: "none", retention: { tombstoneRetentionMs: 0 } };

  it("are reclaimed by the background with no other write", async () => {
    const dir = tempDir("space-time-ttl");
    const store = await Store.open(dir, OPTS);
    try {
      await writeExpiring(store);
      const written = totalBytes(store);
      expect(store.stats().compactions, "nothing died by a write").toBe(0);
      // The kept keys need ~KEPT records; everything else must go once the TTL ran out.
      const reached = await eventually(() => totalBytes(store) < written * 0.25, T);
      expect(reached, `segment bytes fell from ${written} (now ${totalBytes(store)})`).toBe(true);
      expect(store.compactor.timeChecks.fired, "a time check ran").toBeGreaterThan(0);
      expect(store.stats().compactions, "the background pass ran").toBeGreaterThan(0);
    } finally {
      await store.close();
    }
    await checkExpired(dir, OPTS);
  });

  it("are reclaimed too when written after every check the open scheduled ran", async () => {
    const store = await Store.open(tempDir("space-time-ttl-late"), OPTS);
    try {
      // The open's check runs on an empty store and schedules nothing: only the writes can note their expiry.
      expect(await eventually(() => store.compactor.timeChecks.fired > 0, T), "the open's check ran").toBe(true);
      await writeExpiring(store);
      const written = totalBytes(store);
      const reached = await eventually(() => totalBytes(store) < written * 0.25, T);
      expect(reached, `segment bytes fell from ${written} (now ${totalBytes(store)})`).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("twin: with the time check off, a check that found them dead reclaims nothing", async () => {
    unsafeTimeCheckForTests.off = true;
    const dir = tempDir("space-time-ttl-twin");
    const store = await Store.open(dir, OPTS);
    try {
      await writeExpiring(store);
      const written = totalBytes(store);
      const found = await eventually(() => store.compactor.timeChecks.deadSeen > written * 0.5, T);
      expect(found, "a time check's walk found the expired values dead").toBe(true);
      await store.flush();
      expect(store.stats().compactions, "no pass ran").toBe(0);
      expect(totalBytes(store), "every expired value is still on disk").toBeGreaterThanOrEqual(written);
    } finally {
      await store.close();
    }
  });
});

describe("retention records whose window ended", () => {
  const RETENTION_MS = 400;
  const OPTS: OpenOptions = { segmentBytes: 32 * 1024, durability: "none", retention: { tombstoneRetentionMs: RETENTION_MS } };

  it("are dropped by the background once their window ends, with no other write", async () => {
    const dir = tempDir("space-time-retention");
    const store = await Store.open(dir, OPTS);
    let left = -1;
    try {
      await writeThenForget(store);
      // First the values go (their deaths were reported), while the tombstones stay as retention records.
      expect(await eventually(() => store.stats().tombstones === KEYS && store.stats().compactions > 0, T), "values reclaimed, tombstones kept").toBe(true);
      // Then the window ends and nothing else happens: the tombstones must go too, but for those in
      // the active segment (too small for the automatic pass to seal: compactor.ts activeLarge).
      // (stats().tombstones counts the keydir's retention records; the per-segment counts say what a pass would keep now.)
      const gone = await eventually(() => store.stats().tombstones < KEYS / 2, T);
      expect(gone, `retention records left: ${store.stats().tombstones}`).toBe(true);
      expect((await store.probe("k0")).retentionPresent, "k0's retention record is gone").toBe(false);
      left = store.stats().tombstones;
    } finally {
      await store.close();
    }
    const again = await Store.open(dir, { ...OPTS, compaction: { auto: false } });
    try {
      for (let i = 0; i < KEYS; i += 37) expect(await again.read(`k${i}`), `k${i}`).toMatchObject({ status: "NOT_FOUND" });
      expect(again.stats().tombstones, "no dropped tombstone came back at the reopen").toBe(left);
    } finally {
      await again.close();
    }
  });

  it("are dropped too when their values are reclaimed after every check the open scheduled ran", async () => {
    const store = await Store.open(tempDir("space-time-retention-late"), OPTS);
    try {
      // The open's check (one window after it, at the rate bound) runs on an empty store and
      // schedules nothing: only the pass that reclaims the values can note their windows' end.
      expect(await eventually(() => store.compactor.timeChecks.fired > 0, T), "the open's check ran").toBe(true);
      await writeThenForget(store);
      const gone = await eventually(() => store.stats().tombstones < KEYS / 2, T);
      expect(gone, `retention records left: ${store.stats().tombstones}`).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("twin: with the time check off, a check that found them droppable drops nothing", async () => {
    unsafeTimeCheckForTests.off = true;
    const store = await Store.open(tempDir("space-time-retention-twin"), OPTS);
    try {
      await writeThenForget(store);
      expect(await eventually(() => store.stats().tombstones === KEYS && store.stats().compactions > 0, T), "values reclaimed, tombstones kept").toBe(true);
      const found = await eventually(() => store.compactor.timeChecks.deadSeen > 0 && store.stats().tombstones === KEYS, T);
      expect(found, "a time check's walk found the tombstones droppable").toBe(true);
      expect(store.stats().tombstones, "every retention record is still on disk").toBe(KEYS);
      expect((await store.probe("k0")).retentionPresent).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe("retention records found at the open", () => {
  const RETENTION_MS = 400;
  const OPTS: OpenOptions = { segmentBytes: 32 * 1024, durability: "none", retention: { tombstoneRetentionMs: RETENTION_MS } };

  /**
   * A store in `dir` whose KEYS values were reclaimed by compact() and whose tombstones remain,
   * closed. The next open gives them its own time as their reclaim time (the reclaim times its
   * close wrote are ignored, as after a kill): with them applied, an open more than the window
   * after the reclaim finds the records due at once and pays them as debt (a slow machine did),
   * so that no time check is left to show anything (test/space-retention-reopen.test.ts has those).
   */
  async function reclaimedThenClosed(dir: string): Promise<void> {
    unsafeReclaimClockForTests.ignoreFile = true;
    const store = await Store.open(dir, { ...OPTS, compaction: { auto: false } });
    try {
      await writeThenForget(store);
      await store.compact();
      expect(store.stats().tombstones, "the values went, the retention records stay").toBe(KEYS);
    } finally {
      await store.close();
    }
  }

  it("are dropped one window after the open (recovery's reclaim time), with no write", async () => {
    const dir = tempDir("space-time-reopen");
    await reclaimedThenClosed(dir);
    const store = await Store.open(dir, OPTS);
    try {
      // Nothing may build the keydir before the check (stats() would): the open defers it to the
      // hint files, and the one count after an open skips a deferred keydir, so only the check
      // the open noted can find these.
      expect(store.keydir.isDeferred, "the reopened keydir waits in the hint files").toBe(true);
      expect(await eventually(() => store.compactor.timeChecks.fired > 0, T), "the check noted at the open ran").toBe(true);
      const gone = await eventually(() => store.stats().tombstones < KEYS / 2, T);
      expect(gone, `retention records left: ${store.stats().tombstones}`).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("twin: with the time check off, a check that found them droppable drops nothing", async () => {
    const dir = tempDir("space-time-reopen-twin");
    await reclaimedThenClosed(dir);
    unsafeTimeCheckForTests.off = true;
    const store = await Store.open(dir, OPTS);
    try {
      expect(await eventually(() => store.compactor.timeChecks.deadSeen > 0, T), "a time check's walk found the tombstones droppable").toBe(true);
      expect(store.stats().tombstones, "every retention record is still on disk").toBe(KEYS);
    } finally {
      await store.close();
    }
  });
});

describe("the time checks' rate", () => {
  it("a thousand staggered expiries cost a few walks, not one each", async () => {
    const store = await Store.open(tempDir("space-time-rate"), { segmentBytes: 32 * 1024, durability: "none", retention: { tombstoneRetentionMs: 0 } });
    try {
      const started = Date.now();
      // One write every ~2 ms, each expiring 5 ms later: ~1,000 distinct expiry times over ~2 s.
      for (let i = 0; i < 1000; i++) {
        await store.write(`s${i}`, value(i), { ttlMs: 5 });
        if (i % 4 === 3) await new Promise((resolve) => setTimeout(resolve, 8));
      }
      const seconds = (Date.now() - started) / 1000;
      // The gap between checks is at least 1 s: at most one per second of the run, plus the first.
      expect(store.compactor.timeChecks.fired, `checks in ${seconds.toFixed(1)} s`).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
      expect(await eventually(() => store.compactor.timeChecks.fired > 0, T), "a check ran").toBe(true);
    } finally {
      await store.close();
    }
  });
});
