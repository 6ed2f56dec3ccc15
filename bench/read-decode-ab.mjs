// The point read's decode and checksum on block bytes, trees alternated in one process (w5-11). Usage:
//   node bench/read-decode-ab.mjs TREE [TREE ...]     (each TREE has a built dist/; e.g. . /tmp/base)
// Env: ROUNDS (6), N (1,000,000 decodes per round).
// A 16 KiB block of W5's records (10-byte keys, 256-byte values, format 3) is decoded and checked
// record by record as engine/reads.ts finishRead does: a tree whose BlockCache has blockOf decodes
// each record where it lies (checkRecordBytes with its offset), an older one decodes a subarray of
// it; both then copy the value (value-cache copyOf). Prints main-thread CPU ns per record
// (/proc/thread-self/schedstat) per round, then medians (min–max).
import { pathToFileURL } from "node:url";
import * as fs from "node:fs";
import * as path from "node:path";
import { mainNs } from "./w5-shared.mjs";
const trees = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 6);
const n = Number(process.env.N ?? 1000000);
const imp = (t, f) => import(pathToFileURL(path.join(t, "dist", f)).href);
const mods = [];
for (const t of trees) {
  const ck = await imp(t, "segments/checksum.js");
  await ck.initChecksum();
  const v3 = await imp(t, "segments/record-v3.js");
  const pr = await imp(t, "segments/point-read.js");
  const vc = await imp(t, "engine/value-cache.js");
  const bc = await imp(t, "engine/block-cache.js");
  mods.push({ v3, pr, vc, inPlace: typeof bc.BlockCache.prototype.blockOf === "function" });
}
/** One block of records at their offsets, encoded by tree 0. */
const block = Buffer.alloc(16384);
const recs = [];
for (let i = 0, at = 0; ; i++) {
  const r = mods[0].v3.encodeRecordV3({ type: 1, seq: 1000 + i, generation: 1, scope: "global", key: "k" + String(i).padStart(9, "0"), value: Buffer.alloc(256, i) });
  if (at + r.length > block.length) break;
  r.copy(block, at);
  recs.push({ at, len: r.length, key: "k" + String(i).padStart(9, "0"), seq: 1000 + i });
  at += r.length;
}
const res = trees.map(() => []);
for (let round = 0; round < rounds; round++) for (let t = 0; t < trees.length; t++) {
  const { pr, vc, inPlace } = mods[t];
  let sink = 0;
  const m0 = mainNs();
  for (let k = 0; k < n; k++) {
    const r = recs[k % recs.length];
    const expect = { type: 1, scope: "global", key: r.key, generation: 1, seq: r.seq };
    const got = inPlace ? pr.checkRecordBytes(block, r.len, expect, true, 3, r.at) : pr.checkRecordBytes(block.subarray(r.at, r.at + r.len), r.len, expect, true, 3);
    if (typeof got === "string") throw new Error(`${trees[t]}: ${got}`);
    sink += vc.copyOf(got.value).byteLength;
  }
  const ns = (mainNs() - m0) / n;
  res[t].push(ns);
  console.log(`round ${round} ${trees[t]}: ${ns.toFixed(0)} ns/record (${sink}); load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
}
for (let t = 0; t < trees.length; t++) {
  const a = [...res[t]].sort((x, y) => x - y);
  console.log(`${trees[t]}: ${a[a.length >> 1].toFixed(0)} (${a[0].toFixed(0)}–${a[a.length - 1].toFixed(0)}) ns per record decoded, checked and copied, main CPU`);
}
