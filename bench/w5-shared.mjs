// What the one-process scripts share (bench/read-ab.mjs, bench/w5-phases.mjs, bench/read-tail.mjs,
// bench/hint-merge-ab.mjs, bench/hint-decode-ab.mjs, bench/hint-lookup-ab.mjs): bench/workloads.ts's
// keys, values, permutations and W5 batches, written against engine/store.js's Store (op "write" /
// "forget", readSync), and the A/B scripts' tree arguments and paired summary.
import * as fs from "node:fs";

/** Key i, as bench/common.ts keyOf: 10 bytes. */
export const keyOf = (i) => "k" + String(i).padStart(9, "0");

/** Value of key i at `version`, as bench/common.ts valueOf: 256 bytes, index and version first. */
export function valueOf(i, version) {
  const v = Buffer.allocUnsafe(256);
  v.writeUInt32LE(i >>> 0, 0);
  v.writeUInt32LE(version >>> 0, 4);
  let x = (Math.imul(i + 1, 0x9e3779b1) ^ Math.imul(version + 7, 0x85ebca6b)) >>> 0 || 1;
  for (let o = 8; o < 256; o += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; v.writeUInt32LE(x >>> 0, o); }
  return v;
}

/** bench/common.ts's seeded generator (mulberry32). */
export function rng(a) {
  return () => { a |= 0; a = (a + 0x6d2b79f5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a); t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

/** A seeded permutation of 0..n-1 (Fisher–Yates). */
export function permutation(n, seed) {
  const p = new Uint32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const r = rng(seed);
  for (let i = n - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); const t = p[i]; p[i] = p[j]; p[j] = t; }
  return p;
}

/** What W5 expects of key i: version 2 (rewritten), undefined (forgotten) or version 1. */
export const expectOf = (i) => (i % 8 === 0 ? 2 : i % 2 === 0 ? undefined : 1);

/** Main-thread CPU ns so far (/proc/thread-self/schedstat). */
export const mainNs = () => Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);

/** Reads keys 0..n-1 with readSync and counts the values that are not what W5 expects. */
export function verify(s, n) {
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const w = expectOf(i);
    const r = s.readSync(keyOf(i));
    const got = r.status === "OK" ? (typeof r.value === "string" ? Buffer.from(r.value) : r.value) : undefined;
    if (w === undefined ? got !== undefined : !(got && got.byteLength === 256 && Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(valueOf(i, w)))) bad++;
  }
  return bad;
}

/** Writes keys 0..n-1 at version 1 (or `value` for all) in random order (seed 51), atomic batches of 1000. */
export async function loadKeys(s, n, value) {
  const lp = permutation(n, 51);
  for (let b = 0; b < n; b += 1000) {
    const batch = [];
    for (let j = b; j < Math.min(b + 1000, n); j++) batch.push({ op: "write", key: keyOf(lp[j]), value: value ?? valueOf(lp[j], 1) });
    await s.batch(batch);
  }
}

/** W5's batches of 1000 in random order (seed 52): forgets of every even key, then rewrites of every 8th (at version 2, or `value`). */
export function w5Batches(n, value) {
  const perm = permutation(n, 52);
  const dels = [], puts = [];
  let cur = [];
  for (const i of perm) { if (i % 2) continue; cur.push({ op: "forget", key: keyOf(i) }); if (cur.length === 1000) { dels.push(cur); cur = []; } }
  if (cur.length) { dels.push(cur); cur = []; }
  for (const i of perm) { if (i % 8) continue; cur.push({ op: "write", key: keyOf(i), value: value ?? valueOf(i, 2) }); if (cur.length === 1000) { puts.push(cur); cur = []; } }
  if (cur.length) puts.push(cur);
  return { dels, puts, perm };
}

/** The TREE arguments of an A/B script (each a built tree); prints `usage` and exits 2 when none is given. */
export function treesArg(usage) {
  const trees = process.argv.slice(2);
  if (trees.length === 0) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return trees;
}

/** Prints per tree the median (min–max) of its rounds' figures and, after the first, the paired difference against the first tree (median of per-round differences, rounds it was lower in). */
export function printPaired(trees, res, unit) {
  const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  for (let t = 0; t < trees.length; t++) {
    const a = res[t].slice().sort((x, y) => x - y);
    const d = res[t].map((v, r) => v - res[0][r]);
    const paired = t === 0 ? "" : `; paired vs ${trees[0]} ${med(d).toFixed(1)}, better in ${d.filter((x) => x < 0).length} of ${d.length}`;
    console.log(`${trees[t]}: ${med(a).toFixed(1)} (${a[0].toFixed(1)}–${a[a.length - 1].toFixed(1)}) ${unit}${paired}`);
  }
}
