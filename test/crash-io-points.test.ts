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
/** The most arrivals in the work that the mid-work cases let pass before the kill (each draws one in [0, N]). */
const CRASH_AFTER_WORK_MAX = Number(process.env["ENGRAM_CRASH_AFTER_WORK_MAX"] ?? 48);

const dirs: string[] = [];
let keepDirs = false;
afterAll(() => {
  if (!keepDirs) for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * One case: a child on a fresh directory crashes at `point` (with `crashAfterWork` given, after
 * that many arrivals in the work after the armed open, whose own arrivals all pass) and must be
 * killed by the engine, not the parent; the directory is then reopened twice and checked against
 * the model. Returns the round's result (where it crashed).
 */
async function crashCase(pool: ChildPool, seed: number, point: FaultPoint, mode: Mode, crashAfterWork: number | undefined): Promise<RoundResult> {
  const r = rng(seed);
  const dir = tempDir(`crash-io-${point.replace(":", "-")}`);
  dirs.push(dir);
  const open: OpenOptions = { durability: "sync", segmentBytes: 8192, compaction: { mode, workers: 1, auto: false } };
  const model = new CrashModel(SCOPES, KEYS);
  const label = `seed ${seed} ${point}${crashAfterWork === undefined ? "" : ` after ${crashAfterWork} in the work`} ${mode} dir ${dir}`;
  const config: OpsConfig = { mode: "ops", dir, open, seed, lanes: 2, ...WRITE_WORKLOAD, compactLoop: true, crashAt: point, preamble: between(r, 20, 60) };
  if (crashAfterWork !== undefined) config.crashAfterWork = crashAfterWork;
  try {
    const res = await runRound(pool, model, config, null, label);
    expect(res.killedByParent, `${label}: the parent had to kill it`).toBe(false);
    expect(res.exit.signal, label).toBe("SIGKILL");
    if (crashAfterWork !== undefined) {
      expect(res.armed, `${label}: crashed in the armed open, not in the work`).toBe(true);
      expect(res.openArrivals, `${label}: the child reported the open's arrivals`).not.toBeNull();
    }
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
 * crashAfter 0; with the open armed with `faults.crashAfter` past any open's arrivals (the
 * child's `crashAfterWork`: CRASH_AFTER_MAX, then the passes set to a draw in
 * [0, CRASH_AFTER_WORK_MAX] once the open answered) they crash in the work instead: a
 * compaction's source read or read-back, a rotation's seal. Until the fifty-seventh session the
 * cases drew crashAfter in [16, 64] for the open and its work together, and a clean-clone CI run
 * met an io:read open of 32 arrivals (seed 215768350): the preamble's last record crossed the
 * 8 KiB segment's end, so the active file grew by a sparse 8 MiB step (segments/writer.ts
 * PREALLOCATE_STEP_BYTES), and recovery's zero check of the hinted tail reads it in 256 KiB
 * chunks; most opens make 1. The twin is the option ignored: every open of these stores reads
 * (openArrivals ≥ 1 at io:read), so that open would crash, which `res.armed` false reports.
 */
describe("crash: SIGKILL at an I/O point the open meets, after `crashAfter` arrivals, in the work", () => {
  const seed = runSeed();
  const pool = new ChildPool();
  afterAll(() => pool.close());
  const opened: string[] = [];
  afterAll(() => console.info(`[crash-io-points] seed ${seed}, arrivals the armed opens made: ${opened.join("; ")}`));
  const cases = OPEN_POINTS.flatMap((point) => modesFor(point).map((mode) => ({ point, mode })));
  for (const [n, { point, mode }] of cases.entries()) {
    it(`${point}, ${mode} compaction`, { timeout: 120_000 }, async () => {
      const caseSeed = (seed + n * 104_729) >>> 0;
      const res = await crashCase(pool, caseSeed, point, mode, between(rng(caseSeed ^ 0x5bd1e995), 0, CRASH_AFTER_WORK_MAX));
      if (point === "io:read") expect(res.openArrivals, `seed ${caseSeed}: the open read through io:read`).toBeGreaterThanOrEqual(1);
      opened.push(`${point}/${mode}: the open made ${res.openArrivals} arrivals`);
    });
  }
});
