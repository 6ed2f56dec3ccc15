/**
 * A compaction worker thread that dies in the middle of a copy-on-write pass loses nothing and
 * leaves nothing behind: compact() rejects with an IoError that says to run compact() again, the
 * dead job's unpublished output (its .seg.tmp, or a renamed .seg with its hint) is removed at once
 * rather than at the next open, every value reads, later writes and a later pass succeed, and a
 * reopen finds no stray file and gives the same answers. Outputs published before the death stay
 * published; an automatic pass that dies the same way rejects nothing unhandled, and the next one
 * works.
 *
 * Method: a store of 16 KiB segments (copy-on-write, one worker thread), keys of ~300 B in scope
 * `s` written in batches of 40, every third forgotten. The worker is held at
 * `compaction:before-swap` (its output's .seg.tmp complete and fdatasynced, not yet renamed) and
 * its thread is terminated through `workerThreadsForTests()`, as an out-of-memory kill or a crash
 * of the thread would end it; one case holds it at `compaction:after-output-rename` instead (its
 * output's .seg and .hint renamed into place and the directory fsynced, no manifest listing them
 * yet: the main thread has not published them) and checks that both names are gone at once. The
 * typed error's message must say that nothing was lost and to run compact() again, not the
 * device's advice (free space). Then, under a deadline each: the pass's outcome is checked, the
 * segments directory must hold no .tmp and no segment or hint file the store does not list, every
 * live key reads (read() and readSync()), new keys are written, a second pass runs (every later
 * hold released as it comes), and after a close and reopen every key reads the same. The
 * multi-job case fills ~200 segments (four outputs of at most 64 sources, two in flight: the
 * compactor's COPIES_IN_FLIGHT): the first output held is released and its publication awaited
 * (a source's unlink on the main thread, seen by segments/io.ts's observer) before the next
 * output held is killed with whatever else is in flight. The automatic case runs the pass from
 * `compaction.auto` (store-wide share over its bound once the forgets stop: STORE_QUIET_MS) and
 * watches for its warning and for unhandled rejections. The twin
 * (`unsafeWorkerDeathForTests.leaveOutput`, the rule before the fifty-fourth session) leaves the
 * dead job's .seg.tmp — or, held after the rename, its .seg and .hint — in the directory until
 * the next open.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { inFlightSeen, unsafeWorkerDeathForTests } from "../engine/compactor.js";
import { readManifest } from "../engine/manifest.js";
import { segmentFileName } from "../segments/file-names.js";
import { hintFileName } from "../segments/hint.js";
import { setIoObserver } from "../segments/io.js";
import { IoError } from "../rules/errors.js";
import type { OpenOptions } from "../rules/types.js";
import { guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE_MS = 30_000;
const HOLD = "compaction:before-swap" as const;
/** The worker's point after its output's .seg and .hint were renamed into place, before the main thread publishes them. */
const RENAMED = "compaction:after-output-rename" as const;
const REOPEN: OpenOptions = { durability: "sync", segmentBytes: 16 * 1024, compaction: { mode: "copy-on-write", workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
const OPTS: OpenOptions = { ...REOPEN, faults: { pauseAt: [HOLD] } };
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "z");

const rejections = guardUnhandledRejections();

afterEach(() => {
  unsafeWorkerDeathForTests.leaveOutput = false;
  setIoObserver(null);
});

/** Writes `keys` keys (batches of 40) into scope `s` from `from`, then forgets every third of them; returns key → value of the live ones. */
async function fill(s: Store, from: number, keys: number): Promise<Map<string, string>> {
  const live = new Map<string, string>();
  for (let i = from; i < from + keys; i += 40) {
    const ops = [];
    for (let j = i; j < Math.min(from + keys, i + 40); j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: valueOf(j) });
    await s.batch(ops);
  }
  const forgets = [];
  for (let i = from; i < from + keys; i++) {
    if (i % 3 === 0) forgets.push({ op: "forget" as const, scope: "s", key: `k${i}` });
    else live.set(`k${i}`, valueOf(i));
  }
  await s.batch(forgets);
  return live;
}

