/**
 * The workloads. Each runs inside its own child process (child.ts) on a fresh directory and
 * returns named metrics; report.ts says what every metric means.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { Bench } from "tinybench";
import { loadEngram, OPENERS, probeStore, wrapEngram, type BatchOp, type Entry, type StoreAdapter } from "./adapters.js";
import { W5_LOAD_SEED, w5Batches, w5Verify } from "./w5-ops.js";
import type { Mmap } from "./native-mmap.js";
import {
  cpuSplit,
  errorText,
  fullGc,
  KEY_BYTES,
  keyOf,
  nowNs,
  permutation,
  quantileOf,
  rng,
  sameValue,
  secondsSince,
  threadCpuUs,
  VALUE_BYTES,
  valueOf,
  type ChildResult,
  type ChildSpec,
  type StoreName,
} from "./common.js";

/**
 * Minor page faults of this process so far: pages of memory touched for the first time (a heap
 * or buffer growing; for a store that maps its file, its pages read the first time). On the
 * machines measured a fresh page costs ~10 µs (the limits' "first write to fresh memory" row).
 */
const faults = (): number => process.resourceUsage().minorPageFault;

const POOL = 1024;
/** Values for the write-throughput rows (which verify nothing): a pool reused by index. */
function valuePool(): Uint8Array[] {
  return Array.from({ length: POOL }, (_, i) => valueOf(i, 1));
}

function storeOf(spec: ChildSpec): StoreName {
  if (spec.store === "none") throw new Error(`workload ${spec.workload} needs a store`);
  return spec.store;
}

function open(spec: ChildSpec, sub: string, durable: boolean): Promise<StoreAdapter> {
  return OPENERS[storeOf(spec)](path.join(spec.dir, sub), { durable });
}

/** Builds atomic batches of `size` puts of the keys in `perm`, in order (values from `values` by index, else valueOf(i, version)). */
function putBatches(perm: Uint32Array, size: number, version: number, values?: Uint8Array[]): Entry[][] {
  const out: Entry[][] = [];
  for (let b = 0; b < perm.length; b += size) {
    const batch: Entry[] = [];
    for (let j = b; j < Math.min(b + size, perm.length); j++) {
      const i = perm[j] as number;
      batch.push({ key: keyOf(i), value: values !== undefined ? (values[i % values.length] as Uint8Array) : valueOf(i, version) });
    }
    out.push(batch);
  }
  return out;
}

/** Loads keys 0..n-1 (random order, version 1) in atomic batches of 1000. */
async function load(s: StoreAdapter, n: number, seed: number): Promise<void> {
  for (const b of putBatches(permutation(n, seed), 1000, 1)) await s.putMany(b);
}

/**
 * Runs `total` calls of `op(i)` with `inFlight` outstanding at a time, stopping early past
 * `deadlineNs`. Returns how many completed and, when `lat` is given, each one's latency in µs.
 */
