/**
 * One "round" of a crash test: hand a directory to a (pre-spawned) child, feed its messages to the
 * model, SIGKILL it when the kill trigger fires (or let the engine's crashAt kill it), and wait
 * until it is dead and its stdout drained. Then reopen the directory in this process and check it.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { Engram } from "../../src/index.js";
import type { OpenOptions } from "../../src/index.js";
import type { ChildConfig } from "./crash-child.js";
import { CrashModel, leftovers, type Msg, type SettleReport } from "./crash-model.js";
import { CrashChild, type Exit } from "./crash-proc.js";

/**
 * The write path's workload of the crash tests (crash-writes, crash-io-points): four scopes with
 * inheritance and twelve keys, random writes, forgets, atomic batches of 2-5 ops and the odd scope
 * erasure, values padded up to 600 bytes, at most 20,000 units per child. A child config spreads
 * it and adds its own directory, options, seed, lanes and crash point.
 */
export const WRITE_WORKLOAD = {
  scopes: ["global", "user:a", "user:a/session:1", "user:b"],
  keys: Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, "0")}`),
  eraseScopes: ["user:a/session:1", "user:b", "user:a"],
  mix: { write: 55, forget: 18, batch: 24, erase: 3 },
  padMax: 600,
  maxUnits: 20_000,
};

/** Keeps one child loaded ahead of need, so that start-up overlaps the previous round. */
export class ChildPool {
  private ahead: CrashChild | null;
  private readonly prefetch: boolean;

  /** `prefetch`: keep a spare child loading (for runs of many rounds). */
  constructor(prefetch = true) {
    this.prefetch = prefetch;
    this.ahead = prefetch ? new CrashChild() : null;
  }

  /** A loaded child; with prefetch, another starts loading at once. */
  async take(): Promise<CrashChild> {
    const child = this.ahead ?? new CrashChild();
    this.ahead = this.prefetch ? new CrashChild() : null;
    await child.standby;
    return child;
  }

  /** Kills the spare child (ours) and waits for it. */
  async close(): Promise<void> {
    if (this.ahead === null) return;
    this.ahead.kill();
    await this.ahead.exited;
    this.ahead = null;
  }
}

/** When the parent kills: on the count-th message of a kind, optionally after a delay. */
export interface KillTrigger {
  on: "ack" | "send" | "cstart" | "fsevent" | "mark";
  count: number;
  delayMs?: number;
}

export interface RoundResult {
  exit: Exit;
  killedByParent: boolean;
  /** The child reopened with its crash point armed. */
  armed: boolean;
  /** With `crashAfterWork`: the arrivals at the crash point the armed open made (all passed). */
  openArrivals: number | null;
  sendsAfterArmed: number;
  /** Acknowledgements, after arming, of units that committed something. */
  acksAfterArmed: number;
  /** compact() calls started and finished. */
  cstarts: number;
  cdones: number;
  /** A compact() call was running when the kill was sent (or when the child died). */
  inCompaction: boolean;
}

/**
 * Runs one child on `config.dir` until it dies; `kill` null means the engine must kill it, or, with
 * `clean`, that the child must finish its work and exit 0.
 */
export async function runRound(pool: ChildPool, model: CrashModel, config: ChildConfig, kill: KillTrigger | null, label: string, clean = false): Promise<RoundResult> {
  const child = await pool.take();
  const res: RoundResult = { exit: { code: null, signal: null, stderr: "" }, killedByParent: false, armed: false, openArrivals: null, sendsAfterArmed: 0, acksAfterArmed: 0, cstarts: 0, cdones: 0, inCompaction: false };
  const seen = { ack: 0, send: 0, cstart: 0, fsevent: 0, mark: 0 };
  let failure: Error | null = null;
  let timer: NodeJS.Timeout | null = null;
  const killNow = (): void => {
    if (child.killed) return;
    res.inCompaction = res.cstarts > res.cdones;
    child.kill();
  };
  child.onMessage((m: Msg) => {
    try {
      if (m.t === "error") throw new Error(`child failed: ${m.message}`);
      if (m.t === "done" && !clean) throw new Error(`child finished its work instead of dying (${kill === null ? "crash point never reached" : "no kill trigger fired"})`);
      if (m.t === "ready" && m.armed) res.armed = true;
      if (m.t === "ready" && m.openArrivals !== undefined) res.openArrivals = m.openArrivals;
      if (m.t === "cstart") res.cstarts += 1;
      if (m.t === "cdone") res.cdones += 1;
      model.onMessage(m);
      if (m.t === "send" && res.armed) res.sendsAfterArmed += 1;
      // Acks of units that wrote something (a forget of a slot that was not live writes nothing).
      if (m.t === "ack" && res.armed && m.r.some((x) => "ver" in x || x.ts !== null)) res.acksAfterArmed += 1;
      if (m.t === "ack" || m.t === "send" || m.t === "cstart" || m.t === "fsevent" || m.t === "mark") seen[m.t] += 1;
      if (kill !== null && !child.killed && timer === null && (seen[kill.on] >= kill.count || (kill.count === 0 && m.t === "ready"))) {
        if (kill.delayMs === undefined || kill.delayMs <= 0) killNow();
        else timer = setTimeout(killNow, kill.delayMs);
      }
    } catch (err) {
      failure ??= err instanceof Error ? err : new Error(String(err));
      child.kill();
    }
  });
  const watchdog = setTimeout(() => {
    failure ??= new Error("the child neither finished nor died within 60 s");
    child.kill();
  }, 60_000);
  child.start(config);
  res.exit = await child.exited;
  clearTimeout(watchdog);
  if (timer !== null) clearTimeout(timer);
  res.killedByParent = child.killed && failure === null;
  if (!child.killed) res.inCompaction = res.cstarts > res.cdones;
  if (failure !== null) throw new Error(`${label}: ${(failure as Error).message}\nchild stderr:\n${res.exit.stderr}`);
  if (clean) {
    if (res.exit.code !== 0 || !child.messages.some((m) => m.t === "done")) throw new Error(`${label}: child did not finish cleanly: ${JSON.stringify(res.exit)}`);
  } else if (res.exit.signal !== "SIGKILL") throw new Error(`${label}: child ended with ${JSON.stringify(res.exit)}, not SIGKILL`);
  return res;
}

/** What reopenAndCheck saw. */
export interface ReopenReport extends SettleReport {
  segments: number;
}

/** Opens `dir` in this process, checks it against the model, verify()s it, and closes it. */
export async function reopenAndCheck(dir: string, open: OpenOptions, model: CrashModel, label: string): Promise<ReopenReport> {
  let store: Engram;
  try {
    store = await Engram.open(dir, open);
  } catch (err) {
    const segs = path.join(dir, "segments");
    const files = fs.readdirSync(segs).map((n) => `${n} (${fs.statSync(path.join(segs, n)).size} B)`);
    throw new Error(`${label}: reopening after the crash failed: ${String(err)}\nfiles: ${files.slice(-6).join(", ")}`, { cause: err });
  }
  try {
    const left = leftovers(dir);
    if (left.length > 0) throw new Error(`${label}: files left by a crashed compaction after reopen: ${left.join(", ")}`);
    const report = await model.settle(store, label);
    const v = await store.verify();
    if (!v.ok) throw new Error(`${label}: verify() after reopen: ${JSON.stringify(v.problems.slice(0, 5))}`);
    return { ...report, segments: fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".seg")).length };
  } finally {
    await store.close();
  }
}
