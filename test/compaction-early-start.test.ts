/**
 * compact-9: a copy-on-write `compact()` with a worker starts its first output's copy before it
 * seals the active segment (engine/compactor.ts `startsBeforeSeal`, `sealDuring`): the seal's
 * syncs run on the main thread while the worker copies, and nothing is published before the seal
 * and a flush. The segment that was active joins the last output, started once it is sealed.
 *
 * Method: a store of ~130 16 KiB segments (so a pass has two outputs), every third key
 * forgotten, the last writes in the active segment; compact() — the early path ran (the plan was
 * kept, the sealed segment not planned again), every key reads back, before and after a reopen,
 * and the active segment's records are in an output (no sealed segment with garbage left). Then
 * a write lands in the active segment after the first job started and before the seal (the
 * `earlyStartForTests.beforeSeal` hook): the pass plans the sealed segment again, and the write
 * reads back, after a reopen too. The twin: the same write with the plan kept regardless
 * (`unsafePlanReuseForTests.always`): its record is in no plan, the copy drops it as dead, and
 * the key no longer reads its value. Last, the main thread's I/O order (segments/io.ts observer):
 * every sync of the segment that was active precedes the first unlink of a source; its twin seals
 * only after the first outputs are published (`earlyStartForTests.sealAfterPublish`) and the
 * check sees an unlink before the seal's sync. In place (eighteenth session) the first rewrite
 * also starts before the seal, but after a flush: the same store compacted in place keeps its
 * plan, its active segment is durable to its end when the first rewrite has started, the late
 * write is planned again and reads back, and the twins lose it (plan kept regardless) or see the
 * segment not durable (`earlyStartForTests.inPlaceUnflushed`). Since the thirty-first session that
 * flush starts before the plan, its fdatasync running while the main thread plans, and the pass
 * flushes again when a write was committed or queued after it: a forget there (the `underPlan`
 * hook) is durable when the first rewrite starts, and its twin (`trustUnderPlan`: the early flush
 * taken as covering the plan regardless) sees the segment not durable. Since the thirty-seventh
 * session the first job is posted to the worker in the turn that starts it, before the seal's
 * synchronous work (the new segment's creation, the old one's sync, header and hint): with the
 * pool made (a first pass of one segment), the tasks posted are counted (`workerTasks`) when the
 * main thread opens the new segment's file; its twin (`postLateForTests.always`: the post a
 * microtask later, as before) counts none there.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import type { Segment } from "../engine/segment.js";
import { earlyStartForTests, planReuse, postLateForTests, unsafePlanReuseForTests, workerTasks } from "../engine/compactor.js";
import type { OpenOptions } from "../rules/types.js";
import { setIoObserver } from "../segments/io.js";
import { segmentFileName } from "../segments/file-names.js";
import { tempDir } from "./helpers/tmp.js";
import { lateWriteOnce, valueOf, wrongReads as wrongOf } from "./helpers/late-write.js";

const KEYS = 16_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { mode: "copy-on-write", workers: 1, auto: false } };
const OPTS_IN_PLACE: OpenOptions = { ...OPTS, compaction: { mode: "in-place", workers: 1, auto: false } };

/** A store with KEYS keys, every third forgotten (the forgets' tombstones in the active segment). */
async function filled(dir: string, opts: OpenOptions = OPTS): Promise<Store> {
  const s = await Store.open(dir, opts);
  for (let i = 0; i < KEYS; i += 100) {
    const ops = [];
    for (let j = i; j < i + 100; j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: valueOf(j) });
    await s.batch(ops);
  }
  for (let i = 0; i < KEYS; i += 300) {
    const forgets = [];
    for (let j = i; j < Math.min(KEYS, i + 300); j += 3) forgets.push({ op: "forget" as const, scope: "s", key: `k${j}` });
    await s.batch(forgets);
  }
  // The active segment keeps room for the late write of the tests below (it lands in the planned segment).
  expect(s.stats().segments.filter((x) => !x.sealed).every((x) => x.bytes < 12 * 1024)).toBe(true);
  return s;
}

