/**
 * compact-11: with a worker, a copy-on-write pass keeps two outputs in flight (engine/compactor.ts
 * `runJobs`, `topUp`, COPIES_IN_FLIGHT): the next output is walked and copied in the worker while
 * this one's data is written and fdatasynced. The property: a failure of either in-flight output
 * publishes nothing wrong — compact() rejects only once every output still in flight has settled
 * and been removed, the published store reads exactly what was acknowledged, and no file that the
 * manifest does not list stays beside it; a reopen and a second pass agree.
 *
 * Method: a store of ~400 16 KiB segments (seven outputs of at most 64 sources), every third key forgotten.
 * An EIO is injected once at an output's rename (io:rename, in the worker): armed before the pass
 * (the first output to reach its rename fails while its successor is in flight), or armed when the
 * main thread publishes the first output (its first source unlink, seen by segments/io.ts's
 * observer: a later output fails while the one after it is in flight). Each run checks that two
 * jobs were in flight at once (`inFlightSeen`). The twin (`unsafeInFlightForTests.leaveOnFailure`):
 * the pass rejects without awaiting the other in-flight copy; once that copy settles, its
 * unpublished output is found beside the store.
 *
 * The same for an in-place pass (thirty-ninth session: REWRITES_IN_FLIGHT): the worker holds the
 * next rewrite while it runs this one (compaction-core.ts rewriteTurns), so a rewrite that fails
 * has its successor in flight. Method: ~50 16 KiB segments, every third key forgotten; an EIO at
 * the first rewrite's open (io:rewrite, before its generation goes odd), or at its first write
 * after the generation went odd (armed while it is paused at compaction:after-journal). Each run
 * checks that two rewrites were in flight (one with two worker threads, where the pool could run
 * them side by side), that compact() rejects with the IoError, that the
 * successor's completed rewrite was published (no segment is left odd: every key reads, sync and
 * async, within a deadline; its bytes shrank), and that a second pass, verify() and a reopen
 * agree. The twin (leaveOnFailure) leaves the successor's rewrite unpublished: its segment's
 * generation stays odd and its keys fail closed (ScopeErasedDuringRead) for good.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError, ScopeErasedDuringRead } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { inFlightSeen, unsafeInFlightForTests } from "../engine/compactor.js";
import { setIoObserver } from "../segments/io.js";
import { storeWithEveryThirdForgotten } from "./helpers/forgotten-store.js";
import { tempDir } from "./helpers/tmp.js";
import { settle, within } from "./helpers/io-faults.js";

const DEADLINE = 60_000;
const KEYS = 16_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { mode: "copy-on-write", workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "z");

/** A store of KEYS keys, every third forgotten; returns it and the live content. */
async function filled(dir: string): Promise<{ store: Engram; live: Map<string, string> }> {
  const { store, live } = await storeWithEveryThirdForgotten(dir, OPTS, KEYS, 40, valueOf); // 40 records of ~320 B: a batch fills most of a 16 KiB segment
  expect(store.stats().segments.filter((s) => s.sealed).length, "more than four outputs' sources").toBeGreaterThan(4 * 64);
  return { store, live };
}

/** Files in the segments directory that name no segment the store lists (unpublished outputs, .tmp files). */
function unlisted(dir: string, store: Engram): string[] {
  const ids = new Set(store.stats().segments.map((s) => s.id));
  return fs.readdirSync(path.join(dir, "segments")).filter((n) => /^\d{8}\./.test(n) && (n.endsWith(".tmp") || !ids.has(Number(n.slice(0, 8)))));
}

/** Every key of `live` reads its value. */
async function readsAll(store: Engram, live: ReadonlyMap<string, string>, what: string): Promise<void> {
  for (const [k, v] of live) expect(await store.read(k, { scope: "s" }), `${what}: ${k}`).toMatchObject({ value: v });
}

/**
 * After a failed pass: `read` finds every key of `live`, and so do a second pass (`pass`), verify()
 * and a reopen with `opts` (the store is closed on return).
 */
async function agreesAfter(dir: string, store: Engram, live: ReadonlyMap<string, string>, opts: OpenOptions, read: (s: Engram, l: ReadonlyMap<string, string>, what: string) => Promise<void>, pass: () => Promise<unknown>): Promise<void> {
  await read(store, live, "after the failed pass");
  await pass();
  await read(store, live, "after a second pass");
  expect((await store.verify()).problems).toEqual([]);
  await store.close();
  const again = await within(DEADLINE, Engram.open(dir, opts), "reopen");
  const reread = read(again, live, "after reopen").then(async () => (await again.verify()).problems);
  const problems = await reread.finally(() => again.close());
  expect(problems, "verify() after reopen").toEqual([]);
}

