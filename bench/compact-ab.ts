/**
 * A/B timing of compact() alone, for comparing two source trees on a shared machine.
 * Usage: node --import tsx bench/compact-ab.ts <tree> [keys] [mode] [workers]
 *        node --import tsx bench/compact-ab.ts --alternate <treeA> <treeB> [keys] [mode] [workers] [pairs]
 *        node --import tsx bench/compact-ab.ts --fresh <treeA> <treeB> [keys] [mode] [workers] [pairs]
 * Loads `keys` keys (values 256 B) into 4 MiB segments (non-durable, auto compaction off),
 * compacts one sealed segment as a warm-up, forgets every fourth key, and times compact().
 * The keys go in in key order, so every plan lists its survivors in file order and the worker
 * never orders them (engine/offset-order.ts): a change there shows only in the bench's own
 * compaction child (`bench/child.ts`, keys in random order), or here with AB_RANDOM=1 (the keys
 * loaded in the child's own shuffled order). --alternate runs every pass in one process, so from its
 * second pair on each tree's code is warm; the bench's child runs one pass in a fresh process,
 * as `--fresh` does: the same pairs, each run in a child process of its own (the environment
 * passed on), with the same summary line. It prints one JSON
 * line {tree, mode, workers, MBps, seconds, cpuSeconds (the whole process, worker threads
 * included: less sensitive to a busy machine), userS, systemS, MBperCpuS, mainCpuMs, workerCpuMs
 * and restCpuMs (CPU during compact() of the main thread, of the busiest other thread — the
 * compaction worker — and of every other thread: V8's compiler and GC helpers, libuv's pool with
 * the kernel time of the fdatasyncs it runs; Linux only), segments, faults
 * (the process's minor page faults during compact(): fresh memory touched, ~10 µs each on this
 * machine kind, and a count no other load on the machine changes), load,
 * and syncs: the file fdatasyncs and directory fsyncs compact() made, counted by segments/io.ts's
 * observer of the main thread — so only with workers 0, where every call runs there}.
 * AB_PROFILE=FILE writes the main thread's CPU profile of compact(); AB_WINDOW=1 prints its window
 * ("window FROM TO", µs of CLOCK_MONOTONIC: the clock of `node --cpu-prof` profiles, which cover
 * the worker threads too) to stderr. AB_IDLE_MS=N leaves the store idle N ms before the timed
 * compact() (the worker's warm-up rounds, which follow its first task, then run to their end: a
 * long-lived store's pass, against the bench's, which starts ~0.1 s after the worker's first task).
 * AB_NICENESS=N opens the store with compaction.niceness N (default: the option's default).
 * AB_PLAN_COLD=1 starts the tree's plan walks without their warm-up (engine/plan-warm.ts): what
 * that warm-up buys a fresh process's pass, on one tree.
 * AB_MARK=1 prints "=== PASS START" and "=== PASS END" to stdout around the timed compact(), to
 * cut the pass out of a `node --trace-opt --trace-deopt` log (which goes to stdout too).
 * --alternate runs both trees in this one process, A then B, `pairs` times (default 5; a fresh
 * store each run), and ends with a line of per-tree medians and the median of the pairwise B/A
 * ratios of MB/s and MB per CPU-second: on a loaded machine the pairs see the same minutes.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cpuSplit, permutation, threadCpuUs } from "./common.js";

type Mode = "copy-on-write" | "in-place";

/** One run's figures (the JSON line printed). */
interface Run {
  MBps: number;
  MBperCpuS: number;
  [k: string]: unknown;
}

