// W5's delete-phase lookups alone, trees alternated round by round (delete-12). Usage:
//   node bench/hint-lookup-ab.mjs TREE [TREE ...]     (each TREE has a built dist/)
// Env: ROUNDS (8), N (200000 keys).
// Builds W5's loaded store once with the first tree (N keys in random order, durability "none",
// closed: one 64 MiB segment, one hint), then per round and tree opens it (durability "sync", auto
// compaction off) and finds the slot of every key W5's delete phase forgets, in its order, with
// Keydir.get — the deferred keydir's hint probes, lazy block reads and decodes, slots built — and
// prints the main-thread CPU ms of the lookups (/proc/thread-self/schedstat), then medians (min–max)
// and the paired difference against the first tree (median of per-round differences).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import { loadKeys, mainNs, printPaired, treesArg, w5Batches } from "./w5-shared.mjs";
const trees = treesArg("node bench/hint-lookup-ab.mjs TREE [TREE ...]");
const rounds = Number(process.env.ROUNDS ?? 8);
const n = Number(process.env.N ?? 200000);
const mods = await Promise.all(trees.map((t) => import(pathToFileURL(path.join(t, "dist/engine/store.js")).href)));
const { dels } = w5Batches(n);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hlook-"));
const s0 = await mods[0].Store.open(dir, { durability: "none" });
await loadKeys(s0, n);
await s0.close();
const res = trees.map(() => []);
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const s = await mods[t].Store.open(dir, { durability: "sync", compaction: { auto: false } });
  const m0 = mainNs();
  let found = 0;
  for (const b of dels) for (const op of b) if (s.keydir.get(op.scope ?? "global", op.key) !== undefined) found++;
  const ms = (mainNs() - m0) / 1e6;
  await s.close();
  res[t].push(ms);
  console.log(`round ${r} ${trees[t]}: ${ms.toFixed(1)} ms, ${found} found; load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
}
fs.rmSync(dir, { recursive: true, force: true });
printPaired(trees, res, "ms");