async function pump(total: number, inFlight: number, deadlineNs: bigint, op: (i: number) => Promise<void>, lat?: Float64Array): Promise<number> {
  let next = 0;
  let done = 0;
  let stopped = false;
  const lane = async (): Promise<void> => {
    while (next < total && !stopped) {
      if ((next & 7) === 0 && nowNs() > deadlineNs) {
        stopped = true;
        return;
      }
      const i = next++;
      const t = nowNs();
      await op(i);
      if (lat !== undefined) lat[i] = Number(nowNs() - t) / 1000;
      done++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return done;
}

// ---------------------------------------------------------------------------------------------

/**
 * W1: durable single puts, 1 in flight, then 64 in flight (each on a fresh directory). The
 * 1-in-flight phase runs twice: first in the fresh child (the row the target applies to: its
 * first puts run while V8 compiles the store's code), then again on another fresh directory
 * after W1_WARM_PUTS more untimed puts there ("warm": the same puts once compiled).
 */
async function w1(spec: ChildSpec, r: ChildResult): Promise<void> {
  const values = valuePool();
  await w1Single(spec, r, "single", 0, values);
  await w1Single(spec, r, "singleWarm", W1_WARM_PUTS, values);
  {
    const n = spec.sizes.w1Inflight;
    const perm = permutation(n, 12);
    const s = await open(spec, "inflight", true);
    const t0 = nowNs();
    const done = await pump(n, 64, t0 + BigInt(spec.sizes.phaseMs) * 1_000_000n, (i) => s.put(keyOf(perm[i] as number), values[i % POOL] as Uint8Array));
    const sec = secondsSince(t0);
    await s.close();
    r.metrics["w1.inflight64"] = done / sec;
    r.metrics["w1.inflight64.count"] = done;
  }
}

/**
 * Untimed puts before the warm 1-in-flight phase: with the cold phase's, they put the timed puts
 * past the first ~3,000 of the process, after which bench/w1-warm.mjs finds engram at 87–95 % of
 * the device's own pwrite + fdatasync loop.
 */
const W1_WARM_PUTS = 3000;

/**
 * One timed phase of single durable puts at 1 in flight on the fresh directory `sub`, after
 * `warm` untimed puts of other keys there: puts/s and latency p50/p99 as metrics `w1.<sub>…`.
 */
async function w1Single(spec: ChildSpec, r: ChildResult, sub: string, warm: number, values: Uint8Array[]): Promise<void> {
  const n = spec.sizes.w1Single;
  const perm = permutation(n + warm, 11);
  const s = await open(spec, sub, true);
  for (let i = 0; i < warm; i++) await s.put(keyOf(perm[n + i] as number), values[i % POOL] as Uint8Array);
  const lat = new Float64Array(n);
  const f0 = faults();
  const cpu0 = threadCpuUs();
  const t0 = nowNs();
  const done = await pump(n, 1, t0 + BigInt(spec.sizes.phaseMs) * 1_000_000n, (i) => s.put(keyOf(perm[i] as number), values[i % POOL] as Uint8Array), lat);
  const sec = secondsSince(t0);
  const cpu = cpuSplit(cpu0, threadCpuUs());
  r.metrics[`w1.${sub}.faultsPerOp`] = (faults() - f0) / Math.max(1, done);
  r.metrics[`w1.${sub}.mainCpuPerOp`] = cpu.mainUs / Math.max(1, done);
  r.metrics[`w1.${sub}.otherCpuPerOp`] = (cpu.busiestUs + cpu.restUs) / Math.max(1, done);
  await s.close();
  r.metrics[`w1.${sub}`] = done / sec;
  r.metrics[`w1.${sub}.p50`] = quantileOf(lat, done, 0.5);
  r.metrics[`w1.${sub}.p99`] = quantileOf(lat, done, 0.99);
  r.metrics[`w1.${sub}.count`] = done;
}

/** W2: durable atomic batches of 100 and of 1000 puts, one batch in flight. */
async function w2(spec: ChildSpec, r: ChildResult): Promise<void> {
  const values = valuePool();
  for (const [size, total] of [
    [100, spec.sizes.w2Batch100],
    [1000, spec.sizes.w2Batch1000],
  ] as const) {
    const batches = putBatches(permutation(total, 20 + size), size, 1, values);
    const s = await open(spec, `batch${size}`, true);
    const deadline = nowNs() + BigInt(spec.sizes.phaseMs) * 1_000_000n;
    const t0 = nowNs();
    let entries = 0;
    for (const b of batches) {
      await s.putMany(b);
      entries += b.length;
      if (nowNs() > deadline) break;
    }
    const sec = secondsSince(t0);
    await s.close();
    r.metrics[`w2.batch${size}`] = entries / sec;
    r.metrics[`w2.batch${size}.count`] = entries;
  }
}

/**
 * W3: bulk load of n × 256 B in random key order, atomic batches of 1000, non-durable mode, timed
 * up to and including close() (whose own time is reported too). Then W6 (disk vs live bytes),
 * reopen time (open + first read) and JS heap per key of the reopened store, a verified
 * sample, and (engram) the JS heap per key once a compact() pass planned over every name. Then the same load again on a fresh directory ("warm": the first load compiled the code
 * it runs), and the JS heap per key it grew by before its close.
 */
async function w3(spec: ChildSpec, r: ChildResult): Promise<void> {
  const n = spec.sizes.w3Keys;
  const batches = putBatches(permutation(n, 31), 1000, 1);
  const s = await open(spec, "bulk", false);
  const f0 = faults();
  const t0 = nowNs();
  for (const b of batches) await s.putMany(b);
  const tClose = nowNs();
  await s.close();
  const sec = secondsSince(t0);
  r.metrics["w3.bulk"] = n / sec;
  // The close's part: engram's makes the load durable (its prefix hint may describe only durable
  // bytes), where the peers' non-durable modes sync nothing at close (bench/README.md, limits).
  r.metrics["w3.closeMs"] = secondsSince(tClose) * 1000;
  r.metrics["w3.bulk.faultsPerKey"] = (faults() - f0) / n;
  r.metrics["w3.seconds"] = sec;
  const du = s.diskBytes();
  const live = n * (KEY_BYTES + VALUE_BYTES);
  r.metrics["w6.w3.allocated"] = du.allocated;
  r.metrics["w6.w3.apparent"] = du.apparent;
  r.metrics["w6.w3.live"] = live;
  r.metrics["w6.w3.ratio"] = du.allocated / live;
  batches.length = 0;

  fullGc();
  const m0 = process.memoryUsage();
  const t1 = nowNs();
  const s2 = await open(spec, "bulk", false);
  const first = s2.getSync(keyOf(0));
  r.metrics["reopen.ms"] = secondsSince(t1) * 1000;
  fullGc();
  const m1 = process.memoryUsage();
  r.metrics["heap.perKey"] = (m1.heapUsed - m0.heapUsed) / n;
  // Every ArrayBuffer and SharedArrayBuffer (the store's hint regions and slabs are the latter:
  // `external` no longer counts them, segments/long-lived.ts).
  r.metrics["external.perKey"] = (m1.arrayBuffers - m0.arrayBuffers) / n;
  r.metrics["rss.perKey"] = (m1.rss - m0.rss) / n;
  let bad = sameValue(first, 0, 1) ? 0 : 1;
  const pick = rng(33);
  for (let k = 0; k < 2000; k++) {
    const i = Math.floor(pick() * n);
    if (!sameValue(s2.getSync(keyOf(i)), i, 1)) bad++;
  }
  if (s2.compact !== undefined) {
    // A pass's plan walks every name, so it builds whatever the lazy reopen deferred: what a
    // long-lived process holds per key after its first compaction (untimed; W3 left no garbage,
    // so nothing is rewritten).
    await s2.compact();
    fullGc();
    r.metrics["heap.perKeyAfterPass"] = (process.memoryUsage().heapUsed - m0.heapUsed) / n;
  }
  await s2.close();
  r.metrics["w3.verifyErrors"] = bad;
  if (bad > 0) r.notes.push(`W3: ${bad} of 2001 sampled values wrong or missing after reopen`);
  if (spec.store === "engram") r.metrics["reopen.scanMs"] = await reopenByScan(spec, keyOf(0));

  // The same load again on a fresh directory in this process, its code compiled by the first. The
  // heap it grew by while open (after gc, outside the timed part): what a process that writes its
  // keys holds per key, where the reopen's figure above is what one that reads them back holds.
  const warmBatches = putBatches(permutation(n, 31), 1000, 1);
  fullGc();
  const w0 = process.memoryUsage().heapUsed;
  const s3 = await open(spec, "bulkWarm", false);
  const t2 = nowNs();
  for (const b of warmBatches) await s3.putMany(b);
  const loadSec = secondsSince(t2);
  fullGc();
  r.metrics["heap.perKeyWritten"] = (process.memoryUsage().heapUsed - w0) / n;
  const t3 = nowNs();
  await s3.close();
  r.metrics["w3.bulkWarm"] = n / (loadSec + secondsSince(t3));
}

/**
 * engram only: the reopen of W3's store with its hint files removed, so that open scans every
 * segment (what a reopen cost before hints, and what it costs after a crash that lost them): open
 * + the first read of `firstKey`, ms. The reopen row's figure against this one is issue 11's "≥ 10×
 * faster than a full scan". The open writes the hints back; nothing after it reads this store.
 */
async function reopenByScan(spec: ChildSpec, firstKey: string): Promise<number> {
  const segments = path.join(spec.dir, "bulk", "segments");
  const hints = fs.readdirSync(segments).filter((name) => name.endsWith(".hint"));
  if (hints.length === 0) throw new Error("W3: the closed store has no hint file to remove");
  for (const name of hints) fs.rmSync(path.join(segments, name));
  fullGc();
  const t = nowNs();
  const s = await open(spec, "bulk", false);
  const got = s.getSync(firstKey);
  const ms = secondsSince(t) * 1000;
  await s.close();
  if (got === undefined) throw new Error("W3: the store reopened by a scan lost its first key");
  return ms;
}

/** W4: hot gets on a reopened store (page cache warm): sync, async 1 in flight, async 16 in flight. */
async function w4(spec: ChildSpec, r: ChildResult): Promise<void> {
  const n = spec.sizes.w4Keys;
  {
    const s = await open(spec, "gets", false);
    await load(s, n, 41);
    await s.close();
  }
  const s = await open(spec, "gets", false);
  const pick = rng(42);
  const KEYS = 1 << 16;
  const keys: string[] = Array.from({ length: KEYS }, () => keyOf(Math.floor(pick() * n)));
  let c = 0;
  let misses = 0;
  const SYNC_OPS = 1000;
  const ASYNC_OPS = 256;
  const bench = new Bench({ time: spec.sizes.w4TaskMs, warmupTime: spec.quick ? 50 : 200, iterations: 10, throws: true });
  bench.add("getSync", () => {
    for (let k = 0; k < SYNC_OPS; k++) {
      if (s.getSync(keys[c++ & (KEYS - 1)] as string) === undefined) misses++;
    }
  });
  bench.add("getAsync1", async () => {
    for (let k = 0; k < ASYNC_OPS; k++) {
      if ((await s.getAsync(keys[c++ & (KEYS - 1)] as string)) === undefined) misses++;
    }
  });
  const lane = async (): Promise<void> => {
    for (let k = 0; k < ASYNC_OPS / 16; k++) {
      if ((await s.getAsync(keys[c++ & (KEYS - 1)] as string)) === undefined) misses++;
    }
  };
  bench.add("getAsync16", async () => {
    await Promise.all(Array.from({ length: 16 }, lane));
  });
  await bench.run();
  const perIter: Record<string, number> = { getSync: SYNC_OPS, getAsync1: ASYNC_OPS, getAsync16: ASYNC_OPS };
  for (const t of bench.tasks) {
    const res = t.result;
    if (res.state === "completed" || res.state === "aborted-with-statistics") {
      r.metrics[`w4.${t.name}`] = ((perIter[t.name] ?? 1) * 1000) / res.period;
    } else if (res.state === "errored") {
      r.notes.push(`W4 ${t.name}: ${errorText(res.error)}`);
    }
  }
  w4Latency(s, keys, r);
  let bad = 0;
  for (let k = 0; k < 2000; k++) {
    const i = Math.floor(pick() * n);
    if (!sameValue(s.getSync(keyOf(i)), i, 1)) bad++;
  }
  await s.close();
  r.metrics["w4.misses"] = misses;
  r.metrics["w4.verifyErrors"] = bad;
  if (misses > 0 || bad > 0) r.notes.push(`W4: ${misses} misses, ${bad} of 2000 sampled values wrong`);
}

/** Sync gets timed one by one in W4 (after its rates): enough for a stable p99.9. */
const W4_LATENCY_SAMPLES = 50_000;

/**
 * W4's per-call latency of the sync get (p50, p99, p99.9 in µs), each call timed alone with
 * `process.hrtime.bigint()` on the same hot keys as the rates; the timer's own cost (measured
 * back to back and reported as w4.timerNs) is included in every sample, for every store alike.
 */
function w4Latency(s: StoreAdapter, keys: readonly string[], r: ChildResult): void {
  const lat = new Float64Array(W4_LATENCY_SAMPLES);
  const mask = keys.length - 1;
  for (let k = 0; k < W4_LATENCY_SAMPLES; k++) {
    const t0 = process.hrtime.bigint();
    s.getSync(keys[(k * 7 + 3) & mask] as string);
    lat[k] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  const c0 = process.hrtime.bigint();
  for (let k = 0; k < 1000; k++) process.hrtime.bigint();
  r.metrics["w4.timerNs"] = Number(process.hrtime.bigint() - c0) / 1000;
  r.metrics["w4.getSync.p50"] = quantileOf(lat, W4_LATENCY_SAMPLES, 0.5);
  r.metrics["w4.getSync.p99"] = quantileOf(lat, W4_LATENCY_SAMPLES, 0.99);
  r.metrics["w4.getSync.p999"] = quantileOf(lat, W4_LATENCY_SAMPLES, 0.999);
}

/**
 * W5: on n loaded keys (durable store), delete 50% then rewrite 25% of the deleted (durable
 * atomic batches of 1000, random order), then read all n and verify; timed. Then reopen, read
 * all and verify again (timed separately). Then W6: disk vs live bytes after close.
 */
async function w5(spec: ChildSpec, r: ChildResult): Promise<void> {
  const n = spec.sizes.w5Keys;
  {
    // loaded in non-durable mode (not timed), then reopened durable for the timed part
    const l = await open(spec, "churn", false);
    await load(l, n, W5_LOAD_SEED);
    await l.close();
  }
  const s = await open(spec, "churn", true);
  const { dels, puts } = w5Batches(n);

  const f0 = faults();
  const t0 = nowNs();
  for (const b of dels) await s.batch(b);
  const t1 = nowNs();
  for (const b of puts) await s.batch(b);
  const t2 = nowNs();
  const f2 = faults();
  const bad1 = w5Verify((key) => s.getSync(key), n);
  const t3 = nowNs();
  const f3 = faults();
  r.metrics["w5.faultsPerKey"] = (f3 - f0) / n;
  r.metrics["w5.verify.faultsPerKey"] = (f3 - f2) / n;
  r.metrics["w5.seconds"] = secondsSince(t0, t3);
  r.metrics["w5.delete.seconds"] = secondsSince(t0, t1);
  r.metrics["w5.rewrite.seconds"] = secondsSince(t1, t2);
  r.metrics["w5.verify.seconds"] = secondsSince(t2, t3);
  await s.close();

  const t4 = nowNs();
  const s2 = await open(spec, "churn", true);
  const bad2 = w5Verify((key) => s2.getSync(key), n);
  r.metrics["w5.reopenVerify.seconds"] = secondsSince(t4);
  await s2.close();
  r.metrics["w5.verifyErrors"] = bad1 + bad2;
  if (bad1 + bad2 > 0) r.notes.push(`W5: ${bad1} wrong before reopen, ${bad2} after (of ${n} keys each)`);

  const du = s2.diskBytes();
  const liveKeys = n - Math.ceil(n / 2) + Math.ceil(n / 8);
  const live = liveKeys * (KEY_BYTES + VALUE_BYTES);
  r.metrics["w6.w5.allocated"] = du.allocated;
  r.metrics["w6.w5.apparent"] = du.apparent;
  r.metrics["w6.w5.live"] = live;
  r.metrics["w6.w5.ratio"] = du.allocated / live;
}

/**
 * Engram only, per compaction mode: n keys in 4 MiB segments (1 MiB quick), auto compaction off.
 * Round A: forget 25%, time compact() alone (MB/s of segment bytes processed).
 * Round B: forget another 25%; read latency idle, then while compact() runs (async read and
 * readSync alternating, one at a time); p50/p99 of each.
 */
async function compact(spec: ChildSpec, r: ChildResult): Promise<void> {
  const mode = spec.mode ?? "copy-on-write";
  const n = spec.sizes.compactKeys;
  const Engram = await loadEngram();
  const dir = path.join(spec.dir, "compact");
  const store = await Engram.open(dir, {
    durability: "none",
    segmentBytes: spec.quick ? 512 << 10 : 4 << 20,
    compaction: { mode, auto: false },
  });
  const s = wrapEngram(store, dir, false);
  await load(s, n, 61);
  const forgetWhere = async (rem: number): Promise<void> => {
    let cur: BatchOp[] = [];
    for (let i = rem; i < n; i += 4) {
      cur.push({ type: "del", key: keyOf(i) });
      if (cur.length === 1000) {
        await s.batch(cur);
        cur = [];
      }
    }
    if (cur.length > 0) await s.batch(cur);
  };
  const tag = mode === "in-place" ? "inplace" : "cow";

  // Warm-up: compact one sealed segment, so that starting the worker pool is not in round A.
  const first = store.stats().segments.find((x) => x.sealed);
  if (first !== undefined) await store.compact({ mode, segments: [first.id] });

  // Round A
  await forgetWhere(0);
  const before = store.stats();
  const f0 = faults();
  const cpu0 = threadCpuUs();
  const t0 = nowNs();
  const rep = await store.compact({ mode });
  const sec = secondsSince(t0);
  const cpu = cpuSplit(cpu0, threadCpuUs());
  r.metrics[`compact.${tag}.faults`] = faults() - f0;
  r.metrics[`compact.${tag}.cpu.main`] = cpu.mainUs / 1000;
  r.metrics[`compact.${tag}.cpu.worker`] = cpu.busiestUs / 1000;
  r.metrics[`compact.${tag}.cpu.rest`] = cpu.restUs / 1000;
  const bytes = rep.bytesBefore > 0 ? rep.bytesBefore : before.totalBytes;
  r.metrics[`compact.${tag}.MBps`] = bytes / sec / 1e6;
  r.metrics[`compact.${tag}.bytesBefore`] = rep.bytesBefore;
  r.metrics[`compact.${tag}.bytesAfter`] = rep.bytesAfter;
  r.metrics[`compact.${tag}.segments`] = rep.segments.length;
  r.metrics[`compact.${tag}.seconds`] = sec;
  if (rep.segments.length === 0) r.notes.push(`compaction ${mode}: compact() compacted no segment`);

  // Round B
  await forgetWhere(1);
  const pick = rng(62);
  const liveKey = (): [string, number] => {
    const i = 4 * Math.floor(pick() * (n / 4)) + 2 + (pick() < 0.5 ? 0 : 1);
    const j = i < n ? i : 2;
    return [keyOf(j), j];
  };
  const L = spec.sizes.latencyReads;
  for (let k = 0; k < Math.min(L, 2000); k++) {
    // warm-up: JIT and caches, so "idle" is not "cold"
    const [key] = liveKey();
    await s.getAsync(key);
    s.getSync(key);
  }
  fullGc();
  const idleA = new Float64Array(L);
  const idleS = new Float64Array(L);
  let wrong = 0;
  for (let k = 0; k < L; k++) {
    // the same yield as in the loop during compaction below, so both see the same event loop
    if ((k & 15) === 15) await new Promise<void>((resolve) => setImmediate(resolve));
    const [key, i] = liveKey();
    let t = nowNs();
    const a = await s.getAsync(key);
    idleA[k] = Number(nowNs() - t) / 1000;
    t = nowNs();
    const b = s.getSync(key);
    idleS[k] = Number(nowNs() - t) / 1000;
    if (!sameValue(a, i, 1) || !sameValue(b, i, 1)) wrong++;
  }
  const cap = 1 << 20;
  const busyA = new Float64Array(cap);
  const busyS = new Float64Array(cap);
  let nb = 0;
  let failedClosed = 0;
  let done = false;
  let compactErr: unknown = null;
  fullGc();
  const t1 = nowNs();
  const running = store.compact({ mode }).then(
    (x) => {
      done = true;
      return x;
    },
    (err: unknown) => {
      done = true;
      compactErr = err;
      return null;
    },
  );
  const stopAt = nowNs() + 60_000_000_000n;
  while (!done && nb < cap) {
    // A read that completes without I/O resolves in a microtask; yield to the event loop now and
    // then, or the compaction's completion message could never be delivered.
    if ((nb & 15) === 15) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (nowNs() > stopAt) {
        r.notes.push(`compaction ${mode}: stopped reading after 60 s`);
        break;
      }
    }
    const [key, i] = liveKey();
    let t = nowNs();
    let a: Uint8Array | undefined;
    let b: Uint8Array | undefined;
    try {
      a = await s.getAsync(key);
    } catch {
      failedClosed++;
      a = valueOf(i, 1);
    }
    busyA[nb] = Number(nowNs() - t) / 1000;
    t = nowNs();
    try {
      b = s.getSync(key);
    } catch {
      failedClosed++;
      b = valueOf(i, 1);
    }
    busyS[nb] = Number(nowNs() - t) / 1000;
    nb++;
    if (!sameValue(a, i, 1) || !sameValue(b, i, 1)) wrong++;
  }
  const repB = await running;
  const secB = secondsSince(t1);
  if (compactErr !== null) r.notes.push(`compaction ${mode} round B failed: ${errorText(compactErr)}`);
  r.metrics[`lat.${tag}.async.idle.p50`] = quantileOf(idleA, L, 0.5);
  r.metrics[`lat.${tag}.async.idle.p99`] = quantileOf(idleA, L, 0.99);
  r.metrics[`lat.${tag}.sync.idle.p50`] = quantileOf(idleS, L, 0.5);
  r.metrics[`lat.${tag}.sync.idle.p99`] = quantileOf(idleS, L, 0.99);
  r.metrics[`lat.${tag}.async.busy.p50`] = quantileOf(busyA, nb, 0.5);
  r.metrics[`lat.${tag}.async.busy.p99`] = quantileOf(busyA, nb, 0.99);
  r.metrics[`lat.${tag}.sync.busy.p50`] = quantileOf(busyS, nb, 0.5);
  r.metrics[`lat.${tag}.sync.busy.p99`] = quantileOf(busyS, nb, 0.99);
  r.metrics[`lat.${tag}.busy.reads`] = nb;
  r.metrics[`lat.${tag}.failedClosed`] = failedClosed;
  r.metrics[`lat.${tag}.wrong`] = wrong;
  if (repB !== null) r.metrics[`compact.${tag}.underReads.MBps`] = repB.bytesBefore / secB / 1e6;
  if (nb < 100) r.notes.push(`compaction ${mode}: only ${nb} reads completed while compact() ran (${(secB * 1000).toFixed(1)} ms)`);
  if (wrong > 0) r.notes.push(`compaction ${mode}: ${wrong} reads returned a wrong value`);
  await store.close();
}

/** Marker for strace: an access(2) of a path that does not exist, found by name in the trace. */
export function straceMarker(name: string): void {
  try {
    fs.accessSync(`/nonexistent-engram-bench-marker/${name}`);
  } catch {
    // expected
  }
}

/** fsync honesty check: durable puts 1 in flight, then 64 in flight, between strace markers. */
async function fsyncCheck(spec: ChildSpec, r: ChildResult): Promise<void> {
  const values = valuePool();
  const s = await open(spec, "fsync", true);
  const far = nowNs() + 3_600_000_000_000n;
  const n1 = spec.sizes.straceSingle;
  straceMarker("single-begin");
  const a = await pump(n1, 1, far, (i) => s.put(keyOf(i), values[i % POOL] as Uint8Array));
  straceMarker("single-end");
  const n64 = spec.sizes.straceInflight;
  straceMarker("inflight-begin");
  const b = await pump(n64, 64, far, (i) => s.put(keyOf(n1 + i), values[i % POOL] as Uint8Array));
  straceMarker("inflight-end");
  await s.close();
  r.metrics["fsync.single.acked"] = a;
  r.metrics["fsync.inflight.acked"] = b;
}

async function probe(spec: ChildSpec, r: ChildResult): Promise<void> {
  const why = await probeStore(storeOf(spec), path.join(spec.dir, "probe"));
  if (why !== null) r.notes.push(why);
  r.metrics["probe.ok"] = why === null ? 1 : 0;
}

export async function runWorkload(spec: ChildSpec): Promise<ChildResult> {
  const r: ChildResult = { metrics: {}, notes: [] };
  switch (spec.workload) {
    case "probe":
      await probe(spec, r);
      break;
    case "w1":
      await w1(spec, r);
      break;
    case "w2":
      await w2(spec, r);
      break;
    case "w3":
      await w3(spec, r);
      break;
    case "w4":
      await w4(spec, r);
      break;
    case "w5":
      await w5(spec, r);
      break;
    case "compact":
      await compact(spec, r);
      break;
    case "fsync":
      await fsyncCheck(spec, r);
      break;
    case "format": {
      const { measureFormat } = await import("./format.js");
      r.metrics = { ...(await measureFormat(spec.dir, spec.quick)) };
      break;
    }
    case "limits": {
      const { measureLimits } = await import("./limits.js");
      r.metrics = { ...(await measureLimits(spec.dir, spec.quick)) };
      break;
    }
    case "w5floor":
    case "w5answers":
    case "w5mmap": {
      const { measureW5Floor } = await import("./w5-floor.js");
      let mmap: Mmap | null = null;
      if (spec.workload === "w5mmap") {
        const loaded = (await import("./native-mmap.js")).loadMmap();
        if (typeof loaded === "string") throw new Error(loaded);
        mmap = loaded;
      }
      r.metrics = measureW5Floor(spec.dir, spec.sizes.w5Keys, spec.workload !== "w5floor", mmap);
      break;
    }
  }
  return r;
}