/** Terminates every compaction worker thread of `s` (one is held at HOLD): the death of the thread. */
async function killWorkers(s: Store): Promise<void> {
  const threads = s.compactor.workerThreadsForTests();
  expect(threads.length, "the pass runs on a worker thread").toBeGreaterThan(0);
  await within(DEADLINE_MS, Promise.all(threads.map((t) => t.terminate())), "the threads' termination");
}

/** Files of the segments directory that a reopen would delete or that name no listed segment: .tmp files, unlisted segments and hints. */
function strays(dir: string): string[] {
  const segs = path.join(dir, "segments");
  const manifest = readManifest(segs);
  const listed = new Set(manifest?.ids ?? []);
  return fs.readdirSync(segs).filter((n) => {
    if (n.endsWith(".tmp")) return true;
    const m = /^(\d{8,10})\.(seg|hint)$/.exec(n);
    return m !== null && !listed.has(Number(m[1]));
  });
}

/** Every key of `live` reads its value, asynchronously and synchronously. */
async function readsAll(s: Store, live: ReadonlyMap<string, string>, what: string): Promise<void> {
  for (const [k, v] of live) {
    expect(await within(DEADLINE_MS, s.read(k, { scope: "s" }), `${what}: read ${k}`), `${what}: ${k}`).toMatchObject({ status: "OK", value: v });
    expect(s.readSync(k, { scope: "s" }), `${what}: readSync ${k}`).toMatchObject({ status: "OK", value: v });
  }
}

/** Settles `pass`, releasing every job held at HOLD or RENAMED meanwhile. */
async function releasing<T>(s: Store, pass: Promise<T>, what: string): Promise<T> {
  const timer = setInterval(() => {
    s.faults.release(HOLD); // each later job reaches the hold too
    s.faults.release(RENAMED);
  }, 5);
  try {
    return await within(DEADLINE_MS, pass, what);
  } finally {
    clearInterval(timer);
  }
}

/**
 * After the worker's death: no stray file now, every value reads, new writes and a second pass
 * succeed, and a reopen finds no stray file and the same values (the store is closed on return).
 */
async function usableAfter(dir: string, s: Store, live: Map<string, string>, next: number): Promise<void> {
  expect(strays(dir), "the dead job's output is removed at once").toEqual([]);
  await readsAll(s, live, "after the worker's death");
  for (const [k, v] of await fill(s, next, 200)) live.set(k, v);
  const later = await releasing(s, s.compact({ mode: "copy-on-write" }), "a later pass");
  expect(later.segments.length, "the later pass compacts").toBeGreaterThan(0);
  await readsAll(s, live, "after a later pass");
  expect(strays(dir), "nothing stray after the later pass").toEqual([]);
  await within(DEADLINE_MS, s.close(), "close");
  const before = fs.readdirSync(path.join(dir, "segments")).filter((n) => /\.(seg|hint)$/.test(n)).sort();
  const r = await within(DEADLINE_MS, Store.open(dir, REOPEN), "reopen");
  try {
    expect(strays(dir), "the reopen finds nothing stray").toEqual([]);
    expect(fs.readdirSync(path.join(dir, "segments")).filter((n) => /\.seg$/.test(n)).sort(), "the reopen deletes no segment").toEqual(before.filter((n) => n.endsWith(".seg")));
    await readsAll(r, live, "after the reopen");
  } finally {
    await r.close();
  }
}

/** The segments directory's files named for segment `id` (its .seg, .seg.tmp, .hint, .hint.tmp). */
function filesOf(dir: string, id: number): string[] {
  const stem = segmentFileName(id).slice(0, -".seg".length);
  return fs.readdirSync(path.join(dir, "segments")).filter((n) => n.startsWith(`${stem}.`)).sort();
}

/**
 * Opens a store in `dir` filled with `keys` keys, runs a copy-on-write pass and kills its worker
 * at the first hold at `hold`; returns the store, the live keys, the pass's outcome and the
 * held output's id.
 */
