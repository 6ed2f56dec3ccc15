/**
 * Every I/O fault point × {EIO, ENOSPC} × each compaction mode that reaches it, armed just before
 * a compact() with a worker — the pass the failure matrix (io-failure-matrix.test.ts) seldom
 * reaches, since its failure fires at the first call of the point in a write script. With a
 * worker a pass starts its first job before it seals the active segment (engine/compactor.ts
 * `sealDuring`), so a failure may land in the seal, its flush, a job or a publication while a job
 * runs. The property: compact() settles (resolves, or rejects with the injected IoError), every
 * acknowledged value reads back within a deadline — none waits for ever on an odd generation —
 * every segment the store lists has its file, close() resolves, and a reopen reads the same,
 * verifies clean and compacts again.
 *
 * Method: per case a fresh store of 16 KiB segments (~45 keys each, values of ~300 B), every
 * third key forgotten, and values written and forgotten in the active segment so that the pass
 * seals it; the failure is armed once, and twice at the points a pass may meet again after a
 * failure (RETRIED: `whenSealed` retries a failed seal, which one failure alone never fails).
 * Cases whose failure never fired are counted (the pass reached no call of that point) and printed. The protections this sweep
 * leans on have their own twins: test/compaction-inplace-discard.test.ts (a completed rewrite
 * published, the seal retried), test/compaction-in-flight.test.ts (outputs in flight removed).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, IO_FAULT_POINTS, IoError, type FaultPoint, type OpenOptions } from "../src/index.js";
import { storeWithEveryThirdForgotten } from "./helpers/forgotten-store.js";
import { guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

guardUnhandledRejections();

type Mode = "copy-on-write" | "in-place";
const ERRNOS = ["EIO", "ENOSPC"] as const;
const DEADLINE = 20_000;
const KEYS = 600;
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "w");

/**
 * Points a pass may meet again after a failure there (a seal retried by whenSealed, a flush, an
 * unlink retried once, the directory fsync after it): armed twice as well. At any other point the
 * first failure ends the pass, and a second one never fires.
 */
const RETRIED: ReadonlySet<FaultPoint> = new Set(["io:sync", "io:seal", "io:unlink", "io:dir-sync"]);

/** The modes whose pass can reach `point` (the journal and the rewrite are in place's; the copy's output copy-on-write's). */
function modesFor(point: FaultPoint): Mode[] {
  if (point === "io:journal" || point === "io:rewrite") return ["in-place"];
  if (point === "io:copy") return ["copy-on-write"];
  return ["copy-on-write", "in-place"];
}

/** Every key of `live` reads its value, each within the deadline. */
async function readsAll(store: Engram, live: ReadonlyMap<string, string>, what: string): Promise<void> {
  for (const [k, v] of live) expect(await within(DEADLINE, store.read(k, { scope: "s" }), `${what}: read ${k}`), `${what}: ${k}`).toMatchObject({ value: v });
}

/** Segment ids the store lists whose file is missing. */
function missingFiles(dir: string, store: Engram): number[] {
  const ids = store.stats().segments.map((s) => s.id);
  return ids.filter((id) => !fs.existsSync(path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`)));
}

/** One case: returns whether the armed failures all fired and whether compact() rejected. */
async function runCase(point: FaultPoint, errno: (typeof ERRNOS)[number], mode: Mode, times: number): Promise<{ fired: boolean; rejected: boolean }> {
  const dir = tempDir("fault-sweep");
  const opts: OpenOptions = { durability: "sync", segmentBytes: 16 * 1024, compaction: { mode, workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
  const { store, live } = await storeWithEveryThirdForgotten(dir, opts, KEYS, 40, valueOf);
  for (let i = KEYS; i < KEYS + 10; i++) await store.write(`k${i}`, valueOf(i), { scope: "s" }); // garbage in the active segment: the pass seals it
  for (let i = KEYS; i < KEYS + 10; i += 2) await store.forget(`k${i}`, { scope: "s" });
  for (let i = KEYS + 1; i < KEYS + 10; i += 2) live.set(`k${i}`, valueOf(i));
  const what = `${point}/${errno}/${mode}/${times}`;
  store.faults.failAt?.(point, errno, times);
  const r = await settle(DEADLINE, store.compact({ mode }), `${what}: compact`);
  if (!r.ok) {
    expect(r.error, `${what}: compact() rejects with an IoError`).toBeInstanceOf(IoError);
    expect((r.error as IoError).errno, what).toBe(errno);
  }
  const fired = (store.faults.failuresLeft?.() ?? 0) === 0;
  store.faults.failAt?.(point, errno, 0); // a failure that did not fire is disarmed before the checks
  await readsAll(store, live, `${what}, after the pass`);
  expect(missingFiles(dir, store), `${what}: every listed segment has its file`).toEqual([]);
  await within(DEADLINE, store.close(), `${what}: close`);
  const again = await within(DEADLINE, Engram.open(dir, opts), `${what}: reopen`);
  try {
    await readsAll(again, live, `${what}, after reopen`);
    expect((await again.verify()).problems, `${what}: verify after reopen`).toEqual([]);
    await within(DEADLINE, again.compact({ mode }), `${what}: a second pass`);
    await readsAll(again, live, `${what}, after a second pass`);
  } finally {
    await again.close();
  }
  return { fired, rejected: !r.ok };
}

describe("compaction with a worker: every I/O point × {EIO, ENOSPC} armed before the pass, once and twice", () => {
  const cases: Array<{ point: FaultPoint; errno: (typeof ERRNOS)[number]; mode: Mode; times: number }> = [];
  for (const point of IO_FAULT_POINTS) for (const errno of ERRNOS) for (const mode of modesFor(point)) for (const times of RETRIED.has(point) ? [1, 2] : [1]) cases.push({ point, errno, mode, times });
  const ran: string[] = [];
  for (const c of cases) {
    it(`${c.point} ${c.errno} ${c.mode} ×${c.times}`, async () => {
      const out = await runCase(c.point, c.errno, c.mode, c.times);
      ran.push(`${c.point}/${c.errno}/${c.mode}/×${c.times}: ${out.fired ? (out.rejected ? "rejected" : "fired, pass finished") : "not reached"}`);
    }, 60_000);
  }
  it("ran every case", () => {
    const fired = ran.filter((r) => !r.endsWith("not reached")).length;
    console.log(`compaction-fault-sweep: ${ran.length} cases, ${fired} whose failure fired\n  ${ran.join("\n  ")}`);
    expect(ran.length).toBe(cases.length);
    expect(fired, "most points are reached by a pass").toBeGreaterThan(cases.length / 2);
  });
});
