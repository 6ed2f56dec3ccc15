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
import { ChildPool, WRITE_WORKLOAD, reopenAndCheck, runRound } from "./helpers/crash-rounds.js";
import { tempDir } from "./helpers/tmp.js";

type Mode = "copy-on-write" | "in-place";
const { scopes: SCOPES, keys: KEYS } = WRITE_WORKLOAD;

/** The modes whose pass can reach `point` (the journal and the rewrite are in place's; the copy's output copy-on-write's). */
function modesFor(point: FaultPoint): Mode[] {
  if (point === "io:journal" || point === "io:rewrite") return ["in-place"];
  if (point === "io:copy") return ["copy-on-write"];
  return ["copy-on-write", "in-place"];
}

const dirs: string[] = [];
let keepDirs = false;
afterAll(() => {
  if (!keepDirs) for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe("crash: SIGKILL at every I/O point loses nothing acknowledged", () => {
  const seed = runSeed();
  const pool = new ChildPool();
  afterAll(() => pool.close());
  const seen: string[] = [];
  const cases = IO_FAULT_POINTS.flatMap((point) => modesFor(point).map((mode) => ({ point, mode })));
  for (const [n, { point, mode }] of cases.entries()) {
    it(`${point}, ${mode} compaction`, { timeout: 120_000 }, async () => {
      const r = rng((seed + n * 7919) >>> 0);
      const dir = tempDir(`crash-io-${point.replace(":", "-")}`);
      dirs.push(dir);
      const open: OpenOptions = { durability: "sync", segmentBytes: 8192, compaction: { mode, workers: 1, auto: false } };
      const model = new CrashModel(SCOPES, KEYS);
      const label = `seed ${seed} ${point} ${mode} dir ${dir}`;
      const config: OpsConfig = {
        mode: "ops",
        dir,
        open,
        seed: (seed + n * 7919) >>> 0,
        lanes: 2,
        ...WRITE_WORKLOAD,
        compactLoop: true,
        crashAt: point,
        preamble: between(r, 20, 60),
      };
      try {
        const res = await runRound(pool, model, config, null, label);
        expect(res.killedByParent, `${label}: the parent had to kill it`).toBe(false);
        expect(res.exit.signal, label).toBe("SIGKILL");
        seen.push(`${point}/${mode}: ${res.armed ? `in the work (${res.sendsAfterArmed} units sent, ${res.acksAfterArmed} acknowledged after arming${res.inCompaction ? ", in a compact()" : ""})` : "in the armed open"}`);
        const report = await reopenAndCheck(dir, open, model, `${label} (reopen)`);
        expect(report.acked, `${label}: the preamble's units were acknowledged`).toBeGreaterThanOrEqual(config.preamble ?? 0);
        await reopenAndCheck(dir, open, model, `${label} (second reopen)`);
      } catch (err) {
        keepDirs = true;
        throw err;
      }
    });
  }
  it("crashed at every case", () => {
    console.info(`[crash-io-points] seed ${seed}: ${seen.length} crashes\n  ${seen.join("\n  ")}`);
    expect(seen.length).toBe(cases.length);
  });
});