async function killedPass(dir: string, keys: number, hold: typeof HOLD | typeof RENAMED = HOLD): Promise<{ s: Store; live: Map<string, string>; pass: Awaited<ReturnType<typeof settle>>; output: number }> {
  const s = await Store.open(dir, { ...OPTS, faults: { pauseAt: [hold] } });
  const live = await fill(s, 0, keys);
  const pass = s.compact({ mode: "copy-on-write" });
  pass.catch(() => undefined);
  await within(DEADLINE_MS, s.faults.waitFor(hold), "the output's hold");
  const unlisted = strays(dir);
  const output = Number(/^\d+/.exec(unlisted[0] ?? "")?.[0] ?? NaN);
  if (hold === HOLD) expect(unlisted.filter((n) => n.endsWith(".seg.tmp")).length, "the held output's .seg.tmp is on disk").toBe(1);
  else expect(filesOf(dir, output), "the held output's .seg and .hint have their names, unlisted").toEqual([hintFileName(output), segmentFileName(output)].sort());
  await killWorkers(s);
  return { s, live, pass: await settle(DEADLINE_MS, pass, "the pass"), output };
}

/** Expects `error` to be the typed error of a worker's death: an IoError saying to run compact() again. */
function expectWorkerDeath(error: unknown): void {
  expect(error, "a typed error, not the thread pool's plain Error").toBeInstanceOf(IoError);
  expect((error as IoError).code).toBe("IO_ERROR");
  expect((error as IoError).message).toMatch(/compaction worker thread stopped/);
  expect((error as IoError).message).toMatch(/compact\(\) again/i);
  expect((error as IoError).message, "says nothing was lost").toMatch(/Nothing was lost/);
  expect((error as IoError).message, "not the device's advice").not.toMatch(/free space|fix the device/);
}

