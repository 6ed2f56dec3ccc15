// The version-3 hint's block decode alone, trees alternated round by round (delete-12). Usage:
//   node bench/hint-decode-ab.mjs TREE [TREE ...]     (each TREE has a built dist/)
// Env: ROUNDS (8), N (200000 keys), REPS (5 decodes per round and tree).
// Builds W5's loaded store once with the first tree (N keys, random order, durability "none",
// closed: one segment with one hint), then per round and tree reads that hint with the tree's
// segments/hint.js readHint and decodes every block (HintBytesV3.ensureAll: each block's sum,
// then decodeBlock), REPS times; prints main-thread CPU ns per entry and the minor page faults
// per decode (the region's fresh memory), then medians (min–max) and the paired difference
// against the first tree (median of per-round differences, rounds it was better in).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import { loadKeys, mainNs, printPaired, treesArg } from "./w5-shared.mjs";
const trees = treesArg("node bench/hint-decode-ab.mjs TREE [TREE ...]");
const rounds = Number(process.env.ROUNDS ?? 8);
const n = Number(process.env.N ?? 200000);
const reps = Number(process.env.REPS ?? 5);
const imp = (t, rel) => import(pathToFileURL(path.join(t, "dist", rel)).href);
const mods = await Promise.all(trees.map(async (t) => ({ hint: await imp(t, "segments/hint.js"), hio: await imp(t, "segments/header-io.js"), sum: await imp(t, "segments/checksum.js") })));
for (const m of mods) await m.sum.initChecksum(); // each tree's own xxhash module (a store opens only the first's)
const { Store } = await imp(trees[0], "engine/store.js");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hdec-"));
const s = await Store.open(dir, { durability: "none" });
await loadKeys(s, n);
await s.close();
const segDir = path.join(dir, "segments");
const hintNames = fs.readdirSync(segDir).filter((f) => f.endsWith(".hint"));
if (hintNames.length !== 1) throw new Error(`expected one hint, found ${hintNames.join(",")}`);
const { hint: H0 } = mods[0];
const id = H0.parseHintFileName(hintNames[0]);
const segFile = fs.readdirSync(segDir).find((f) => f.startsWith(hintNames[0].replace(/\.hint$/, "")) && !f.endsWith(".hint"));
const fd = fs.openSync(path.join(segDir, segFile), "r");
const header = mods[0].hio.readHeader(fd, id);
fs.closeSync(fd);
const res = trees.map(() => []);
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) {
  const { hint: H } = mods[t];
  let ns = 0;
  let faults = 0;
  for (let k = 0; k < reps; k++) {
    const h = H.readHint(segDir, id, header);
    if (h === null || h.bytes === null) throw new Error(`hint not read lazily: ${h === null ? "null" : "bytes null"}`);
    const f0 = process.resourceUsage().minorPageFault;
    const m0 = mainNs();
    if (!h.bytes.ensureAll()) throw new Error("decode failed");
    ns += mainNs() - m0;
    faults += process.resourceUsage().minorPageFault - f0;
  }
  res[t].push(ns / reps / n);
  console.log(`round ${r} ${trees[t]}: ${(ns / reps / n).toFixed(1)} ns/entry, ${(faults / reps).toFixed(0)} minor faults per decode; load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
}
fs.rmSync(dir, { recursive: true, force: true });
printPaired(trees, res, "ns/entry");
