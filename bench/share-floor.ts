/**
 * The floor of issue 10's durable-put target, with no engram code at all: is "4 client processes
 * × 16 durable puts in flight at least as fast as 1 process × 64" reachable on this machine by
 * any design that commits in groups through one owner process?
 *
 *   node --import tsx bench/share-floor.ts [--rounds N] [--window-ms MS] [--work-us US] [--owner-work-us US]
 *                                          [--client-work-us US] [--pool-replies]
 *
 * Two setups run in alternating windows in the same run, doing the same durable work:
 * - **solo**: one process keeps 64 puts in flight. A put burns `--work-us` of CPU (what the
 *   engine spends deciding and encoding one put: default 15 µs, about a local engram put's main-
 *   thread work here), appends a 100-byte record to the open group; the group commit loop writes
 *   the group with one write and one fdatasync (in the libuv thread pool, as engram does), then
 *   completes its puts, each of which issues the next put at once.
 * - **four**: this process is the owner of a Unix socket; 4 child processes keep 16 puts each in
 *   flight, sending the puts of one turn (ids and records) as one frame. The owner burns the same `--work-us` per
 *   put as it reads them, appends them to the open group, and starts a group when the log is idle
 *   and every client it answered has sent again (or 2 ms passed: gathering, as engram does),
 *   then answers each client with one frame. A client burns `--client-work-us` per reply (0 by
 *   default: the most favourable case for the shared side). `--owner-work-us` (default: the
 *   same as solo) models clients that take part of a put's work off the owner (move it to
 *   `--client-work-us`).
 * Reported per window: puts/s, CPU per put of each side (process.cpuUsage, all threads), puts per
 * group, and the ratio four / solo. If even this floor stays below 1.0×, the remaining gap of the
 * engram figure is the process boundary (wake-ups of separate processes on this machine's cores),
 * measured, and not the share protocol.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const RECORD_BYTES = 100;
const GATHER_MS = 2;
const CLIENTS = 4;
const PER_CLIENT = 16;
const SOLO_IN_FLIGHT = CLIENTS * PER_CLIENT;
const POOL_REPLIES = process.argv.includes("--pool-replies");

function numArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(process.argv[i + 1]);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} needs a non-negative number`);
  return n;
}

/** Loop iterations per µs of this process's CPU, measured once (burn() is calibrated by it). */
let itersPerUs = 0;
let sink = 0;

/** Burns about `us` µs of CPU (a fixed amount of arithmetic, not wall time). */
function burn(us: number): void {
  let x = sink | 1;
  const n = Math.round(us * itersPerUs);
  for (let i = 0; i < n; i++) x = (x ^ (x << 13)) ^ ((x >>> 17) ^ (x << 5));
  sink = x;
}

function calibrate(): void {
  itersPerUs = 100;
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = process.hrtime.bigint();
    burn(20_000);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1000);
  }
  itersPerUs = (100 * 20_000) / best;
}

/** One durable file written in groups: one write + one fdatasync (thread pool) per group. */
class GroupLog {
  private readonly fd: number;
  private offset = 0;
  private open: Array<() => void> = [];
  private openBytes: Buffer[] = [];
  private writing = false;
  groups = 0;
  puts = 0;
  /** Whether a group may start now (four: gathering); solo: always. */
  mayStart: () => boolean = () => true;
  /** Called when a group starts (four: ends the gathering window). */
  onStart: () => void = () => undefined;

  constructor(file: string) {
    this.fd = fs.openSync(file, "w");
  }

  /** Appends one record; `done` runs once a group holding it is durable. */
  append(record: Buffer, done: () => void): void {
    this.openBytes.push(record);
    this.open.push(done);
    if (!this.writing) queueMicrotask(() => this.kick());
  }

