/**
 * The benchmark driver: `npm run bench` (full) or `npm run bench:quick`.
 *
 *   node --import tsx bench/run.ts [--quick] [--reps N] [--stores a,b] [--only w1,w4,compact]
 *                                  [--dir TMP] [--no-strace] [--no-limits]
 *
 * Installs the peers into bench/peers on first use, probes every store, measures the machine's
 * limits, runs every workload of every store in its own child process (fresh directory, stores
 * in rotating order, repeated), runs the fsync honesty check under strace, and writes the
 * markdown report to bench/results/<timestamp>.md and stdout, and a full run's to
 * bench/results/latest.md too (what bench/docs.ts reads).
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { DURABILITY_NOTES, PEERS_DIR } from "./adapters.js";
import { errorText, FULL, median, QUICK, STORES, isStoreName, type ChildResult, type ChildSpec, type Sizes, type StoreName, type Workload } from "./common.js";
import { DOCS_FILE, keptSections, renderDocs } from "./docs.js";
import { describeMachine } from "./machine.js";
import { addSample, deriveMetrics, renderReport, type FsyncRow, type Samples } from "./report.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..");
const childPath = path.join(here, "child.ts");
const resultsDir = path.join(here, "results");

interface Options {
  quick: boolean;
  reps: number;
  stores: StoreName[];
  only: Set<string> | null;
  dir: string;
  strace: boolean;
  limits: boolean;
  /** Write a V8 CPU profile of every engram child to bench/results/profiles/. */
  cpuProf: boolean;
  /** Also write docs/PERFORMANCE.md (full runs only). */
  docs: boolean;
}

function parseArgs(argv: string[]): Options {
  const quick = argv.includes("--quick");
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const reps = Number(value("--reps") ?? (quick ? 1 : 3));
  const storesArg = value("--stores");
  const stores = storesArg === undefined ? [...STORES] : storesArg.split(",").filter(isStoreName);
  const onlyArg = value("--only");
  return {
    quick,
    reps: Number.isInteger(reps) && reps > 0 ? reps : 1,
    stores,
    only: onlyArg === undefined ? null : new Set(onlyArg.split(",")),
    dir: value("--dir") ?? process.env["BENCH_TMPDIR"] ?? os.tmpdir(),
    strace: !argv.includes("--no-strace"),
    limits: !argv.includes("--no-limits"),
    cpuProf: argv.includes("--cpu-prof"),
    docs: argv.includes("--docs"),
  };
}

function log(line: string): void {
  process.stderr.write(line + "\n");
}

/** Installs bench/peers/node_modules when it is missing. Peers are optional dependencies: one whose build fails is skipped. */
function ensurePeers(notes: string[]): void {
  if (fs.existsSync(path.join(PEERS_DIR, "node_modules"))) return;
  log("installing the peer stores into bench/peers (first run only; better-sqlite3 compiles, ~2-3 min) ...");
  const t0 = Date.now();
  const r = spawnSync("npm", ["install", "--prefix", PEERS_DIR, "--no-audit", "--no-fund"], {
    cwd: PEERS_DIR,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_nodedir: fs.existsSync("/usr/include/node/node.h") ? "/usr" : (process.env["npm_config_nodedir"] ?? "") },
  });
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  if (r.error !== undefined || r.status !== 0) {
    const tail = `${r.stderr ?? ""}`.trim().split("\n").slice(-3).join(" / ");
    notes.push(`Peer install (npm install --prefix bench/peers) failed after ${secs} s: ${r.error !== undefined ? errorText(r.error) : tail}`);
    log(`peer install failed: ${tail}`);
  } else {
    notes.push(`Peers were installed by this run (npm install --prefix bench/peers, ${secs} s); that time is not in the totals below.`);
  }
}

interface ChildOutcome {
  result: ChildResult | null;
  error: string | null;
  seconds: number;
}

let seq = 0;
let cpuProfDir: string | null = null;
/** Process groups of the children running now, ended if the driver is interrupted. */
const running = new Set<number>();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    for (const pid of running) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    process.exit(130);
  });
}

/** Per metric, the median over `runs` (each run's metrics by id); empty when there are none. */
function medianMetrics(runs: ReadonlyArray<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const id of new Set(runs.flatMap((r) => Object.keys(r)))) out[id] = median(runs.map((r) => r[id] ?? Number.NaN));
  return out;
}

