// W5's read-all, in one process, trees alternated (reads-7). Usage:
//   node bench/read-ab.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base-628)
// Env: ROUNDS (2), N (200000 keys), OPTS (JSON open options for the durable reopen, e.g.
// '{"compaction":{"auto":false}}'), PROF (a path prefix: writes a CPU profile of each read-all).
// Does what bench/workloads.ts w5 does — load N keys non-durably, reopen durable, forget every
// even key and rewrite every 8th (atomic batches of 1000, random order), read all N with
// readSync and verify — then prints the read-all's wall time, main-thread CPU time
// (/proc/thread-self/schedstat), V8's collections during it, the block cache's counters (trees
// that have them), and the same for a reopen + read-all. Opens engine/store.js's Store directly so
// that the counters are reachable; kept out of the bench's report (no peers: use bench/run.ts).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import { PerformanceObserver } from "node:perf_hooks";
let gcs = { n: 0, major: 0, ms: 0, majorMs: 0 };
new PerformanceObserver((l) => { for (const e of l.getEntries()) { gcs.n++; gcs.ms += e.duration; const k = e.detail?.kind ?? e.kind; if (k === 4 || k === 2) { gcs.major++; gcs.majorMs += e.duration; } } }).observe({ entryTypes: ["gc"] });
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 2);
const n = Number(process.env.N ?? 200000);
const opts = process.env.OPTS ? JSON.parse(process.env.OPTS) : {};
const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const keyOf = (i) => "k" + String(i).padStart(9, "0");
function valueOf(i, version) { const v = Buffer.allocUnsafe(256); v.writeUInt32LE(i >>> 0, 0); v.writeUInt32LE(version >>> 0, 4); let x = (Math.imul(i + 1, 0x9e3779b1) ^ Math.imul(version + 7, 0x85ebca6b)) >>> 0 || 1; for (let o = 8; o < 256; o += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; v.writeUInt32LE(x >>> 0, o); } return v; }
function rng(a) { return () => { a |= 0; a = (a + 0x6d2b79f5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a); t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
function permutation(n, seed) { const p = new Uint32Array(n); for (let i = 0; i < n; i++) p[i] = i; const r = rng(seed); for (let i = n - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); const t = p[i]; p[i] = p[j]; p[j] = t; } return p; }
const expect = (i) => (i % 8 === 0 ? 2 : i % 2 === 0 ? undefined : 1);
const mainNs = () => Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
function verify(s) { let bad = 0; for (let i = 0; i < n; i++) { const w = expect(i); const r = s.readSync(keyOf(i)); const got = r.status === "OK" ? (typeof r.value === "string" ? Buffer.from(r.value) : r.value) : undefined; if (w === undefined ? got !== undefined : !(got && got.byteLength === 256 && Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(valueOf(i, w)))) bad++; } return bad; }
const perm = permutation(n, 52);
const dels = [], puts = []; let cur = [];
for (const i of perm) { if (i % 2) continue; cur.push({ op: "forget", key: keyOf(i) }); if (cur.length === 1000) { dels.push(cur); cur = []; } }
if (cur.length) { dels.push(cur); cur = []; }
for (const i of perm) { if (i % 8) continue; cur.push({ op: "write", key: keyOf(i), value: valueOf(i, 2) }); if (cur.length === 1000) { puts.push(cur); cur = []; } }
if (cur.length) puts.push(cur);
const res = trees.map(() => []);
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const E = mods[t].Store;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "r7w5-"));
  let s = await E.open(dir, { durability: "none" });
  const lp = permutation(n, 51);
  for (let b = 0; b < n; b += 1000) { const batch = []; for (let j = b; j < Math.min(b + 1000, n); j++) batch.push({ op: "write", key: keyOf(lp[j]), value: valueOf(lp[j], 1) }); await s.batch(batch); }
  await s.close();
  s = await E.open(dir, { durability: "sync", ...opts });
  const w0 = performance.now();
  for (const b of dels) await s.batch(b);
  for (const b of puts) await s.batch(b);
  const w1 = performance.now();
  let sess = null;
  if (process.env.PROF) { const inspector = await import("node:inspector"); sess = new inspector.Session(); sess.connect(); const post = (m, a) => new Promise((res, rej) => sess.post(m, a ?? {}, (e, x) => e ? rej(e) : res(x))); await post("Profiler.enable"); await post("Profiler.setSamplingInterval", { interval: 100 }); await post("Profiler.start"); sess.post2 = post; }
  await new Promise((r) => setTimeout(r, 20)); gcs = { n: 0, major: 0, ms: 0, majorMs: 0 };
  const m0 = mainNs(), t0 = performance.now();
  const bad = verify(s);
  const m1 = mainNs(), t1 = performance.now();
  await new Promise((r) => setTimeout(r, 20)); const g1 = { ...gcs };
  if (sess) { const p = await sess.post2("Profiler.stop"); fs.writeFileSync(`${process.env.PROF}-${t}-${r}.cpuprofile`, JSON.stringify(p.profile)); sess.disconnect(); }
  const st = JSON.stringify(s.blocks?.counters ?? {});
  await s.close();
  const m2 = mainNs(), t2 = performance.now();
  s = await E.open(dir, { durability: "sync", ...opts });
  const bad2 = verify(s);
  const m3 = mainNs(), t3 = performance.now();
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  res[t].push([t1 - t0, (m1 - m0) / 1e6, t3 - t2, (m3 - m2) / 1e6]);
  console.log(`round ${r} ${trees[t]}: del+rewrite ${(w1 - w0).toFixed(0)} ms; read-all ${(t1 - t0).toFixed(0)} ms wall / ${((m1 - m0) / 1e6).toFixed(0)} ms main CPU; reopen+read-all ${(t3 - t2).toFixed(0)} wall / ${((m3 - m2) / 1e6).toFixed(0)} CPU; bad ${bad}/${bad2}; gc ${g1.n} (${g1.ms.toFixed(0)} ms), major ${g1.major} (${g1.majorMs.toFixed(0)} ms); load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]} ${st}`);
}
for (let t = 0; t < trees.length; t++) { const med = (k) => { const a = res[t].map((x) => x[k]).sort((x, y) => x - y); return a[a.length >> 1].toFixed(0); }; console.log(`${trees[t]}: read-all median ${med(0)} ms wall / ${med(1)} CPU; reopen+read-all ${med(2)} wall / ${med(3)} CPU`); }
