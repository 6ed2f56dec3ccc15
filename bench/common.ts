/**
 * Shared helpers of the benchmark: keys and values, statistics, timing, disk usage, specs.
 * Nothing here depends on a store.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { rng } from "../test/helpers/rng.js";

/** The stores the suite compares. */
export const STORES = ["engram", "lmdb", "classic-level", "better-sqlite3"] as const;
export type StoreName = (typeof STORES)[number];

export function isStoreName(x: string): x is StoreName {
  return (STORES as readonly string[]).includes(x);
}

/** Sizes of one run. `quick` uses small ones so the whole suite fits in a minute. */
export interface Sizes {
  /** W1: durable single puts, 1 in flight (count cap). */
  w1Single: number;
  /** W1: durable puts with 64 in flight (count cap). */
  w1Inflight: number;
  /** W2: entries written in batches of 100 (cap). */
  w2Batch100: number;
  /** W2: entries written in batches of 1000 (cap). */
  w2Batch1000: number;
  /** Wall-clock cap of one W1/W2 phase, ms (a phase stops at its count or this, whichever first). */
  phaseMs: number;
  /** W3 bulk load entries (also reopen and heap rows). */
  w3Keys: number;
  /** W4 keys loaded before the hot gets. */
  w4Keys: number;
  /** tinybench time budget of one W4 task, ms. */
  w4TaskMs: number;
  /** W5 keys. */
  w5Keys: number;
  /** Engram-only compaction rows: keys loaded. */
  compactKeys: number;
  /** Reads sampled for an idle latency distribution. */
  latencyReads: number;
  /** fsync honesty check: puts at 1 in flight and at 64 in flight. */
  straceSingle: number;
  straceInflight: number;
}

export const QUICK: Sizes = {
  w1Single: 300,
  w1Inflight: 3000,
  w2Batch100: 3000,
  w2Batch1000: 20000,
  phaseMs: 400,
  w3Keys: 20000,
  w4Keys: 20000,
  w4TaskMs: 150,
  w5Keys: 10000,
  compactKeys: 10000,
  latencyReads: 1000,
  straceSingle: 100,
  straceInflight: 640,
};

export const FULL: Sizes = {
  w1Single: 5000,
  w1Inflight: 100000,
  w2Batch100: 100000,
  w2Batch1000: 400000,
  phaseMs: 700,
  w3Keys: 200000,
  w4Keys: 100000,
  w4TaskMs: 400,
  w5Keys: 200000,
  compactKeys: 100000,
  latencyReads: 10000,
  straceSingle: 300,
  straceInflight: 1920,
};

/** Bytes of every value the suite writes. */
export const VALUE_BYTES = 256;

/** Workloads one child process can run. */
export const WORKLOADS = ["probe", "w1", "w2", "w3", "w4", "w5", "compact", "fsync", "limits", "w5floor", "w5answers", "w5mmap", "format"] as const;
export type Workload = (typeof WORKLOADS)[number];

/** What the parent tells a child (passed as one JSON argument). */
export interface ChildSpec {
  store: StoreName | "none";
  workload: Workload;
  /** A fresh directory the child owns; it may create subdirectories. */
  dir: string;
  /** Where the child writes its ChildResult as JSON. */
  out: string;
  sizes: Sizes;
  quick: boolean;
  /** Engram-only compaction workload: which mode. */
  mode?: "copy-on-write" | "in-place";
}

/** What a child reports: named numbers (see report.ts for their meaning) and notes. */
export interface ChildResult {
  metrics: Record<string, number>;
  notes: string[];
}

/** The key of entry `i`: fixed width, 10 bytes. */
export function keyOf(i: number): string {
  return "k" + String(i).padStart(9, "0");
}

/** Bytes of one key (all keys have the same width). */
export const KEY_BYTES = keyOf(0).length;

/**
 * The 256-byte value of entry `i` at `version`: index and version in the first 8 bytes, the rest
 * a deterministic pattern, so a wrong or torn value is detected by comparing with a fresh copy.
 */
