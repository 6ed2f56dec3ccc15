/**
 * Sharing one store between processes (issue 10): what a client pays over the owner's own calls.
 *
 *   npm run bench:share [-- --quick]      (node --import tsx bench/share.ts [--quick])
 *
 * Measures, on one directory in `sync` durability:
 * - the msgpackr round trip of the wire protocol: encode a call frame, split and decode it, encode
 *   the reply, decode it (in-process, no socket);
 * - latency p50 / p99 of sequential async reads (hot keys) and durable writes, by the owner itself
 *   and by a client in another process;
 * - throughput of reads and of durable writes with 1, 2 and 4 client processes, 16 in flight each;
 * - durable puts/s: 4 client processes × 16 in flight against one process × 64 in flight (the
 *   owner alone, no clients): the target is that the former is at least as fast; with
 *   the CPU each side spent per put (µs), which does not depend on the machine's load the way
 *   rates do;
 * - the floor: a bare Node.js echo over a Unix socket between the same two processes (40-byte
 *   messages, one at a time), i.e. the two process wake-ups every client call needs, measured
 *   right before the client's latencies; the client's read p50 is reported against it.
 * Prints a markdown report on stdout and writes it to bench/results/share-latest.md.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as net from "node:net";
import * as readline from "node:readline";
import { fileURLToPath } from "node:url";
import { Session } from "node:inspector/promises";
import { Engram } from "../src/index.js";
import { decodeBody, encodeFrame, FrameDecoder, FRAME_BYTES_MIN } from "../share/protocol.js";
import { SharedStore } from "../share/handle.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const QUICK = process.argv.includes("--quick");
const KEYS = 2000;
const VALUE = "v".repeat(100);
const READS = QUICK ? 2000 : 20_000;
const WRITES = QUICK ? 200 : 1000;
const WINDOW_MS = QUICK ? 1000 : 3000;
/** `--rounds-only`: only the alternating 1 × 64 / 4 × 16 rounds (A/B runs and profiles); `--rounds N` of them. */
const ROUNDS_ONLY = process.argv.includes("--rounds-only");
const ROUNDS = roundsArg(process.argv);
/**
 * `--profile-four DIR`: V8 CPU profiles of the owner during each 1 × 64 and 4 × 16 window of the
 * rounds, and of each client process during its write windows, written to DIR.
 */
const PROFILE_FOUR = process.argv.includes("--profile-four") ? (process.argv[process.argv.indexOf("--profile-four") + 1] ?? "") : (process.env["BENCH_SHARE_PROFILE_DIR"] ?? null);
if (PROFILE_FOUR !== null) process.env["BENCH_SHARE_PROFILE_DIR"] = PROFILE_FOUR; // the workers profile their windows too

/** Runs `fn` under the V8 CPU profiler when PROFILE_FOUR is set; writes DIR/owner-NAME.cpuprofile. */
async function profiled<T>(name: string, fn: () => Promise<T>): Promise<T> {
  if (PROFILE_FOUR === null || PROFILE_FOUR === "") return fn();
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  const value = await fn();
  const { profile } = await session.post("Profiler.stop");
  fs.mkdirSync(PROFILE_FOUR, { recursive: true });
  fs.writeFileSync(path.join(PROFILE_FOUR, `owner-${name}.cpuprofile`), JSON.stringify(profile));
  session.disconnect();
  return value;
}

function roundsArg(argv: string[]): number {
  const i = argv.indexOf("--rounds");
  const n = i >= 0 ? Number(argv[i + 1]) : QUICK ? 1 : 3;
  if (!Number.isInteger(n) || n < 1 || n > 100) throw new Error("--rounds takes an integer from 1 to 100");
  return n;
}

function nowUs(): number {
  return Number(process.hrtime.bigint()) / 1000;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

/** Sequential latencies (µs) of `n` calls of `fn(i)`. */
async function latencies(n: number, fn: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = nowUs();
    await fn(i);
    xs.push(nowUs() - t);
  }
  return { p50: pct(xs, 50), p99: pct(xs, 99) };
}

/**
 * Context switches of this process so far, all threads (Linux /proc; zeros elsewhere): voluntary
 * (the thread blocked: waited for I/O, a lock, the next event) and involuntary (the kernel took
 * the CPU away: preempted, e.g. by a process its own write just woke).
 */
