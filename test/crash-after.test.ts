/**
 * `faults.crashAfter` counts arrivals at the crash point exactly, on the engine's points and on
 * the I/O points, and is refused where it means nothing. Before it, `crashAt` killed at the first
 * arrival, so a point that the open itself meets (recovery's reads, its seal) could never stop a
 * store in the middle of its work (test/crash-io-points.test.ts's second half uses it for that).
 *
 * Method: a child process (test/helpers/crash-child.ts, "ops" mode) writes one key at a time on
 * one lane (durability "sync", no compaction, 64 MiB segments: one group commit, one fdatasync
 * and one `write:after-sync` per write, nothing in the background) until the engine kills it.
 * At `write:after-sync` with crashAfter N it must have acknowledged exactly N writes, the
 * (N+1)th sent and killed after its sync. At `io:sync` the open makes syncs of its own, a number
 * the test does not assume: the acknowledged counts for N and N + d must differ by exactly d.
 * Each directory is then reopened and checked against the model of sent and acknowledged
 * writes. The twin is the option ignored: every run would stop at the first arrival, the counts
 * equal for every N. Bad values (and crashAfter without crashAt) are INVALID_ARGUMENT with no
 * directory created.
 */
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError, type FaultPoint, type OpenOptions } from "../src/index.js";
import type { OpsConfig } from "./helpers/crash-child.js";
import { CrashModel } from "./helpers/crash-model.js";
import { runSeed } from "./helpers/crash-proc.js";
import { ChildPool, reopenAndCheck, runRound } from "./helpers/crash-rounds.js";
import { tempDir } from "./helpers/tmp.js";

const SCOPES = ["global"];
const KEYS = Array.from({ length: 8 }, (_, i) => `k${i}`);
const OPEN: OpenOptions = { durability: "sync", compaction: { auto: false } };

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("faults.crashAfter", () => {
  const seed = runSeed();
  const pool = new ChildPool();
  afterAll(() => pool.close());

  /** Runs one child to its crash at `point` after `crashAfter` arrivals; returns the writes it acknowledged (checked after a reopen). */
  async function ackedBeforeCrash(point: FaultPoint, crashAfter: number): Promise<number> {
    const dir = tempDir(`crash-after-${point.replace(":", "-")}-${crashAfter}`);
    dirs.push(dir);
    const model = new CrashModel(SCOPES, KEYS);
    const label = `seed ${seed} ${point} after ${crashAfter} dir ${dir}`;
    const config: OpsConfig = {
      mode: "ops",
      dir,
      open: OPEN,
      seed,
      lanes: 1,
      scopes: SCOPES,
      keys: KEYS,
      eraseScopes: [],
      mix: { write: 100, forget: 0, batch: 0, erase: 0 },
      padMax: 64,
      crashAt: point,
      crashAfter,
      maxUnits: 2_000,
    };
    const res = await runRound(pool, model, config, null, label);
    expect(res.killedByParent, `${label}: the parent had to kill it`).toBe(false);
    expect(res.exit.signal, label).toBe("SIGKILL");
    const report = await reopenAndCheck(dir, OPEN, model, `${label} (reopen)`);
    expect(report.acked, label).toBe(res.acksAfterArmed);
    return res.acksAfterArmed;
  }

  it("at an engine point, kills at arrival N + 1: exactly N writes acknowledged", { timeout: 60_000 }, async () => {
    for (const n of [0, 1, 7, 23]) expect(await ackedBeforeCrash("write:after-sync", n), `crashAfter ${n}`).toBe(n);
  });

  it("at an I/O point, each arrival more lets exactly one write more through", { timeout: 60_000 }, async () => {
    const base = await ackedBeforeCrash("io:sync", 8);
    for (const d of [1, 5, 16]) expect(await ackedBeforeCrash("io:sync", 8 + d), `crashAfter ${8 + d} against 8`).toBe(base + d);
  });

  const bad: Array<[string, Record<string, unknown>]> = [
    ["without crashAt", { crashAfter: 3 }],
    ["negative", { crashAt: "write:after-sync", crashAfter: -1 }],
    ["fractional", { crashAt: "write:after-sync", crashAfter: 1.5 }],
    ["a string", { crashAt: "write:after-sync", crashAfter: "3" }],
    ["above 1,000,000", { crashAt: "io:sync", crashAfter: 1_000_001 }],
  ];
  for (const [what, faults] of bad) {
    it(`refuses crashAfter ${what} with INVALID_ARGUMENT and creates nothing`, async () => {
      const dir = path.join(tempDir("crash-after-bad"), "store");
      dirs.push(path.dirname(dir));
      const err = await Engram.open(dir, { faults } as OpenOptions).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toContain("crashAfter");
      expect(existsSync(dir)).toBe(false);
    });
  }
});
