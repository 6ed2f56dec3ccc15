/**
 * The failure matrix's script (test/io-failure-matrix.test.ts, test/share-fault-matrix.test.ts):
 * acknowledged state laid down, one injected failure armed, then a fixed script of calls that
 * reaches every I/O point — writes across rotations, forgets, an undelete, gc, an eager
 * forgetScope, more writes, compact and flush. Every call settles within a deadline; a rejected
 * one must be an IoError with the injected errno, a resolved one goes into a model of
 * acknowledged state, which `Model.check` compares with what a store reads.
 */
import { expect } from "vitest";
import { IO_FAULT_POINTS, IoError, type Engram, type FaultPoint } from "../../src/index.js";
import { settle, within } from "./io-faults.js";

export const DEADLINE = 20_000;

export type Mode = "copy-on-write" | "in-place";
export const ERRNOS = ["EIO", "ENOSPC"] as const;
export type Errno = (typeof ERRNOS)[number];

/** The compaction modes whose script can reach `point` (the journal and the rewrite are in place's, the copy copy-on-write's). */
export function modesFor(point: FaultPoint): Mode[] {
  if (point === "io:journal" || point === "io:rewrite") return ["in-place"];
  if (point === "io:copy") return ["copy-on-write"];
  return ["copy-on-write", "in-place"];
}

/** The matrix's cases: every I/O point × errno × mode reaching it, workers alternating between 0 and 1. */
export function matrixCases(): Array<{ point: FaultPoint; errno: Errno; mode: Mode; workers: number }> {
  const cases: Array<{ point: FaultPoint; errno: Errno; mode: Mode; workers: number }> = [];
  for (const point of IO_FAULT_POINTS) for (const errno of ERRNOS) for (const mode of modesFor(point)) cases.push({ point, errno, mode, workers: cases.length % 2 });
  return cases;
}
const S1 = "user:alice";

const value = (key: string, round: number): string => `${key}@${round}:${"v".repeat(600)}`;

/** Acknowledged state: key -> value (null = not readable). Keys of S1 are stored as "S1/key". */
export class Model {
  readonly slots = new Map<string, string | null>();

  /** Every key of the model reads as the model says, through `store`, each within the deadline. */
  async check(store: Engram, when: string): Promise<void> {
    for (const [id, want] of this.slots) {
      const [scope, key] = id.startsWith(`${S1}/`) ? [S1, id.slice(S1.length + 1)] : ["global", id];
      const got = await within(DEADLINE, store.read(key, { scope, inherit: false }), `read ${id}`);
      if (want === null) expect(got, `${when}: ${id}`).toEqual({ status: "NOT_FOUND" });
      else expect(got, `${when}: ${id}`).toMatchObject({ value: want });
    }
  }
}

/**
 * Runs the script on `store` (an owner, or a client of a shared one), calling `arm()` once the
 * acknowledged state is laid down; `what` names the case in messages. Returns the model and the
 * count of calls rejected.
 */
export async function runFaultScript(store: Engram, arm: () => void, errno: string, what: string): Promise<{ model: Model; rejected: number }> {
  const model = new Model();
  let rejected = 0;
  /** Runs one call; a resolution is applied to the model, a rejection must be the injected IoError. */
  const call = async <R>(name: string, p: Promise<R>, onOk: (r: R) => void, onFail: () => Promise<void> = async () => undefined): Promise<void> => {
    const r = await settle(DEADLINE, p, `${what}: ${name}`);
    if (r.ok) {
      onOk(r.value);
      return;
    }
    rejected += 1;
    expect(r.error, `${name} rejected with an IoError`).toBeInstanceOf(IoError);
    expect((r.error as IoError).errno, name).toBe(errno);
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
  arm();

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
  return { model, rejected };
}
