/**
 * Every I/O fault point × {EIO, ENOSPC} × each compaction mode that reaches it, armed while an
 * automatic compaction (compaction.auto, with a worker) is about to run in the background — the
 * pass no caller awaits, whose failure only becomes a process warning. The compaction sweep
 * (compaction-fault-sweep.test.ts) arms a point before a compact() the test awaits; this one asks
 * what a failure leaves behind for the passes that follow.
 *
 * The properties: the background pass ends (it publishes segments, or its failure is warned
 * about) within the deadline; every acknowledged value reads back and every forgotten key stays
 * absent (a read that fails closed because a later automatic pass rewrote its segment in place
 * meanwhile is read again, as API.md asks of callers); every listed segment has its file; automatic compaction then runs again by itself when
 * more values die (a failed pass leaves no segment marked as being compacted, no timer stopped);
 * and a reopen reads the same and verifies clean.
 *
 * Method: per case a fresh store of 16 KiB segments (durability "sync", garbage ratio 0.2), 300
 * keys of ~300 B; every third key is forgotten in one batch, which makes every sealed segment a
 * third dead and nudges the automatic pass, and the failure is armed once that batch is
 * acknowledged (the pass starts on a 20 ms timer after the nudge). The test waits for the pass's end by watching stats().compactions and the process's
 * warnings (a condition checked every few ms under a deadline, never a fixed sleep), disarms a
 * failure that did not fire, then forgets another sixth of the keys and waits for the next
 * automatic pass to publish. The protections it leans on have their own twins
 * (test/compaction-inplace-discard.test.ts); with `unsafeSealWaitForTests.noRetry` set (by hand,
 * twentieth session) the eight `io:sync` and `io:seal` cases here miss their deadline as well.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram, IO_FAULT_POINTS, ScopeErasedDuringRead, type FaultPoint, type OpenOptions, type ReadResult } from "../src/index.js";
import { ERRNOS, modesFor, type Errno, type Mode } from "./helpers/fault-script.js";
import { guardUnhandledRejections, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

guardUnhandledRejections();

const DEADLINE = 20_000;
const KEYS = 300;
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "w");

/** The warnings the process emitted about failed automatic passes, in order. */
const autoFailures: string[] = [];
const onWarning = (w: Error): void => {
  if (w.message.startsWith("engram auto compaction failed")) autoFailures.push(w.message);
};
beforeAll(() => {
  process.on("warning", onWarning);
});
afterAll(() => {
  process.off("warning", onWarning);
});

/** Resolves once `done()` holds, checked every 5 ms; rejects after `ms` naming `what`. */
async function until(ms: number, done: () => boolean, what: string): Promise<void> {
  const check = new Promise<void>((resolve) => {
    const tick = (): void => {
      if (done()) resolve();
      else setTimeout(tick, 5).unref();
    };
    tick();
  });
  await within(ms, check, what);
}

/** Most times a read is retried after failing closed (ScopeErasedDuringRead). */
const READ_ATTEMPTS_MAX = 20;

/**
 * `store.read(key)` in scope "s", within the deadline, read again when it failed closed: an
 * automatic pass may start (in place) at any time, and a read that straddles one of its rewrites
 * fails closed by design and asks to be read again (API.md). Any other failure is thrown.
 */
async function readAgainIfClosed(store: Engram, key: string, what: string): Promise<ReadResult> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await within(DEADLINE, store.read(key, { scope: "s" }), `${what}: read ${key}`);
    } catch (err) {
      if (!(err instanceof ScopeErasedDuringRead) || attempt >= READ_ATTEMPTS_MAX) throw err;
    }
  }
}

/** Every live key reads its value and every forgotten key is absent, each within the deadline. */
async function readsAll(store: Engram, live: ReadonlyMap<string, string>, forgotten: ReadonlySet<string>, what: string): Promise<void> {
  for (const [k, v] of live) expect(await readAgainIfClosed(store, k, what), `${what}: ${k}`).toMatchObject({ value: v });
  for (const k of forgotten) expect((await readAgainIfClosed(store, k, what)).status, `${what}: ${k} stays forgotten`).toBe("NOT_FOUND");
}

