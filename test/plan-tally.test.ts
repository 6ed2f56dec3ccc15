/**
 * compact-13: the dead-byte count without record lists. tallySegments (the recount after an
 * erasure that supersedes another, once after an open, and any pass over chosen segments while
 * the count is missing; an erasure of a subtree holding none counts its killed values itself)
 * walks the keydir as a plan does but files each record only into a per-segment sum; a plan over
 * chosen segments counts every other segment the same way in the same walk. The space policy
 * acts on these sums, so they must be exactly what a full plan's survivors add up to.
 *
 * Method: a seeded store over many 4 KiB segments — writes, overwrites, forgets, undeletes (CLEAR
 * records), scope erasures (ERASE records), values with a TTL, two scopes with different
 * retention — checked at several clocks (before and after retention windows and expiries):
 * tallySegments equals tallyOfPlans(planSegments(all)) segment by segment; a plan over a chosen
 * third of the segments with a tally gives those segments the full plan's lists, entry for entry,
 * and the rest the full plan's sums. Then a store whose dead bytes were never counted compacts
 * chosen segments and its segments' dead-byte estimates equal a recount's. Twin: a tally that
 * files dead records as live (`unsafeTallyForTests.countDead`) disagrees with the full plan. Then
 * an erasure's own count against a recount (below), and last the walk's soonest death by time
 * (the time checks, below).
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { KIND_PUT, planSegments, planWalks, tallySegments, unsafeTallyForTests, type LiveTally, type SegmentPlan, type Soonest } from "../engine/compaction-plan.js";
import type { OpenOptions } from "../rules/types.js";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  unsafeTallyForTests.countDead = false;
});

const DAY = 24 * 3600 * 1000;

/** A store with a clock the test moves, and a seeded history over many small segments. */
async function history(): Promise<{ s: Store; clock: { now: number } }> {
  await initChecksum();
  const clock = { now: 1_700_000_000_000 };
  const opts: OpenOptions = {
    durability: "none",
    segmentBytes: 4096,
    compaction: { workers: 0, auto: false },
    retention: { tombstoneRetentionMs: DAY, scopes: { "user:b": { tombstoneRetentionMs: 60_000 } } },
    clock: () => clock.now,
  };
  const s = await Store.open(tempDir("plan-tally-"), opts);
  const r = rng(4242);
  const scopes = ["user:a", "user:b", "user:a/session:1", "user:b/session:2"];
  for (let i = 0; i < 900; i++) {
    const scope = scopes[Math.floor(r() * scopes.length)] as string;
    const key = `k${Math.floor(r() * 150)}`;
    const x = r();
    if (x < 0.6) await s.write(key, "v".repeat(1 + Math.floor(r() * 300)), { scope, ...(r() < 0.1 ? { ttlMs: 5_000 + Math.floor(r() * 100_000) } : {}) });
    else if (x < 0.85) await s.forget(key, { scope });
    else if (x < 0.97) await s.undelete(key, { scope }).catch(() => undefined); // nothing to undelete: refused, nothing written
    else await s.forgetScope(scopes[2 + Math.floor(r() * 2)] as string);
    clock.now += Math.floor(r() * 2_000);
  }
  return { s, clock };
}

/** The tally a full plan implies: the sums of its survivors' lists (the reference tallySegments must agree with). */
function tallyOfPlans(plans: ReadonlyMap<number, SegmentPlan>): Map<number, LiveTally> {
  const out = new Map<number, LiveTally>();
  for (const [seg, { survivors }] of plans) {
    let tombstones = 0;
    for (let i = 0; i < survivors.length; i++) if (survivors.kindAt(i) !== KIND_PUT) tombstones += 1;
    out.set(seg, { liveBytes: survivors.bytes(), records: survivors.length, tombstones });
  }
  return out;
}

/** The entries of a record list as comparable rows. */
function rows(plan: SegmentPlan): string {
  const list = (l: SegmentPlan["survivors"]): string[] => Array.from(l.offsets(), (off, i) => `${l.kindAt(i)}@${off}+${l.lenAt(i)}`);
  return JSON.stringify([list(plan.survivors), list(plan.droppable), list(plan.deadPuts)]);
}

