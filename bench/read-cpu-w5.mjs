// W5's read-all alone, main-thread CPU per read, trees alternated on ONE store (w5-11). Usage:
//   node bench/read-cpu-w5.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base)
// Env: ROUNDS (6), N (200000 keys), PASSES (2).
// Builds W5's store once with the first tree (load N keys non-durably, reopen durable, forget every
// even key, rewrite every 8th, close with auto compaction on so it settles as W5's does), then per
// round and tree: opens it with auto compaction off (no worker CPU, no slot moving under the
// reads), reads all N with readSync and verifies, PASSES times, and closes. Pass 1 is read-all on
// a fresh block cache (fills, first touches), later passes read through the warm cache (the value
// cache caches a pass's values only from its second read on, so pass 2 is mostly hits there).
// Prints main-thread CPU ns per read (/proc/thread-self/schedstat) per pass, then medians (min–max).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import { loadKeys, mainNs, verify, w5Batches } from "./w5-shared.mjs";
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 6);
const n = Number(process.env.N ?? 200000);
const passes = Number(process.env.PASSES ?? 2);
const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const { dels, puts } = w5Batches(n);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rcw5-"));
{
  const E = mods[0].Store;
  let s = await E.open(dir, { durability: "none" });
  await loadKeys(s, n);
  await s.close();
  s = await E.open(dir, { durability: "sync" });
  for (const b of dels) await s.batch(b);
  for (const b of puts) await s.batch(b);
  verify(s, n);
  await s.close();
}
const res = trees.map(() => Array.from({ length: passes }, () => []));
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const s = await mods[t].Store.open(dir, { durability: "sync", compaction: { auto: false } });
  const line = [];
  for (let p = 0; p < passes; p++) {
    const m0 = mainNs();
    const bad = verify(s, n);
    const ns = (mainNs() - m0) / n;
    if (bad !== 0) throw new Error(`${trees[t]}: ${bad} wrong`);
    res[t][p].push(ns);
    line.push(`pass ${p + 1} ${ns.toFixed(0)} ns/read`);
  }
  await s.close();
  console.log(`round ${r} ${trees[t]}: ${line.join("; ")}; load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
}
for (let t = 0; t < trees.length; t++) {
  const stat = (a) => { a = [...a].sort((x, y) => x - y); return `${a[a.length >> 1].toFixed(0)} (${a[0].toFixed(0)}–${a[a.length - 1].toFixed(0)})`; };
  console.log(`${trees[t]}: ${res[t].map((a, p) => `pass ${p + 1} ${stat(a)}`).join("; ")} ns/read main CPU`);
}
fs.rmSync(dir, { recursive: true, force: true });