/** Keys of this test's store that do not read what they should (`late`: key "late" too). */
function wrongReads(s: Store, late: boolean): number {
  return wrongOf(s, KEYS, late);
}

/** The compaction mode of a store of this test. */
function modeOf(opts: OpenOptions): "copy-on-write" | "in-place" {
  return opts.compaction?.mode ?? "copy-on-write";
}

/** A write lands in the active segment after the first job started and before the seal: the pass plans that segment again, and the write reads back, after a reopen too. */
async function lateWriteReadsBack(opts: OpenOptions, label: string): Promise<void> {
  const dir = tempDir(label);
  const s = await filled(dir, opts);
  earlyStartForTests.beforeSeal = lateWriteOnce(s, () => (earlyStartForTests.beforeSeal = null));
  const sealedReplanned = planReuse.sealedReplanned;
  const earlyStarts = planReuse.earlyStarts;
  await s.compact({ mode: modeOf(opts) });
  expect(planReuse.earlyStarts).toBe(earlyStarts + 1);
  expect(planReuse.sealedReplanned).toBe(sealedReplanned + 1);
  expect(wrongReads(s, true)).toBe(0);
  await s.close();
  const again = await Store.open(dir, opts);
  expect(wrongReads(again, true)).toBe(0);
  await again.close();
}

/** The twin: the same late write with the plan kept regardless — its record is in no plan, and the pass drops it. */
async function lateWriteLostWithStalePlan(opts: OpenOptions, label: string): Promise<void> {
  const s = await filled(tempDir(label), opts);
  unsafePlanReuseForTests.always = true;
  earlyStartForTests.beforeSeal = lateWriteOnce(s, () => (earlyStartForTests.beforeSeal = null));
  await s.compact({ mode: modeOf(opts) }).catch(() => undefined);
  expect(wrongReads(s, true)).toBeGreaterThan(0);
  await s.close().catch(() => undefined);
}

afterEach(() => {
  setIoObserver(null);
  earlyStartForTests.sealAfterPublish = false;
  earlyStartForTests.inPlaceUnflushed = false;
  earlyStartForTests.beforeSeal = null;
  earlyStartForTests.underPlan = null;
  earlyStartForTests.trustUnderPlan = false;
  earlyStartForTests.beforeJobs = null;
  earlyStartForTests.sealingByWriter = false;
  unsafePlanReuseForTests.always = false;
  postLateForTests.always = false;
});

