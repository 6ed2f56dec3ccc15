/**
 * Retention windows across restarts (issue 11, space): a forgotten key's retention record is kept
 * `tombstoneRetentionMs` after its value is reclaimed (API.md), and a store opened more often than
 * that window must still drop it once the window ends. Before segments/DEADBYTES version 2, every
 * open gave every slot without a value the open's time as its reclaim time (recovery.ts), so under
 * the 24 h default a store reopened daily — or by every CLI command — never dropped one.
 *
 * Method: a real store (engine Store) on a fake clock (option `clock`), with no automatic pass so
 * that only gc() reclaims (but where a case turns it on); each "process" is an open and a close.
 * Cases, each against a 10 s window unless said:
 * - keys forgotten and reclaimed at t0 keep their records through a process at t0 + 3 s that
 *   builds none of their slots and a gc() at t0 + 6 s, and lose them to gc() at t0 + 12 s; the
 *   twin (`unsafeReclaimClockForTests.ignoreFile`, the store before the change) keeps them;
 * - reopened 61 s after the reclaim under a 60 s window with the automatic pass and no call, the
 *   check the open notes (from the carried times) drops them;
 * - an open past the window closed at once, as a CLI command does, pays the carried records'
 *   bytes as debt before its close; the twin (`ignoreFile`) drops none;
 * - a version-1 file gives its estimates and no reclaim time;
 * - a stale file (the one a process left before another compacted and was killed, simulated by
 *   putting the old file back) is not applied, so keys whose values were reclaimed at t0 + 5 s
 *   keep their records at t0 + 11 s; the twin (`anySegments`: applied anyway) drops them four
 *   seconds early.
 * Property stressed: a retention window is counted from the reclaim, across processes, never less.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeReclaimClockForTests } from "../engine/reclaim-clock.js";
import { DEAD_BYTES_FILE, decodeDeadBytes } from "../segments/dead-bytes.js";
import { checksum64, initChecksum } from "../segments/checksum.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { eventually } from "./helpers/space.js";

const KEYS = 200;
const WINDOW_MS = 10_000;
const T0 = 1_800_000_000_000;
const value = (i: number): string => `v${i}:${"r".repeat(200)}`;

afterEach(() => {
  unsafeReclaimClockForTests.ignoreFile = false;
  unsafeReclaimClockForTests.anySegments = false;
});

/** A fake clock the stores of one test read: setting `now` moves it. */
function fakeClock(): { now: number; options: OpenOptions } {
  const clock = { now: T0, options: {} as OpenOptions };
  clock.options = { durability: "none", segmentBytes: 32 * 1024, compaction: { auto: false }, retention: { tombstoneRetentionMs: WINDOW_MS }, clock: () => clock.now };
  return clock;
}

/** Writes `prefix0…` in batches of 100. */
async function writeKeys(store: Store, prefix: string): Promise<void> {
  for (let i = 0; i < KEYS; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `${prefix}${i + j}`, value: value(i + j) })));
}

/** Forgets `prefix0…` in batches of 100. */
async function forgetKeys(store: Store, prefix: string): Promise<void> {
  for (let i = 0; i < KEYS; i += 100) await store.batch(Array.from({ length: 100 }, (_, j) => ({ op: "forget" as const, key: `${prefix}${i + j}` })));
}

/** The probe states of every 7th key of `prefix`, counted. */
async function states(store: Store, prefix: string): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  for (let i = 0; i < KEYS; i += 7) {
    const p = await store.probe(`${prefix}${i}`);
    seen[p.state] = (seen[p.state] ?? 0) + 1;
  }
  return seen;
}

/** Opens `dir` at the clock's time, runs `body`, closes. */
async function inProcess<R>(dir: string, clock: { options: OpenOptions }, body: (s: Store) => Promise<R>): Promise<R> {
  const store = await Store.open(dir, clock.options);
  try {
    return await body(store);
  } finally {
    await store.close();
  }
}

const SAMPLED = Math.ceil(KEYS / 7);

/** A process at the clock's time that runs gc() and returns the probe states of `prefix`'s keys. */
function gcThenStates(dir: string, clock: { options: OpenOptions }, prefix: string): Promise<Record<string, number>> {
  return inProcess(dir, clock, async (s) => {
    await s.gc();
    return states(s, prefix);
  });
}