/** A tally as sorted comparable rows. */
function tallyRows(t: ReadonlyMap<number, LiveTally>): string {
  return JSON.stringify([...t.entries()].sort((a, b) => a[0] - b[0]));
}

describe("the dead-byte tally", () => {
  it("equals a full plan's sums, and a plan over chosen segments plans them whole and counts the rest", async () => {
    const { s, clock } = await history();
    try {
      for (const step of [0, 30_000, 120_000, DAY + 1]) {
        clock.now += step;
        const now = clock.now;
        const full = planSegments(s, now, null);
        expect(full.size).toBeGreaterThan(10);
        expect(tallyRows(tallySegments(s, now))).toBe(tallyRows(tallyOfPlans(full)));
        const ids = [...full.keys()].filter((_, i) => i % 3 === 0);
        const tally = new Map<number, LiveTally>();
        const chosen = planSegments(s, now, new Set(ids), tally);
        expect([...chosen.keys()].sort()).toEqual([...ids].sort());
        for (const id of ids) expect(rows(chosen.get(id) as SegmentPlan)).toBe(rows(full.get(id) as SegmentPlan));
        const rest = new Map([...tallyOfPlans(full)].filter(([id]) => !ids.includes(id)));
        expect(tallyRows(tally)).toBe(tallyRows(rest));
      }
    } finally {
      await s.close();
    }
  });

  it("a store whose dead bytes were never counted learns them from its first pass over chosen segments", async () => {
    const { s, clock } = await history();
    try {
      const sealed = s.stats().segments.filter((x) => x.sealed).map((x) => x.id);
      const c = s.compactor as unknown as { deadCounted: boolean };
      c.deadCounted = false;
      await s.compact({ mode: "copy-on-write", segments: sealed.slice(0, 2) });
      expect(c.deadCounted).toBe(true);
      const estimated = JSON.stringify([...s.segments.values()].map((x) => [x.id, x.deadBytes]));
      s.compactor.recount();
      expect(JSON.stringify([...s.segments.values()].map((x) => [x.id, x.deadBytes]))).toBe(estimated);
      void clock;
    } finally {
      await s.close();
    }
  });

  it("twin: a tally that files dead records as live disagrees with the full plan", async () => {
    const { s, clock } = await history();
    try {
      unsafeTallyForTests.countDead = true;
      const now = clock.now + DAY + 1;
      expect(tallyRows(tallySegments(s, now))).not.toBe(tallyRows(tallyOfPlans(planSegments(s, now, null))));
    } finally {
      await s.close();
    }
  });
});

/**
 * Every time at which a record of `s` could die by time alone, by the GC rule's thresholds (a
 * value's expiry plus its scope's retention window, a reclaimed slot's window, an erasure's): the
 * tally can change only at one of these.
 */
function deathTimes(s: Store): number[] {
  const times: number[] = [];
  for (const slot of s.keydir.all()) {
    const retentionMs = s.retentionMsFor(slot.scope);
    if (slot.expiresAt !== 0) times.push(slot.expiresAt + retentionMs);
    if (slot.reclaimedAt !== 0) times.push(slot.reclaimedAt + retentionMs);
  }
  for (const [scope, e] of s.keydir.erases) times.push(e.committedAt + s.retentionMsFor(scope));
  return times;
}

