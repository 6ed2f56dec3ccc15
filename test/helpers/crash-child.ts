/**
 * The child process of the crash tests (test/crash-writes.test.ts, test/crash-compaction.test.ts).
 * Run as `node --import tsx test/helpers/crash-child.ts` from the repository root. It loads the
 * engine, prints {"t":"standby"}, reads one JSON configuration line from stdin, then works on a
 * real directory until it is SIGKILLed (by the parent, or by the engine's faults.crashAt).
 *
 * Every operation is reported as a "send" line written right before the store is called (with a
 * synchronous write to fd 1, so the line is out before the operation is queued) and an "ack"
 * line once it resolved. See test/helpers/crash-model.ts for what the parent makes of them.
 *
 * Modes:
 *  - "ops": random writes / forgets / batches / forgetScopes in `lanes` concurrent loops (so that
 *    group commit puts several in one fsync), optionally with a compaction loop beside them, and
 *    optionally a clean `preamble` of acknowledged operations before reopening with faults.crashAt.
 *  - "prepare": a scripted store with live, overwritten and forgotten keys and erased scopes, a
 *    compaction of every sealed segment but the oldest, more garbage, then a clean close.
 *  - "compact-crash": open with faults.crashAt and run compact(): it must never return.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
// The Engram class itself (src/index.js re-exports it): importing it directly skips loading the
// agent-tool layer (zod, MCP), which would double every child's start-up time.
import { Engram } from "../../src/engram.js";
import type { BatchOp, FaultPoint, OpenOptions } from "../../src/types.js";
import { FaultController } from "../../engine/faults.js";
import { CRASH_AFTER_MAX, armCrashPasses, crashPassesLeft } from "../../segments/io-faults.js";
import { isCompactionFile, type Msg, type Mut, type Res } from "./crash-model.js";
import { between, rng } from "./crash-proc.js";
import { useBuiltWorker } from "./built-worker.js";

useBuiltWorker(); // the compaction worker from dist/ while it is fresh (built-worker.ts)

interface Common {
  dir: string;
  /** JSON-serializable OpenOptions (no clock, no faults). */
  open: OpenOptions;
}

export interface OpsConfig extends Common {
  mode: "ops";
  seed: number;
  lanes: number;
  scopes: string[];
  keys: string[];
  eraseScopes: string[];
  /** Percent weights of unit kinds. */
  mix: { write: number; forget: number; batch: number; erase: number };
  padMax: number;
  crashAt?: FaultPoint;
  /** `faults.crashAfter`: arrivals at crashAt that pass before the one that kills (default 0). */
  crashAfter?: number;
  /**
   * Arrivals at crashAt in the work after the armed open that pass before the one that kills (with
   * a preamble; not with crashAfter): the open is armed with crashAfter CRASH_AFTER_MAX, so none
   * of its own arrivals kill, and the passes are set to this once it answered. How many arrivals
   * an open makes depends on the store the preamble left, so no fixed crashAfter is sure to pass them.
   */
  crashAfterWork?: number;
  /** Acknowledged units to complete (then close cleanly) before reopening with crashAt armed. */
  preamble?: number;
  /** Run compact() back to back beside the writers. */
  compactLoop?: boolean;
  /** Loops of inherited reads beside the writers; each checks the value names its slot. */
  readers?: number;
  /** Report the creation of compaction files (*.journal, *.tmp but a seal's hint: crash-model.ts isCompactionFile) seen through fs.watch (inotify). */
  watchFiles?: boolean;
  /** Stop and exit 0 after this many units (a safety net: the parent should kill us first). */
  maxUnits: number;
}

export interface PrepareConfig extends Common {
  mode: "prepare";
  seed: number;
  scopes: string[];
  keys: string[];
}

export interface CompactCrashConfig extends Common {
  mode: "compact-crash";
  crashAt: FaultPoint;
  /** `faults.crashAfter`: arrivals at crashAt that pass first (a later job of the pass). */
  crashAfter?: number;
}

/** A scripted race: a forget answered "nothing to forget" while the tombstone it saw is in flight. */
export interface NoopForgetConfig extends Common {
  mode: "noop-forget";
}

export type ChildConfig = OpsConfig | PrepareConfig | CompactCrashConfig | NoopForgetConfig;

/**
 * Writes one line to stdout synchronously, always. process.stdout.write on a pipe is synchronous
 * only while the pipe has room: once the (loaded) parent falls behind it queues the line in this
 * process, and a SIGKILL then loses "send" lines of operations that did reach the store. So the
 * line goes straight to fd 1, retrying while the non-blocking pipe is full.
 */
