/**
 * The GC policy on its own (engine/gc-policy.ts): pure rules over a keydir built by the same
 * apply* functions recovery uses. Each rule is checked on the state that makes it matter, and
 * the phantom-write-loss sweep (unsafe) is checked to do exactly the damage the seed describes,
 * so the contrast between the two rules is explicit. Invariant stressed: I5 (GC keyed by
 * generation never reclaims a value above its slot's killed generation).
 */
import { describe, expect, it } from "vitest";
import { applyClear, applyErase, applyPut, applyTombstone, Keydir } from "../engine/keydir.js";
import * as P from "../engine/gc-policy.js";

const at = (seg: number, off: number, len = 100) => ({ seg, off, len });
const NOW = 1_000_000;
const DAY = 24 * 3600 * 1000;

function seedSlot() {
  const kd = new Keydir();
  const slot = kd.ensure("global", "pref.theme");
  applyPut(slot, 1, 1, 0, at(1, 128)); // v1, generation 1
  applyTombstone(slot, 2, 1, 1, at(1, 228)); // forget: kills generation 1 (version 1)
  applyPut(slot, 3, 2, 0, at(2, 128)); // v2 written over the tombstone: generation 2
  return { kd, slot };
}

describe("value records", () => {
  it("keeps a rewrite whose generation is above the killed one (I5)", () => {
    const { kd, slot } = seedSlot();
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(true);
  });

  it("drops a value killed by its tombstone", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyPut(slot, 1, 1, 0, at(1, 128));
    applyTombstone(slot, 2, 1, 1, at(1, 228));
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false);
  });

  it("drops a value whose scope (or an ancestor) was erased after it was written", () => {
    const kd = new Keydir();
    const slot = kd.ensure("user:a/session:1", "k");
    applyPut(slot, 1, 1, 0, at(1, 128));
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(true);
    applyErase(kd, "user:a", 2, NOW, at(1, 300), []);
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false);
    applyPut(slot, 3, 2, 0, at(2, 128)); // written after the erasure: live again
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(true);
  });

  it("drops an expired value only when it is the slot's last PUT record and its retention window passed", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyPut(slot, 1, 1, 0, at(1, 128));
    applyPut(slot, 2, 1, NOW - DAY, at(2, 128));
    expect(slot.physical).toBe(2);
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(true); // the older PUT would resurrect
    slot.physical = 1;
    expect(P.valueRecordLive(kd, slot, NOW - 1, DAY)).toBe(true); // still the retention record
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false);
  });

  it("a tombstone replayed before its PUT keeps the killed version, and the PUT still gets its location", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyTombstone(slot, 2, 1, 1, at(2, 128));
    expect(slot.putSeq).toBe(1);
    expect(slot.seg).toBe(0);
    applyPut(slot, 1, 1, 0, at(1, 128));
    expect(slot.seg).toBe(1);
    expect(slot.physical).toBe(1);
  });
});

describe("tombstones, clears and erasures (I6)", () => {
  it("keeps a tombstone while any value record of its slot remains, then for the retention window", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "pref.theme");
    applyPut(slot, 1, 1, 0, at(1, 128));
    applyTombstone(slot, 2, 1, 1, at(1, 228)); // the kill stands: no later value
    expect(P.tombstoneRecordLive(slot, NOW + 10 * DAY, DAY)).toBe(true);
    slot.physical = 0;
    slot.reclaimedAt = NOW;
    expect(P.tombstoneRecordLive(slot, NOW + DAY - 1, DAY)).toBe(true);
    expect(P.tombstoneRecordLive(slot, NOW + DAY, DAY)).toBe(false);
  });

  it("drops a tombstone a later PUT superseded once no value older than that PUT remains; the twin keeps it", () => {
    const { slot } = seedSlot(); // v1, its tombstone, v2 over it
    expect(P.tombstoneRecordLive(slot, NOW, DAY), "v1 still on disk: the tombstone guards it").toBe(true);
    slot.physical = 1; // v1 reclaimed: v2 is the only value record
    expect(P.tombstoneRecordLive(slot, NOW, DAY)).toBe(false);
    slot.physical = 0; // v2 gone too (expired and reclaimed)
    slot.seg = 0;
    slot.reclaimedAt = NOW;
    expect(P.tombstoneRecordLive(slot, NOW, DAY), "inside the window, still superseded").toBe(false);
    P.unsafeTombstoneForTests.keepSuperseded = true;
    try {
      expect(P.tombstoneRecordLive(slot, NOW, DAY), "the rule before: kept for the window").toBe(true);
    } finally {
      P.unsafeTombstoneForTests.keepSuperseded = false;
    }
  });

  it("keeps a CLEAR only while it is newer than the slot's tombstone", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyPut(slot, 1, 1, 0, at(1, 128));
    applyTombstone(slot, 2, 1, 1, at(1, 228));
    applyClear(slot, 3, 2, at(1, 328));
    expect(P.clearRecordLive(slot, NOW, DAY)).toBe(true);
    applyPut(slot, 4, 2, 0, at(1, 428));
    applyTombstone(slot, 5, 2, 4, at(1, 528));
    expect(P.clearRecordLive(slot, NOW, DAY)).toBe(false);
  });

  it("keeps an erasure while its subtree holds value records; drops one superseded by an ancestor's", () => {
    const kd = new Keydir();
    const slot = kd.ensure("user:a/session:1", "k");
    applyPut(slot, 1, 1, 0, at(1, 128));
    applyErase(kd, "user:a/session:1", 2, NOW - 2 * DAY, at(1, 300), []);
    const erase = kd.erases.get("user:a/session:1");
    if (erase === undefined) throw new Error("erase not applied");
    expect(P.eraseRecordLive(kd, "user:a/session:1", erase, NOW, DAY)).toBe(true);
    slot.physical = 0;
    expect(P.eraseRecordLive(kd, "user:a/session:1", erase, NOW, DAY)).toBe(false);
    slot.physical = 1;
    applyErase(kd, "user:a", 3, NOW, at(1, 400), []);
    expect(P.eraseRecordLive(kd, "user:a/session:1", erase, NOW, DAY)).toBe(false);
  });
});

