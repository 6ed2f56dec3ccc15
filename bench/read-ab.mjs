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
import { loadKeys, mainNs, verify, w5Batches } from "./w5-shared.mjs";
let gcs = { n: 0, major: 0, ms: 0, majorMs: 0 };
new PerformanceObserver((l) => { for (const e of l.getEntries()) { gcs.n++; gcs.ms += e.duration; const k = e.detail?.kind ?? e.kind; if (k === 4 || k === 2) { gcs.major++; gcs.majorMs += e.duration; } } }).observe({ entryTypes: ["gc"] });
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 2);
const n = Number(process.env.N ?? 200000);
const opts = process.env.OPTS ? JSON.parse(process.env.OPTS) : {};
const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const { dels, puts } = w5Batches(n);
const res = trees.map(() => []);
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const E = mods[t].Store;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "r7w5-"));
  let s = await E.open(dir, { durability: "none" });
  await loadKeys(s, n);
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
  const bad = verify(s, n);
  const m1 = mainNs(), t1 = performance.now();
  await new Promise((r) => setTimeout(r, 20)); const g1 = { ...gcs };
  if (sess) { const p = await sess.post2("Profiler.stop"); fs.writeFileSync(`${process.env.PROF}-${t}-${r}.cpuprofile`, JSON.stringify(p.profile)); sess.disconnect(); }
  const st = JSON.stringify(s.blocks?.counters ?? {});
  await s.close();
  const m2 = mainNs(), t2 = performance.now();
  s = await E.open(dir, { durability: "sync", ...opts });
  const bad2 = verify(s, n);
  const m3 = mainNs(), t3 = performance.now();
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  res[t].push([t1 - t0, (m1 - m0) / 1e6, t3 - t2, (m3 - m2) / 1e6]);
  console.log(`round ${r} ${trees[t]}: del+rewrite ${(w1 - w0).toFixed(0)} ms; read-all ${(t1 - t0).toFixed(0)} ms wall / ${((m1 - m0) / 1e6).toFixed(0)} ms main CPU; reopen+read-all ${(t3 - t2).toFixed(0)} wall / ${((m3 - m2) / 1e6).toFixed(0)} CPU; bad ${bad}/${bad2}; gc ${g1.n} (${g1.ms.toFixed(0)} ms), major ${g1.major} (${g1.majorMs.toFixed(0)} ms); load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]} ${st}`);
}
for (let t = 0; t < trees.length; t++) { const med = (k) => { const a = res[t].map((x) => x[k]).sort((x, y) => x - y); return a[a.length >> 1].toFixed(0); }; console.log(`${trees[t]}: read-all median ${med(0)} ms wall / ${med(1)} CPU; reopen+read-all ${med(2)} wall / ${med(3)} CPU`); }