  /** Starts the open group if none is in flight and the gate allows it. */
  kick(): void {
    if (this.writing || this.open.length === 0 || !this.mayStart()) return;
    this.writing = true;
    this.onStart();
    const dones = this.open;
    const buf = Buffer.concat(this.openBytes);
    this.open = [];
    this.openBytes = [];
    fs.writeSync(this.fd, buf, 0, buf.length, this.offset);
    this.offset += buf.length;
    fs.fdatasync(this.fd, (err) => {
      if (err) throw err;
      this.writing = false;
      this.groups += 1;
      this.puts += dones.length;
      for (const d of dones) d();
      process.nextTick(() => this.kick()); // after the acks the dones queued (four: those clients are now expected back)
    });
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

interface Window {
  puts: number;
  ms: number;
  cpuUs: number;
  groups: number;
}

/** One process, 64 puts in flight, for `ms`. */
async function solo(file: string, ms: number, workUs: number): Promise<Window> {
  const log = new GroupLog(file);
  const record = Buffer.alloc(RECORD_BYTES, 1);
  let stop = false;
  let outstanding = 0;
  let finished: () => void = () => undefined;
  const put = (): void => {
    if (stop) {
      if (--outstanding === 0) finished();
      return;
    }
    burn(workUs);
    log.append(record, put);
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < SOLO_IN_FLIGHT; i++) {
    outstanding += 1;
    put();
  }
  await new Promise((r) => setTimeout(r, ms));
  const puts = log.puts;
  const t = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const groups = log.groups;
  stop = true;
  await new Promise<void>((r) => (finished = r));
  log.close();
  return { puts, ms: t, cpuUs: c.user + c.system, groups };
}

/** Frames: 4-byte length, then `count` u32 ids (client → owner: puts; owner → client: acks). */
function frameOf(ids: number[]): Buffer {
  const b = Buffer.allocUnsafe(4 + 4 * ids.length);
  b.writeUInt32BE(4 * ids.length, 0);
  for (let i = 0; i < ids.length; i++) b.writeUInt32BE(ids[i] as number, 4 + 4 * i);
  return b;
}

/** Splits a byte stream into frames of u32 ids. */
class Frames {
  private buf: Buffer = Buffer.alloc(0);
  push(chunk: Buffer): number[][] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: number[][] = [];
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (this.buf.length < 4 + n) break;
      const ids: number[] = [];
      for (let i = 0; i < n; i += 4) ids.push(this.buf.readUInt32BE(4 + i));
      out.push(ids);
      this.buf = this.buf.subarray(4 + n);
    }
    return out;
  }
}

/** Splits a byte stream into frame bodies (4-byte length prefix). */
class RawFrames {
  private buf: Buffer = Buffer.alloc(0);
  push(chunk: Buffer): Buffer[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: Buffer[] = [];
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (this.buf.length < 4 + n) break;
      out.push(this.buf.subarray(4, 4 + n));
      this.buf = this.buf.subarray(4 + n);
    }
    return out;
  }
}

/** A client process: 16 puts in flight, the puts of one turn in one frame (each put carries its record). */
function clientMain(sock: string, clientWorkUs: number): void {
  calibrate();
  const s = net.createConnection(sock);
  const frames = new Frames();
  let next = 1;
  const record = Buffer.alloc(RECORD_BYTES, 2);
  const send = (count: number): void => {
    // One frame for the puts of this turn: count, then each put's id and record.
    const b = Buffer.allocUnsafe(8 + count * (4 + RECORD_BYTES));
    b.writeUInt32BE(4 + count * (4 + RECORD_BYTES), 0);
    b.writeUInt32BE(count, 4);
    for (let i = 0; i < count; i++) {
      const at = 8 + i * (4 + RECORD_BYTES);
      b.writeUInt32BE(next++, at);
      record.copy(b, at + 4);
    }
    s.write(b);
  };
  s.on("connect", () => send(PER_CLIENT));
  s.on("data", (chunk: Buffer) => {
    for (const acks of frames.push(chunk)) {
      for (let i = 0; i < acks.length; i++) burn(clientWorkUs);
      send(acks.length);
    }
  });
  s.on("error", () => process.exit(0));
  s.on("close", () => process.exit(0));
}

