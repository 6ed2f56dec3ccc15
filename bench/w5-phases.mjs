// W5's phases one by one, in one process, trees alternated round by round (w5-9). Usage:
//   node bench/w5-phases.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base)
// Env: ROUNDS (3), N (200000 keys), PROF (a path prefix: writes a V8 CPU profile of the delete
// phase and of the read-all, `${PROF}-{delete,read}-${tree}-${round}.cpuprofile`; summarize with
// bench/profile-top.ts), AUTO=off (the durable opens with `compaction: { auto: false }`: what the
// automatic pass costs the phases), PRELOAD=1 (`stats()` right after the durable open, untimed,
// builds every name from the hints: what the deferred keydir costs the phases).
// Does what bench/workloads.ts w5 does through engine/store.js's Store — load N keys non-durably,
// reopen durable, forget every even key, rewrite every 8th (atomic batches of 1000, random order),
// read all N with readSync and verify, close, reopen and read all again — and prints each phase's
// wall and main-thread CPU ms (/proc/thread-self/schedstat), then the medians (min–max) per tree;
// per round also the other threads' CPU and the process's minor page faults in each phase.
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import * as inspector from "node:inspector";
import { loadKeys, mainNs, verify, w5Batches } from "./w5-shared.mjs";
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 3);
const n = Number(process.env.N ?? 200000);
const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const { dels, puts } = w5Batches(n);
const durable = { durability: "sync", ...(process.env.AUTO === "off" ? { compaction: { auto: false } } : {}) };
const preload = process.env.PRELOAD === "1";
const post = (sess, m, a) => new Promise((res, rej) => sess.post(m, a ?? {}, (e, x) => (e ? rej(e) : res(x))));
/** Runs `fn`, profiled to `${PROF}-${name}-...` when PROF is set; returns [wall ms, main CPU ms]. */
async function phase(name, t, r, fn) {
  let sess = null;
  if (process.env.PROF) { sess = new inspector.Session(); sess.connect(); await post(sess, "Profiler.enable"); await post(sess, "Profiler.setSamplingInterval", { interval: 200 }); await post(sess, "Profiler.start"); }
  const m0 = mainNs(), t0 = performance.now(), c0 = process.cpuUsage(), f0 = process.resourceUsage().minorPageFault;
  const out = await fn();
  const m1 = mainNs(), t1 = performance.now(), c1 = process.cpuUsage(c0);
  others[name] = (c1.user + c1.system) / 1000 - (m1 - m0) / 1e6;
  faults[name] = process.resourceUsage().minorPageFault - f0;
  if (sess) { const p = await post(sess, "Profiler.stop"); fs.writeFileSync(`${process.env.PROF}-${name}-${t}-${r}.cpuprofile`, JSON.stringify(p.profile)); sess.disconnect(); }
  return [t1 - t0, (m1 - m0) / 1e6, out];
}
const names = ["delete", "rewrite", "read-all", "reopen+read-all"];
/** Per phase of the last round: CPU ms of the process's other threads (compaction workers, libuv) during it. */
const others = {};
/** Per phase of the last round: the process's minor page faults during it (fresh memory touched). */
const faults = {};
const res = trees.map(() => names.map(() => []));
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const E = mods[t].Store;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "w5p-"));
  let s = await E.open(dir, { durability: "none" });
  await loadKeys(s, n);
  await s.close();
  s = await E.open(dir, durable);
  if (preload) s.stats();
  const ph = [];
  ph.push(await phase("delete", t, r, async () => { for (const b of dels) await s.batch(b); }));
  ph.push(await phase("rewrite", t, r, async () => { for (const b of puts) await s.batch(b); }));
  ph.push(await phase("read", t, r, () => verify(s, n)));
  await s.close();
  ph.push(await phase("reopen", t, r, async () => { const s2 = await E.open(dir, durable); const bad = verify(s2, n); await s2.close(); return bad; }));
  fs.rmSync(dir, { recursive: true, force: true });
  for (let k = 0; k < names.length; k++) res[t][k].push(ph[k]);
  const load = fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  console.log(`round ${r} ${trees[t]}: ${names.map((nm, k) => `${nm} ${ph[k][0].toFixed(0)} wall / ${ph[k][1].toFixed(0)} CPU`).join("; ")}; bad ${ph[2][2]}/${ph[3][2]}; other threads' CPU ${Object.entries(others).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(" ")} ms; faults ${Object.entries(faults).map(([k, v]) => `${k} ${v}`).join(" ")}; load ${load}`);
}
for (let t = 0; t < trees.length; t++) {
  const stat = (k, j) => { const a = res[t][k].map((x) => x[j]).sort((x, y) => x - y); return `${a[a.length >> 1].toFixed(0)} (${a[0].toFixed(0)}–${a[a.length - 1].toFixed(0)})`; };
  console.log(`${trees[t]}: ${names.map((nm, k) => `${nm} ${stat(k, 0)} wall / ${stat(k, 1)} CPU ms`).join("; ")}`);
}