function contextSwitches(): { vol: number; invol: number } {
  let vol = 0;
  let invol = 0;
  try {
    for (const task of fs.readdirSync("/proc/self/task")) {
      const status = fs.readFileSync(`/proc/self/task/${task}/status`, "utf8");
      vol += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
      invol += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
    }
  } catch {
    // not Linux: no figures
  }
  return { vol, invol };
}

/** Runs `fn`; returns its value, the CPU (µs, all threads) and the context switches of this process meanwhile. */
async function cpuOf<T>(fn: () => Promise<T>): Promise<{ value: T; cpuUs: number; vol: number; invol: number }> {
  const c0 = process.cpuUsage();
  const s0 = contextSwitches();
  const value = await fn();
  const c = process.cpuUsage(c0);
  const s1 = contextSwitches();
  return { value, cpuUs: c.user + c.system, vol: s1.vol - s0.vol, invol: s1.invol - s0.invol };
}

/** Sequential round trips (µs) of 40-byte messages to the echo server at `socketPath`. */
async function echoLatencies(socketPath: string, n: number): Promise<{ p50: number; p99: number }> {
  const socket = net.createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let answered: (() => void) | null = null;
  socket.on("data", () => answered?.());
  const message = Buffer.alloc(40, 1);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = nowUs();
    await new Promise<void>((resolve) => {
      answered = resolve;
      socket.write(message);
    });
    xs.push(nowUs() - t);
  }
  socket.destroy();
  return { p50: pct(xs, 50), p99: pct(xs, 99) };
}

/** Ops per second of `inflight` loops calling `fn` for `ms`. */
async function throughput(inflight: number, ms: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  let ops = 0;
  let i = 0;
  const end = Date.now() + ms;
  const t0 = nowUs();
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (Date.now() < end) {
        await fn(i++);
        ops++;
      }
    }),
  );
  return ops / ((nowUs() - t0) / 1e6);
}

/** The worker side: a client process that runs one measurement on command. */
async function worker(dir: string, tag: string): Promise<void> {
  const store = await Engram.open(dir, { share: true });
  const out = (v: unknown): void => void process.stdout.write(`${JSON.stringify(v)}\n`);
  out({ ready: store.role });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, arg] = line.split(" ");
    if (cmd === "latency") {
      const floor = await echoLatencies(arg as string, READS);
      const read = await cpuOf(() => latencies(READS, (i) => store.read(`k${i % KEYS}`)));
      const write = await latencies(WRITES, (i) => store.write(`w-${tag}-${i}`, VALUE));
      out({ floor, read: read.value, readCpuUs: read.cpuUs / READS, write });
    } else if (cmd === "reads") {
      out({ opsPerSec: await throughput(Number(arg), WINDOW_MS, (i) => store.read(`k${i % KEYS}`)) });
    } else if (cmd === "writes") {
      const r = await profiled(`client-${tag}-${process.pid}`, () => cpuOf(() => throughput(Number(arg), WINDOW_MS, (i) => store.write(`t-${tag}-${i}`, VALUE))));
      out({ opsPerSec: r.value, cpuUs: r.cpuUs, vol: r.vol, invol: r.invol });
    } else if (cmd === "close") {
      await store.close();
      process.exit(0);
    }
  }
}

/** The bench's own node flags (e.g. --cpu-prof, which NODE_OPTIONS may not carry) for its workers, with tsx. */
function workerExecArgv(): string[] {
  const own = process.execArgv;
  return own.includes("tsx") ? own : [...own, "--import", "tsx"];
}

/** A worker process and its answers. */
class Worker {
  readonly child: ChildProcess;
  private readonly lines: string[] = [];
  private wake: (() => void) | null = null;
  constructor(dir: string, tag: string) {
    this.child = spawn(process.execPath, [...workerExecArgv(), path.join(here, "share.ts"), "worker", dir, tag], { stdio: ["pipe", "pipe", "inherit"] });
    readline.createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on("line", (l) => {
      this.lines.push(l);
      this.wake?.();
    });
  }
  async next(): Promise<Record<string, unknown>> {
    const deadline = Date.now() + 120_000;
    while (this.lines.length === 0) {
      if (Date.now() > deadline) throw new Error("bench worker did not answer in 120 s");
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, 1000);
      });
    }
    return JSON.parse(this.lines.shift() as string) as Record<string, unknown>;
  }
  async ask(cmd: string): Promise<Record<string, unknown>> {
    this.child.stdin?.write(`${cmd}\n`);
    return this.next();
  }
}