/** Segment ids the store lists whose file is missing. */
function missingFiles(dir: string, store: Engram): number[] {
  return store.stats().segments.map((s) => s.id).filter((id) => !fs.existsSync(path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`)));
}

/** Forgets keys `k{i}` for the i of `which` in one batch; moves them from `live` to `forgotten`. */
async function forgetSome(store: Engram, which: number[], live: Map<string, string>, forgotten: Set<string>): Promise<void> {
  await store.batch(which.map((i) => ({ op: "forget" as const, scope: "s", key: `k${i}` })));
  for (const i of which) {
    live.delete(`k${i}`);
    forgotten.add(`k${i}`);
  }
}

/** One case: returns whether the failure fired and whether the background pass was warned about. */
async function runCase(point: FaultPoint, errno: Errno, mode: Mode): Promise<{ fired: boolean; warned: boolean }> {
  const dir = tempDir("auto-sweep");
  const what = `${point}/${errno}/${mode}`;
  const opts: OpenOptions = { durability: "sync", segmentBytes: 16 * 1024, compaction: { mode, workers: 1, auto: true, garbageRatio: 0.2 }, retention: { tombstoneRetentionMs: 0 } };
  const store = await Engram.open(dir, { ...opts, faults: {} });
  const live = new Map<string, string>();
  const forgotten = new Set<string>();
  try {
    for (let i = 0; i < KEYS; i += 30) {
      await store.batch(Array.from({ length: 30 }, (_, j) => ({ op: "write" as const, scope: "s", key: `k${i + j}`, value: valueOf(i + j) })));
      for (let j = i; j < i + 30; j++) live.set(`k${j}`, valueOf(j));
    }
    const passesBefore = store.stats().compactions;
    const warnedBefore = autoFailures.length;
    await forgetSome(store, Array.from({ length: KEYS / 3 }, (_, n) => 3 * n), live, forgotten);
    // Armed once the forgets are acknowledged (so that their own append and sync never meet it),
    // before the pass they nudged starts: it waits for a 20 ms timer (compactor.ts nudge).
    store.faults.failAt?.(point, errno, 1);
    await until(DEADLINE, () => store.stats().compactions > passesBefore || autoFailures.length > warnedBefore, `${what}: the automatic pass ends`);
    const fired = (store.faults.failuresLeft?.() ?? 0) === 0;
    store.faults.failAt?.(point, errno, 0);
    const warned = autoFailures.length > warnedBefore;
    await readsAll(store, live, forgotten, `${what}, after the pass`);
    expect(missingFiles(dir, store), `${what}: every listed segment has its file`).toEqual([]);
    const passesAfter = store.stats().compactions;
    await forgetSome(store, Array.from({ length: KEYS / 6 }, (_, n) => 6 * n + 1), live, forgotten);
    await until(DEADLINE, () => store.stats().compactions > passesAfter, `${what}: automatic compaction runs again`);
    await readsAll(store, live, forgotten, `${what}, after the next pass`);
    await within(DEADLINE, store.close(), `${what}: close`);
    const again = await within(DEADLINE, Engram.open(dir, opts), `${what}: reopen`);
    try {
      await readsAll(again, live, forgotten, `${what}, reopened`);
      expect((await again.verify()).problems, `${what}: verify after reopen`).toEqual([]);
    } finally {
      await again.close();
    }
    return { fired, warned };
  } finally {
    await store.close().catch(() => undefined); // idempotent; a case that failed early still releases the store
  }
}

describe("automatic compaction with a worker: every I/O point × {EIO, ENOSPC} armed as a background pass starts", () => {
  const cases = IO_FAULT_POINTS.flatMap((point) => ERRNOS.flatMap((errno) => modesFor(point).map((mode) => ({ point, errno, mode }))));
  const ran: string[] = [];
  for (const c of cases) {
    it(`${c.point} ${c.errno} ${c.mode}`, async () => {
      const out = await runCase(c.point, c.errno, c.mode);
      ran.push(`${c.point}/${c.errno}/${c.mode}: ${out.fired ? (out.warned ? "pass failed, warned" : "fired, pass finished") : "not reached"}`);
    }, 60_000);
  }
  it("ran every case", () => {
    const fired = ran.filter((r) => !r.endsWith("not reached")).length;
    console.log(`auto-compaction-fault-sweep: ${ran.length} cases, ${fired} whose failure fired\n  ${ran.join("\n  ")}`);
    expect(ran.length).toBe(cases.length);
    expect(fired, "most points are reached by an automatic pass").toBeGreaterThan(cases.length / 3);
  });
});