describe("a retention window across restarts", () => {
  /** t0: writes and forgets the keys, reclaims their values (gc()), closes. */
  async function reclaimedAtT0(dir: string, clock: { now: number; options: OpenOptions }): Promise<void> {
    await inProcess(dir, clock, async (s) => {
      await writeKeys(s, "k");
      await forgetKeys(s, "k");
      await s.gc();
      expect(await states(s, "k"), "t0: values reclaimed, retention records kept").toEqual({ reclaimed: SAMPLED });
    });
  }

  it("runs from the reclaim, not from each open: the records go one window after it", async () => {
    const dir = tempDir("retention-reopen");
    const clock = fakeClock();
    await reclaimedAtT0(dir, clock);
    // A process that builds none of those slots (a CLI read): its close carries their time on.
    clock.now = T0 + 3_000;
    await inProcess(dir, clock, async (s) => {
      expect(s.keydir.isDeferred, "t0 + 3 s: the keydir waits in the hint files").toBe(true);
      expect(await s.read("other"), "an unrelated read").toMatchObject({ status: "NOT_FOUND" });
    });
    clock.now = T0 + 6_000;
    const at6 = await gcThenStates(dir, clock, "k");
    expect(at6, "t0 + 6 s: inside the window, kept").toEqual({ reclaimed: SAMPLED });
    clock.now = T0 + 12_000;
    const at12 = await inProcess(dir, clock, async (s) => {
      const report = await s.gc();
      expect(report.retentionRecordsDropped, "t0 + 12 s: every retention record dropped").toBe(KEYS);
      return states(s, "k");
    });
    expect(at12, "t0 + 12 s: past the window counted from t0").toEqual({ absent: SAMPLED });
  });

  it("twin: with the file's reclaim times ignored, every open restarts the window", async () => {
    const dir = tempDir("retention-reopen-twin");
    const clock = fakeClock();
    await reclaimedAtT0(dir, clock);
    unsafeReclaimClockForTests.ignoreFile = true;
    clock.now = T0 + 6_000;
    await inProcess(dir, clock, (s) => s.gc());
    clock.now = T0 + 12_000;
    const at12 = await gcThenStates(dir, clock, "k");
    expect(at12, "the window restarted at t0 + 6 s and again at t0 + 12 s").toEqual({ reclaimed: SAMPLED });
  });
});

