/**
 * The plan walk's warm-up (engine/plan-warm.ts, compaction-plan.ts warmPlanWalks): before a
 * thread's first walk of the keydir, every kind of walk runs over a small keydir of every kind of
 * name, so that the code V8 compiles during the first large walk has the type feedback of every
 * branch and is not thrown away by the next walk of another kind. It buys time only (the
 * thirty-eighth session's A/B in docs/performance-history.md); what can be checked is that it
 * reaches every branch it is there for, that it runs once and is not counted, and that it
 * changes no answer.
 *
 * Method: a plan of every segment of the warm-up keydir must file records of every kind —
 * held rows, live and dead PUTs, live and droppable tombstones, a clear, an erasure — and find a
 * death by time; a keydir that lost a kind fails here. Then a real store's stats() and compact()
 * with the warm-up's state reset as in a thread that walked nothing yet: the first walk runs the
 * warm-up once, each public walk counts one in planWalks, and the answers equal those of walks
 * made with the warm-up skipped (planWarm.skip) over the same store.
 */
import { describe, expect, it } from "vitest";
import { KIND_CLEAR, KIND_ERASE, KIND_PUT, KIND_ROW, KIND_TOMB, planSegments, planWalks, planWarm, tallySegments, warmPlanHost, type RecordList } from "../engine/compaction-plan.js";
import { WARM_NAMES } from "../engine/plan-warm.js";
import { Store } from "../engine/store.js";
import { initChecksum } from "../segments/checksum.js";
import { tempDir } from "./helpers/tmp.js";

/** The kinds of the entries of `list`. */
function kindsOf(list: RecordList): Set<number> {
  const kinds = new Set<number>();
  for (let i = 0; i < list.length; i++) kinds.add(list.kindAt(i));
  return kinds;
}

describe("the plan walk's warm-up", () => {
  it("walks a keydir that files every kind of record", () => {
    const now = 1_700_000_000_000;
    const host = warmPlanHost(now);
    const soonest = { at: Infinity };
    const plans = planSegments(host, now, null, undefined, soonest);
    const survivors = new Set<number>();
    const droppable = new Set<number>();
    let deadPuts = 0;
    let entries = 0;
    for (const p of plans.values()) {
      for (const k of kindsOf(p.survivors)) survivors.add(k);
      for (const k of kindsOf(p.droppable)) droppable.add(k);
      deadPuts += p.deadPuts.length;
      entries += p.survivors.length + p.droppable.length + p.deadPuts.length;
    }
    expect([...survivors].sort()).toEqual([KIND_PUT, KIND_TOMB, KIND_CLEAR, KIND_ERASE, KIND_ROW].sort());
    expect(droppable.has(KIND_TOMB)).toBe(true);
    expect(deadPuts).toBeGreaterThan(0);
    expect(entries).toBeGreaterThan(WARM_NAMES); // a name's tombstone and clear are records of their own
    expect(soonest.at).toBeGreaterThan(now);
    expect(soonest.at).toBeLessThan(Infinity);
  });

  it("runs once before a thread's first walk, uncounted, and changes no answer", async () => {
    await initChecksum();
    const dir = tempDir("plan-warm-");
    const s = await Store.open(dir, { durability: "none", segmentBytes: 4096, compaction: { auto: false } });
    try {
      for (let i = 0; i < 200; i++) await s.write(`k${i}`, `value ${i}`, { scope: i % 2 === 0 ? "user:a" : "user:b" });
      for (let i = 0; i < 200; i += 3) await s.forget(`k${i}`, { scope: i % 2 === 0 ? "user:a" : "user:b" });
      planWarm.done = false; // as in a thread that walked no keydir yet (the first test's walks warmed this one)
      planWarm.runs = 0;
      const walks = planWalks.count;
      const warmed = s.stats();
      expect(planWarm.done).toBe(true);
      expect(planWarm.runs).toBe(1);
      expect(planWalks.count).toBe(walks + 1); // the stats() tally alone
      planWarm.skip = true;
      planWarm.done = false;
      try {
        expect(s.stats()).toEqual(warmed);
        expect(planWarm.done).toBe(false); // skipped: not run
      } finally {
        planWarm.skip = false;
        planWarm.done = true;
      }
      const report = await s.compact();
      expect(report.segments.length).toBeGreaterThan(0);
      expect(planWarm.runs).toBe(1); // once per thread
      for (let i = 0; i < 200; i++) {
        const got = await s.read(`k${i}`, { scope: i % 2 === 0 ? "user:a" : "user:b" });
        expect(got.status).toBe(i % 3 === 0 ? "NOT_FOUND" : "OK");
      }
    } finally {
      await s.close();
    }
  });

  it("a tally of the warm-up keydir equals its plan's sums", () => {
    const now = 1_700_000_000_000;
    const host = warmPlanHost(now);
    const tally = tallySegments(host, now);
    for (const [seg, p] of planSegments(host, now, null)) {
      const t = tally.get(seg);
      expect(t?.liveBytes).toBe(p.survivors.bytes());
      expect(t?.records).toBe(p.survivors.length);
    }
  });
});