describe("copy-on-write compact() starts its first output before the seal", () => {
  it("the plan is kept, two outputs, every key reads back before and after a reopen", async () => {
    const dir = tempDir("early-start");
    const s = await filled(dir);
    const kept = planReuse.kept;
    const sealedReplanned = planReuse.sealedReplanned;
    const earlyStarts = planReuse.earlyStarts;
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id;
    expect(activeId).toBeDefined();
    let sealedAfterStart = false;
    earlyStartForTests.beforeSeal = async () => {
      sealedAfterStart = true;
    };
    const rep = await s.compact({ mode: "copy-on-write" });
    expect(sealedAfterStart).toBe(true);
    expect(planReuse.kept).toBe(kept + 1);
    expect(planReuse.sealedReplanned).toBe(sealedReplanned);
    expect(planReuse.earlyStarts).toBe(earlyStarts + 1); // the first output's job ran when the seal began
    expect(rep.segments.length).toBeGreaterThan(64); // more sources than one output takes
    expect(wrongReads(s, false)).toBe(0);
    // The segment that was active went into an output (sealed, then compacted with the rest).
    expect(s.stats().segments.some((x) => x.id === activeId)).toBe(false);
    await s.close();
    const again = await Store.open(dir, OPTS);
    expect(wrongReads(again, false)).toBe(0);
    await again.close();
  }, 60_000);

  it("a write between the first job's start and the seal: the sealed segment is planned again, the write reads back", () => lateWriteReadsBack(OPTS, "early-start-late"), 60_000);

  it("twin: the same write with the plan kept regardless is lost", () => lateWriteLostWithStalePlan(OPTS, "early-start-late-unsafe"), 60_000);

  /**
   * The main thread's I/O of one pass (the worker's is not observed): the index of the last sync
   * of the segment that was active, and of the first unlink of a source segment.
   */
  async function ioOrder(s: Store, activeFile: string): Promise<{ lastSealSync: number; firstUnlink: number }> {
    const log: string[] = [];
    setIoObserver((e) => {
      if (e.op === "sync" && e.path.endsWith(activeFile)) log.push("seal-sync");
      else if (e.op === "unlink" && e.path.endsWith(".seg")) log.push("unlink");
    });
    await s.compact({ mode: "copy-on-write" });
    setIoObserver(null);
    return { lastSealSync: log.lastIndexOf("seal-sync"), firstUnlink: log.indexOf("unlink") };
  }

  it("I/O order: the segment that was active is synced before any source is unlinked", async () => {
    const s = await filled(tempDir("early-start-order"));
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id as number;
    const earlyStarts = planReuse.earlyStarts;
    const order = await ioOrder(s, segmentFileName(activeId));
    expect(planReuse.earlyStarts).toBe(earlyStarts + 1);
    expect(order.lastSealSync).toBeGreaterThanOrEqual(0);
    expect(order.firstUnlink).toBeGreaterThan(order.lastSealSync);
    expect(wrongReads(s, false)).toBe(0);
    await s.close();
  }, 60_000);

  it("twin: sealing after the first outputs are published unlinks sources before the seal's sync (caught)", async () => {
    const s = await filled(tempDir("early-start-order-unsafe"));
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id as number;
    earlyStartForTests.sealAfterPublish = true;
    const order = await ioOrder(s, segmentFileName(activeId));
    expect(order.firstUnlink).toBeGreaterThanOrEqual(0);
    expect(order.firstUnlink).toBeLessThan(order.lastSealSync);
    await s.close().catch(() => undefined);
  }, 60_000);
});

