/**
 * Physical limits of this machine for the storage patterns engram uses, measured on the same
 * filesystem as the benchmark's stores. Run alone: `node --import tsx bench/limits.ts [--quick] [--dir D]`.
 *
 * - append + fdatasync: 256 B appended past the end of the file, then fdatasync (size changes:
 *   the filesystem journals the inode each time).
 * - overwrite + fdatasync: 256 B written into space preallocated with real zeros and synced.
 * - sparse + fdatasync: 256 B written into space extended with ftruncate (a hole: blocks are
 *   allocated on first write, which is what a segment preallocated by ftruncate gets).
 * - overwrite + fdatasync beside a busy core: the overwrite loop again while another thread of the
 *   process spins (a cold process's V8 compiler and GC threads take a core the same way).
 * - sequential append: 1 MiB writes then one fdatasync, GB/s; and the fdatasync alone of 64 MiB
 *   written just before (what closing a store loaded without syncs costs, if it makes them durable).
 * - pread 256 B: readSync at random offsets of a page-cached file; async with fs.read
 *   (1 and 16 in flight) and fs.promises FileHandle.read (16 in flight).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { Bench } from "tinybench";
import { fmt, nowNs, quantileOf, rng, secondsSince } from "./common.js";

/** One metric of the limits table: its label and unit. */
export const LIMIT_ROWS: ReadonlyArray<{ id: string; label: string; unit: string }> = [
  { id: "limit.append.rate", label: "append 256 B + fdatasync", unit: "ops/s" },
  { id: "limit.append.p50", label: "append 256 B + fdatasync, latency p50", unit: "µs" },
  { id: "limit.append.p99", label: "append 256 B + fdatasync, latency p99", unit: "µs" },
  { id: "limit.overwrite.rate", label: "overwrite 256 B in zero-filled preallocated space + fdatasync", unit: "ops/s" },
  { id: "limit.overwrite.p50", label: "overwrite + fdatasync, latency p50", unit: "µs" },
  { id: "limit.overwrite.p99", label: "overwrite + fdatasync, latency p99", unit: "µs" },
  { id: "limit.overwrite.busy.rate", label: "overwrite + fdatasync while another thread spins on the second core", unit: "ops/s" },
  { id: "limit.overwrite.busy.p50", label: "overwrite + fdatasync beside the spinning thread, latency p50", unit: "µs" },
  { id: "limit.sparse.rate", label: "write 256 B into ftruncate-extended (sparse) space + fdatasync", unit: "ops/s" },
  { id: "limit.sparse.p99", label: "sparse write + fdatasync, latency p99", unit: "µs" },
  { id: "limit.seq.GBps", label: "sequential append, 1 MiB writes + final fdatasync", unit: "GB/s" },
  { id: "limit.seq.syncMs", label: "fdatasync alone of 64 MiB (16 MiB with --quick) written just before", unit: "ms" },
  { id: "limit.pread.sync", label: "readSync pread 256 B (page cache)", unit: "ops/s" },
  { id: "limit.pread.async1", label: "fs.read pread 256 B, 1 in flight", unit: "ops/s" },
  { id: "limit.pread.async16", label: "fs.read pread 256 B, 16 in flight", unit: "ops/s" },
  { id: "limit.pread.fh16", label: "FileHandle.read 256 B, 16 in flight", unit: "ops/s" },
  { id: "limit.touch.fresh", label: "first write to fresh memory (allocUnsafeSlow, one byte per 4 KiB page)", unit: "µs/page" },
  { id: "limit.touch.again", label: "write to the same memory again", unit: "µs/page" },
  { id: "limit.pread16k.fresh", label: "readSync pread 16 KiB (page cache) into fresh memory", unit: "µs" },
  { id: "limit.pread16k.reused", label: "readSync pread 16 KiB (page cache) into one reused buffer", unit: "µs" },
  { id: "limit.w5floor.seconds", label: "W5 on the floor store (bench/w5-floor.ts: the least W5 costs a store that meets the reopen and heap goals here)", unit: "s" },
  { id: "limit.w5floor.delete.seconds", label: "of which delete", unit: "s" },
  { id: "limit.w5floor.rewrite.seconds", label: "of which rewrite", unit: "s" },
  { id: "limit.w5floor.verify.seconds", label: "of which read-all-verify", unit: "s" },
  { id: "limit.w5floor.reopenMs", label: "the floor store's reopen after W5 + first read", unit: "ms" },
  { id: "limit.w5floor.answers.seconds", label: "W5 on the floor store answering as the contract asks (a state lookup before each write and forget: a forget of nothing writes nothing, a write after a forget takes the next generation)", unit: "s" },
  { id: "limit.w5floor.answers.delete.seconds", label: "of which delete", unit: "s" },
  { id: "limit.w5floor.answers.rewrite.seconds", label: "of which rewrite", unit: "s" },
  { id: "limit.w5floor.answers.verify.seconds", label: "of which read-all-verify", unit: "s" },
  { id: "limit.w5floor.answers.reopenMs", label: "the answering floor store's reopen after W5 + first read", unit: "ms" },
  { id: "limit.w5floor.answers.mmap.seconds", label: "W5 on the answering floor store reading its log through mmap (bench/native-mmap.ts, a native addon, as lmdb reads its file)", unit: "s" },
  { id: "limit.w5floor.answers.mmap.delete.seconds", label: "of which delete", unit: "s" },
  { id: "limit.w5floor.answers.mmap.rewrite.seconds", label: "of which rewrite", unit: "s" },
  { id: "limit.w5floor.answers.mmap.verify.seconds", label: "of which read-all-verify", unit: "s" },
];

