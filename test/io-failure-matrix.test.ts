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
import { Engram, IO_FAULT_POINTS, IoError, type FaultPoint, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";

guardUnhandledRejections();

type Mode = "copy-on-write" | "in-place";
const ERRNOS = ["EIO", "ENOSPC"] as const;
const DEADLINE = 20_000;
const S1 = "user:alice";

function modesFor(point: FaultPoint): Mode[] {
  if (point === "io:journal" || point === "io:rewrite") return ["in-place"];
  if (point === "io:copy") return ["copy-on-write"];
  return ["copy-on-write", "in-place"];
}

const value = (key: string, round: number): string => `${key}@${round}:${"v".repeat(600)}`;

/** Acknowledged state: key -> value (null = not readable). Keys of S1 are stored as "S1/key". */
class Model {
  readonly slots = new Map<string, string | null>();
  async check(store: Engram, when: string): Promise<void> {
    for (const [id, want] of this.slots) {
      const [scope, key] = id.startsWith(`${S1}/`) ? [S1, id.slice(S1.length + 1)] : ["global", id];
      const got = await within(DEADLINE, store.read(key, { scope, inherit: false }), `read ${id}`);
      if (want === null) expect(got, `${when}: ${id}`).toEqual({ status: "NOT_FOUND" });
      else expect(got, `${when}: ${id}`).toMatchObject({ value: want });
    }
  }
}

interface Outcome {
  rejected: number;
}

async function runCase(point: FaultPoint, errno: (typeof ERRNOS)[number], mode: Mode, workers: number): Promise<Outcome> {
  const dir = tempDir("matrix");
  const options: OpenOptions = { segmentBytes: 4096, retention: { tombstoneRetentionMs: 0 }, compaction: { mode, workers, auto: false }, faults: {} };
  const store = await Engram.open(dir, options);
  const model = new Model();
  let rejected = 0;
  /** Runs one call; a resolution is applied to the model, a rejection must be the injected IoError. */
  const call = async <R>(what: string, p: Promise<R>, onOk: (r: R) => void, onFail: () => Promise<void> = async () => undefined): Promise<void> => {
    const r = await settle(DEADLINE, p, `${point}/${errno}/${mode}: ${what}`);
    if (r.ok) {
      onOk(r.value);
      return;
    }
    rejected += 1;
    expect(r.error, `${what} rejected with an IoError`).toBeInstanceOf(IoError);
    expect((r.error as IoError).errno, what).toBe(errno);
    await onFail();
  };
  for (let i = 0; i < 6; i++) {
    await store.write(`k${i}`, value(`k${i}`, 0));
    model.slots.set(`k${i}`, value(`k${i}`, 0));
  }
  for (let i = 0; i < 3; i++) {
    await store.write(`s${i}`, value(`s${i}`, 0), { scope: S1 });
    model.slots.set(`${S1}/s${i}`, value(`s${i}`, 0));
  }
  await store.forget("k5");
  model.slots.set("k5", null);
  store.faults.failAt?.(point, errno, 1);

  for (let i = 0; i < 8; i++) {
    const k = `k${i}`;
    await call(`write ${k}`, store.write(k, value(k, 1)), () => model.slots.set(k, value(k, 1)));
  }
  for (const k of ["k1", "k3", "k6"]) await call(`forget ${k}`, store.forget(k), () => model.slots.set(k, null));
  await call("undelete k3", store.undelete("k3"), () => undefined);
  await call("gc", store.gc(), () => undefined);
  const erased = (): void => {
    for (let i = 0; i < 3; i++) model.slots.set(`${S1}/s${i}`, null);
  };
  await call("forgetScope eager", store.forgetScope(S1, { reclaim: "eager" }), erased, async () => {
    // The erasure record may be durable and applied while only its reclamation failed: ask the store.
    if ((await store.read("s0", { scope: S1, inherit: false })).status === "NOT_FOUND") erased();
  });
  for (const k of ["k8", "k9"]) await call(`write ${k}`, store.write(k, value(k, 2)), () => model.slots.set(k, value(k, 2)));
  await call("compact", store.compact(), () => undefined);
  await call("flush", store.flush(), () => undefined);

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
  const cases: Array<{ point: FaultPoint; errno: (typeof ERRNOS)[number]; mode: Mode; workers: number }> = [];
  let n = 0;
  for (const point of IO_FAULT_POINTS) for (const errno of ERRNOS) for (const mode of modesFor(point)) cases.push({ point, errno, mode, workers: n++ % 2 });
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
