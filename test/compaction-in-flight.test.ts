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
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
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
      await readsAll(store, live, "after the failed pass");
      await within(DEADLINE, store.compact({ mode: "copy-on-write" }), "second pass");
      await readsAll(store, live, "after a second pass");
      expect((await store.verify()).problems).toEqual([]);
      await store.close();
      const again = await within(DEADLINE, Engram.open(dir, OPTS), "reopen");
      const reread = readsAll(again, live, "after reopen").then(async () => (await again.verify()).problems);
      const problems = await reread.finally(() => again.close());
      expect(problems, "verify() after reopen").toEqual([]);
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