export function valueOf(i: number, version: number): Uint8Array {
  const v = Buffer.allocUnsafe(VALUE_BYTES);
  v.writeUInt32LE(i >>> 0, 0);
  v.writeUInt32LE(version >>> 0, 4);
  let x = (Math.imul(i + 1, 0x9e3779b1) ^ Math.imul(version + 7, 0x85ebca6b)) >>> 0 || 1;
  for (let o = 8; o < VALUE_BYTES; o += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    v.writeUInt32LE(x >>> 0, o);
  }
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** True when `got` holds exactly the bytes of `valueOf(i, version)`. */
export function sameValue(got: Uint8Array | undefined, i: number, version: number): boolean {
  if (got === undefined || got.byteLength !== VALUE_BYTES) return false;
  return Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(valueOf(i, version));
}


/** The one seeded PRNG of the project (mulberry32), shared with the tests. */
export { rng };

/** 0..n-1 in a deterministic random order (keys are written in random order, like fillrandom). */
export function permutation(n: number, seed: number): Uint32Array {
  const p = new Uint32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const r = rng(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    const t = p[i] as number;
    p[i] = p[j] as number;
    p[j] = t;
  }
  return p;
}

/** Nanoseconds since an arbitrary origin. */
export function nowNs(): bigint {
  return process.hrtime.bigint();
}

/** Seconds between two nowNs() readings. */
export function secondsSince(start: bigint, end: bigint = nowNs()): number {
  return Number(end - start) / 1e9;
}

/**
 * Time on CPU of each thread of this process so far, µs by thread id (Linux's
 * /proc/self/task/<tid>/schedstat, whose first field is ns; empty elsewhere). A thread that ended
 * is missing from a later reading: cpuSplit counts it as 0 there.
 */
export function threadCpuUs(): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[];
  try {
    tids = fs.readdirSync("/proc/self/task");
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      out.set(Number(tid), Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]) / 1000);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * CPU between two threadCpuUs readings, µs: the main thread's (its id is the process's), the
 * busiest other thread's (in a compaction, the worker's), and all the others' together (V8's
 * compiler and GC helpers, libuv's pool, and a store's own threads). NaN off Linux.
 */
export function cpuSplit(before: Map<number, number>, after: Map<number, number>): { mainUs: number; busiestUs: number; restUs: number } {
  if (after.size === 0) return { mainUs: NaN, busiestUs: NaN, restUs: NaN };
  let mainUs = 0;
  let busiestUs = 0;
  let othersUs = 0;
  for (const [tid, us] of after) {
    const spent = us - (before.get(tid) ?? 0);
    if (tid === process.pid) mainUs = spent;
    else {
      othersUs += spent;
      busiestUs = Math.max(busiestUs, spent);
    }
  }
  return { mainUs, busiestUs, restUs: othersUs - busiestUs };
}

/** The median of numbers (NaN for none). */
export function median(xs: readonly number[]): number {
  return quantile(xs, 0.5);
}

/** The q-quantile (0..1) by linear interpolation between order statistics (NaN for none). */
export function quantile(xs: readonly number[], q: number): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = s[lo] as number;
  const b = s[hi] as number;
  return a + (b - a) * (pos - lo);
}

/** Quantile over a Float64Array of samples already filled up to `n` (sorted in place). */
export function quantileOf(samples: Float64Array, n: number, q: number): number {
  if (n === 0) return Number.NaN;
  const s = samples.subarray(0, n).sort();
  const pos = (n - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return (s[lo] as number) + ((s[hi] as number) - (s[lo] as number)) * (pos - lo);
}

/** Disk usage of a directory tree: apparent size and allocated blocks. */
export interface DiskUsage {
  /** Sum of file sizes (what `ls -l` shows; sparse/preallocated space counts). */
  apparent: number;
  /** Sum of allocated blocks × 512 (what `du` shows: what the disk really holds). */
  allocated: number;
  files: number;
}

export function diskUsage(dir: string): DiskUsage {
  const u: DiskUsage = { apparent: 0, allocated: 0, files: 0 };
  const walk = (d: string): void => {
    let names: string[];
    try {
      names = fs.readdirSync(d);
    } catch {
      return;
    }
    for (const name of names) {
      const p = path.join(d, name);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(p);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        u.apparent += st.size;
        u.allocated += st.blocks * 512;
        u.files += 1;
      }
    }
  };
  walk(dir);
  return u;
}

/** Runs `gc()` when the process was started with --expose-gc (the children are). */
export function fullGc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === "function") {
    g();
    g();
  }
}

/** Resolves on the next macrotask: lets background work (timers, worker messages) run. */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Formats a number for the report: 3 significant digits, thousands grouped. */
export function fmt(x: number): string {
  if (!Number.isFinite(x)) return "–";
  const a = Math.abs(x);
  if (Number.isInteger(x) || a >= 1000) return Math.round(x).toLocaleString("en-US");
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  if (a === 0) return "0";
  return x.toPrecision(3);
}

/** The message of any thrown thing. */
export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message.split("\n")[0] ?? err.name;
  return String(err);
}
