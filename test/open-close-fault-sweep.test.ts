/**
 * Every I/O fault point × {EIO, ENOSPC}, armed once and twice, at the two ends of a store's life
 * that the other sweeps do not arm: just before close() (its final sync, sync mark, the active
 * segment's prefix hint) and at open (`faults.failAt`: recovery's seal of the unsealed tail, the
 * hints written for segments that had none, the manifest, a new active segment). The failure
 * matrix (io-failure-matrix.test.ts) arms a point before a write script, the compaction sweep
 * (compaction-fault-sweep.test.ts) before a pass; neither reaches these calls.
 *
 * The properties. close() settles within the deadline — resolves, or rejects with the injected
 * IoError — and leaves no descriptor of the store open and its lock released. open() settles
 * likewise; one that rejects leaves no descriptor open and the lock free, so that the next open
 * (faults off) succeeds. Whatever failed, a later open reads every acknowledged value, every
 * forgotten key stays absent, verify finds no problem, and the store takes a write and a
 * compaction and closes clean. Cases whose failure never fired are counted and printed. A
 * `none`-mode close is swept twice: as it runs here (no sync: only its boot-stamped hint is
 * written, so only io:hint fires) and on a machine without a boot id (it syncs and marks).
 *
 * Method: per case a fresh store of 16 KiB segments (~45 keys of ~300 B each, durability "sync",
 * so every write is acknowledged durable), every third key forgotten, and a few writes left in the
 * active segment. For the open cases the store is closed first, then left in one of two states:
 * "hints dropped" (the hint files of every other sealed segment deleted, so that the open scans
 * those and writes their hints again) or "leftovers" (the MANIFEST deleted, so that the open
 * writes it again, and a stray `.tmp` file, which the open unlinks).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, IO_FAULT_POINTS, IoError, type FaultPoint, type OpenOptions } from "../src/index.js";
import { storeWithEveryThirdForgotten } from "./helpers/forgotten-store.js";
import { ERRNOS, type Errno } from "./helpers/fault-script.js";
import { fdCount, guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";
import { simulateBootForTests } from "../segments/boot-id.js";

guardUnhandledRejections();

const DEADLINE = 20_000;
const KEYS = 300;
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "w");
type Durability = "sync" | "batch" | "none";
const OPTS: OpenOptions = { durability: "sync", segmentBytes: 16 * 1024, compaction: { workers: 0, auto: false } };

/** A store's content: live key → value, and the keys forgotten. */
interface Content {
  live: Map<string, string>;
  forgotten: string[];
}

/** Writes the case's store (left open, in `durability`); the active segment holds a few acknowledged writes. */
async function writeStore(dir: string, durability: Durability = "sync"): Promise<{ store: Engram; content: Content }> {
  const { store, live } = await storeWithEveryThirdForgotten(dir, { ...OPTS, durability }, KEYS, 30, valueOf);
  for (let i = KEYS; i < KEYS + 6; i++) {
    await store.write(`k${i}`, valueOf(i), { scope: "s" });
    live.set(`k${i}`, valueOf(i));
  }
  const forgotten = Array.from({ length: KEYS }, (_, i) => `k${i}`).filter((k) => !live.has(k));
  return { store, content: { live, forgotten } };
}

/** Deletes the hint files of every other sealed segment: the next open scans those and writes their hints. */
function dropHalfTheHints(dir: string): number {
  const hints = fs.readdirSync(path.join(dir, "segments")).filter((f) => f.endsWith(".hint")).sort();
  const dropped = hints.filter((_, i) => i % 2 === 0);
  for (const f of dropped) fs.rmSync(path.join(dir, "segments", f));
  return dropped.length;
}

/** The states an open case starts from (see the header). */
type Before = "hints dropped" | "leftovers";

/** Leaves the closed store in state `before`. */
function prepare(dir: string, before: Before): void {
  if (before === "hints dropped") {
    expect(dropHalfTheHints(dir), "some hints dropped").toBeGreaterThan(0);
    return;
  }
  fs.rmSync(path.join(dir, "segments", "MANIFEST"));
  fs.writeFileSync(path.join(dir, "segments", "00000077.hint.tmp"), "a hint never renamed");
}

/** Expects a rejection to be the injected IoError. */
function expectInjected(error: unknown, errno: Errno, what: string): void {
  expect(error, `${what}: rejects with an IoError`).toBeInstanceOf(IoError);
  expect((error as IoError).errno, what).toBe(errno);
}

/** Every live key reads its value and every forgotten key is absent, each read within the deadline. */
async function readsAll(store: Engram, content: Content, what: string): Promise<void> {
  for (const [k, v] of content.live) expect(await within(DEADLINE, store.read(k, { scope: "s" }), `${what}: read ${k}`), `${what}: ${k}`).toMatchObject({ value: v });
  for (const k of content.forgotten) expect((await within(DEADLINE, store.read(k, { scope: "s" }), `${what}: read ${k}`)).status, `${what}: forgotten ${k} stays absent`).toBe("NOT_FOUND");
}

/** Opens without faults and checks everything: reads, verify, a write, a compaction, a clean close. */
async function checkReopen(dir: string, content: Content, what: string): Promise<void> {
  const store = await within(DEADLINE, Engram.open(dir, OPTS), `${what}: reopen`);
  try {
    await readsAll(store, content, `${what}, reopened`);
    expect((await store.verify()).problems, `${what}: verify`).toEqual([]);
    await store.write("after", "x", { scope: "s" });
    await within(DEADLINE, store.compact(), `${what}: compact after reopen`);
    await readsAll(store, content, `${what}, compacted`);
    expect(await store.read("after", { scope: "s" })).toMatchObject({ value: "x" });
  } finally {
    await within(DEADLINE, store.close(), `${what}: close after reopen`);
  }
}

