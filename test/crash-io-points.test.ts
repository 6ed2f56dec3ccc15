/**
 * SIGKILL at every I/O fault point (`faults.crashAt` naming an `io:` point: segments/io.ts kills
 * the process, from whichever thread makes the call, right before the system call is made). Until
 * the forty-seventh session such a `crashAt` opened fine and never fired, so nothing could stop a
 * store exactly at a manifest rename, a hint's write, a journal's fdatasync or a read.
 *
 * Method: per I/O point and per compaction mode whose pass can reach it, a child process
 * (test/helpers/crash-child.ts, "ops" mode) works on a fresh directory of 8 KiB segments — random
 * writes, forgets, batches and scope erasures in two lanes, with compact() back to back on a
 * worker beside them — for a clean preamble of acknowledged units, closes, reopens with the crash
 * point armed and goes on until the engine kills it. The point may be met by the armed open itself
 * (recovery's reads and seals, the manifest) or by the work after it; either way the engine, not
 * the parent, must be what killed the child. The parent then reopens the directory and checks it
 * against the model of sent and acknowledged operations (test/helpers/crash-model.ts: every
 * acknowledged write reads back with its version, every acknowledged forget stays forgotten,
 * in-flight units are all-or-none, verify is clean), and a second open checks it again.
 * The twin is the kill itself: a point that never crashed would leave the child working until it
 * finished its units, which runRound reports as a failure ("crash point never reached").
 */
import * as fs from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { IO_FAULT_POINTS, type FaultPoint, type OpenOptions } from "../src/index.js";
import type { OpsConfig } from "./helpers/crash-child.js";
import { CrashModel } from "./helpers/crash-model.js";
import { between, rng, runSeed } from "./helpers/crash-proc.js";
import { ChildPool, WRITE_WORKLOAD, reopenAndCheck, runRound, type RoundResult } from "./helpers/crash-rounds.js";
import { tempDir } from "./helpers/tmp.js";

type Mode = "copy-on-write" | "in-place";
const { scopes: SCOPES, keys: KEYS } = WRITE_WORKLOAD;

/** The modes whose pass can reach `point` (the journal and the rewrite are in place's; the copy's output copy-on-write's). */
function modesFor(point: FaultPoint): Mode[] {
  if (point === "io:journal" || point === "io:rewrite") return ["in-place"];
  if (point === "io:copy") return ["copy-on-write"];
  return ["copy-on-write", "in-place"];
}

/** The I/O points a reopen meets before it answers (recovery's reads and its seal of the old active segment). */
const OPEN_POINTS: readonly FaultPoint[] = ["io:seal", "io:read"];
/** The least `crashAfter` of the mid-work cases: more arrivals than an open of these stores makes at OPEN_POINTS. */
const CRASH_AFTER_MIN = Number(process.env["ENGRAM_CRASH_AFTER_MIN"] ?? 16);

const dirs: string[] = [];
let keepDirs = false;
afterAll(() => {
  if (!keepDirs) for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * One case: a child on a fresh directory crashes at `point` (after `crashAfter` arrivals when
 * given) and must be killed by the engine, not the parent; the directory is then reopened twice
 * and checked against the model. Returns the round's result (where it crashed).
 */
async function crashCase(pool: ChildPool, seed: number, point: FaultPoint, mode: Mode, crashAfter: number | undefined): Promise<RoundResult> {
  const r = rng(seed);
  const dir = tempDir(`crash-io-${point.replace(":", "-")}`);
  dirs.push(dir);
  const open: OpenOptions = { durability: "sync", segmentBytes: 8192, compaction: { mode, workers: 1, auto: false } };
  const model = new CrashModel(SCOPES, KEYS);
  const label = `seed ${seed} ${point}${crashAfter === undefined ? "" : ` after ${crashAfter}`} ${mode} dir ${dir}`;
  const config: OpsConfig = { mode: "ops", dir, open, seed, lanes: 2, ...WRITE_WORKLOAD, compactLoop: true, crashAt: point, preamble: between(r, 20, 60) };
  if (crashAfter !== undefined) config.crashAfter = crashAfter;
  try {
    const res = await runRound(pool, model, config, null, label);
    expect(res.killedByParent, `${label}: the parent had to kill it`).toBe(false);
    expect(res.exit.signal, label).toBe("SIGKILL");
    if (crashAfter !== undefined) expect(res.armed, `${label}: crashed in the armed open, not in the work`).toBe(true);
    const report = await reopenAndCheck(dir, open, model, `${label} (reopen)`);
    expect(report.acked, `${label}: the preamble's units were acknowledged`).toBeGreaterThanOrEqual(config.preamble ?? 0);
    await reopenAndCheck(dir, open, model, `${label} (second reopen)`);
    return res;
  } catch (err) {
    keepDirs = true;
    throw err;
  }
}

describe("crash: SIGKILL at every I/O point loses nothing acknowledged", () => {
  const seed = runSeed();
  const pool = new ChildPool();
  afterAll(() => pool.close());
  const seen: string[] = [];
  const cases = IO_FAULT_POINTS.flatMap((point) => modesFor(point).map((mode) => ({ point, mode })));
  for (const [n, { point, mode }] of cases.entries()) {
    it(`${point}, ${mode} compaction`, { timeout: 120_000 }, async () => {
      const res = await crashCase(pool, (seed + n * 7919) >>> 0, point, mode, undefined);
      seen.push(`${point}/${mode}: ${res.armed ? `in the work (${res.sendsAfterArmed} units sent, ${res.acksAfterArmed} acknowledged after arming${res.inCompaction ? ", in a compact()" : ""})` : "in the armed open"}`);
    });
  }
  it("crashed at every case", () => {
    console.info(`[crash-io-points] seed ${seed}: ${seen.length} crashes\n  ${seen.join("\n  ")}`);
    expect(seen.length).toBe(cases.length);
  });
});

/**
 * The points the armed open itself meets (recovery's reads and its seal) crash there with
 * crashAfter 0; with `faults.crashAfter` past the open's arrivals they crash in the work instead:
 * a compaction's source read or read-back, a rotation's seal. The twin is the option ignored: the
 * open would crash, which `res.armed` false reports.
 */
describe("crash: SIGKILL at an I/O point the open meets, after `crashAfter` arrivals, in the work", () => {
  const seed = runSeed();
  const pool = new ChildPool();
  afterAll(() => pool.close());
  const cases = OPEN_POINTS.flatMap((point) => modesFor(point).map((mode) => ({ point, mode })));
  for (const [n, { point, mode }] of cases.entries()) {
    it(`${point}, ${mode} compaction`, { timeout: 120_000 }, async () => {
      const caseSeed = (seed + n * 104_729) >>> 0;
      await crashCase(pool, caseSeed, point, mode, between(rng(caseSeed ^ 0x5bd1e995), CRASH_AFTER_MIN, CRASH_AFTER_MIN * 4));
    });
  }
});
