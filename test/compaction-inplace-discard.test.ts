/**
 * An in-place pass with a worker starts its first rewrite before it seals and flushes the active
 * segment (engine/compactor.ts `sealDuring`, eighteenth session). The property: whatever fails
 * meanwhile, the rewrite that completed is published (`discard`), and the pass settles. A
 * completed rewrite leaves its segment's generation odd until the main thread publishes it;
 * unpublished, every read of the segment would wait for ever.
 *
 * Method: a store of 64 KiB segments (~150 keys each), every third key forgotten, the active
 * segment holding garbage too, so that compact() seals it during its first job. The seal's new
 * segment is refused (ENOSPC at io:create), or the old segment's sealing header fails twice (EIO
 * at io:seal: in rotate() and again when the pass waits for it, engine/commit.ts `whenSealed`),
 * armed just before the pass: compact() rejects with that IoError while the first rewrite is in
 * flight (`planReuse.earlyStarts`). Then every live key must read back within a deadline, the
 * segment files the store lists exist, a reopen reads them all and a second pass runs. The twin
 * (`unsafeInPlaceDiscardForTests.asCopy`, the rule before this session): the completed rewrite
 * is discarded like a copy — its "output", the segment itself, unlinked — and reads of its keys
 * miss the deadline. A seal that failed once in rotate() is sealed again when the pass waits for
 * it, and the pass finishes, in either mode; failing twice, a copy-on-write pass rejects too,
 * every listed file present. The twin (`unsafeSealWaitForTests.noRetry`, the rule before):
 * compact() never settles.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { unsafeSealWaitForTests } from "../engine/commit.js";
import { planReuse, unsafeInPlaceDiscardForTests } from "../engine/compactor.js";
import { settle, within } from "./helpers/io-faults.js";
import { storeWithEveryThirdForgotten } from "./helpers/forgotten-store.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE = 60_000;
/** How long a read may take after the failed pass before it counts as waiting for ever. */
const READ_DEADLINE_MS = 3_000;
const KEYS = 3_000;
const OPTS: OpenOptions = { durability: "sync", segmentBytes: 64 * 1024, compaction: { mode: "in-place", workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
const valueOf = (i: number): string => `v${i}:`.padEnd(400, "q");

/** A store of KEYS keys in ~20 segments, every third forgotten (the last ones in the active segment); returns it and the live content. */
async function filled(dir: string): Promise<{ store: Engram; live: Map<string, string> }> {
  const { store, live } = await storeWithEveryThirdForgotten(dir, OPTS, KEYS, 50, valueOf);
  for (let i = KEYS; i < KEYS + 30; i++) await store.write(`k${i}`, valueOf(i), { scope: "s" }); // the active segment's own garbage:
  for (let i = KEYS; i < KEYS + 30; i += 2) await store.forget(`k${i}`, { scope: "s" }); // values written and forgotten there
  for (let i = KEYS + 1; i < KEYS + 30; i += 2) live.set(`k${i}`, valueOf(i));
  expect(store.stats().segments.filter((s) => s.sealed).length, "segments to rewrite").toBeGreaterThan(10);
  return { store, live };
}

/** The live keys that do not read back their value within READ_DEADLINE_MS each (a read waiting for ever counts), up to `enough` of them. */
async function unreadable(store: Engram, live: ReadonlyMap<string, string>, enough = 5): Promise<string[]> {
  const bad: string[] = [];
  for (const [k, v] of live) {
    const r = await settle(READ_DEADLINE_MS, store.read(k, { scope: "s" }), `read ${k}`).catch(() => ({ ok: false as const, error: "deadline" }));
    if (!r.ok || (r.value as { value?: unknown } | null)?.value !== v) bad.push(k);
    if (bad.length >= enough) break; // enough to tell; a waiting read costs the whole deadline
  }
  return bad;
}

/** Segment ids the store lists whose file is missing. */
function missingFiles(dir: string, store: Engram): number[] {
  return store
    .stats()
    .segments.map((s) => s.id)
    .filter((id) => !fs.existsSync(path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`)));
}

/** Runs an in-place pass with `point` armed to fail `times` times with `errno` just before it. */
async function failingPass(store: Engram, point: "io:create" | "io:seal", errno: "ENOSPC" | "EIO", times: number): Promise<{ ok: boolean; error?: unknown }> {
  const early = planReuse.earlyStarts;
  store.faults.failAt?.(point, errno, times);
  const r = await settle(DEADLINE, store.compact({ mode: "in-place" }), "compact");
  expect(store.faults.failuresLeft?.(), "the armed failure fired").toBe(0);
  expect(planReuse.earlyStarts, "the first rewrite started before the seal").toBe(early + 1);
  return r;
}

afterEach(() => {
  unsafeInPlaceDiscardForTests.asCopy = false;
  unsafeSealWaitForTests.noRetry = false;
});

describe("in-place compaction with a worker: a rewrite in flight when its pass fails", () => {
  // The seal fails in rotate() and again when the pass waits for it (whenSealed retries it).
  for (const [point, errno, times] of [
    ["io:create", "ENOSPC", 1],
    ["io:seal", "EIO", 2],
  ] as const) {
    it(`${errno} at ${point} while the first rewrite runs: compact() rejects, the rewrite is published, every key reads back, and after a reopen`, async () => {
      const dir = tempDir(`inplace-discard-${point.slice(3)}`);
      const { store, live } = await filled(dir);
      const r = await failingPass(store, point, errno, times);
      expect(r.ok).toBe(false);
      expect(r.error).toBeInstanceOf(IoError);
      expect(await unreadable(store, live)).toEqual([]);
      expect(missingFiles(dir, store)).toEqual([]);
      await store.close();
      const again = await within(DEADLINE, Engram.open(dir, OPTS), "reopen");
      try {
        expect(await unreadable(again, live)).toEqual([]);
        expect((await again.verify()).problems).toEqual([]);
        await within(DEADLINE, again.compact({ mode: "in-place" }), "a second pass");
        expect(await unreadable(again, live)).toEqual([]);
      } finally {
        await again.close();
      }
    });
  }

  it("twin: a completed rewrite discarded like a copy unlinks its segment, and its reads wait for ever", async () => {
    const dir = tempDir("inplace-discard-twin");
    const { store, live } = await filled(dir);
    unsafeInPlaceDiscardForTests.asCopy = true;
    const r = await failingPass(store, "io:create", "ENOSPC", 1);
    expect(r.ok).toBe(false);
    expect(missingFiles(dir, store).length, "the twin unlinked a listed segment").toBeGreaterThan(0);
    expect((await unreadable(store, live, 1)).length, "reads of its keys miss the deadline").toBeGreaterThan(0);
  });

  for (const mode of ["in-place", "copy-on-write"] as const) {
    it(`${mode}: a seal that failed in rotate() is retried when the pass waits for it: a second success lets the pass finish`, async () => {
      const dir = tempDir(`seal-retry-${mode}`);
      const { store, live } = await filled(dir);
      const early = planReuse.earlyStarts;
      store.faults.failAt?.("io:seal", "EIO", 1);
      const report = await within(DEADLINE, store.compact({ mode }), "compact");
      expect(store.faults.failuresLeft?.(), "the armed failure fired").toBe(0);
      expect(planReuse.earlyStarts).toBe(early + (mode === "in-place" ? 1 : 0)); // one output here: it holds the segment being sealed, so it starts after the seal
      expect(report.segments.length).toBeGreaterThan(mode === "in-place" ? 10 : 1);
      expect(await unreadable(store, live)).toEqual([]);
      await store.close();
    });
  }

  it("copy-on-write: EIO twice at io:seal: compact() rejects instead of waiting, no listed file is missing, every key reads back", async () => {
    const dir = tempDir("seal-fails-cow");
    const { store, live } = await filled(dir);
    store.faults.failAt?.("io:seal", "EIO", 2);
    const r = await settle(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact");
    expect(r.ok).toBe(false);
    expect(r.ok ? null : r.error).toBeInstanceOf(IoError);
    expect(missingFiles(dir, store)).toEqual([]);
    expect(await unreadable(store, live)).toEqual([]);
    await store.close();
  });

  it("twin: without the retry, the pass waits for ever on a seal that failed before it waited", async () => {
    const dir = tempDir("inplace-seal-twin");
    const { store } = await filled(dir);
    unsafeSealWaitForTests.noRetry = true;
    store.faults.failAt?.("io:seal", "EIO", 1);
    const r = await settle(READ_DEADLINE_MS, store.compact({ mode: "in-place" }), "compact").catch((err: unknown) => ({ ok: false as const, error: err }));
    expect(String((r as { error?: unknown }).error), "the pass did not settle").toMatch(/^Error: deadline/);
  });
});
