/**
 * The keys of the plan-reuse tests (test/compaction-plan-reuse.test.ts, compaction-early-start):
 * keys k0..k(n-1) of scope "s" with every third forgotten, and a "late" write that lands in the
 * active segment after a pass planned it — which a pass keeping a stale plan drops.
 */
import type { Store } from "../../engine/store.js";

/** The value of key i. */
export function valueOf(i: number): string {
  return `v${i}-`.padEnd(90 + (i % 30), "z");
}

/** Of keys k0..k(keys-1), those that do not read what they should; with `late`, key "late" must read "late-value". */
export function wrongReads(s: Store, keys: number, late: boolean): number {
  let wrong = 0;
  for (let i = 0; i < keys; i++) {
    const got = s.readSync(`k${i}`, { scope: "s" });
    const ok = i % 3 === 0 ? got.status === "NOT_FOUND" : got.status === "OK" && Buffer.from(got.value as Uint8Array).toString() === valueOf(i);
    if (!ok) wrong += 1;
  }
  if (late) {
    let got: ReturnType<Store["readSync"]> | null = null;
    try {
      got = s.readSync("late", { scope: "s" });
    } catch {
      got = null; // a slot left pointing at bytes that are gone fails: it reads wrong either way
    }
    if (got === null || got.status !== "OK" || Buffer.from(got.value as Uint8Array).toString() !== "late-value") wrong += 1;
  }
  return wrong;
}

/** A hook that writes "late" once (the first call) and then clears itself through `clear`. */
export function lateWriteOnce(s: Store, clear: () => void): () => Promise<void> {
  return async () => {
    clear();
    await s.write("late", "late-value", { scope: "s" });
  };
}