describe("in-place compact() starts its first rewrite after a flush, before the seal", () => {
  /** A hook (beforeSeal: the first rewrite has started) that records whether the segment that was active is durable to its end. */
  function durableAtFirstJob(s: Store, activeId: number, seen: { durable: boolean | null }): () => Promise<void> {
    return async () => {
      const seg = s.segments.get(activeId);
      seen.durable = seg !== undefined && seg.syncedEnd === seg.dataEnd;
    };
  }

  it("the plan is kept, the active segment is durable when the first rewrite runs, every key reads back before and after a reopen", async () => {
    const dir = tempDir("early-start-inplace");
    const s = await filled(dir, OPTS_IN_PLACE);
    const kept = planReuse.kept;
    const earlyStarts = planReuse.earlyStarts;
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id as number;
    const seen: { durable: boolean | null } = { durable: null };
    earlyStartForTests.beforeSeal = durableAtFirstJob(s, activeId, seen);
    const rep = await s.compact({ mode: "in-place" });
    expect(seen.durable, "every record that killed one was durable before the first rewrite").toBe(true);
    expect(planReuse.kept).toBe(kept + 1);
    expect(planReuse.earlyStarts).toBe(earlyStarts + 1);
    expect(rep.segments).toContain(activeId); // sealed during the pass, then rewritten last
    expect(wrongReads(s, false)).toBe(0);
    await s.close();
    const again = await Store.open(dir, OPTS_IN_PLACE);
    expect(wrongReads(again, false)).toBe(0);
    await again.close();
  }, 60_000);

  it("a write between the first rewrite's start and the seal: the sealed segment is planned again, the write reads back", () => lateWriteReadsBack(OPTS_IN_PLACE, "early-start-inplace-late"), 60_000);

  it("twin: the same write with the plan kept regardless is lost", () => lateWriteLostWithStalePlan(OPTS_IN_PLACE, "early-start-inplace-late-unsafe"), 60_000);

  /** A forget lands after the flush started under the plan reached its fdatasync, before the plan: is the segment that was active durable when the first rewrite runs? */
  async function forgetUnderPlan(label: string, trust: boolean): Promise<boolean | null> {
    const dir = tempDir(label);
    const s = await filled(dir, OPTS_IN_PLACE);
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id as number;
    earlyStartForTests.trustUnderPlan = trust;
    earlyStartForTests.underPlan = async () => {
      earlyStartForTests.underPlan = null;
      await s.forget("k1", { scope: "s" }); // k1's value lies in the first sealed segment
    };
    const seen: { durable: boolean | null } = { durable: null };
    earlyStartForTests.beforeSeal = durableAtFirstJob(s, activeId, seen);
    await s.compact({ mode: "in-place" });
    expect(s.readSync("k1", { scope: "s" }).status).toBe("NOT_FOUND");
    await s.close();
    return seen.durable;
  }

  it("a forget after the flush started under the plan is made durable by a second flush before the first rewrite (thirty-first session)", async () => {
    expect(await forgetUnderPlan("early-start-inplace-under-plan", false), "the forget planned after the early flush was durable before the first rewrite").toBe(true);
  }, 60_000);

  it("twin: trusting the flush started under the plan regardless, that forget is not durable when the first rewrite runs (caught)", async () => {
    expect(await forgetUnderPlan("early-start-inplace-under-plan-unsafe", true)).toBe(false);
  }, 60_000);

  /**
   * While the pass awaits its flush before its first rewrite (the `beforeJobs` hook), a write of
   * "late" lands in the segment it will seal, then writes fill that segment until the write path
   * rotates it itself: its writer is gone, yet its plan predates those records. The store holds
   * only that segment (10 values, every third forgotten), so its rewrite is the pass's first job.
   * Returns whether compact() rejected and the values that do not read back, before and after a reopen.
   */
  async function rotatedUnderFlush(label: string, byWriter: boolean): Promise<{ rejected: boolean; wrong: number; wrongAfterReopen: number }> {
    const dir = tempDir(label);
    const s = await Store.open(dir, OPTS_IN_PLACE);
    const want = new Map<string, string | undefined>();
    for (let i = 0; i < 10; i++) {
      await s.write(`a${i}`, `a${i}-`.padEnd(1000, "v"), { scope: "s" });
      want.set(`a${i}`, `a${i}-`.padEnd(1000, "v"));
    }
    for (let i = 0; i < 10; i += 3) {
      await s.forget(`a${i}`, { scope: "s" });
      want.set(`a${i}`, undefined);
    }
    const activeNow = (): number | undefined => s.stats().segments.find((x) => !x.sealed)?.id;
    const activeId = activeNow();
    expect(s.stats().segments.length, "one segment: the one the pass seals").toBe(1);
    earlyStartForTests.sealingByWriter = byWriter;
    earlyStartForTests.beforeJobs = async () => {
      earlyStartForTests.beforeJobs = null;
      await s.write("late", "late-value", { scope: "s" });
      want.set("late", "late-value");
      for (let i = 0; i < 64 && activeNow() === activeId; i++) {
        await s.write(`fill${i}`, `fill${i}-`.padEnd(1000, "f"), { scope: "s" });
        want.set(`fill${i}`, `fill${i}-`.padEnd(1000, "f"));
      }
      expect(activeNow(), "the write path rotated the segment the pass seals").not.toBe(activeId);
      await s.log.whenSealed(s.segments.get(activeId as number) as Segment); // sealed by the write path: its writer is gone
      await s.flush(); // and its hint written: a pass may take it now
    };
    const replanned = planReuse.sealedReplanned;
    const rejected = await s.compact({ mode: "in-place" }).then(
      () => false,
      () => true,
    );
    if (!byWriter) expect(planReuse.sealedReplanned, "the sealed segment was planned again before its rewrite").toBe(replanned + 1);
    const wrongOfStore = (store: Store): number => {
      let n = 0;
      for (const [k, v] of want) {
        let got: string | undefined | null = null;
        try {
          const r = store.readSync(k, { scope: "s" });
          got = r.status === "OK" ? Buffer.from(r.value as Uint8Array).toString() : undefined;
        } catch {
          got = null; // a read that fails reads wrong
        }
        if (got !== v) n++;
      }
      return n;
    };
    const wrong = wrongOfStore(s);
    await s.close().catch(() => undefined);
    const again = await Store.open(dir, OPTS_IN_PLACE);
    const wrongAfterReopen = wrongOfStore(again);
    await again.close();
    return { rejected, wrong, wrongAfterReopen };
  }

  it("the segment being sealed, rotated by the write path while the pass awaits its flush, is rewritten only on its new plan (forty-seventh session)", async () => {
    expect(await rotatedUnderFlush("early-start-inplace-rotated", false)).toEqual({ rejected: false, wrong: 0, wrongAfterReopen: 0 });
  }, 60_000);

  it("twin: started once its writer is gone, its rewrite on the old plan drops the late write (caught)", async () => {
    const out = await rotatedUnderFlush("early-start-inplace-rotated-unsafe", true);
    console.info(`[compaction-early-start] twin, rewrite on the old plan: compact() ${out.rejected ? "rejected" : "resolved"}, ${out.wrong} values wrong, ${out.wrongAfterReopen} after a reopen`);
    expect(out.rejected || out.wrong > 0, "the pass failed or read wrong").toBe(true);
    expect(out.wrongAfterReopen, "the acknowledged late write is gone from disk").toBeGreaterThan(0);
  }, 60_000);

  it("twin: without the flush the first rewrite runs while the segment that was active is not durable (caught)", async () => {
    const s = await filled(tempDir("early-start-inplace-unflushed"), OPTS_IN_PLACE);
    const activeId = s.stats().segments.find((x) => !x.sealed)?.id as number;
    earlyStartForTests.inPlaceUnflushed = true;
    const seen: { durable: boolean | null } = { durable: null };
    earlyStartForTests.beforeSeal = durableAtFirstJob(s, activeId, seen);
    await s.compact({ mode: "in-place" });
    expect(seen.durable).toBe(false);
    await s.close();
  }, 60_000);
});