function syncLoop(fd: number, n: number, capMs: number, pos: (i: number) => number | null): { rate: number; lat: Float64Array; done: number } {
  const buf = Buffer.alloc(256, 0xa5);
  const lat = new Float64Array(n);
  const deadline = nowNs() + BigInt(capMs) * 1_000_000n;
  const t0 = nowNs();
  let done = 0;
  for (let i = 0; i < n; i++) {
    const t = nowNs();
    fs.writeSync(fd, buf, 0, 256, pos(i));
    fs.fdatasyncSync(fd);
    const e = nowNs();
    lat[i] = Number(e - t) / 1000;
    done++;
    if (e > deadline) break;
  }
  return { rate: done / secondsSince(t0), lat, done };
}

function readAsync(fd: number, buf: Buffer, at: number): Promise<number> {
  return new Promise((resolve, reject) => {
    fs.read(fd, buf, 0, 256, at, (err, n) => (err ? reject(err) : resolve(n)));
  });
}

/** Measures every limit in LIMIT_ROWS on a scratch directory inside `dir`. */
export async function measureLimits(dir: string, quick: boolean): Promise<Record<string, number>> {
  const work = fs.mkdtempSync(path.join(dir, "limits-"));
  const m: Record<string, number> = {};
  const n = quick ? 200 : 3000;
  const capMs = quick ? 200 : 1000;
  try {
    {
      const fd = fs.openSync(path.join(work, "append.dat"), "w");
      const r = syncLoop(fd, n, capMs, () => null);
      fs.closeSync(fd);
      m["limit.append.rate"] = r.rate;
      m["limit.append.p50"] = quantileOf(r.lat, r.done, 0.5);
      m["limit.append.p99"] = quantileOf(r.lat, r.done, 0.99);
    }
    {
      const fd = fs.openSync(path.join(work, "overwrite.dat"), "w+");
      const size = n * 256;
      const zeros = Buffer.alloc(1 << 20);
      for (let at = 0; at < size; at += zeros.length) fs.writeSync(fd, zeros, 0, Math.min(zeros.length, size - at), at);
      fs.fsyncSync(fd);
      const r = syncLoop(fd, n, capMs, (i) => i * 256);
      fs.closeSync(fd);
      m["limit.overwrite.rate"] = r.rate;
      m["limit.overwrite.p50"] = quantileOf(r.lat, r.done, 0.5);
      m["limit.overwrite.p99"] = quantileOf(r.lat, r.done, 0.99);
      Object.assign(m, await overwriteBesideSpinner(path.join(work, "overwrite-busy.dat"), n, capMs, zeros));
    }
    {
      const fd = fs.openSync(path.join(work, "sparse.dat"), "w+");
      fs.ftruncateSync(fd, n * 256);
      fs.fsyncSync(fd);
      const r = syncLoop(fd, n, capMs, (i) => i * 256);
      fs.closeSync(fd);
      m["limit.sparse.rate"] = r.rate;
      m["limit.sparse.p99"] = quantileOf(r.lat, r.done, 0.99);
    }
    const seqFile = path.join(work, "seq.dat");
    {
      const total = (quick ? 16 : 128) << 20;
      const chunk = Buffer.alloc(1 << 20, 0x5a);
      const fd = fs.openSync(seqFile, "w");
      const t0 = nowNs();
      for (let done = 0; done < total; done += chunk.length) fs.writeSync(fd, chunk);
      fs.fdatasyncSync(fd);
      m["limit.seq.GBps"] = total / secondsSince(t0) / 1e9;
      fs.closeSync(fd);
    }
    m["limit.seq.syncMs"] = syncAfterWrites(path.join(work, "unsynced.dat"), (quick ? 16 : 64) << 20);
    {
      const fd = fs.openSync(seqFile, "r");
      const size = fs.fstatSync(fd).size;
      const slots = Math.floor(size / 256);
      const pick = rng(7);
      const OFFS = 1 << 16;
      const offs = Array.from({ length: OFFS }, () => Math.floor(pick() * slots) * 256);
      let c = 0;
      const buf = Buffer.alloc(256);
      const bufs = Array.from({ length: 16 }, () => Buffer.alloc(256));
      const fh = await fs.promises.open(seqFile, "r");
      const bench = new Bench({ time: quick ? 100 : 500, warmupTime: quick ? 20 : 100, iterations: 10, throws: true });
      const SYNC = 1000;
      const ASYNC = 256;
      bench.add("limit.pread.sync", () => {
        for (let k = 0; k < SYNC; k++) fs.readSync(fd, buf, 0, 256, offs[c++ & (OFFS - 1)] as number);
      });
      bench.add("limit.pread.async1", async () => {
        for (let k = 0; k < ASYNC; k++) await readAsync(fd, buf, offs[c++ & (OFFS - 1)] as number);
      });
      bench.add("limit.pread.async16", async () => {
        await Promise.all(
          bufs.map(async (b) => {
            for (let k = 0; k < ASYNC / 16; k++) await readAsync(fd, b, offs[c++ & (OFFS - 1)] as number);
          }),
        );
      });
      bench.add("limit.pread.fh16", async () => {
        await Promise.all(
          bufs.map(async (b) => {
            for (let k = 0; k < ASYNC / 16; k++) await fh.read(b, 0, 256, offs[c++ & (OFFS - 1)] as number);
          }),
        );
      });
      await bench.run();
      for (const t of bench.tasks) {
        const res = t.result;
        if (res.state === "completed" || res.state === "aborted-with-statistics") {
          m[t.name] = ((t.name === "limit.pread.sync" ? SYNC : ASYNC) * 1000) / res.period;
        }
      }
      await fh.close();
      fs.closeSync(fd);
    }
    Object.assign(m, freshMemory(seqFile, quick));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return m;
}

/**
 * The overwrite + fdatasync loop on a fresh zero-filled file while a worker thread of this process
 * spins: on a two-core machine the second core is then taken, as a cold process's V8 compiler and
 * GC threads take it during its first puts (twenty-second session: ~150 ms of their CPU over
 * engram's first 3,000 durable puts). The loop's thread waits in the syscall; what the spinner
 * costs it is the wake-up and the kernel's own I/O work finding no idle core.
 */
async function overwriteBesideSpinner(file: string, n: number, capMs: number, zeros: Buffer): Promise<Record<string, number>> {
  const fd = fs.openSync(file, "w+");
  const size = n * 256;
  for (let at = 0; at < size; at += zeros.length) fs.writeSync(fd, zeros, 0, Math.min(zeros.length, size - at), at);
  fs.fsyncSync(fd);
  const spinner = new Worker("const { parentPort } = require('node:worker_threads'); parentPort.postMessage('spinning'); for (;;) {}", { eval: true });
  try {
    await new Promise<void>((resolve, reject) => {
      spinner.once("message", () => resolve());
      spinner.once("error", reject);
    });
    const r = syncLoop(fd, n, capMs, (i) => i * 256);
    return { "limit.overwrite.busy.rate": r.rate, "limit.overwrite.busy.p50": quantileOf(r.lat, r.done, 0.5) };
  } finally {
    await spinner.terminate();
    fs.closeSync(fd);
  }
}

/**
 * The fdatasync alone of `bytes` written (1 MiB writes) into a new file just before, in ms: the
 * device's part of making a load durable at once — what a store's close() pays when nothing synced
 * during a non-durable load (engram's close syncs, so that the hint it writes describes durable
 * bytes; the peers' non-durable modes do not sync at close).
 */
function syncAfterWrites(file: string, bytes: number): number {
  const chunk = Buffer.alloc(1 << 20, 0x3c);
  const fd = fs.openSync(file, "w");
  try {
    for (let done = 0; done < bytes; done += chunk.length) fs.writeSync(fd, chunk);
    const t0 = nowNs();
    fs.fdatasyncSync(fd);
    return Number(nowNs() - t0) / 1e6;
  } finally {
    fs.closeSync(fd);
  }
}

/** Bytes of a page: the unit the kernel maps fresh memory in. */
const PAGE_BYTES = 4096;

/**
 * What touching memory for the first time costs, against touching it again: one byte written per
 * page of a fresh buffer (each write faults a page in), then the same again; and a 16 KiB pread of
 * `file` (in the page cache) into fresh memory against into one reused buffer. On a virtual
 * machine a first touch can cost tens of times what it costs on bare metal (compact-13 measured
 * ~10 µs per page here), which bounds every workload that grows its memory: a cache filling, a
 * keydir growing, a buffer allocated per job (docs/performance-history.md, compact-13).
 */
function freshMemory(file: string, quick: boolean): Record<string, number> {
  const m: Record<string, number> = {};
  const bytes = (quick ? 16 : 64) << 20;
  const buf = Buffer.allocUnsafeSlow(bytes);
  let t0 = nowNs();
  for (let at = 0; at < bytes; at += PAGE_BYTES) buf[at] = 1;
  m["limit.touch.fresh"] = Number(nowNs() - t0) / 1e3 / (bytes / PAGE_BYTES);
  t0 = nowNs();
  for (let at = 0; at < bytes; at += PAGE_BYTES) buf[at] = 2;
  m["limit.touch.again"] = Number(nowNs() - t0) / 1e3 / (bytes / PAGE_BYTES);
  const fd = fs.openSync(file, "r");
  try {
    const size = fs.fstatSync(fd).size;
    const BLOCK = 16 * 1024;
    const reads = Math.min(quick ? 512 : 2048, Math.floor(size / BLOCK));
    const pick = rng(11);
    const offs = Array.from({ length: reads }, () => Math.floor(pick() * Math.floor(size / BLOCK)) * BLOCK);
    const slab = Buffer.allocUnsafeSlow(reads * BLOCK);
    t0 = nowNs();
    for (let i = 0; i < reads; i++) fs.readSync(fd, slab, i * BLOCK, BLOCK, offs[i] as number);
    m["limit.pread16k.fresh"] = Number(nowNs() - t0) / 1e3 / reads;
    const one = Buffer.allocUnsafeSlow(BLOCK);
    fs.readSync(fd, one, 0, BLOCK, 0); // its pages faulted in before the timing
    t0 = nowNs();
    for (let i = 0; i < reads; i++) fs.readSync(fd, one, 0, BLOCK, offs[i] as number);
    m["limit.pread16k.reused"] = Number(nowNs() - t0) / 1e3 / reads;
  } finally {
    fs.closeSync(fd);
  }
  return m;
}

/** The limits as a markdown table. */
export function limitsTable(m: Record<string, number>): string {
  const lines = ["| limit | value | unit |", "|---|---:|---|"];
  for (const row of LIMIT_ROWS) lines.push(`| ${row.label} | ${fmt(m[row.id] ?? Number.NaN)} | ${row.unit} |`);
  return lines.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--dir");
  const dir = at >= 0 && args[at + 1] !== undefined ? (args[at + 1] as string) : os.tmpdir();
  const m = await measureLimits(dir, args.includes("--quick"));
  process.stdout.write(limitsTable(m) + "\n");
}