/** The owner of four clients for `ms`: gathers, commits, answers. */
async function four(file: string, ms: number, workUs: number): Promise<{ w: Window; clientCpuUs: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "share-floor-"));
  const sockPath = path.join(dir, "s");
  const log = new GroupLog(file);
  const conns = new Set<{ s: net.Socket; expected: boolean; acks: number[] }>();
  let gatherUntil = 0;
  let gatherTimer: NodeJS.Timeout | null = null;
  log.onStart = () => {
    if (gatherTimer !== null) clearTimeout(gatherTimer);
    gatherTimer = null;
  };
  log.mayStart = () => {
    for (const c of conns) if (c.expected && performance.now() < gatherUntil) return false;
    return true;
  };
  const server = net.createServer((s) => {
    const conn = { s, expected: false, acks: [] as number[] };
    conns.add(conn);
    const frames = new RawFrames();
    s.on("data", (chunk: Buffer) => {
      conn.expected = false;
      for (const body of frames.push(chunk)) {
        const count = body.readUInt32BE(0);
        for (let i = 0; i < count; i++) {
          const at = 4 + i * (4 + RECORD_BYTES);
          const id = body.readUInt32BE(at);
          burn(workUs);
          log.append(body.subarray(at + 4, at + 4 + RECORD_BYTES), () => {
            conn.acks.push(id);
            if (conn.acks.length === 1) process.nextTick(() => flushAcks(conn));
          });
        }
      }
      log.kick();
    });
    s.on("error", () => undefined);
  });
  const flushAcks = (conn: { s: net.Socket; expected: boolean; acks: number[] }): void => {
    const acks = conn.acks;
    conn.acks = [];
    conn.expected = true;
    gatherUntil = performance.now() + GATHER_MS;
    gatherTimer ??= setTimeout(() => {
      gatherTimer = null;
      for (const c of conns) c.expected = false; // not back within the window: not waited for
      log.kick();
    }, GATHER_MS);
    const frame = frameOf(acks);
    // --pool-replies: the write (and the wake-up of the client it causes) runs on a libuv pool
    // thread, so a client woken onto the owner's core preempts that thread, not the event loop.
    // Safe here only because nothing else writes these sockets.
    const fd = (conn.s as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (POOL_REPLIES && fd !== undefined && fd >= 0) fs.write(fd, frame, (err) => err && conn.s.write(frame));
    else conn.s.write(frame);
  };
  await new Promise<void>((r) => server.listen(sockPath, r));
  const children: ChildProcess[] = [];
  const cpuFiles: string[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const cpuFile = path.join(dir, `cpu-${i}`);
    cpuFiles.push(cpuFile);
    children.push(spawn(process.execPath, ["--import", "tsx", path.join(here, "share-floor.ts"), "client", sockPath, String(numArg("--client-work-us", 0)), cpuFile], { stdio: "inherit" }));
  }
  while (conns.size < CLIENTS) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 200)); // every client past its start-up
  const p0 = log.puts;
  const g0 = log.groups;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const ch of children) ch.kill("SIGUSR1"); // clients: start counting CPU
  await new Promise((r) => setTimeout(r, ms));
  for (const ch of children) ch.kill("SIGUSR2"); // clients: write CPU since SIGUSR1
  const puts = log.puts - p0;
  const t = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const groups = log.groups - g0;
  let clientCpuUs = 0;
  for (const f of cpuFiles) {
    const deadline = Date.now() + 5000;
    while (!fs.existsSync(f) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    clientCpuUs += Number(fs.readFileSync(f, "utf8"));
  }
  for (const ch of children) ch.kill("SIGKILL");
  for (const s of conns) s.s.destroy();
  server.close();
  if (gatherTimer !== null) clearTimeout(gatherTimer);
  await new Promise((r) => setTimeout(r, 50));
  log.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { w: { puts, ms: t, cpuUs: c.user + c.system, groups }, clientCpuUs };
}

async function main(): Promise<void> {
  calibrate();
  const rounds = numArg("--rounds", 3);
  const windowMs = numArg("--window-ms", 3000);
  const workUs = numArg("--work-us", 15);
  const ownerWorkUs = numArg("--owner-work-us", workUs);
  const dir = fs.mkdtempSync(path.join(process.env["BENCH_TMPDIR"] ?? os.tmpdir(), "engram-bench-floor-"));
  console.log(`share-floor: ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}, work ${workUs} µs/put solo, ${ownerWorkUs} on the owner, ${numArg("--client-work-us", 0)} µs/put on each client, ${windowMs} ms windows${POOL_REPLIES ? ", replies written from the thread pool" : ""}`);
  console.log("| round | solo 1 × 64 puts/s | CPU µs/put | puts/group | four 4 × 16 puts/s | owner CPU µs/put | clients' CPU µs/put | puts/group | ratio |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const a = await solo(path.join(dir, `solo-${r}`), windowMs, workUs);
    const b = await four(path.join(dir, `four-${r}`), windowMs, ownerWorkUs);
    const ra = (a.puts / a.ms) * 1000;
    const rb = (b.w.puts / b.w.ms) * 1000;
    ratios.push(rb / ra);
    const f = (n: number): string => Math.round(n).toLocaleString("en-US");
    console.log(`| ${r + 1} | ${f(ra)} | ${(a.cpuUs / a.puts).toFixed(1)} | ${(a.puts / a.groups).toFixed(1)} | ${f(rb)} | ${(b.w.cpuUs / b.w.puts).toFixed(1)} | ${(b.clientCpuUs / b.w.puts).toFixed(1)} | ${(b.w.puts / b.w.groups).toFixed(1)} | ${(rb / ra).toFixed(2)}× |`);
  }
  ratios.sort((x, y) => x - y);
  console.log(`median ratio ${(ratios[Math.floor(ratios.length / 2)] as number).toFixed(2)}×; load after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  fs.rmSync(dir, { recursive: true, force: true });
}

if (process.argv[2] === "client") {
  const cpuFile = process.argv[5] as string;
  let c0 = process.cpuUsage();
  process.on("SIGUSR1", () => (c0 = process.cpuUsage()));
  process.on("SIGUSR2", () => {
    const c = process.cpuUsage(c0);
    fs.writeFileSync(cpuFile, String(c.user + c.system));
  });
  clientMain(process.argv[3] as string, Number(process.argv[4]));
} else {
  await main();
}
