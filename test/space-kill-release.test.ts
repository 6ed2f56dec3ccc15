/**
 * A kill record that an older one held is reclaimed by the background once the older one goes, in
 * a store left alone (fifty-sixth session; engine/compactor.ts killRecordsGone, killReleases).
 *
 * The engine keeps a slot's latest TOMBSTONE while an older one of the slot is on disk
 * (gc-policy.ts olderKillOnDisk): the walk that counts dead bytes counts it live until then. When
 * a compaction drops the older record, the latest becomes droppable — but no write, forget or time
 * check reports it, so its segment's dead-byte estimate never counted it, and in a store with no
 * more writes that segment was never compacted again: the record stayed on disk for ever.
 *
 * Method: a real store (engine Store, for the compactor's counters), 4 KiB segments, retention 0,
 * the real clock. The first process places the records with explicit single-segment compactions
 * (test/helpers/segment-records.ts reads which record lies where): the forget's first tombstone
 * beside a 3,000-byte live value (too little dead there for the space rule), the second alone in a
 * sealed segment, held by the first; every value of the slot gone. The second process opens with
 * automatic compaction on, waits for the open's time check (its recount finds the second
 * tombstone still held), then overwrites the large value: the automatic pass compacts that
 * segment and drops the first tombstone. Nothing else is called; the test polls, with a deadline,
 * until no tombstone of the slot is on disk. The twin sets `unsafeTimeCheckForTests.ignoreKillDrops`
 * (the drop arms no time check: the engine before) and waits until the first tombstone is gone and
 * the background is quiescent (no pass running, no check or automatic pass scheduled, no segment
 * chosen by the space rule: `Compactor.quiescentForTests`), then finds the second still on disk.
 * The second pair does the same for a TOMBSTONE that a later value supersedes once the older value
 * goes (gc-policy.ts tombstoneRecordLive): a 900-byte key (its tombstone, alone in a segment,
 * outweighs the segment's own dead bytes), its first value beside a 6,000-byte value in one 8 KiB
 * segment, the tombstone sealed alone, the second value written; the second process overwrites the
 * large value, and the automatic pass that drops the first value must leave the background to
 * reclaim the tombstone. Its twin sets `ignoreSupersedingDrops` (the PUT's drop arms no check).
 * Property stressed: a record the GC rule lets go is reclaimed by the background, without a call.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeTimeCheckForTests } from "../engine/compactor.js";
import type { OpenOptions } from "../rules/types.js";
import { segmentRecords } from "./helpers/segment-records.js";
import { eventually } from "./helpers/space.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE_MS = 30_000;
/** A value past the 4 KiB segment size: written alone in a segment, which it seals. */
const FILLER = "x".repeat(5000);
const OPTS: OpenOptions = { segmentBytes: 4096, durability: "none", retention: { tombstoneRetentionMs: 0 } };

afterEach(() => {
  unsafeTimeCheckForTests.ignoreKillDrops = false;
  unsafeTimeCheckForTests.ignoreSupersedingDrops = false;
});

/** Labels of the tombstones of global/k on disk under `dir`, by segment. */
function tombstonesOfK(dir: string): string[] {
  return [...segmentRecords(dir).values()].flat().filter((l) => l.startsWith("T global/k "));
}

/** Compacts only the segment holding the record labelled `label`. */
async function compactHolding(store: Store, dir: string, label: string): Promise<void> {
  const found = [...segmentRecords(dir)].find(([, records]) => records.includes(label));
  if (found === undefined) throw new Error(`no segment holds ${label}: ${JSON.stringify([...segmentRecords(dir)])}`);
  await store.compact({ segments: [found[0]] });
}

/**
 * The first process: k written, forgotten (its first tombstone, beside the large value "big"),
 * written again and forgotten again (the second, sealed alone once its value went); both values
 * compacted away. Returns the labels of the two tombstones.
 */
async function placeRecords(dir: string): Promise<{ first: string; second: string }> {
  const store = await Store.open(dir, { ...OPTS, compaction: { auto: false, workers: 0 } });
  try {
    await store.write("k", "v1");
    await store.write("filler0", FILLER); // seals v1's segment
    await store.forget("k");
    await store.write("big", "b".repeat(3000));
    await store.write("filler1", FILLER); // seals the first tombstone's segment, with big
    await store.write("k", "v2");
    await store.forget("k");
    await store.write("filler2", FILLER); // seals the second tombstone's segment
    const [first, second] = tombstonesOfK(dir);
    if (first === undefined || second === undefined) throw new Error(`two tombstones of k expected: ${JSON.stringify([...segmentRecords(dir)])}`);
    await compactHolding(store, dir, "P global/k 1");
    await compactHolding(store, dir, second); // v2 goes; the second tombstone stays, held by the first
    expect(tombstonesOfK(dir), "both tombstones on disk, every value of k gone").toEqual([first, second]);
    expect([...segmentRecords(dir).values()].flat().filter((l) => l.startsWith("P global/k "))).toEqual([]);
    return { first, second };
  } finally {
    await store.close();
  }
}

/** The second process, left alone after one overwrite of "big": returns the store (closed by the caller) once the open's check ran. */
async function reopenAndOverwrite(dir: string, opts: OpenOptions = OPTS): Promise<Store> {
  const store = await Store.open(dir, { ...opts, compaction: { auto: true, workers: 0 } });
  expect(await eventually(() => store.compactor.timeChecks.fired > 0, DEADLINE_MS), "the open's time check ran").toBe(true);
  await store.write("big", "small"); // the first tombstone's segment is now mostly dead: the space rule picks it
  return store;
}