describe("the automatic pass after a reopen", () => {
  it("drops records whose window ended before the open, with no call (the open's time check)", async () => {
    const dir = tempDir("retention-reopen-auto");
    const clock = fakeClock();
    // A window longer than the test's deadline: a check noted one window after the open (the
    // open's time as everyone's reclaim time) would come too late to count.
    const long: OpenOptions = { ...clock.options, retention: { tombstoneRetentionMs: 60_000 } };
    await inProcess(dir, { options: long }, async (s) => {
      await writeKeys(s, "k");
      await forgetKeys(s, "k");
      await s.gc();
    });
    clock.now = T0 + 61_000;
    const store = await Store.open(dir, { ...long, compaction: { auto: true } });
    try {
      // Nothing may build the keydir before the check (stats() would, and its count would find
      // them): only the check the open noted can.
      expect(store.keydir.isDeferred, "the reopened keydir waits in the hint files").toBe(true);
      expect(await eventually(() => store.compactor.timeChecks.fired > 0, 20_000), "the check the open noted ran").toBe(true);
      const gone = await eventually(() => store.stats().tombstones === 0, 20_000);
      expect(gone, `retention records left: ${store.stats().tombstones}`).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe("a process too short for a time check", () => {
  /** t0: records reclaimed (retention 10 s); t0 + 12 s: one open with the automatic pass and an immediate close; returns the retention records left. */
  async function shortProcessAfterWindow(dir: string): Promise<number> {
    const clock = fakeClock();
    await inProcess(dir, clock, async (s) => {
      await writeKeys(s, "k");
      await forgetKeys(s, "k");
      await s.gc();
    });
    clock.now = T0 + 12_000;
    const short = await Store.open(dir, { ...clock.options, compaction: { auto: true } });
    await short.close();
    return inProcess(dir, clock, async (s) => s.stats().tombstones);
  }

  it("drops records whose window ended before its open, as debt it pays before its close", async () => {
    expect(await shortProcessAfterWindow(tempDir("retention-short")), "retention records left").toBe(0);
  });

  it("twin: with the file's reclaim times ignored, nothing is due at the open and every record stays", async () => {
    unsafeReclaimClockForTests.ignoreFile = true;
    expect(await shortProcessAfterWindow(tempDir("retention-short-twin")), "retention records left").toBe(KEYS);
  });
});

describe("a version-1 file (the twenty-ninth session's)", () => {
  it("gives its dead-byte estimates and no reclaim time", async () => {
    await initChecksum();
    const dir = tempDir("retention-v1");
    const clock = fakeClock();
    await inProcess(dir, clock, async (s) => {
      await writeKeys(s, "k");
      await forgetKeys(s, "k");
      await s.gc();
    });
    const file = path.join(dir, "segments", DEAD_BYTES_FILE);
    const v2 = decodeDeadBytes(fs.readFileSync(file));
    if (v2 === null) throw new Error("the close wrote no readable file");
    expect(v2.complete && v2.entries.some((e) => e.reclaimedBy === T0), "version 2 carries t0").toBe(true);
    // The same entries in version 1's layout: 32 bytes each, no reclaim time, no retained bytes.
    const v1 = Buffer.alloc(16 + 32 * v2.entries.length + 8);
    v1.writeUInt32LE(0x44414544, 0);
    v1.writeUInt32LE(1, 4);
    v1.writeUInt32LE(v2.entries.length, 8);
    v2.entries.forEach((e, i) => {
      v1.writeUInt32LE(e.id, 16 + 32 * i);
      v1.writeDoubleLE(e.generation, 16 + 32 * i + 8);
      v1.writeDoubleLE(e.dataEnd, 16 + 32 * i + 16);
      v1.writeDoubleLE(e.deadBytes, 16 + 32 * i + 24);
    });
    v1.writeBigUInt64LE(checksum64(v1, 0, v1.length - 8), v1.length - 8);
    const back = decodeDeadBytes(v1);
    expect(back?.complete, "a version-1 file does not list every segment").toBe(false);
    expect(back?.entries.map((e) => [e.id, e.deadBytes, e.reclaimedBy, e.retainedBytes]), "its estimates, no times").toEqual(v2.entries.map((e) => [e.id, e.deadBytes, 0, 0]));
    fs.writeFileSync(file, v1);
    clock.now = T0 + 12_000;
    expect(await gcThenStates(dir, clock, "k"), "t0 + 12 s: the window counted from this open").toEqual({ reclaimed: SAMPLED });
  });
});

describe("a stale file", () => {
  /**
   * t0: writes `a…` and `b…` into separate segments, forgets both (their tombstones share the
   * active segment), reclaims only the a-values, closes (file F0: that segment's time is t0).
   * t0 + 5 s: reclaims the b-values, closes. Then puts F0 back: the file a process leaves when a
   * later one compacted and crashed before its close.
   */
  async function staleAfterT5(dir: string, clock: { now: number; options: OpenOptions }): Promise<void> {
    const sealed = (s: Store): number[] => s.stats().segments.filter((x) => x.sealed).map((x) => x.id);
    let bSegments: number[] = [];
    await inProcess(dir, clock, async (s) => {
      await writeKeys(s, "a");
      s.log.rotate();
      await s.flush();
      const aSegments = sealed(s);
      await writeKeys(s, "b");
      s.log.rotate();
      await s.flush();
      bSegments = sealed(s).filter((id) => !aSegments.includes(id));
      await forgetKeys(s, "a");
      await forgetKeys(s, "b");
      await s.compact({ segments: aSegments });
      expect(await states(s, "a"), "t0: a-values reclaimed").toEqual({ reclaimed: SAMPLED });
      expect(await states(s, "b"), "t0: b-values still on disk").toEqual({ tombstoned: SAMPLED });
    });
    const f0 = fs.readFileSync(path.join(dir, "segments", DEAD_BYTES_FILE));
    clock.now = T0 + 5_000;
    await inProcess(dir, clock, async (s) => {
      await s.compact({ segments: bSegments });
      expect(await states(s, "b"), "t0 + 5 s: b-values reclaimed").toEqual({ reclaimed: SAMPLED });
    });
    fs.writeFileSync(path.join(dir, "segments", DEAD_BYTES_FILE), f0);
  }

  /** The stale file put back (staleAfterT5), then gc() at t0 + 11 s: the b-keys' probe states. */
  async function bAfterGcAt11(name: string): Promise<Record<string, number>> {
    const dir = tempDir(name);
    const clock = fakeClock();
    await staleAfterT5(dir, clock);
    clock.now = T0 + 11_000;
    return gcThenStates(dir, clock, "b");
  }

  it("is not applied: records of values reclaimed after it was written keep their whole window", async () => {
    expect(await bAfterGcAt11("retention-stale"), "t0 + 11 s: b's window runs to t0 + 15 s at the earliest").toEqual({ reclaimed: SAMPLED });
  });

  it("twin: applied anyway, it drops those records four seconds early", async () => {
    unsafeReclaimClockForTests.anySegments = true;
    expect(await bAfterGcAt11("retention-stale-twin"), "the stale t0 was applied to b's records").toEqual({ absent: SAMPLED });
  });
});
