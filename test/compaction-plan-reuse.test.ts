/**
 * compact() without ids plans the whole pass in one keydir walk before it seals the active
 * segment, and keeps that plan for the pass when nothing changed meanwhile (engine/compactor.ts
 * compactGarbage, stillPlanned; compact-8): before, a recount of the active segment walked every
 * slot and the pass walked them all again. The plan is kept only when no write was committed or
 * queued since (the sequence) and the segment sealed holds exactly the bytes it held at the plan
 * — a record that reached it after the plan is in no survivor list, and the copy would drop it
 * as dead.
 *
 * Method: a real store (16 KiB segments, auto compaction off, both modes, inline and with a
 * worker) with keys whose values lie in the active segment forgotten, so that compact() seals it:
 * the pass keeps its plan (`planReuse.kept` counts it), and every key reads back, before and
 * after a reopen. Then a write lands in the active segment between the plan and the seal
 * (`unsafePlanReuseForTests.afterPlan`): the pass plans again and that write reads back. The
 * twin keeps the plan regardless (`always`): the late write's record is copied nowhere and the
 * key no longer reads its value.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { planReuse, unsafePlanReuseForTests } from "../engine/compactor.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { valueOf, wrongReads as wrongOf } from "./helpers/late-write.js";

type Mode = "copy-on-write" | "in-place";
const KEYS = 600;

/** The options of a store of this test: small segments, no automatic compaction. */
function optsOf(mode: Mode, workers: number): OpenOptions {
  return { durability: "none", segmentBytes: 16 * 1024, compaction: { mode, workers, auto: false } };
}

/** A store with KEYS keys, every third forgotten (the last ones' values lie in the active segment). */
async function filled(dir: string, opts: OpenOptions): Promise<Store> {
  const s = await Store.open(dir, opts);
  for (let i = 0; i < KEYS; i += 50) {
    const ops = [];
    for (let j = i; j < i + 50; j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: valueOf(j) });
    await s.batch(ops);
  }
  for (let i = 0; i < KEYS; i += 3) await s.forget(`k${i}`, { scope: "s" });
  return s;
}

/** Keys of this test's store that do not read what they should (`late`: key "late" too). */
function wrongReads(s: Store, late: boolean): number {
  return wrongOf(s, KEYS, late);
}

afterEach(() => {
  unsafePlanReuseForTests.always = false;
  unsafePlanReuseForTests.afterPlan = null;
});

describe("compact() keeps the plan made before its seal only when nothing changed", () => {
  for (const mode of ["copy-on-write", "in-place"] as const) {
    for (const workers of [0, 1]) {
      it(`${mode}, ${workers === 0 ? "inline" : "worker"}: the plan is kept and every key reads back`, async () => {
        const opts = optsOf(mode, workers);
        const dir = tempDir(`plan-reuse-${mode}-${workers}`);
        const s = await filled(dir, opts);
        const before = s.stats().segments.length;
        const kept = planReuse.kept;
        const rep = await s.compact({ mode });
        expect(planReuse.kept).toBe(kept + 1);
        expect(rep.segments.length).toBeGreaterThan(1);
        expect(s.stats().segments.length).toBeLessThanOrEqual(before + 1);
        expect(wrongReads(s, false)).toBe(0);
        await s.close();
        const again = await Store.open(dir, opts);
        expect(wrongReads(again, false)).toBe(0);
        await again.close();
      }, 60_000);
    }
  }

  it("a write between the plan and the seal: planned again, the write reads back", async () => {
    const opts = optsOf("copy-on-write", 0);
    const s = await filled(tempDir("plan-reuse-late"), opts);
    unsafePlanReuseForTests.afterPlan = async () => {
      unsafePlanReuseForTests.afterPlan = null;
      await s.write("late", "late-value", { scope: "s" });
    };
    const replanned = planReuse.replanned;
    await s.compact({ mode: "copy-on-write" });
    expect(planReuse.replanned).toBe(replanned + 1);
    expect(wrongReads(s, true)).toBe(0);
    await s.close();
  }, 60_000);

  it("the same write with the plan kept regardless (twin): the late write is lost", async () => {
    const opts = optsOf("copy-on-write", 0);
    const s = await filled(tempDir("plan-reuse-late-unsafe"), opts);
    unsafePlanReuseForTests.always = true;
    unsafePlanReuseForTests.afterPlan = async () => {
      unsafePlanReuseForTests.afterPlan = null;
      await s.write("late", "late-value", { scope: "s" });
    };
    await s.compact({ mode: "copy-on-write" });
    expect(wrongReads(s, true)).toBeGreaterThan(0);
    await s.close().catch(() => undefined);
  }, 60_000);
});