async function workers(dir: string, n: number, tag: string): Promise<Worker[]> {
  const ws = Array.from({ length: n }, (_, i) => new Worker(dir, `${tag}${i}`));
  for (const w of ws) {
    const r = await w.next();
    if (r["ready"] !== "client") throw new Error(`a bench worker became ${String(r["ready"])}, not a client`);
  }
  return ws;
}

async function closeAll(ws: Worker[]): Promise<void> {
  await Promise.all(ws.map((w) => new Promise<void>((r) => {
    w.child.once("exit", () => r());
    w.child.stdin?.write("close\n");
  })));
}

/** Runs `fn`, and measures the CPU this (the owner's) process used meanwhile, as a fraction of the wall time. */
async function ownerCpu<T>(fn: () => Promise<T>): Promise<{ value: T; cpu: number }> {
  const c0 = process.cpuUsage();
  const t0 = nowUs();
  const value = await fn();
  const c = process.cpuUsage(c0);
  return { value, cpu: (c.user + c.system) / (nowUs() - t0) };
}

/**
 * The protocol's encode/decode cost per write call and its result (µs): `batch` calls to a
 * frame (1: a lone call; 16: one client's turn at 16 in flight) and one replies frame of them.
 */
function roundTripUs(batch: number): number {
  const n = (QUICK ? 20_000 : 200_000) / batch;
  const dec = new FrameDecoder(FRAME_BYTES_MIN);
  const t0 = nowUs();
  for (let i = 0; i < n; i++) {
    const ops = new Array<string>(batch).fill("write");
    const args = Array.from({ length: batch }, (_, j) => [`key-${i}-${j}`, VALUE, { scope: "user:alice" }]);
    const call = encodeFrame(batch === 1 ? { t: "call", id: i, op: "write", args: args[0] as unknown[] } : { t: "calls", id: i, ops, args }, FRAME_BYTES_MIN);
    for (const b of dec.push(call)) decodeBody(b);
    const r: unknown[] = [];
    for (let j = 0; j < batch; j++) r.push(i + j, true, { ok: true, version: i + j, generation: 1 });
    const reply = encodeFrame({ t: "replies", r }, FRAME_BYTES_MIN);
    for (const b of dec.push(reply)) decodeBody(b);
  }
  return (nowUs() - t0) / (n * batch);
}

const f = (x: number, d = 0): string => x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

/** Context switches per 1000 puts: voluntary and involuntary, of one side. */
type Switches = { vol: number; invol: number };
type Round = {
  solo: number;
  four: number;
  soloCpuUs: number;
  ownerCpuUs: number;
  clientCpuUs: number;
  soloPerGroup: number;
  fourPerGroup: number;
  soloSwitches: Switches;
  ownerSwitches: Switches;
  clientSwitches: Switches;
};

/** Runs `fn`; returns its value and the owner's operations per commit group meanwhile. */
async function perGroupOf<T>(handle: SharedStore, fn: () => Promise<T>): Promise<{ value: T; perGroup: number }> {
  const c0 = handle.commitCounts;
  const value = await fn();
  const c1 = handle.commitCounts;
  if (c0 === null || c1 === null) throw new Error("the bench process must own the store");
  return { value, perGroup: (c1.ops - c0.ops) / Math.max(1, c1.groups - c0.groups) };
}

/**
 * The comparison of issue 10: one process × 64 durable puts in flight (the owner alone) against
 * 4 client processes × 16, in ROUNDS alternating windows so that the machine's load drifts over
 * both alike; with the CPU per put of each side.
 */