describe("a scope erasure counts the values it kills, without a walk", () => {
  // Method: the seeded history above, counted exactly (recount), then a new subtree — values
  // written one by one and by a batch (held as rows), some overwritten, some forgotten, some with
  // a TTL that ran out (expired, inside their retention window: still live records) — is erased,
  // scope by scope. An erasure of a subtree that holds no erasure record counts its killed values
  // itself: no walk of every name (planWalks), and every segment's estimate equal to what a
  // recount then finds — but for the erasure's own group framing, which a recount counts as dead
  // and an append never does (no write's does: the same for every write). One that supersedes an
  // erasure record (of its scope or a descendant) recounts, a walk. Without erasedValuesDie every
  // erasure walks.
  it("equals a recount, and walks only when it supersedes an erasure record", async () => {
    const { s, clock } = await history();
    try {
      for (const scope of ["user:c", "user:c/session:1", "user:c/session:1/task:7", "user:c/session:2"]) {
        await s.batch(Array.from({ length: 20 }, (_, i) => ({ op: "write" as const, scope, key: `row${i}`, value: "r".repeat(40 + i) })));
        for (let i = 0; i < 10; i++) await s.write(`one${i}`, "o".repeat(100 + i), { scope });
        for (let i = 0; i < 5; i++) await s.write(`one${i}`, "p".repeat(60), { scope }); // the first values die
        for (let i = 0; i < 3; i++) await s.forget(`row${i}`, { scope });
        for (let i = 0; i < 4; i++) await s.write(`ttl${i}`, "t".repeat(80), { scope, ttlMs: 1_000 });
      }
      clock.now += 5_000; // the TTLs ran out: expired values stay live records for a retention window
      let counting = 0;
      for (const scope of ["user:c/session:1/task:7", "user:c/session:2", "user:c/session:1", "user:c/session:1", "user:c"]) {
        s.compactor.recount();
        const ends = new Map([...s.segments.values()].map((x) => [x.id, x.dataEnd]));
        const walks = planWalks.count;
        const supersedes = [...s.keydir.erases.keys()].some((e) => e === scope || e.startsWith(`${scope}/`));
        await s.forgetScope(scope);
        expect(planWalks.count - walks, `walks of ${scope}`).toBe(supersedes ? 1 : 0);
        if (!supersedes) counting += 1;
        const erase = s.keydir.erases.get(scope);
        expect(erase).toBeDefined();
        const counted = new Map([...s.segments.values()].map((x) => {
          const records = [erase, ...(erase?.more ?? [])].reduce((sum, c) => sum + (c !== undefined && c.seg === x.id ? c.len : 0), 0);
          const framing = x.dataEnd - (ends.get(x.id) ?? C.DATA_START) - records; // the erasure group's bytes that are no record
          expect(framing).toBeGreaterThanOrEqual(0);
          expect(framing).toBeLessThan(128); // a group's frame, never a record
          return [x.id, x.deadBytes + (supersedes ? 0 : framing)]; // a recount in the erasure's apply saw its group whole
        }));
        s.compactor.recount();
        expect(JSON.stringify([...s.segments.values()].map((x) => [x.id, x.deadBytes])), `estimates after erasing ${scope}`).toBe(JSON.stringify([...counted]));
      }
      expect(counting).toBe(2); // the first two erasures counted; session:1 (over task:7, then again) and user:c recounted
    } finally {
      await s.close();
    }
  });
});

describe("the walk's soonest death by time (the compactor's time checks)", () => {
  // Method: the seeded history above, compacted once so that slots have reclaim times (windows of
  // 60 s and 24 h), walked at several clocks. At each, soonest must lie after now, and the tally at
  // every time a record could die that comes before soonest must equal the tally now: a death the
  // walk missed would change it there. Soonest must be finite at the clocks where deaths remain.
  it("no record dies by time alone before it, and it is finite while deaths remain", async () => {
    const { s, clock } = await history();
    try {
      await s.compact();
      const start = clock.now;
      let finite = 0;
      for (const offset of [0, 4_000, 30_000, 59_000, 61_000, 120_000, DAY - 1, DAY + 1, 2 * DAY]) {
        const now = start + offset;
        const soonest: Soonest = { at: Infinity };
        const base = tallyRows(tallySegments(s, now, soonest));
        expect(soonest.at, `soonest after ${offset} ms`).toBeGreaterThan(now);
        const later = deathTimes(s).filter((t) => t > now);
        for (const t of later) {
          if (t >= soonest.at) continue;
          // A threshold the walk found held by something else (or missed): nothing may change there.
          expect(tallyRows(tallySegments(s, t)), `${t - now} ms after clock +${offset}`).toBe(base);
        }
        if (later.length > 0 && soonest.at === Infinity) expect(tallyRows(tallySegments(s, Math.max(...later))), `deaths remain after +${offset} but soonest is none`).toBe(base);
        if (soonest.at < Infinity) finite += 1;
      }
      expect(finite, "clocks with a finite soonest").toBeGreaterThan(3);
    } finally {
      await s.close();
    }
  });
});
