/**
 * Two places where garbage hid from the background space rule (issue 11, W5 at 1.80× live):
 * (1) the ACTIVE segment. With the default 64 MiB segments a whole store may live in the active
 * segment, which the automatic pass sealed only once it was past its own garbage ratio (0.5): a
 * store 40% dead stayed 40% dead forever. Now a large active segment (≥ half a segment or 4 MiB)
 * is a candidate of the store-wide rule like a sealed one; the pass seals it, then compacts it.
 * (2) garbage that existed before the OPEN: recovery does not count dead bytes (the open stays
 * O(segments)), so a reopened store believed every segment clean. The first automatic pass, once
 * the store has been open STORE_QUIET_MS, counts them from the keydir (when the keydir holds no
 * deferred hint slots: that count would build every slot; see docs/ENGINE.md "Scheduling").
 *
 * Method: real files, DEFAULT automatic compaction, stats() polled with a deadline until the
 * segment files' bytes are within 10% of what the live records and retained tombstones need
 * (stats().liveBytes); every value is then checked after a reopen. Each case has a twin with
 * `auto: false` on the same workload that must stay over the bound, so the check can tell a
 * compacted store from a half-garbage one. (By hand, with the active segment left out of the
 * candidates, case (1) stays at 1.60× and fails at its deadline; with the count after open
 * removed, case (2) stays at 1.61×: both checked.) Property stressed: no garbage is out of the space rule's
 * sight, wherever it sits and whenever it died.
 */
import { describe, expect, it } from "vitest";
import { Engram, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { amplification, churn, eventually } from "./helpers/space.js";
import { dropHints } from "./helpers/hints.js";

const T = 30_000;
const BOUND = 1.1;
const value = (i: number): string => `v${i}:${"a".repeat(240)}`;

/** Reopens `dir` without compaction and checks every key: gone or its value. */
async function checkAll(dir: string, options: OpenOptions, keys: number, gone: Set<number>): Promise<void> {
  const again = await Engram.open(dir, { ...options, compaction: { auto: false } });
  try {
    for (let i = 0; i < keys; i++) {
      const r = await again.read(`k${i}`);
      if (gone.has(i)) expect(r, `k${i}`).toMatchObject({ status: "NOT_FOUND" });
      else expect(r, `k${i}`).toMatchObject({ value: value(i) });
    }
  } finally {
    await again.close();
  }
}

/** Waits (deadline T) until the background has brought segment bytes within BOUND of the live bytes, by at least one pass. */
async function expectCompactedToBound(store: Engram): Promise<void> {
  const reached = await eventually(() => amplification(store) <= BOUND, T);
  expect(reached, `segment bytes / live bytes reached ${BOUND} (now ${amplification(store).toFixed(2)})`).toBe(true);
  expect(store.stats().compactions, "the background pass ran").toBeGreaterThan(0);
}

describe("garbage in the active segment", () => {
  // 1 MiB segments: 3000 records of ~300 B (~0.9 MB) stay in the active segment, past half of it.
  const OPTS: OpenOptions = { segmentBytes: 1 << 20, durability: "none" };
  const KEYS = 3000;

  it("a large active segment 40% dead (under its 0.5 ratio) is sealed and compacted in the background", async () => {
    const dir = tempDir("space-active");
    const store = await Engram.open(dir, OPTS);
    let gone: Set<number>;
    try {
      gone = await churn(store, KEYS, value, 100);
      // Under load the churn's final flush can outlast the 200 ms quiet window, so the background
      // pass may already have sealed segment 1 (or compacted it): what must not have happened is
      // a rotation by size — every record sits in segment 1, the only one sealed.
      const st = store.stats();
      const bySize = st.segments.filter((s) => s.sealed && !(s.id === 1 && s.records === KEYS));
      expect(st.compactions > 0 || bySize.length === 0, `everything sits in the active segment (sealed: ${JSON.stringify(bySize)})`).toBe(true);
      await expectCompactedToBound(store);
    } finally {
      await store.close();
    }
    await checkAll(dir, OPTS, KEYS, gone);
  });

  it("twin: with auto compaction off the same store stays over the bound", async () => {
    const store = await Engram.open(tempDir("space-active-twin"), { ...OPTS, compaction: { auto: false } });
    try {
      await churn(store, KEYS, value, 100);
      expect(store.stats().segments.filter((s) => s.sealed)).toEqual([]);
      expect(amplification(store)).toBeGreaterThan(BOUND);
    } finally {
      await store.close();
    }
  });
});

describe("garbage that existed before the open", () => {
  const OPTS: OpenOptions = { segmentBytes: 32 * 1024, durability: "none" };
  const KEYS = 1000;

  /** A store of 40%-dead sealed segments written with auto compaction off, and no hint files (so the reopen scans). */
  async function prepared(name: string): Promise<{ dir: string; gone: Set<number> }> {
    const dir = tempDir(name);
    const store = await Engram.open(dir, { ...OPTS, compaction: { auto: false } });
    let gone: Set<number>;
    try {
      gone = await churn(store, KEYS, value, 100);
      expect(amplification(store), "prepared half-garbage").toBeGreaterThan(BOUND);
    } finally {
      await store.close();
    }
    dropHints(dir);
    return { dir, gone };
  }

  it("a reopened store counts its dead bytes once and compacts them in the background", async () => {
    const { dir, gone } = await prepared("space-reopen");
    const store = await Engram.open(dir, OPTS);
    try {
      await expectCompactedToBound(store);
    } finally {
      await store.close();
    }
    await checkAll(dir, OPTS, KEYS, gone);
  });

  it("twin: reopened with auto compaction off, the same store stays over the bound", async () => {
    const { dir } = await prepared("space-reopen-twin");
    const store = await Engram.open(dir, { ...OPTS, compaction: { auto: false } });
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(amplification(store)).toBeGreaterThan(BOUND);
    } finally {
      await store.close();
    }
  });
});
