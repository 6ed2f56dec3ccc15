/**
 * The failure matrix: every I/O fault point × {EIO, ENOSPC} × each compaction mode that reaches
 * it (docs/ENGINE.md "Failure protocol"). Each case opens a fresh store with tiny segments, lays
 * down acknowledged state, arms one injected failure of the real system call at that point
 * (`store.faults.failAt`, shared with the compaction worker), then runs a fixed script that
 * reaches every point — writes across rotations, forgets, an undelete, gc, an eager forgetScope,
 * more writes, flush. Every call settles within a deadline; a rejected call must be an IoError
 * with the injected errno, and a resolved one goes into a model of acknowledged state. Then:
 * the injected failure really fired, reads return the model, close() resolves, and a reopened
 * store (and `verify`) agrees with the model — nothing acknowledged lost, nothing rejected or
 * forgotten back. The test file fails on any unhandled rejection; the host process survives by
 * construction. The count of cases run is printed.
 */
import { describe, expect, it } from "vitest";
import { Engram, IO_FAULT_POINTS, type FaultPoint, type OpenOptions } from "../src/index.js";
import { DEADLINE, ERRNOS, matrixCases, runFaultScript, type Errno, type Mode } from "./helpers/fault-script.js";
import { tempDir } from "./helpers/tmp.js";
import { guardUnhandledRejections, within } from "./helpers/io-faults.js";

guardUnhandledRejections();

interface Outcome {
  rejected: number;
}

async function runCase(point: FaultPoint, errno: Errno, mode: Mode, workers: number): Promise<Outcome> {
  const dir = tempDir("matrix");
  const options: OpenOptions = { segmentBytes: 4096, retention: { tombstoneRetentionMs: 0 }, compaction: { mode, workers, auto: false }, faults: {} };
  const store = await Engram.open(dir, options);
  const { model, rejected } = await runFaultScript(store, () => store.faults.failAt?.(point, errno, 1), errno, `${point}/${errno}/${mode}`);
  expect(store.faults.failuresLeft?.() ?? 0, `the failure at ${point} fired`).toBe(0);
  await model.check(store, "before close");
  await within(DEADLINE, store.close(), "close");
  const again = await within(DEADLINE, Engram.open(dir, { ...options, faults: undefined }), "reopen");
  try {
    await model.check(again, "after reopen");
    expect((await again.verify()).problems).toEqual([]);
    await within(DEADLINE, again.write("after", "works"), "write after reopen");
  } finally {
    await again.close();
  }
  return { rejected };
}

describe("every I/O point × {EIO, ENOSPC}: IoError, no hang, reads work, close works, reopen intact", () => {
  const cases = matrixCases();
  const ran: string[] = [];
  for (const c of cases) {
    it(`${c.point} ${c.errno} ${c.mode} (workers ${c.workers})`, async () => {
      const out = await runCase(c.point, c.errno, c.mode, c.workers);
      ran.push(`${c.point}/${c.errno}/${c.mode}: ${out.rejected} call(s) rejected`);
    });
  }
  it("ran every case", () => {
    console.log(`io-failure-matrix: ${ran.length} cases (${IO_FAULT_POINTS.length} points × ${ERRNOS.length} errnos × modes reaching each)\n  ${ran.join("\n  ")}`);
    expect(ran.length).toBe(cases.length);
  });
});