describe("the latest tombstone of a slot, held while an older one was on disk", () => {
  it("is reclaimed by the background once the older one's segment is compacted, with no other call", async () => {
    const dir = tempDir("kill-release");
    const { second } = await placeRecords(dir);
    const store = await reopenAndOverwrite(dir);
    try {
      const gone = await eventually(() => tombstonesOfK(dir).length === 0, DEADLINE_MS);
      expect(gone, `tombstones of k left: ${JSON.stringify(tombstonesOfK(dir))} (the second was ${second})`).toBe(true);
      expect(await store.probe("k")).toMatchObject({ state: "absent", retentionPresent: false });
      expect(await store.read("big")).toMatchObject({ value: "small" });
    } finally {
      await store.close();
    }
  });

  it("twin: with the drop arming no time check, it stays on disk while the background is quiescent", async () => {
    unsafeTimeCheckForTests.ignoreKillDrops = true;
    const dir = tempDir("kill-release-twin");
    const { first, second } = await placeRecords(dir);
    const store = await reopenAndOverwrite(dir);
    try {
      const settled = await eventually(() => !tombstonesOfK(dir).includes(first) && store.compactor.quiescentForTests(), DEADLINE_MS);
      expect(settled, `the first tombstone went and the background settled: ${JSON.stringify(tombstonesOfK(dir))}`).toBe(true);
      expect(tombstonesOfK(dir), "the second tombstone is still on disk, and nothing will start a pass").toEqual([second]);
    } finally {
      await store.close();
    }
  });
});

/**
 * A key of 900 bytes: its tombstone, alone in a segment, outweighs the segment's own dead bytes,
 * so the space rule chooses that segment once the tombstone is counted dead, and not before.
 */
const LONG = `s${"x".repeat(899)}`;
/** 8 KiB segments, and a filler past them, so that "big" and LONG's first value share one. */
const OPTS_8K: OpenOptions = { ...OPTS, segmentBytes: 8192 };
const FILLER_8K = "x".repeat(9000);

/** Labels of the records of LONG of `kind` ("T", "P") on disk under `dir`. */
function recordsOfLong(dir: string, kind: string): string[] {
  return [...segmentRecords(dir).values()].flat().filter((l) => l.startsWith(`${kind} global/${LONG} `));
}

/**
 * The first process, for the superseded tombstone: LONG's first value after the large value
 * "big" in one segment (too little dead there for the space rule), LONG forgotten (its tombstone sealed alone),
 * LONG written again (sealed alone too). Nothing compacted. Returns the tombstone's label.
 */
async function placeSuperseded(dir: string): Promise<string> {
  const store = await Store.open(dir, { ...OPTS_8K, compaction: { auto: false, workers: 0 } });
  try {
    await store.write("big", "b".repeat(6000));
    await store.write(LONG, "v1"); // beside big: too little of that segment for the space rule at the open
    await store.write("filler0", FILLER_8K); // seals v1's segment, with big
    await store.forget(LONG);
    await store.write("filler1", FILLER_8K); // seals the tombstone's segment: it alone
    await store.write(LONG, "v2");
    await store.write("filler2", FILLER_8K); // seals v2's segment
    const [tomb, more] = recordsOfLong(dir, "T");
    if (tomb === undefined || more !== undefined) throw new Error(`one tombstone expected: ${JSON.stringify([...segmentRecords(dir)])}`);
    expect(recordsOfLong(dir, "P"), "both values on disk").toHaveLength(2);
    return tomb;
  } finally {
    await store.close();
  }
}

describe("a tombstone that a later value supersedes once the older value goes", () => {
  it("is reclaimed by the background after the pass that drops the older value, with no other call", async () => {
    const dir = tempDir("supersede-release");
    const tomb = await placeSuperseded(dir);
    const store = await reopenAndOverwrite(dir, OPTS_8K); // the pass over big's segment drops v1: the tombstone guards nothing from then on
    try {
      const gone = await eventually(() => recordsOfLong(dir, "P").length === 1 && recordsOfLong(dir, "T").length === 0, DEADLINE_MS);
      expect(gone, `left on disk: ${JSON.stringify(recordsOfLong(dir, "T"))} (the tombstone was ${tomb}), values ${recordsOfLong(dir, "P").length}`).toBe(true);
      expect(await store.read(LONG)).toMatchObject({ status: "OK", value: "v2" });
      expect(await store.read("big")).toMatchObject({ value: "small" });
    } finally {
      await store.close();
    }
  });

  it("twin: with the drop arming no time check, it stays on disk while the background is quiescent", async () => {
    unsafeTimeCheckForTests.ignoreSupersedingDrops = true;
    const dir = tempDir("supersede-release-twin");
    const tomb = await placeSuperseded(dir);
    const store = await reopenAndOverwrite(dir, OPTS_8K);
    try {
      const settled = await eventually(() => recordsOfLong(dir, "P").length === 1 && store.compactor.quiescentForTests(), DEADLINE_MS);
      expect(settled, "v1 went and the background settled").toBe(true);
      expect(recordsOfLong(dir, "T"), "the superseded tombstone is still on disk, and nothing will start a pass").toEqual([tomb]);
      expect(await store.read(LONG)).toMatchObject({ status: "OK", value: "v2" });
    } finally {
      await store.close();
    }
  });
});
