// W5's phases one by one, in one process, trees alternated round by round (w5-9). Usage:
//   node bench/w5-phases.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base)
// Env: ROUNDS (3), N (200000 keys), PROF (a path prefix: writes a V8 CPU profile of the delete
// phase and of the read-all, `${PROF}-{delete,read}-${tree}-${round}.cpuprofile`; summarize with
// bench/profile-top.ts).
// Does what bench/workloads.ts w5 does through engine/store.js's Store — load N keys non-durably,
// reopen durable, forget every even key, rewrite every 8th (atomic batches of 1000, random order),
// read all N with readSync and verify, close, reopen and read all again — and prints each phase's
// wall and main-thread CPU ms (/proc/thread-self/schedstat), then the medians (min–max) per tree.
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import * as inspector from "node:inspector";
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 3);
const n = Number(process.env.N ?? 200000);
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
const post = (sess, m, a) => new Promise((res, rej) => sess.post(m, a ?? {}, (e, x) => (e ? rej(e) : res(x))));
/** Runs `fn`, profiled to `${PROF}-${name}-...` when PROF is set; returns [wall ms, main CPU ms]. */
async function phase(name, t, r, fn) {
  let sess = null;
  if (process.env.PROF) { sess = new inspector.Session(); sess.connect(); await post(sess, "Profiler.enable"); await post(sess, "Profiler.setSamplingInterval", { interval: 200 }); await post(sess, "Profiler.start"); }
  const m0 = mainNs(), t0 = performance.now(), c0 = process.cpuUsage();
  const out = await fn();
  const m1 = mainNs(), t1 = performance.now(), c1 = process.cpuUsage(c0);
  others[name] = (c1.user + c1.system) / 1000 - (m1 - m0) / 1e6;
  if (sess) { const p = await post(sess, "Profiler.stop"); fs.writeFileSync(`${process.env.PROF}-${name}-${t}-${r}.cpuprofile`, JSON.stringify(p.profile)); sess.disconnect(); }
  return [t1 - t0, (m1 - m0) / 1e6, out];
}
const names = ["delete", "rewrite", "read-all", "reopen+read-all"];
/** Per phase of the last round: CPU ms of the process's other threads (compaction workers, libuv) during it. */
const others = {};
const res = trees.map(() => names.map(() => []));
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const E = mods[t].Store;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "w5p-"));
  let s = await E.open(dir, { durability: "none" });
  const lp = permutation(n, 51);
  for (let b = 0; b < n; b += 1000) { const batch = []; for (let j = b; j < Math.min(b + 1000, n); j++) batch.push({ op: "write", key: keyOf(lp[j]), value: valueOf(lp[j], 1) }); await s.batch(batch); }
  await s.close();
  s = await E.open(dir, { durability: "sync" });
  const ph = [];
  ph.push(await phase("delete", t, r, async () => { for (const b of dels) await s.batch(b); }));
  ph.push(await phase("rewrite", t, r, async () => { for (const b of puts) await s.batch(b); }));
  ph.push(await phase("read", t, r, () => verify(s)));
  await s.close();
  ph.push(await phase("reopen", t, r, async () => { const s2 = await E.open(dir, { durability: "sync" }); const bad = verify(s2); await s2.close(); return bad; }));
  fs.rmSync(dir, { recursive: true, force: true });
  for (let k = 0; k < names.length; k++) res[t][k].push(ph[k]);
  const load = fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  console.log(`round ${r} ${trees[t]}: ${names.map((nm, k) => `${nm} ${ph[k][0].toFixed(0)} wall / ${ph[k][1].toFixed(0)} CPU`).join("; ")}; bad ${ph[2][2]}/${ph[3][2]}; other threads' CPU ${Object.entries(others).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(" ")} ms; load ${load}`);
}
for (let t = 0; t < trees.length; t++) {
  const stat = (k, j) => { const a = res[t][k].map((x) => x[j]).sort((x, y) => x - y); return `${a[a.length >> 1].toFixed(0)} (${a[0].toFixed(0)}–${a[a.length - 1].toFixed(0)})`; };
  console.log(`${trees[t]}: ${names.map((nm, k) => `${nm} ${stat(k, 0)} wall / ${stat(k, 1)} CPU ms`).join("; ")}`);
}
