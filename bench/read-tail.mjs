// The readSync tail beside a compaction pass (fortieth session), trees alternated. Usage:
//   node bench/read-tail.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base)
// Env: ROUNDS (2), N (100000 keys), MODE ("in-place" or "copy-on-write"; default in-place).
// Does what bench/workloads.ts compact's round B does, through engine/store.js's Store: N keys
// of 256 B in 4 MiB segments (the bench's order), a quarter forgotten and compacted, a second quarter
// forgotten; then 10,000 pairs idle and, while compact() runs, pairs until it ends — each pair an
// async read and a timed readSync of the same live key, a setImmediate every 16 pairs. Prints per
// tree and round: the readSync p99 idle and during the pass, the during/idle ratio (issue 6's
// row), a histogram of the readSyncs during the pass, and how many of them made a copy pool
// inside the read (`copyPoolCounters` of engine/value-cache.js, trees that have it) with their
// median time. The reads that made no pool and still took 10-20 µs are what is left (the guest
// sees nothing in them: performance-history.md, fortieth session).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { keyOf, permutation, rng, treesArg, valueOf } from "./w5-shared.mjs";

const trees = treesArg("node bench/read-tail.mjs TREE [TREE ...]");
const rounds = Number(process.env.ROUNDS ?? 2);
const n = Number(process.env.N ?? 100000);
const mode = process.env.MODE ?? "in-place";
const IDLE_PAIRS = 10000;
const PASS_DEADLINE_MS = 60000;
const EDGES = [2, 5, 10, 20, 50, 100, 300, Infinity];

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];
const turnEnds = () => new Promise((resolve) => setImmediate(resolve));

/** A store as round B finds it: N keys, half forgotten (one quarter already compacted away). */
async function roundBStore(Store) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "read-tail-"));
  const s = await Store.open(dir, { durability: "none", segmentBytes: 4 << 20, compaction: { mode, auto: false } });
  const order = permutation(n, 61); // the bench's compaction child's order (workloads.ts load)
  for (let b = 0; b < n; b += 1000) await s.batch(Array.from(order.subarray(b, b + 1000), (i) => ({ op: "write", key: keyOf(i), value: valueOf(i, 1) })));
  const forgetWhere = async (rem) => {
    const ops = [];
    for (let i = rem; i < n; i += 4) ops.push({ op: "forget", key: keyOf(i) });
    for (let b = 0; b < ops.length; b += 1000) await s.batch(ops.slice(b, b + 1000));
  };
  const first = s.stats().segments.find((x) => x.sealed);
  if (first !== undefined) await s.compact({ mode, segments: [first.id] });
  await forgetWhere(0);
  await s.compact({ mode });
  await forgetWhere(1);
  return { s, dir };
}

/** One pair: an async read, then a timed readSync of the same key; returns [µs, pools made inside]. */
async function pair(s, key, pools) {
  await s.read(key);
  const made = pools?.made ?? 0;
  const t = performance.now();
  s.readSync(key);
  const us = (performance.now() - t) * 1000;
  return [us, (pools?.made ?? 0) - made];
}

async function round(mod, cache) {
  const { s, dir } = await roundBStore(mod.Store);
  const pools = cache.copyPoolCounters ?? null;
  const pick = rng(62);
  const liveKey = () => {
    const i = 4 * Math.floor(pick() * (n / 4)) + 2 + (pick() < 0.5 ? 0 : 1);
    return keyOf(i < n ? i : 2);
  };
  for (let k = 0; k < 2000; k++) await pair(s, liveKey(), pools);
  const idle = [];
  for (let k = 0; k < IDLE_PAIRS; k++) {
    if ((k & 15) === 15) await turnEnds();
    idle.push((await pair(s, liveKey(), pools))[0]);
  }
  let done = false;
  const running = s.compact({ mode }).finally(() => (done = true));
  const busy = [];
  const madeIn = [];
  const stopAt = performance.now() + PASS_DEADLINE_MS;
  while (!done && performance.now() < stopAt) {
    if ((busy.length & 15) === 15) await turnEnds();
    const [us, made] = await pair(s, liveKey(), pools);
    busy.push(us);
    if (made > 0) madeIn.push(us);
  }
  await running;
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  const hist = EDGES.map(() => 0);
  for (const us of busy) hist[EDGES.findIndex((e) => us < e)]++;
  const idleP99 = quantile(idle, 0.99);
  const busyP99 = quantile(busy, 0.99);
  return { idleP99, busyP99, ratio: busyP99 / idleP99, reads: busy.length, hist, pools: pools === null ? null : madeIn.length, poolUs: madeIn.length > 0 ? quantile(madeIn, 0.5) : 0 };
}

const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const caches = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/value-cache.js")).href)));
console.log(`read-tail: ${mode}, ${n} keys, histogram edges (µs) ${EDGES.slice(0, -1).join(", ")}`);
for (let r = 0; r < rounds; r++) {
  for (let t = 0; t < trees.length; t++) {
    const x = await round(mods[t], caches[t]);
    const pools = x.pools === null ? "pools: not counted in this tree" : `pools made inside a read: ${x.pools} (median ${x.poolUs.toFixed(0)} µs)`;
    console.log(`${trees[t]} round ${r}: readSync p99 idle ${x.idleP99.toFixed(2)} µs, during ${x.busyP99.toFixed(2)} µs, ratio ${x.ratio.toFixed(2)}; ${x.reads} reads in the pass, histogram ${x.hist.join(" ")}; ${pools}`);
  }
}