describe("a pass's first job reaches the worker before the seal's synchronous work (thirty-seventh session)", () => {
  /** Tasks posted by the pass when the main thread opened the file of the segment its seal creates; null if it opened none. */
  async function postedAtSeal(opts: OpenOptions, label: string): Promise<number | null> {
    const s = await filled(tempDir(label), opts);
    const first = s.stats().segments.find((x) => x.sealed);
    expect(first).toBeDefined();
    await s.compact({ mode: modeOf(opts), segments: [(first as { id: number }).id] }); // makes the pool
    const before = workerTasks.posted;
    let atSeal: number | null = null;
    setIoObserver((e) => {
      // createSegmentFile's first step: its temporary file (NNNNNNNN.seg.tmp), made on the main thread only by the seal's rotation.
      if (atSeal === null && e.op === "open" && e.path.endsWith(".seg.tmp")) atSeal = workerTasks.posted - before;
    });
    await s.compact({ mode: modeOf(opts) });
    setIoObserver(null);
    expect(wrongReads(s, false)).toBe(0);
    await s.close();
    return atSeal;
  }

  for (const opts of [OPTS, OPTS_IN_PLACE]) {
    const mode = modeOf(opts);
    it(`${mode}: the first job was posted when the seal creates the new segment`, async () => {
      expect(await postedAtSeal(opts, `post-early-${mode}`)).toBeGreaterThanOrEqual(1);
    }, 60_000);

    it(`twin (${mode}): posted a microtask later, no job had reached the worker then (caught)`, async () => {
      postLateForTests.always = true;
      expect(await postedAtSeal(opts, `post-late-${mode}`)).toBe(0);
    }, 60_000);
  }
});