async function fourRounds(handle: SharedStore, dir: string, log: (s: string) => void): Promise<Round[]> {
  const owner = Engram.fromBackend(handle);
  const ws4 = await workers(dir, 4, "c-");
  const rounds: Round[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const sg = await profiled(`solo-${r}`, () => perGroupOf(handle, () => cpuOf(() => throughput(64, WINDOW_MS, (i) => owner.write(`solo-${r}-${i}`, VALUE)))));
    const fg = await profiled(`four-${r}`, () => perGroupOf(handle, () => cpuOf(() => Promise.all(ws4.map((w) => w.ask("writes 16"))))));
    const s = sg.value;
    const four = fg.value;
    const four4 = four.value.reduce((a, x) => a + Number(x["opsPerSec"]), 0);
    const fourOps = four4 * (WINDOW_MS / 1000);
    const clientCpuUs = four.value.reduce((a, x) => a + Number(x["cpuUs"]), 0) / fourOps;
    const soloOps = s.value * (WINDOW_MS / 1000);
    const per1000 = (n: number, ops: number): number => (1000 * n) / ops;
    const sum = (k: "vol" | "invol"): number => four.value.reduce((a, x) => a + Number(x[k] ?? 0), 0);
    const row: Round = {
      solo: s.value,
      four: four4,
      soloCpuUs: s.cpuUs / soloOps,
      ownerCpuUs: four.cpuUs / fourOps,
      clientCpuUs,
      soloPerGroup: sg.perGroup,
      fourPerGroup: fg.perGroup,
      soloSwitches: { vol: per1000(s.vol, soloOps), invol: per1000(s.invol, soloOps) },
      ownerSwitches: { vol: per1000(four.vol, fourOps), invol: per1000(four.invol, fourOps) },
      clientSwitches: { vol: per1000(sum("vol"), fourOps), invol: per1000(sum("invol"), fourOps) },
    };
    rounds.push(row);
    const sw = (x: Switches): string => `${f(x.vol)}+${f(x.invol)}`;
    log(
      `round ${r}: 1 × 64 ${f(s.value)} puts/s (${f(row.soloCpuUs, 1)} µs CPU/put), 4 × 16 ${f(four4)} puts/s (owner ${f(row.ownerCpuUs, 1)} + clients ${f(clientCpuUs, 1)} µs CPU/put), ` +
        `puts per commit group ${f(row.soloPerGroup, 1)} vs ${f(row.fourPerGroup, 1)}, context switches per 1000 puts (voluntary+involuntary) solo ${sw(row.soloSwitches)}, owner ${sw(row.ownerSwitches)}, clients ${sw(row.clientSwitches)}, ratio ${f(four4 / s.value, 2)}`,
    );
  }
  await closeAll(ws4);
  return rounds;
}

/** A client process's sequential read and write latencies and, between the same two processes, the floor: a bare echo over a Unix socket. */
async function clientLatencies(root: string, dir: string): Promise<{ floor: Lat; read: Lat; readCpuUs: number; write: Lat }> {
  const echoPath = path.join(root, "echo.sock");
  const echo = net.createServer((c) => c.on("data", (d) => c.write(d)));
  await new Promise<void>((resolve) => echo.listen(echoPath, resolve));
  try {
    const [one] = await workers(dir, 1, "l");
    try {
      return (await (one as Worker).ask(`latency ${echoPath}`)) as { floor: Lat; read: Lat; readCpuUs: number; write: Lat };
    } finally {
      await closeAll([one as Worker]);
    }
  } finally {
    echo.close();
  }
}

/** Percentiles of one latency sample, in µs. */
type Lat = { p50: number; p99: number };

/** `--latency-only`: the floor and a client's sequential read and write latencies, one line on stderr (A/B runs). */
async function latencyOnly(): Promise<void> {
  const root = fs.mkdtempSync(path.join(process.env["BENCH_TMPDIR"] ?? os.tmpdir(), "engram-bench-share-"));
  try {
    const dir = path.join(root, "store");
    const owner = await Engram.open(dir, { share: true });
    await owner.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: VALUE })));
    const lat = await clientLatencies(root, dir);
    await owner.close();
    process.stderr.write(
      `bench:share: load ${os.loadavg()[0]?.toFixed(2)}: echo p50 ${f(lat.floor.p50, 1)} µs; client read p50 ${f(lat.read.p50, 1)} µs (${f(lat.read.p50 / lat.floor.p50, 2)}× echo, client CPU ${f(lat.readCpuUs, 1)} µs/read); write p50 ${f(lat.write.p50)} µs\n`,
    );
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