describe("older kill records on disk (fifty-fifth session: olderKillOnDisk, tombstoneUnder)", () => {
  /** Runs `check` with `unsafeTombstoneForTests.ignoreOlder` set (the rule before), then clears it. */
  function ignoringOlder(check: () => void): void {
    P.unsafeTombstoneForTests.ignoreOlder = true;
    try {
      check();
    } finally {
      P.unsafeTombstoneForTests.ignoreOlder = false;
    }
  }

  it("counts every TOMBSTONE and CLEAR applied, an older one replayed after the latest too", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyTombstone(slot, 6, 2, 5, at(3, 128)); // the latest first (a copy-on-write output's higher id)
    applyTombstone(slot, 3, 1, 1, at(2, 128));
    applyClear(slot, 4, 2, at(2, 228));
    expect([slot.tombSeq, slot.tombRecords, slot.clearRecords]).toEqual([6, 2, 1]);
  });

  it("keeps the latest tombstone, past its window and even superseded, while an older one is on disk", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyTombstone(slot, 3, 1, 1, at(2, 128)); // T1, v1 gone
    applyTombstone(slot, 6, 2, 5, at(3, 128)); // T2, v2 gone
    slot.reclaimedAt = NOW;
    expect(P.tombstoneRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(true);
    applyPut(slot, 8, 3, 0, at(4, 128)); // v3 over T2: superseded
    expect(P.tombstoneRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(true);
    ignoringOlder(() => expect(P.tombstoneRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(false));
    slot.tombRecords = 1; // T1's segment compacted
    expect(P.tombstoneRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(false);
  });

  it("keeps an expired value while a tombstone of its slot is on disk", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyTombstone(slot, 2, 1, 1, at(1, 128)); // v1 gone
    applyPut(slot, 3, 2, NOW - DAY, at(2, 128)); // v2 over it, expired a window ago
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(true);
    ignoringOlder(() => expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false));
    slot.tombRecords = 0; // the tombstone went (superseded)
    slot.tombSeg = 0;
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false);
  });

  it("keeps the latest CLEAR while an older one is on disk", () => {
    const kd = new Keydir();
    const slot = kd.ensure("global", "k");
    applyClear(slot, 4, 2, at(2, 128));
    applyClear(slot, 9, 3, at(3, 128));
    slot.reclaimedAt = NOW;
    expect(P.clearRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(true);
    ignoringOlder(() => expect(P.clearRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(false));
    slot.clearRecords = 1;
    expect(P.clearRecordLive(slot, NOW + 2 * DAY, DAY)).toBe(false);
  });

  it("keeps a scope's latest erasure, even superseded, while an older one of the scope is on disk; its own chunks do not hold it", () => {
    const kd = new Keydir();
    applyErase(kd, "a/b", 6, NOW - 2 * DAY, at(3, 128), []); // the latest first
    applyErase(kd, "a/b", 6, NOW - 2 * DAY, at(3, 328), []); // its second chunk
    const erase = kd.erases.get("a/b");
    if (erase === undefined) throw new Error("erase not applied");
    expect(P.eraseRecordLive(kd, "a/b", erase, NOW, DAY), "its chunks alone").toBe(false);
    applyErase(kd, "a/b", 3, NOW - 3 * DAY, at(2, 128), []); // an older one
    expect([kd.erases.get("a/b")?.seq, erase.records]).toEqual([6, 3]);
    expect(P.eraseRecordLive(kd, "a/b", erase, NOW, DAY)).toBe(true);
    applyErase(kd, "a", 8, NOW - 2 * DAY, at(4, 128), []); // an ancestor's later erasure supersedes it
    expect(P.eraseRecordLive(kd, "a/b", erase, NOW, DAY)).toBe(true);
    ignoringOlder(() => expect(P.eraseRecordLive(kd, "a/b", erase, NOW, DAY)).toBe(false));
  });
});

describe("the unsafe tombstone-sequence sweep (seed 000's GC)", () => {
  it("reclaims the rewritten value of a slot whose tombstone is below the watermark", () => {
    const { kd, slot } = seedSlot();
    expect(P.unsafeSweep(kd, 1)).toBe(0); // tombstone seq 2 is above watermark 1
    expect(P.unsafeSweep(kd, 3)).toBe(1);
    expect(slot.seg).toBe(0); // the value v2 is gone, the retention record (version 3) survives
    expect(slot.putSeq).toBe(3);
    expect(P.valueRecordLive(kd, slot, NOW, DAY)).toBe(false);
  });
});