/**
 * Armed before close(): close settles, releases its descriptors and lock; a reopen has everything
 * (in durability "batch" and "none" too: the process did not die, so what close failed to sync is
 * still in the page cache — what this checks is that no failure path loses or resurrects a key).
 */
async function closeCase(point: FaultPoint, errno: Errno, times: number, durability: Durability): Promise<{ fired: boolean; rejected: boolean }> {
  const dir = tempDir("close-sweep");
  const what = `close (${durability}) ${point}/${errno}/×${times}`;
  const fdsBefore = fdCount();
  const { store, content } = await writeStore(dir, durability);
  store.faults.failAt?.(point, errno, times);
  const r = await settle(DEADLINE, store.close(), `${what}: close`);
  if (!r.ok) expectInjected(r.error, errno, what);
  // The fault table is unregistered by close: a failure that did not fire cannot fire later.
  const fired = (store.faults.failuresLeft?.() ?? 0) === 0;
  expect(fdCount(), `${what}: no descriptor of the store left open`).toBeLessThanOrEqual(fdsBefore);
  await checkReopen(dir, content, what);
  return { fired, rejected: !r.ok };
}

/** `run` on a machine that tells no boot id: a `none`-mode close then syncs as a `batch` one does. */
async function withoutBootId<T>(run: () => Promise<T>): Promise<T> {
  simulateBootForTests(null);
  try {
    return await run();
  } finally {
    simulateBootForTests(undefined);
  }
}

/** Armed at open: open settles; one that fails leaves nothing open and the next open has everything. */
async function openCase(point: FaultPoint, errno: Errno, times: number, before: Before): Promise<{ fired: boolean; rejected: boolean }> {
  const dir = tempDir("open-sweep");
  const what = `open (${before}) ${point}/${errno}/×${times}`;
  const { store, content } = await writeStore(dir);
  await store.close();
  prepare(dir, before);
  const fdsBefore = fdCount();
  const r = await settle(DEADLINE, Engram.open(dir, { ...OPTS, faults: { failAt: { point, errno, times } } }), `${what}: open`);
  let fired = true;
  if (r.ok) {
    const opened = r.value;
    fired = (opened.faults.failuresLeft?.() ?? 0) === 0;
    opened.faults.failAt?.(point, errno, 0);
    await readsAll(opened, content, `${what}, opened`);
    await within(DEADLINE, opened.close(), `${what}: close`);
  } else {
    expectInjected(r.error, errno, what);
    expect(fdCount(), `${what}: a failed open leaves no descriptor open`).toBeLessThanOrEqual(fdsBefore);
  }
  await checkReopen(dir, content, what);
  return { fired, rejected: !r.ok };
}

const WHEN = ["close: sync", "close: batch", "close: none", "close: none, no boot id", "open: hints dropped", "open: leftovers"] as const;

/**
 * Fewest cases whose failure fires, per WHEN. A `none`-mode close syncs nothing where the machine
 * tells its boot id: it only writes its stamped hint (io:hint: 2 errnos × once and twice).
 */
const FIRED_MIN: Record<(typeof WHEN)[number], number> = { "close: sync": 5, "close: batch": 5, "close: none": 4, "close: none, no boot id": 5, "open: hints dropped": 5, "open: leftovers": 5 };

/** Runs the case of `when` (a WHEN). */
function runCase(when: (typeof WHEN)[number], point: FaultPoint, errno: Errno, times: number): Promise<{ fired: boolean; rejected: boolean }> {
  switch (when) {
    case "close: sync":
      return closeCase(point, errno, times, "sync");
    case "close: batch":
      return closeCase(point, errno, times, "batch");
    case "close: none":
      return closeCase(point, errno, times, "none");
    case "close: none, no boot id":
      return withoutBootId(() => closeCase(point, errno, times, "none"));
    case "open: hints dropped":
      return openCase(point, errno, times, "hints dropped");
    case "open: leftovers":
      return openCase(point, errno, times, "leftovers");
  }
}

for (const when of WHEN) {
  describe(`every I/O point × {EIO, ENOSPC} armed at ${when}, once and twice`, () => {
    const ran: string[] = [];
    const cases = IO_FAULT_POINTS.flatMap((point) => ERRNOS.flatMap((errno) => [1, 2].map((times) => ({ point, errno, times }))));
    for (const c of cases) {
      it(`${c.point} ${c.errno} ×${c.times}`, async () => {
        const out = await runCase(when, c.point, c.errno, c.times);
        ran.push(`${c.point}/${c.errno}/×${c.times}: ${out.fired ? (out.rejected ? "rejected" : "fired, resolved") : "not reached"}`);
      }, 60_000);
    }
    it("ran every case", () => {
      const fired = ran.filter((x) => !x.endsWith("not reached")).length;
      console.log(`open-close-fault-sweep (${when}): ${ran.length} cases, ${fired} whose failure fired\n  ${ran.join("\n  ")}`);
      expect(ran.length).toBe(cases.length);
      expect(fired, `some points are reached at ${when}`).toBeGreaterThanOrEqual(FIRED_MIN[when]);
    });
  });
}