/** Loads a tree's built dist/ (or its sources with AB_SOURCE or no dist/). */
async function engramOf(tree: string): Promise<{ Engram: typeof import("../src/index.js").Engram; io: typeof import("../segments/io.js") }> {
  const built = path.resolve(tree, "dist/src/index.js");
  const entry = process.env["AB_SOURCE"] === undefined && fs.existsSync(built) ? built : path.resolve(tree, "src/index.ts");
  const { Engram } = (await import(pathToFileURL(entry).href)) as typeof import("../src/index.js");
  const ioEntry = entry.endsWith(".ts") ? path.resolve(tree, "segments/io.ts") : path.resolve(tree, "dist/segments/io.js");
  const io = (await import(pathToFileURL(ioEntry).href)) as typeof import("../segments/io.js");
  if (process.env["AB_PLAN_COLD"] !== undefined) await skipPlanWarm(entry.endsWith(".ts") ? path.resolve(tree, "engine/compaction-plan.ts") : path.resolve(tree, "dist/engine/compaction-plan.js"));
  return { Engram, io };
}

/** AB_PLAN_COLD: the tree's plan walks start without their warm-up (compaction-plan.ts planWarm.skip); a tree without one fails. */
async function skipPlanWarm(file: string): Promise<void> {
  const plan = (await import(pathToFileURL(file).href)) as { planWarm?: { skip: boolean } };
  if (plan.planWarm === undefined) throw new Error(`AB_PLAN_COLD: ${file} has no plan warm-up`);
  plan.planWarm.skip = true;
}

/** One store of `tree`: load, warm-up compaction, forget every fourth key, then the timed compact(). */
async function runOnce(tree: string, keys: number, mode: Mode, workers: number): Promise<Run> {
  const { Engram, io } = await engramOf(tree);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compact-ab-"));
  const niceness = process.env["AB_NICENESS"] === undefined ? {} : { niceness: Number(process.env["AB_NICENESS"]) };
  const store = await Engram.open(dir, { durability: "none", segmentBytes: 4 << 20, compaction: { mode, auto: false, workers, ...niceness } });
  const value = new Uint8Array(256).fill(7);
  const order = loadOrder(keys, process.env["AB_RANDOM"] !== undefined);
  for (let i = 0; i < keys; i += 1000) {
    const ops = [];
    for (let j = i; j < Math.min(keys, i + 1000); j++) ops.push({ op: "write" as const, scope: "s", key: `k${String(order[j]).padStart(9, "0")}`, value });
    await store.batch(ops);
  }
  const first = store.stats().segments.find((x) => x.sealed);
  if (first !== undefined) await store.compact({ mode, segments: [first.id] });
  for (let i = 0; i < keys; i += 4000) {
    const ops = [];
    for (let j = i; j < Math.min(keys, i + 4000); j += 4) ops.push({ op: "forget" as const, scope: "s", key: `k${String(j).padStart(9, "0")}` });
    await store.batch(ops);
  }
  const idleMs = Number(process.env["AB_IDLE_MS"] ?? 0);
  if (idleMs > 0) await new Promise((resolve) => setTimeout(resolve, idleMs)); // a store idle before the pass: the worker's warm-up rounds run meanwhile
  const prof = process.env["AB_PROFILE"];
  let session: import("node:inspector/promises").Session | null = null;
  if (prof !== undefined) {
    const inspector = await import("node:inspector/promises");
    session = new inspector.Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.start");
  }
  const syncs = { file: 0, dir: 0, unlink: 0, rename: 0 };
  if (workers === 0) {
    io.setIoObserver((e) => {
      if (e.op === "sync") syncs.file += 1;
      else if (e.op === "dir-sync") syncs.dir += 1;
      else if (e.op === "unlink") syncs.unlink += 1;
      else if (e.op === "rename") syncs.rename += 1;
    });
  }
  const faults0 = process.resourceUsage().minorPageFault;
  const threads0 = threadCpuUs();
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const tick0 = process.hrtime.bigint() / 1000n;
  if (process.env["AB_MARK"] !== undefined) console.log("=== PASS START");
  const rep = await store.compact({ mode });
  if (process.env["AB_MARK"] !== undefined) console.log("=== PASS END");
  if (process.env["AB_WINDOW"] !== undefined) console.error(`window ${tick0} ${process.hrtime.bigint() / 1000n}`); // µs of CLOCK_MONOTONIC, a --cpu-prof profile's clock
  io.setIoObserver(null);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const threads = cpuSplit(threads0, threadCpuUs());
  const faults = process.resourceUsage().minorPageFault - faults0;
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  if (session !== null && prof !== undefined) {
    const { profile } = await session.post("Profiler.stop");
    fs.writeFileSync(prof, JSON.stringify(profile));
  }
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { tree, mode, workers, MBps: +(rep.bytesBefore / seconds / 1e6).toFixed(1), seconds: +seconds.toFixed(3), cpuSeconds: +cpuSeconds.toFixed(3), userS: +(cpu.user / 1e6).toFixed(3), systemS: +(cpu.system / 1e6).toFixed(3), MBperCpuS: +(rep.bytesBefore / cpuSeconds / 1e6).toFixed(1), mainCpuMs: +(threads.mainUs / 1000).toFixed(1), workerCpuMs: +(threads.busiestUs / 1000).toFixed(1), restCpuMs: +(threads.restUs / 1000).toFixed(1), segments: rep.segments.length, faults, ...(workers === 0 ? { syncs } : {}), load: (os.loadavg()[0] ?? 0).toFixed(2) };
}