/** `--rounds-only`: a store of the hot keys, then only the rounds; one line per round on stderr. */
async function roundsOnly(): Promise<void> {
  const root = fs.mkdtempSync(path.join(process.env["BENCH_TMPDIR"] ?? os.tmpdir(), "engram-bench-share-"));
  const log = (s: string): void => void process.stderr.write(`bench:share: ${s}\n`);
  try {
    const dir = path.join(root, "store");
    const handle = await SharedStore.open(dir, { share: true });
    const owner = Engram.fromBackend(handle);
    await owner.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: VALUE })));
    const rounds = await fourRounds(handle, dir, log);
    await owner.close();
    const ratios = rounds.map((r) => r.four / r.solo);
    log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}; median ratio ${f(pct(ratios, 50), 2)}`);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const root = fs.mkdtempSync(path.join(process.env["BENCH_TMPDIR"] ?? os.tmpdir(), "engram-bench-share-"));
  const dir = path.join(root, "store");
  const lines: string[] = [];
  const log = (s: string): void => void process.stderr.write(`bench:share: ${s}\n`);
  try {
    const rt = roundTripUs(1);
    const rt16 = roundTripUs(16);
    log(`msgpackr round trip ${f(rt, 2)} µs per lone call, ${f(rt16, 2)} µs per call in frames of 16`);
    const handle = await SharedStore.open(dir, { share: true }); // default options: compaction in a worker thread
    const owner = Engram.fromBackend(handle);
    await owner.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: VALUE })));
    const ownRead = await latencies(READS, (i) => owner.read(`k${i % KEYS}`));
    const ownWrite = await latencies(WRITES, (i) => owner.write(`own-${i}`, VALUE));
    log(`owner: read p50 ${f(ownRead.p50, 1)} µs, write p50 ${f(ownWrite.p50)} µs`);
    // The client's latencies right after the owner's, on the same small store, next to the floor:
    // a bare echo over a Unix socket between the same two processes.
    const lat = await clientLatencies(root, dir);
    log(`echo floor p50 ${f(lat.floor.p50, 1)} µs; client: read p50 ${f(lat.read.p50, 1)} µs (client CPU ${f(lat.readCpuUs, 1)} µs/read), write p50 ${f(lat.write.p50)} µs`);
    const solo = await ownerCpu(() => throughput(64, WINDOW_MS, (i) => owner.write(`solo-${i}`, VALUE)));
    const solo64 = solo.value;
    log(`1 process × 64: ${f(solo64)} puts/s`);

    const scale: Array<{ n: number; reads: number; writes: number; readCpu: number; writeCpu: number }> = [];
    for (const n of [1, 2, 4]) {
      const ws = await workers(dir, n, `s${n}-`);
      const r = await ownerCpu(async () => (await Promise.all(ws.map((w) => w.ask("reads 16")))).reduce((a, x) => a + Number(x["opsPerSec"]), 0));
      const w = await ownerCpu(async () => (await Promise.all(ws.map((x) => x.ask("writes 16")))).reduce((a, x) => a + Number(x["opsPerSec"]), 0));
      await closeAll(ws);
      scale.push({ n, reads: r.value, writes: w.value, readCpu: r.cpu, writeCpu: w.cpu });
      log(`${n} client process(es) × 16 in flight: ${f(r.value)} reads/s (owner CPU ${f(r.cpu * 100)}%), ${f(w.value)} durable puts/s (owner CPU ${f(w.cpu * 100)}%)`);
    }
    const rounds = await fourRounds(handle, dir, log);
    await owner.close();
    const med = (xs: number[]): number => pct(xs, 50);
    const four = med(rounds.map((r) => r.four));
    const soloMed = med(rounds.map((r) => r.solo));

    lines.push(
      `## Sharing one store between processes`,
      ``,
      `Run ${new Date().toISOString()} · ${QUICK ? "quick" : "full"} · ${os.cpus().length} cores, load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")} · \`npm run bench:share\` (bench/share.ts).`,
      `One store, \`sync\` durability, 100-byte values, ${KEYS} hot keys; the owner is the bench process, clients are separate processes over the Unix socket.`,
      ``,
      `| latency (µs) | owner's own p50 | owner's own p99 | client p50 | client p99 |`,
      `|---|---:|---:|---:|---:|`,
      `| async read (hot key) | ${f(ownRead.p50, 1)} | ${f(ownRead.p99, 1)} | ${f(lat.read.p50, 1)} | ${f(lat.read.p99, 1)} |`,
      `| durable write | ${f(ownWrite.p50)} | ${f(ownWrite.p99)} | ${f(lat.write.p50)} | ${f(lat.write.p99)} |`,
      `| floor: bare echo over a Unix socket, same two processes | | | ${f(lat.floor.p50, 1)} | ${f(lat.floor.p99, 1)} |`,
      ``,
      `Client read p50 = ${f(lat.read.p50 / lat.floor.p50, 2)}× the echo floor; CPU per sequential client read, in the client process: ${f(lat.readCpuUs, 1)} µs.`,
      ``,
      `| client processes × 16 in flight | reads/s | owner CPU | durable puts/s | owner CPU |`,
      `|---|---:|---:|---:|---:|`,
      ...scale.map((s) => `| ${s.n} | ${f(s.reads)} | ${f(s.readCpu * 100)}% | ${f(s.writes)} | ${f(s.writeCpu * 100)}% |`),
      ``,
      `Durable puts with 64 in flight in all, in alternating ${WINDOW_MS / 1000} s windows (the first row also alone, before any client: ${f(solo64)} puts/s, owner CPU ${f(solo.cpu * 100)}%):`,
      ``,
      `| round | one process × 64 (the owner) | CPU µs/put | 4 client processes × 16 | owner CPU µs/put | clients' CPU µs/put | ratio |`,
      `|---|---:|---:|---:|---:|---:|---:|`,
      ...rounds.map((r, i) => `| ${i + 1} | ${f(r.solo)} | ${f(r.soloCpuUs, 1)} | ${f(r.four)} | ${f(r.ownerCpuUs, 1)} | ${f(r.clientCpuUs, 1)} | ${f(r.four / r.solo, 2)}× |`),
      `| median | ${f(soloMed)} | ${f(med(rounds.map((r) => r.soloCpuUs)), 1)} | ${f(four)} | ${f(med(rounds.map((r) => r.ownerCpuUs)), 1)} | ${f(med(rounds.map((r) => r.clientCpuUs)), 1)} | ${f(four / soloMed, 2)}× |`,
      ``,
      `Commit groups and context switches in the same windows (switches per 1000 puts, all threads, voluntary + involuntary, from /proc):`,
      ``,
      `| round | puts per group, 1 × 64 | puts per group, 4 × 16 | switches, 1 × 64 | owner's switches, 4 × 16 | clients' switches, 4 × 16 |`,
      `|---|---:|---:|---:|---:|---:|`,
      ...rounds.map((r, i) => {
        const sw = (x: Switches): string => `${f(x.vol)} + ${f(x.invol)}`;
        return `| ${i + 1} | ${f(r.soloPerGroup, 1)} | ${f(r.fourPerGroup, 1)} | ${sw(r.soloSwitches)} | ${sw(r.ownerSwitches)} | ${sw(r.clientSwitches)} |`;
      }),
      ``,
      `msgpackr round trip of the protocol (encode call, frame, decode; encode reply, decode), in process: ${f(rt, 2)} µs per lone call, ${f(rt16, 2)} µs per call in frames of 16 calls and 16 results.`,
      `Targets (issue 10): client async read p50 ≤ 60 µs — ${lat.read.p50 <= 60 ? "met" : "not met"} (${f(lat.read.p50, 1)} µs); ` +
        `4 processes × 16 at least as fast as 1 × 64 — ${four >= soloMed ? "met" : "not met"} (median ${f(four / soloMed, 2)}×).`,
      ``,
    );
    const report = lines.join("\n");
    fs.mkdirSync(path.join(here, "results"), { recursive: true });
    fs.writeFileSync(path.join(here, "results", `share-latest${QUICK ? "-quick" : ""}.md`), report);
    process.stdout.write(report);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[2] === "worker") await worker(process.argv[3] as string, process.argv[4] as string);
else if (ROUNDS_ONLY) await roundsOnly();
else if (process.argv.includes("--latency-only")) await latencyOnly();
else await main();