/** Runs one child (optionally under strace) and reads its result; kills its process group at the timeout. */
function runChild(spec: Omit<ChildSpec, "dir" | "out">, root: string, timeoutMs: number, straceOut?: string, seccomp = false): Promise<ChildOutcome> {
  const dir = path.join(root, `${String(++seq).padStart(3, "0")}-${spec.workload}-${spec.store}`);
  fs.mkdirSync(dir, { recursive: true });
  const out = path.join(root, `${path.basename(dir)}.json`);
  const full: ChildSpec = { ...spec, dir, out };
  // One directory per child: node writes one profile per thread (main, loader hooks, workers).
  const prof = cpuProfDir !== null && spec.store === "engram" && spec.workload !== "probe" ? ["--cpu-prof", `--cpu-prof-dir=${path.join(cpuProfDir, `${spec.workload}${spec.mode !== undefined ? `-${spec.mode}` : ""}-${seq}`)}`] : [];
  const nodeArgs = ["--expose-gc", ...prof, "--import", "tsx", childPath, JSON.stringify(full)];
  const cmd = straceOut === undefined ? process.execPath : "strace";
  const args =
    straceOut === undefined
      ? nodeArgs
      : ["-f", ...(seccomp ? ["--seccomp-bpf"] : []), "-o", straceOut, "-e", "trace=fdatasync,fsync,msync,sync_file_range,access,faccessat,faccessat2", process.execPath, ...nodeArgs];
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"], detached: true });
    if (child.pid !== undefined) running.add(child.pid);
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      stderr = (stderr + b.toString("utf8")).slice(-4000);
    });
    child.stdout.on("data", () => {});
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          child.kill("SIGKILL");
        }
      }
    }, timeoutMs);
    let finished = false;
    const finish = (code: number | null): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (child.pid !== undefined) running.delete(child.pid);
      const seconds = (Date.now() - t0) / 1000;
      let result: ChildResult | null = null;
      try {
        result = JSON.parse(fs.readFileSync(out, "utf8")) as ChildResult;
      } catch {
        result = null;
      }
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(out, { force: true });
      settleDisk();
      let error: string | null = null;
      if (timedOut) error = `timed out after ${(timeoutMs / 1000).toFixed(0)} s`;
      else if (result === null) error = `exited with ${String(code)} and no result: ${stderr.trim().split("\n").slice(-2).join(" / ")}`;
      else if (code !== 0) error = result.notes[0] ?? `exited with ${String(code)}`;
      resolve({ result, error, seconds });
    };
    child.on("error", (err) => {
      stderr += errorText(err);
      finish(null);
    });
    child.on("close", (code) => finish(code));
  });
}

/**
 * Makes the file systems quiet before the next child starts: sync(1) commits what is dirty, and
 * with it the ext4 journal transaction that frees the removed child's blocks — on a file system
 * mounted with `discard` (this machine kind's /), that commit sends the device a discard for
 * every freed extent. Without it the next child's fsyncs waited on that commit: `--only compact`
 * on the same engine gave in place 107 and 113 MB/s and copy-on-write 153 and 131 without it,
 * 127 and 123, and 179 and 174 with it (twenty-fourth session). A failed sync(1) only costs that
 * isolation.
 */
function settleDisk(): void {
  spawnSync("sync", [], { stdio: "ignore", timeout: 60_000 });
}