describe("a compaction worker that dies mid copy-on-write", () => {
  it("compact() rejects with an IoError, the output is removed at once, and the store stays usable across a reopen", async () => {
    const dir = tempDir("worker-death-cow");
    const { s, live, pass } = await killedPass(dir, 600);
    expect(pass.ok, "the pass rejects").toBe(false);
    if (!pass.ok) expectWorkerDeath(pass.error);
    await usableAfter(dir, s, live, 10_000);
  });

  it("a worker that dies after its output's .seg and .hint were renamed into place: compact() rejects, both are removed at once, the store stays usable across a reopen", async () => {
    const dir = tempDir("worker-death-cow-renamed");
    const { s, live, pass, output } = await killedPass(dir, 600, RENAMED);
    expect(pass.ok, "the pass rejects").toBe(false);
    if (!pass.ok) expectWorkerDeath(pass.error);
    expect(filesOf(dir, output), "the renamed, unpublished output and its hint are removed at once").toEqual([]);
    expect(readManifest(path.join(dir, "segments"))?.ids, "no manifest lists it").not.toContain(output);
    await usableAfter(dir, s, live, 10_000);
  });

  it("in a pass of several outputs: the ones published before stay published, the ones in flight are removed", async () => {
    const dir = tempDir("worker-death-cow-many");
    const s = await Store.open(dir, OPTS);
    const live = await fill(s, 0, 8_000);
    const before = new Set(s.stats().segments.map((x) => x.id));
    const sources = new Set(s.stats().segments.filter((x) => x.sealed).map((x) => x.id));
    expect(sources.size, "more than three outputs' sources (64 each)").toBeGreaterThan(3 * 64);
    let published!: () => void;
    const firstPublished = new Promise<void>((resolve) => (published = resolve));
    setIoObserver((e) => {
      if (e.op === "unlink" && /\d{8}\.seg$/.test(e.path)) published(); // a source's unlink: an output is published (in the same turn)
    });
    inFlightSeen.max = 0;
    const pass = s.compact({ mode: "copy-on-write" });
    pass.catch(() => undefined);
    await within(DEADLINE_MS, s.faults.waitFor(HOLD), "the first output's hold");
    // Released until an output is published, not once: the two jobs in flight may reach the hold
    // in either order, and one that reaches it just after a single release would stay held while
    // the other's output waits its turn to be published (the fifty-fifth session's long campaign
    // met that once, under load). Jobs that reach the hold after the first publication stay held.
    const releasing = setInterval(() => s.faults.release(HOLD), 5);
    try {
      await within(DEADLINE_MS, firstPublished, "the first output's publication");
    } finally {
      clearInterval(releasing);
    }
    await within(DEADLINE_MS, s.faults.waitFor(HOLD), "a later output's hold");
    expect(inFlightSeen.max, "two outputs were in flight").toBeGreaterThanOrEqual(2);
    await killWorkers(s);
    const r = await settle(DEADLINE_MS, pass, "the pass");
    expect(r.ok, "the pass rejects").toBe(false);
    if (!r.ok) expectWorkerDeath(r.error);
    const now = s.stats().segments;
    expect(now.filter((x) => x.sealed && !before.has(x.id)).length, "an output published before the death stays published").toBeGreaterThan(0);
    const left = now.filter((x) => sources.has(x.id)).length;
    expect(left, "its sources are retired; the in-flight jobs' sources stay").toBeLessThan(sources.size);
    expect(left, "the in-flight jobs' sources stay").toBeGreaterThan(0);
    await usableAfter(dir, s, live, 10_000);
  });

  it("an automatic pass whose worker dies rejects nothing unhandled, removes its output, and the next automatic pass works", async () => {
    const dir = tempDir("worker-death-cow-auto");
    const s = await Store.open(dir, { ...OPTS, compaction: { mode: "copy-on-write", workers: 1, auto: true, garbageRatio: 0.2 } });
    let warned!: (message: string) => void;
    const warning = new Promise<string>((resolve) => (warned = resolve));
    const onWarning = (w: Error): void => {
      if (/auto compaction failed/.test(w.message)) warned(w.message);
    };
    process.on("warning", onWarning);
    try {
      const live = await fill(s, 0, 600);
      await within(DEADLINE_MS, s.faults.waitFor(HOLD), "the automatic pass's hold");
      const held = fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".seg.tmp"));
      expect(held.length, "the held output's .seg.tmp is on disk").toBe(1);
      const dead = (held[0] as string).slice(0, -".seg.tmp".length);
      await killWorkers(s);
      expect(await within(DEADLINE_MS, warning, "the automatic pass's warning"), "its typed error is the warning").toMatch(/IoError: .*compaction worker thread stopped/);
      // Later automatic passes may start now (a quiet-store check): they write outputs of their own
      // ids, so the check names the dead job's files, and every later hold is released.
      expect(fs.readdirSync(path.join(dir, "segments")).filter((n) => n.startsWith(dead)), "the dead job's output is removed at once").toEqual([]);
      expect(readManifest(path.join(dir, "segments"))?.ids, "the manifest does not list it").not.toContain(Number(dead));
      const timer = setInterval(() => s.faults.release(HOLD), 5);
      try {
        await readsAll(s, live, "after the automatic pass's death");
        const done = s.stats().compactions;
        let published!: () => void;
        const publication = new Promise<void>((resolve) => (published = resolve));
        setIoObserver((e) => {
          if (e.op === "unlink" && /\d{8}\.seg$/.test(e.path)) published(); // a source's unlink on this thread: a pass published an output
        });
        for (const [k, v] of await fill(s, 10_000, 600)) live.set(k, v); // more garbage: the next automatic pass
        await within(DEADLINE_MS, publication, "a later automatic pass's publication");
        await within(DEADLINE_MS, s.compactor.exclusive(async () => undefined), "the later automatic pass's end");
        expect(s.stats().compactions, "a later automatic pass compacted").toBeGreaterThan(done);
        await readsAll(s, live, "after a later automatic pass");
      } finally {
        clearInterval(timer);
      }
      expect(rejections.seen).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await releasing(s, s.close(), "close"); // a pass still running may hold a job
    }
  });

  it("twin: with the output left, the dead job's .seg.tmp stays in the directory until the next open", async () => {
    unsafeWorkerDeathForTests.leaveOutput = true;
    const dir = tempDir("worker-death-cow-twin");
    const { s } = await killedPass(dir, 600);
    expect(strays(dir).filter((n) => n.endsWith(".seg.tmp")).length, "the dead job's .seg.tmp is left").toBe(1);
    await within(DEADLINE_MS, s.close(), "close");
  });

  it("twin: with the output left, a dead job's renamed .seg and .hint stay in the directory until the next open", async () => {
    unsafeWorkerDeathForTests.leaveOutput = true;
    const dir = tempDir("worker-death-cow-renamed-twin");
    const { s, output } = await killedPass(dir, 600, RENAMED);
    expect(strays(dir), "the dead job's renamed output and hint are left").toEqual(filesOf(dir, output));
    expect(filesOf(dir, output).length).toBe(2);
    await within(DEADLINE_MS, s.close(), "close");
  });
});