/** The key numbers 0..keys-1 in the order they are loaded: key order, or (`random`) the bench's compaction child's own shuffle (bench/workloads.ts compact: permutation seed 61). */
function loadOrder(keys: number, random: boolean): Uint32Array {
  if (random) return permutation(keys, 61);
  const order = new Uint32Array(keys);
  for (let i = 0; i < keys; i++) order[i] = i;
  return order;
}

/** The median of `xs` (not empty). */
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1] as number;
}

/**
 * One run in a child process of its own (`--fresh`): this script with the tree's arguments, its
 * environment passed on (AB_RANDOM and the rest); the child's JSON line. A failed child throws.
 */
function runFresh(tree: string, keys: number, mode: Mode, workers: number): Run {
  const script = fileURLToPath(import.meta.url);
  const r = spawnSync(process.execPath, ["--import", "tsx", script, tree, String(keys), mode, String(workers)], { encoding: "utf8", timeout: 300_000 });
  const line = r.stdout.trim().split("\n").pop() ?? "";
  if (r.status !== 0 || !line.startsWith("{")) throw new Error(`compact-ab child for ${tree} failed (status ${String(r.status)}): ${r.stderr.slice(-500)}`);
  return JSON.parse(line) as Run;
}

const argv = process.argv.slice(2);
if (argv[0] === "--alternate" || argv[0] === "--fresh") {
  const [a = "/tmp/base-628", b = ".", k, m, w, p] = argv.slice(1);
  const keys = Number(k ?? 100_000);
  const mode = (m ?? "copy-on-write") as Mode;
  const workers = Number(w ?? 1);
  const pairs = Number(p ?? 5);
  const one = argv[0] === "--fresh" ? async (t: string) => runFresh(t, keys, mode, workers) : (t: string) => runOnce(t, keys, mode, workers);
  const runs: { a: Run; b: Run }[] = [];
  for (let i = 0; i < pairs; i++) {
    const ra = await one(a);
    console.log(JSON.stringify(ra));
    const rb = await one(b);
    console.log(JSON.stringify(rb));
    runs.push({ a: ra, b: rb });
  }
  const fig = (f: (r: Run) => number): string => `${median(runs.map((r) => f(r.a))).toFixed(1)} → ${median(runs.map((r) => f(r.b))).toFixed(1)}`;
  const ratio = (f: (r: Run) => number): string => median(runs.map((r) => f(r.b) / f(r.a))).toFixed(2);
  console.log(JSON.stringify({ summary: { a, b, mode, workers, pairs, MBps: fig((r) => r.MBps), MBperCpuS: fig((r) => r.MBperCpuS), ratioMBps: ratio((r) => r.MBps), ratioMBperCpuS: ratio((r) => r.MBperCpuS), load: (os.loadavg()[0] ?? 0).toFixed(2) } }));
} else {
  console.log(JSON.stringify(await runOnce(argv[0] ?? ".", Number(argv[1] ?? 100_000), (argv[2] ?? "copy-on-write") as Mode, Number(argv[3] ?? 1))));
}