function emit(m: Msg): void {
  const line = Buffer.from(`${JSON.stringify(m)}\n`);
  let done = 0;
  while (done < line.length) {
    try {
      done += fs.writeSync(1, line, done, line.length - done);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EAGAIN") throw err;
    }
  }
}

function die(err: unknown): never {
  emit({ t: "error", message: err instanceof Error ? `${err.name}: ${err.message}\n${err.stack ?? ""}` : String(err) });
  process.exit(3);
}

/** `scope`, its parent, ..., "global". */
function lineageOf(scope: string): string[] {
  const parts = scope === "global" ? [] : scope.split("/");
  const out: string[] = [];
  for (let i = parts.length; i > 0; i--) out.push(parts.slice(0, i).join("/"));
  out.push("global");
  return out;
}

const PAD = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/** A value that names its slot and its unit: a wrong or torn read can never pass for it. */
function valueFor(s: string, k: string, tag: string, padLen: number): string {
  let pad = "";
  while (pad.length < padLen) pad += PAD;
  return `${s}|${k}|${tag}|${pad.slice(0, padLen)}`;
}

/** Runs one unit against the store and returns one result per mutation. */
async function exec(store: Engram, muts: Mut[], batch: boolean): Promise<Res[]> {
  const val = (m: Extract<Mut, { op: "w" }>): string | Uint8Array => (m.b ? new Uint8Array(Buffer.from(m.v, "utf8")) : m.v);
  if (batch) {
    const ops: BatchOp[] = muts.map((m) => {
      if (m.op === "w") return { op: "write", key: m.k, value: val(m), scope: m.s };
      if (m.op === "f") return { op: "forget", key: m.k, scope: m.s };
      throw new Error("forgetScope inside a batch");
    });
    const results = await store.batch(ops);
    return results.map((r) => ("version" in r ? { ver: r.version } : { ts: r.tombstoneSeq }));
  }
  const m = muts[0] as Mut;
  if (m.op === "w") return [{ ver: (await store.write(m.k, val(m), { scope: m.s })).version }];
  if (m.op === "f") return [{ ts: (await store.forget(m.k, { scope: m.s })).tombstoneSeq }];
  return [{ ts: (await store.forgetScope(m.s)).tombstoneSeq }];
}

/** Sequential unit numbering and reporting shared by all modes. */
class Reporter {
  next = 0;
  acked = 0;

  /** Reports, then calls the store in the same synchronous step (so send order = commit order). */
  async run(store: Engram, muts: Mut[], batch: boolean): Promise<Res[]> {
    const u = this.next++;
    emit({ t: "send", u, muts });
    const r = await exec(store, muts, batch);
    emit({ t: "ack", u, r });
    this.acked += 1;
    return r;
  }
}

function optionsOf(c: Common & { crashAfter?: number; crashAfterWork?: number }, crashAt?: FaultPoint): OpenOptions {
  if (crashAt === undefined) return { ...c.open };
  if (c.crashAfterWork !== undefined) return { ...c.open, faults: { crashAt, crashAfter: CRASH_AFTER_MAX } };
  return { ...c.open, faults: c.crashAfter === undefined ? { crashAt } : { crashAt, crashAfter: c.crashAfter } };
}

/**
 * After an open armed by `crashAfterWork`: the arrivals the open made at the crash point (all
 * passed), and the passes left set to `crashAfterWork` so the kill comes in the work.
 */
function armWork(store: Engram, crashAfterWork: number): number {
  const faults = store.faults;
  if (!(faults instanceof FaultController) || faults.buffer === null) throw new Error("crashAfterWork: the open made no fault table");
  const buffer = faults.buffer;
  const openArrivals = CRASH_AFTER_MAX - crashPassesLeft(buffer);
  if (openArrivals < 0 || openArrivals >= CRASH_AFTER_MAX) throw new Error(`crashAfterWork: the open made ${openArrivals} arrivals`);
  armCrashPasses(buffer, crashAfterWork);
  return openArrivals;
}