/** Counts sync syscalls between the access(2) markers the fsync workload leaves in the trace. */
function countSyncs(trace: string): { single: number; inflight: number } {
  const counts = { single: 0, inflight: 0 };
  let phase: "single" | "inflight" | null = null;
  const sync = /\b(fdatasync|fsync|msync|sync_file_range)\(/;
  for (const line of trace.split("\n")) {
    const m = /engram-bench-marker\/(single|inflight)-(begin|end)/.exec(line);
    if (m !== null) {
      phase = m[2] === "begin" ? (m[1] as "single" | "inflight") : null;
      continue;
    }
    if (phase !== null && sync.test(line)) counts[phase]++;
  }
  return counts;
}

function straceInfo(): { ok: boolean; seccomp: boolean; version: string } {
  const r = spawnSync("strace", ["-V"], { encoding: "utf8" });
  if (r.error !== undefined || r.status !== 0) return { ok: false, seccomp: false, version: "" };
  const m = /version (\d+)\.(\d+)/.exec(r.stdout);
  const major = Number(m?.[1] ?? 0);
  const minor = Number(m?.[2] ?? 0);
  return { ok: true, seccomp: major > 5 || (major === 5 && minor >= 3), version: `${major}.${minor}` };
}

function rotate<T>(xs: readonly T[], by: number): T[] {
  if (xs.length === 0) return [];
  const k = ((by % xs.length) + xs.length) % xs.length;
  return [...xs.slice(k), ...xs.slice(0, k)];
}

function sizesText(s: Sizes): string {
  return (
    `W1 ≤ ${s.w1Single} puts at 1 in flight and ≤ ${s.w1Inflight} at 64, W2 ≤ ${s.w2Batch100} / ${s.w2Batch1000} entries ` +
    `(each phase also capped at ${s.phaseMs} ms), W3 ${s.w3Keys} keys, W4 ${s.w4Keys} keys (${s.w4TaskMs} ms per tinybench task), ` +
    `W5 ${s.w5Keys} keys, compaction ${s.compactKeys} keys, values 256 B, keys 10 B`
  );
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const o = parseArgs(argv);
  const w3Keys = Number(argv[argv.indexOf("--w3-keys") + 1]);
  const w4Keys = Number(argv[argv.indexOf("--w4-keys") + 1]);
  const sizesW3 = argv.includes("--w3-keys") && Number.isSafeInteger(w3Keys) && w3Keys > 0 ? { ...(o.quick ? QUICK : FULL), w3Keys } : o.quick ? QUICK : FULL;
  const sizes = argv.includes("--w4-keys") && Number.isSafeInteger(w4Keys) && w4Keys > 0 ? { ...sizesW3, w4Keys } : sizesW3;

  const notes: string[] = [];
  const timeoutMs = o.quick ? 40_000 : 240_000;

  ensurePeers(notes);
  // The clock (and the time budget) starts after the one-time peer install.
  const startedAt = new Date();
  const t0 = Date.now();
  if (o.cpuProf) {
    cpuProfDir = path.join(resultsDir, "profiles");
    fs.mkdirSync(cpuProfDir, { recursive: true });
    notes.push("Run with --cpu-prof: engram children wrote V8 CPU profiles to bench/results/profiles/ (profiling slows them; do not compare these figures).");
  }
  fs.mkdirSync(o.dir, { recursive: true });
  const root = fs.mkdtempSync(path.join(o.dir, "engram-bench-"));
  const machine = describeMachine(o.dir);
  const base = { sizes, quick: o.quick };

  const want = (w: string): boolean => o.only === null || o.only.has(w);

  // The fsync check doubles as the probe: a store whose durable-put child fails (module missing,
  // native build failed, engine not exported yet) is reported as unavailable and not run. When
  // strace is missing or not wanted, the same child runs untraced, as a probe only.
  const st = straceInfo();
  const traced = o.strace && want("fsync") && st.ok;
  let fsync: FsyncRow[] | string = !o.strace || !want("fsync") ? "not run (--no-strace or --only)." : !st.ok ? "not run: strace is not installed (Debian: `apt-get install -y strace`)." : [];
  const status = new Map<StoreName, string>();
  for (const store of o.stores) {
    const traceFile = path.join(root, `strace-${store}.txt`);
    let out = await runChild({ ...base, store, workload: "fsync" }, root, timeoutMs, traced ? traceFile : undefined, st.seccomp);
    let tracedOk = traced && out.error === null;
    if (traced && out.error !== null) {
      // maybe strace itself got in the way: probe again untraced
      const again = await runChild({ ...base, store, workload: "fsync" }, root, timeoutMs);
      if (again.error === null) notes.push(`fsync check of ${store} failed under strace (${out.error}); it works untraced.`);
      out = again;
      tracedOk = false;
    }
    status.set(store, out.error === null ? "ok" : `unavailable: ${out.error}`);
    log(`${traced ? "fsync check / probe" : "probe"} ${store}: ${out.error === null ? "ok" : `unavailable: ${out.error}`} (${out.seconds.toFixed(1)} s)`);
    if (Array.isArray(fsync) && out.error === null) {
      if (tracedOk && out.result !== null) {
        let trace = "";
        try {
          trace = fs.readFileSync(traceFile, "utf8");
        } catch {
          // counted as zero below
        }
        const c = countSyncs(trace);
        fsync.push({
          store,
          singleAcked: out.result.metrics["fsync.single.acked"] ?? 0,
          singleSyncs: c.single,
          inflightAcked: out.result.metrics["fsync.inflight.acked"] ?? 0,
          inflightSyncs: c.inflight,
        });
      } else {
        fsync.push({ store, singleAcked: 0, singleSyncs: 0, inflightAcked: 0, inflightSyncs: 0, error: "failed under strace" });
      }
    }
    fs.rmSync(traceFile, { force: true });
  }
  const avail = o.stores.filter((s) => status.get(s) === "ok");

  let limits: Record<string, number> | string = "not measured (--no-limits or --only)";
  if (o.limits && want("limits")) {
    const l = await runChild({ ...base, store: "none", workload: "limits" }, root, timeoutMs);
    limits = l.result !== null && l.error === null ? l.result.metrics : `failed: ${l.error ?? "?"}`;
    log(`limits (${l.seconds.toFixed(1)} s)`);
  }

  let format: Record<string, number> | string = "not run in quick mode (run `node --import tsx bench/format.ts`).";
  if (!o.quick && want("format")) {
    const f = await runChild({ ...base, store: "none", workload: "format" }, root, timeoutMs);
    format = f.result !== null && f.error === null ? f.result.metrics : `failed: ${f.error ?? "?"}`;
    log(`format (${f.seconds.toFixed(1)} s)`);
  }

  const samples: Samples = new Map();
  const workloads: Workload[] = ["w1", "w2", "w3", "w4", "w5"];
  const record = (store: StoreName, label: string, rep: number, out: ChildOutcome): void => {
    if (out.result !== null) {
      deriveMetrics(out.result.metrics);
      addSample(samples, store, out.result.metrics);
      for (const n of out.result.notes) if (out.error === null || n !== out.error) notes.push(`${store} ${label} (rep ${rep + 1}): ${n}`);
    }
    if (out.error !== null) notes.push(`${store} ${label} (rep ${rep + 1}) failed: ${out.error}`);
    log(`[rep ${rep + 1}/${o.reps}] ${label.padEnd(18)} ${store.padEnd(15)} ${out.seconds.toFixed(1).padStart(6)} s${out.error !== null ? `  FAILED: ${out.error}` : ""}`);
  };
  // The time budget: a child whose previous repetition would not fit in what is left is skipped
  // (and said so), so that a loaded machine still gets a report in time.
  const budgetMs = o.quick ? 55_000 : 570_000;
  const lastSeconds = new Map<string, number>();
  const skipped: string[] = [];
  const runTimed = async (store: StoreName, label: string, rep: number, spec: Omit<ChildSpec, "dir" | "out">): Promise<void> => {
    const key = `${store} ${label}`;
    const expect = (lastSeconds.get(key) ?? (o.quick ? 1 : 0)) * 1000;
    if ((rep > 0 || o.quick) && Date.now() - t0 + expect > budgetMs) {
      skipped.push(`${key} (rep ${rep + 1})`);
      log(`[rep ${rep + 1}/${o.reps}] ${label.padEnd(18)} ${store.padEnd(15)} skipped: time budget`);
      return;
    }
    const out = await runChild(spec, root, timeoutMs);
    lastSeconds.set(key, out.seconds);
    record(store, label, rep, out);
  };
  // W5's floors (bench/w5-floor.ts: blind, answering as the contract asks, and answering with its
  // log read through mmap): limits, each measured once per repetition right after the stores' W5
  // children, each in a fresh process as theirs, so that their medians share the stores' conditions.
  const floorRuns: Array<Record<string, number>> = [];
  const answersRuns: Array<Record<string, number>> = [];
  const mmapRuns: Array<Record<string, number>> = [];
  const FLOORS = [
    ["w5floor", floorRuns, "w5 floor"],
    ["w5answers", answersRuns, "w5 floor, answers"],
    ["w5mmap", mmapRuns, "w5 floor, mmap"],
  ] as const;
  for (let rep = 0; rep < o.reps; rep++) {
    for (let wi = 0; wi < workloads.length; wi++) {
      const w = workloads[wi] as Workload;
      if (!want(w)) continue;
      for (const store of rotate(avail, rep + wi)) await runTimed(store, w, rep, { ...base, store, workload: w });
      if (w === "w5" && typeof limits !== "string") {
        for (const [workload, runs, label] of FLOORS) {
          const f = await runChild({ ...base, store: "none", workload }, root, timeoutMs);
          if (f.result !== null && f.error === null) runs.push(f.result.metrics);
          else notes.push(`W5's floor (bench/w5-floor.ts, ${workload}, rep ${rep + 1}) failed: ${f.error ?? "?"}`);
          log(`[rep ${rep + 1}/${o.reps}] ${label.padEnd(18)} ${"none".padEnd(15)} ${f.seconds.toFixed(1).padStart(6)} s`);
        }
      }
    }
    if (avail.includes("engram") && want("compact")) {
      for (const mode of rotate(["copy-on-write", "in-place"] as const, rep)) {
        await runTimed("engram", `compact ${mode}`, rep, { ...base, store: "engram", workload: "compact", mode });
      }
    }
  }
  if (typeof limits !== "string") Object.assign(limits, medianMetrics(floorRuns), medianMetrics(answersRuns), medianMetrics(mmapRuns));
  if (skipped.length > 0) {
    notes.push(`Time budget (${budgetMs / 1000} s) reached: skipped ${skipped.join(", ")}; those rows have fewer repetitions (or none).`);
  }

  fs.rmSync(root, { recursive: true, force: true });
  machine.push(`Load average at end (1/5/15 min): ${os.loadavg().map((x) => x.toFixed(2)).join(" / ")}`);
  const seconds = (Date.now() - t0) / 1000;
  const event = process.env["npm_lifecycle_event"];
  const command = event === "bench" || event === "bench:quick" ? `npm run ${event}` : `node --import tsx bench/run.ts ${argv.join(" ")}`.trim();
  const md = renderReport({
    title: "engram benchmark: side by side with lmdb, classic-level and better-sqlite3",
    command,
    startedAt,
    seconds,
    quick: o.quick,
    reps: o.reps,
    sizesText: sizesText(sizes),
    machine,
    stores: o.stores.map((name) => ({ name, status: status.get(name) ?? "not probed", durability: DURABILITY_NOTES[name] })),
    samples,
    fsync,
    limits,
    format,
    notes,
  });
  fs.mkdirSync(resultsDir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/\.\d+Z$/, "Z").replace(/:/g, "-");
  // A partial run (--only, --stores, --reps, --cpu-prof) keeps its own file and leaves latest.md
  // alone, and so does a quick one: latest.md is always the last full run, which bench/docs.ts
  // reads (a quick run there sent every reader of the default path to small sizes).
  const partial = o.only !== null || o.stores.length !== STORES.length || o.cpuProf || argv.includes("--reps") || argv.includes("--w3-keys") || argv.includes("--w4-keys");
  const own = `${stamp}${o.quick ? "-quick" : ""}${partial ? "-partial" : ""}.md`;
  const full = !o.quick && !partial;
  for (const name of full ? [own, "latest.md"] : [own]) {
    const file = path.join(resultsDir, name);
    fs.writeFileSync(`${file}.tmp`, md);
    fs.renameSync(`${file}.tmp`, file);
  }
  process.stdout.write(md + "\n");
  if (o.docs) {
    if (o.quick || partial) log("--docs ignored: docs/PERFORMANCE.md holds complete full-run figures only");
    else {
      const kept = fs.existsSync(DOCS_FILE) ? keptSections(fs.readFileSync(DOCS_FILE, "utf8")) : "";
      fs.writeFileSync(DOCS_FILE, renderDocs(md) + kept);
      log(`wrote ${path.relative(repoRoot, DOCS_FILE)}`);
    }
  }
  log(`report: bench/results/${own}${full ? " and bench/results/latest.md" : ""} (${seconds.toFixed(0)} s)`);
}

await main();
