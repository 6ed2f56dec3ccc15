// Slot lookups on a hinted open, with the hint tables merged into one index or probed one by one
// (engine/hint-index.ts MergedIndex; w5-9). Usage:
//   node bench/hint-merge-ab.mjs [TREE]     (TREE has a built dist/ exporting setHintMerge; default .)
// Env: ROUNDS (5), N (200000 keys), AFTER (comma-separated merge fractions to compare, default
// "0.015625,Infinity": merged after lookups of 1/64 of the entries, as the engine does, and never).
// Builds three stores once: "loaded" (N keys written in random order: one 64 MiB segment, one
// hint), the same with 4 MiB segments (about N / 14000 hints of equal size), and "w5" (loaded,
// then W5's forgets of every even key and rewrites of every 8th, then closed: as many hints as
// compaction left, often two). Then, rounds alternating the fractions, opens each store and looks
// up slots with Keydir.get — the even keys of the loaded ones (W5's delete phase), every key of
// "w5" (its reopen + read-all) — and prints the main-thread CPU ms (/proc/thread-self/schedstat)
// of the lookups and the hints, then the medians (min–max) per fraction. No value is read: this
// is the hint side only.
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import { keyOf, loadKeys, mainNs, w5Batches } from "./w5-shared.mjs";
const tree = process.argv[2] ?? ".";
const { Store } = await import(pathToFileURL(path.join(tree, "dist/engine/store.js")).href);
const { setHintMerge } = await import(pathToFileURL(path.join(tree, "dist/engine/hint-index.js")).href);
const rounds = Number(process.env.ROUNDS ?? 5);
const n = Number(process.env.N ?? 200000);
const afters = (process.env.AFTER ?? "0.015625,Infinity").split(",").map(Number);
const value = Buffer.alloc(256, 7);
const root = fs.mkdtempSync(path.join(os.tmpdir(), "hint-merge-ab-"));
const { perm } = w5Batches(n, value);
async function build(name, churn, segmentBytes) {
  const dir = path.join(root, name);
  const s = await Store.open(dir, { durability: "none", ...(segmentBytes ? { segmentBytes } : {}) });
  await loadKeys(s, n, value);
  if (churn) {
    const { dels, puts } = w5Batches(n, value);
    for (const b of [...dels, ...puts]) await s.batch(b);
  }
  await s.close();
  return dir;
}
const stores = [
  ["loaded (even keys)", await build("loaded", false), (i) => i % 2 === 0],
  ["loaded, 4 MiB segments (even keys)", await build("small", false, 4 << 20), (i) => i % 2 === 0],
  ["w5 (every key)", await build("w5", true), () => true],
];
const res = stores.map(() => afters.map(() => []));
for (let r = 0; r < rounds; r++) for (let a = 0; a < afters.length; a++) {
  setHintMerge({ after: afters[a] });
  const line = [];
  for (let k = 0; k < stores.length; k++) {
    const [label, dir, wanted] = stores[k];
    const s = await Store.open(dir, { durability: "none", compaction: { auto: false } });
    let found = 0;
    const sizes = (s.keydir.deferred?.tables ?? []).map((t) => t.count); // private fields, read for the report only
    const m0 = mainNs();
    for (const i of perm) if (wanted(i) && s.keydir.get("global", keyOf(i)) !== undefined) found++;
    const ms = (mainNs() - m0) / 1e6;
    const merged = s.keydir.deferred?.isMerged === true;
    await s.close();
    res[k][a].push(ms);
    line.push(`${label} ${ms.toFixed(0)} ms (${found} found, ${sizes.length} hints${sizes.length <= 4 ? ` of ${sizes.join(" + ")} entries` : ""}${merged ? ", merged" : ""})`);
  }
  console.log(`round ${r} after=${afters[a]}: ${line.join("; ")}; load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
}
fs.rmSync(root, { recursive: true, force: true });
for (let k = 0; k < stores.length; k++) for (let a = 0; a < afters.length; a++) {
  const v = res[k][a].sort((x, y) => x - y);
  console.log(`${stores[k][0]}, after=${afters[a]}: median ${v[v.length >> 1].toFixed(0)} (${v[0].toFixed(0)}–${v[v.length - 1].toFixed(0)}) ms CPU`);
}