async function runOps(c: OpsConfig): Promise<void> {
  const r = rng(c.seed);
  const rep = new Reporter();
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const total = c.mix.write + c.mix.forget + c.mix.batch + c.mix.erase;
  const gen = (): { muts: Mut[]; batch: boolean } => {
    const tag = `${c.seed}.${rep.next}`;
    const one = (j: number, forgetOk: boolean): Mut => {
      const s = pick(c.scopes);
      const k = pick(c.keys);
      if (forgetOk && r() < 0.35) return { op: "f", s, k };
      return { op: "w", s, k, v: valueFor(s, k, `${tag}.${j}`, between(r, 0, c.padMax)), b: r() < 0.2 };
    };
    const x = r() * total;
    if (x < c.mix.write) return { muts: [one(0, false)], batch: false };
    if (x < c.mix.write + c.mix.forget) {
      const s = pick(c.scopes);
      return { muts: [{ op: "f", s, k: pick(c.keys) }], batch: false };
    }
    if (x < c.mix.write + c.mix.forget + c.mix.batch) {
      const n = between(r, 2, 5);
      return { muts: Array.from({ length: n }, (_, j) => one(j, true)), batch: true };
    }
    return { muts: [{ op: "e", s: pick(c.eraseScopes) }], batch: false };
  };

  let store = await Engram.open(c.dir, optionsOf(c, c.preamble === undefined ? c.crashAt : undefined));
  let stop = false;
  if (c.watchFiles === true) {
    // Seen from outside the engine, like any other process watching the directory would.
    const segs = path.join(c.dir, "segments");
    fs.watch(segs, (_event, name) => {
      if (name !== null && isCompactionFile(name) && fs.existsSync(path.join(segs, name))) emit({ t: "fsevent", name });
    }).unref();
  }
  const lanes = async (until: () => boolean): Promise<void> => {
    const lane = async (): Promise<void> => {
      while (!stop && !until() && rep.next < c.maxUnits) {
        const { muts, batch } = gen();
        await rep.run(store, muts, batch);
      }
    };
    const compactor = async (): Promise<void> => {
      for (let n = 0; !stop && !until() && rep.next < c.maxUnits; n++) {
        emit({ t: "cstart", n });
        const report = await store.compact();
        emit({ t: "cdone", n, segments: report.segments });
        // Yield to I/O: a compact() with nothing to do resolves in microtasks only.
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const reader = async (): Promise<void> => {
      while (!stop && !until() && rep.next < c.maxUnits) {
        const scope = pick(c.scopes);
        const key = pick(c.keys);
        try {
          const got = await store.read(key, { scope });
          if (got.status === "OK") {
            const text = typeof got.value === "string" ? got.value : Buffer.from(got.value).toString("utf8");
            if (!lineageOf(scope).includes(got.scope) || !text.startsWith(`${got.scope}|${key}|`)) {
              throw new Error(`torn read: read(${key}, {scope: ${scope}}) returned scope ${got.scope} value ${text.slice(0, 60)}`);
            }
          }
        } catch (err) {
          // Failing closed is allowed while a segment is rewritten under the read (I4).
          if ((err as { code?: string }).code !== "SCOPE_ERASED_DURING_READ") throw err;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const all = Array.from({ length: c.lanes }, () => lane());
    for (let i = 0; i < (c.readers ?? 0); i++) all.push(reader());
    if (c.compactLoop === true) all.push(compactor());
    await Promise.all(all);
  };

  let openArrivals: number | undefined;
  if (c.preamble !== undefined) {
    emit({ t: "ready", armed: false });
    const goal = c.preamble;
    await lanes(() => rep.acked >= goal);
    await store.close();
    store = await Engram.open(c.dir, optionsOf(c, c.crashAt));
    if (c.crashAfterWork !== undefined) openArrivals = armWork(store, c.crashAfterWork);
  }
  emit({ t: "ready", armed: c.crashAt !== undefined, ...(openArrivals === undefined ? {} : { openArrivals }) });
  await lanes(() => false);
  stop = true;
  await store.close();
  emit({ t: "done" });
}

async function runPrepare(c: PrepareConfig): Promise<void> {
  const r = rng(c.seed);
  const rep = new Reporter();
  const store = await Engram.open(c.dir, optionsOf(c));
  emit({ t: "ready", armed: false });
  let tag = 0;
  const w = (s: string, k: string): Mut => ({ op: "w", s, k, v: valueFor(s, k, `p${c.seed}.${tag++}`, between(r, 80, 700)), b: r() < 0.2 });
  const slots = c.scopes.flatMap((s) => c.keys.map((k) => [s, k] as const));
  const first = slots[0] as readonly [string, string];

  // The very first record of the oldest segment is a value that dies later: an in-place rewrite
  // of that segment must move bytes at its first record.
  await rep.run(store, [w(first[0], first[1])], false);
  // Round A: every slot gets a value, a quarter of them through batches of three.
  for (let i = 1; i < slots.length; ) {
    if (r() < 0.25 && i + 3 <= slots.length) {
      await rep.run(store, slots.slice(i, i + 3).map(([s, k]) => w(s, k)), true);
      i += 3;
    } else {
      const [s, k] = slots[i] as readonly [string, string];
      await rep.run(store, [w(s, k)], false);
      i += 1;
    }
  }
  // Round B: overwrites, forgets (single and batched), two scope erasures, writes after erasure.
  await rep.run(store, [w(first[0], first[1])], false);
  for (const [s, k] of slots) if (r() < 0.33) await rep.run(store, [w(s, k)], false);
  const doomed = slots.filter(() => r() < 0.25);
  for (let i = 0; i < doomed.length; ) {
    if (r() < 0.3 && i + 2 <= doomed.length) {
      await rep.run(store, doomed.slice(i, i + 2).map(([s, k]) => ({ op: "f", s, k }) as Mut), true);
      i += 2;
    } else {
      const [s, k] = doomed[i] as readonly [string, string];
      await rep.run(store, [{ op: "f", s, k }], false);
      i += 1;
    }
  }
  const erased = c.scopes.filter((s) => s === "user:a/session:2" || s === "user:b");
  for (const s of erased) await rep.run(store, [{ op: "e", s }], false);
  const reborn = c.scopes.find((s) => s === "user:b/session:1");
  if (reborn !== undefined) {
    for (const k of c.keys.slice(0, 5)) await rep.run(store, [w(reborn, k)], false);
    await rep.run(store, [w(reborn, c.keys[0] as string)], false);
    await rep.run(store, [{ op: "f", s: reborn, k: c.keys[1] as string }], false);
  }
  // Phase 1: compact every sealed segment but the oldest (which keeps old values of forgotten and
  // erased slots on disk, so their tombstones and erase records must survive: I6).
  await store.flush();
  const sealed = store
    .stats()
    .segments.filter((s) => s.sealed)
    .map((s) => s.id)
    .sort((a, b) => a - b);
  emit({ t: "cstart", n: 0 });
  const report = await store.compact({ segments: sealed.slice(1) });
  emit({ t: "cdone", n: 0, segments: report.segments });
  // Round C: more garbage on top of relocated records.
  for (let i = 0; i < 40; i++) {
    const [s, k] = slots[Math.floor(r() * slots.length)] as readonly [string, string];
    await rep.run(store, [r() < 0.7 ? w(s, k) : { op: "f", s, k }], false);
  }
  await store.flush();
  await store.close();
  emit({ t: "done" });
}

async function runCompactCrash(c: CompactCrashConfig): Promise<void> {
  const store = await Engram.open(c.dir, optionsOf(c, c.crashAt));
  emit({ t: "ready", armed: true });
  emit({ t: "cstart", n: 0 });
  const report = await store.compact();
  emit({ t: "cdone", n: 0, segments: report.segments });
  await store.close();
  emit({ t: "done" });
}

/**
 * write k00 (acked), reopen with pauseAt write:after-append; write k01 (its group is appended and
 * held before fdatasync), forget k00 (queued behind that group: not written yet), forget k00 again
 * (nothing live any more). Today that second forget is answered at once with tombstoneSeq null;
 * an engine that makes it wait for the tombstone it relied on leaves it pending. Either way, one
 * event-loop turn later we print a "mark" and the parent kills us (the group stays held).
 */
async function runNoopForget(c: NoopForgetConfig): Promise<void> {
  setInterval(() => undefined, 1000); // stay alive while operations wait on the held group
  const rep = new Reporter();
  const w = (k: string): Mut => ({ op: "w", s: "global", k, v: valueFor("global", k, `n.${rep.next}`, 40), b: false });
  let store = await Engram.open(c.dir, optionsOf(c));
  emit({ t: "ready", armed: false });
  await rep.run(store, [w("k00")], false);
  await store.close();
  store = await Engram.open(c.dir, { ...c.open, faults: { pauseAt: ["write:after-append"] } });
  emit({ t: "ready", armed: true });
  void rep.run(store, [w("k01")], false).catch(die);
  await store.faults.waitFor("write:after-append");
  void rep.run(store, [{ op: "f", s: "global", k: "k00" }], false).catch(die);
  const second = rep.run(store, [{ op: "f", s: "global", k: "k00" }], false).catch(die);
  // An answer given at once has been acked (and printed) before the next turn of the loop.
  await Promise.race([second, new Promise((resolve) => setImmediate(resolve))]);
  emit({ t: "mark", what: "second forget answered or pending" });
}

async function main(): Promise<void> {
  const rl = createInterface({ input: process.stdin });
  emit({ t: "standby" });
  const line = await new Promise<string>((resolve, reject) => {
    rl.once("line", resolve);
    rl.once("close", () => reject(new Error("stdin closed before the configuration arrived")));
  });
  rl.close();
  const c = JSON.parse(line) as ChildConfig;
  if (c.mode === "ops") await runOps(c);
  else if (c.mode === "prepare") await runPrepare(c);
  else if (c.mode === "noop-forget") {
    await runNoopForget(c);
    return;
  } else await runCompactCrash(c);
  process.exit(0);
}

main().catch(die);