/** Runs a pass whose output rename fails once: before the pass ("first") or at the first output's publication ("later"). */
async function failingPass(store: Engram, which: "first" | "later"): Promise<{ ok: boolean; error?: unknown }> {
  inFlightSeen.max = 0;
  if (which === "first") store.faults.failAt?.("io:rename", "EIO", 1);
  else {
    let armed = false;
    setIoObserver((e) => {
      if (!armed && e.op === "unlink" && /\d{8}\.seg$/.test(e.path)) {
        armed = true; // a source's unlink: the first output is being published, the next ones are in flight
        store.faults.failAt?.("io:rename", "EIO", 1);
      }
    });
  }
  try {
    return await settle(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact");
  } finally {
    setIoObserver(null);
  }
}

afterEach(() => {
  unsafeInFlightForTests.leaveOnFailure = false;
  unsafeInFlightForTests.left = [];
  setIoObserver(null);
});

describe("copy-on-write compaction with two outputs in flight", () => {
  for (const which of ["first", "later"] as const) {
    it(`EIO at the ${which} output's rename: compact() rejects with nothing unpublished left; reads, reopen and a second pass agree`, async () => {
      const dir = tempDir(`in-flight-${which}`);
      const { store, live } = await filled(dir);
      const before = new Set(store.stats().segments.map((s) => s.id));
      const r = await failingPass(store, which);
      expect(store.faults.failuresLeft?.(), "the armed rename failed").toBe(0);
      expect(r.ok).toBe(false);
      expect(r.error).toBeInstanceOf(IoError);
      expect(inFlightSeen.max, "two jobs were in flight at once").toBeGreaterThanOrEqual(2);
      expect(unlisted(dir, store), "no unpublished output stays").toEqual([]);
      const published = store.stats().segments.filter((s) => !before.has(s.id)).length;
      if (which === "later") expect(published, "an output was published before the failure").toBeGreaterThan(0);
      await agreesAfter(dir, store, live, OPTS, readsAll, () => within(DEADLINE, store.compact({ mode: "copy-on-write" }), "second pass"));
    });
  }

  it("twin: a failed pass that does not await the copies in flight leaves an unpublished output behind", async () => {
    const dir = tempDir("in-flight-twin");
    const { store, live } = await filled(dir);
    unsafeInFlightForTests.leaveOnFailure = true;
    const r = await failingPass(store, "first");
    expect(r.ok).toBe(false);
    expect(inFlightSeen.max).toBeGreaterThanOrEqual(2);
    await within(DEADLINE, Promise.all(unsafeInFlightForTests.left), "the copies left in flight");
    expect(unlisted(dir, store).length, "the twin leaves an unpublished output").toBeGreaterThan(0);
    await readsAll(store, live, "twin, the published store");
    await store.close();
  });
});

const IN_PLACE: OpenOptions = { ...OPTS, compaction: { mode: "in-place", workers: 1, auto: false } };
const IN_PLACE_KEYS = 2_000;

/** Sealed segments' sizes by id. */
function sizes(store: Engram): Map<number, number> {
  return new Map(store.stats().segments.filter((s) => s.sealed).map((s) => [s.id, s.bytes]));
}

/**
 * An in-place pass whose first rewrite fails with EIO: at its open ("open": before its generation
 * goes odd), or at its first write once the generation went odd ("odd": armed while the rewrite is
 * paused after its journal, every later pause released as it comes).
 */
async function failingRewrite(store: Engram, where: "open" | "odd"): Promise<{ ok: boolean; error?: unknown }> {
  inFlightSeen.max = 0;
  if (where === "open") {
    store.faults.failAt?.("io:rewrite", "EIO", 1);
    return settle(DEADLINE, store.compact({ mode: "in-place" }), "compact");
  }
  const pass = settle(DEADLINE, store.compact({ mode: "in-place" }), "compact");
  await within(DEADLINE, store.faults.waitFor(PAUSE), "the first rewrite paused after its journal");
  expect(inFlightSeen.max, "the next rewrite was handed over while the first is paused").toBe(2);
  store.faults.failAt?.("io:rewrite", "EIO", 1);
  return releasing(store, pass);
}

/** The pause point of the "odd" case, armed at open. */
const PAUSE = "compaction:after-journal" as const;

/** Settles `pass`, releasing every rewrite paused at PAUSE meanwhile (none pauses unless the store armed it). */
async function releasing<T>(store: Engram, pass: Promise<T>): Promise<T> {
  let over = false;
  void pass.then(
    () => (over = true),
    () => (over = true),
  );
  while (!over) {
    store.faults.release(PAUSE);
    await within(DEADLINE, Promise.race([pass, store.faults.waitFor(PAUSE)]), "the next pause or the pass's end");
  }
  return pass;
}

/** Every key of `live` reads its value, synchronously and asynchronously, within the deadline. */
async function readsAllBothWays(store: Engram, live: ReadonlyMap<string, string>, what: string): Promise<void> {
  for (const [k, v] of live) expect(store.readSync(k, { scope: "s" }), `${what}: readSync ${k}`).toMatchObject({ value: v });
  await within(DEADLINE, readsAll(store, live, what), `${what}: async reads`);
}

describe("in-place compaction with two rewrites in flight", () => {
  for (const where of ["open", "odd"] as const) {
    it(`EIO at the first rewrite's ${where === "open" ? "open" : "first write after its generation went odd"}: its successor's rewrite is published; reads, reopen and a second pass agree`, async () => {
      const dir = tempDir(`in-flight-rewrite-${where}`);
      const opts: OpenOptions = where === "odd" ? { ...IN_PLACE, faults: { pauseAt: [PAUSE] } } : IN_PLACE;
      const { store, live } = await storeWithEveryThirdForgotten(dir, opts, IN_PLACE_KEYS, 40, valueOf);
      const before = sizes(store);
      expect(before.size, "segments for several rewrites").toBeGreaterThan(10);
      const r = await failingRewrite(store, where);
      expect(store.faults.failuresLeft?.(), "the armed failure fired").toBe(0);
      expect(r.ok).toBe(false);
      expect(r.error).toBeInstanceOf(IoError);
      expect(inFlightSeen.max, "two rewrites were in flight at once").toBe(2);
      const after = sizes(store);
      const shrunk = [...before].filter(([id, bytes]) => (after.get(id) ?? bytes) < bytes);
      expect(shrunk.length, "the successor in flight was rewritten and published").toBeGreaterThanOrEqual(1);
      expect(shrunk.length, "the failed rewrite and the jobs after the successor were not").toBeLessThan(before.size - 1);
      expect(fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".journal")), "no journal stays").toEqual([]);
      await agreesAfter(dir, store, live, IN_PLACE, readsAllBothWays, () => releasing(store, store.compact({ mode: "in-place" })));
    });
  }

  it("with two worker threads a pass keeps one rewrite in flight (the pool could run the next beside it in the other thread)", async () => {
    const dir = tempDir("in-flight-rewrite-threads");
    const opts: OpenOptions = { ...IN_PLACE, compaction: { mode: "in-place", workers: 2, auto: false } };
    const { store, live } = await storeWithEveryThirdForgotten(dir, opts, IN_PLACE_KEYS, 40, valueOf);
    inFlightSeen.max = 0;
    const report = await within(DEADLINE, store.compact({ mode: "in-place" }), "compact");
    expect(report.segments.length, "several rewrites").toBeGreaterThan(10);
    expect(inFlightSeen.max, "one rewrite at a time").toBe(1);
    await readsAllBothWays(store, live, "after the pass");
    await store.close();
  });

  it("twin: a failed pass that does not await the rewrite in flight leaves its segment odd, its keys failing closed", async () => {
    const dir = tempDir("in-flight-rewrite-twin");
    const { store, live } = await storeWithEveryThirdForgotten(dir, IN_PLACE, IN_PLACE_KEYS, 40, valueOf);
    unsafeInFlightForTests.leaveOnFailure = true;
    const r = await failingRewrite(store, "open");
    expect(r.ok).toBe(false);
    expect(inFlightSeen.max).toBe(2);
    await within(DEADLINE, Promise.all(unsafeInFlightForTests.left), "the rewrite left in flight");
    let closed = 0;
    for (const k of live.keys()) {
      try {
        store.readSync(k, { scope: "s" });
      } catch (err) {
        expect(err).toBeInstanceOf(ScopeErasedDuringRead);
        closed += 1;
      }
    }
    expect(closed, "the unpublished rewrite's keys fail closed").toBeGreaterThan(0);
    await store.close();
  });
});
