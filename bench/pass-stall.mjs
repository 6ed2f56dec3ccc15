// How long the main thread stops answering around the first automatic pass after a hinted reopen
// (forty-second session: the pass's walk applied every deferred name in one turn). Usage:
//   node bench/pass-stall.mjs [--n N] [--rounds R] TREE [TREE ...]     (each TREE has a built dist/)
// Per round and tree, in a fresh process: N keys (64 B values) loaded non-durably and closed, the
// store reopened durable (its names deferred in the hints), then W5's batches of 1000 (every even
// key forgotten, every 8th rewritten, random order) one after the other while a 5 ms interval timer
// notes each gap between its ticks; then 5 s idle for the pass to end. Prints per round the
// longest batch, the longest gap and the longest gap that began after the first 50 batches (the
// first batches after a reopen decode hint blocks for their names: FIRST_BATCHES), then the
// medians per tree.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { loadKeys, w5Batches } from "./w5-shared.mjs";

const args = process.argv.slice(2);
function flag(name, fallback) {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = args[i + 1];
  args.splice(i, 2);
  return Number(v);
}

/**
 * Batches after the reopen whose gaps are left out of the "after" figure: the first batches of
 * random names decode the hint blocks that hold them (lazily, a block per name at first), which
 * holds the main thread 0.2 s at 200k names and 0.8 s at 1M in their first turns; the pass starts
 * later, once the forgets have made half of the store garbage.
 */
const FIRST_BATCHES = 50;

/** One round in this process: prints a JSON line {batchMax, gapMax, gapAfterStart}. */
async function child(tree, n) {
  const { Store } = await import(pathToFileURL(path.join(tree, "dist/engine/store.js")).href);
  const value = Buffer.alloc(64, 7);
  const { dels, puts } = w5Batches(n, value);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pass-stall-"));
  let s = await Store.open(dir, { durability: "none" });
  await loadKeys(s, n, value);
  await s.close();
  s = await Store.open(dir, { durability: "sync" });
  const gaps = [];
  let last = performance.now();
  let batchesDone = 0;
  let batchesAtLast = 0;
  const timer = setInterval(() => {
    const t = performance.now();
    gaps.push({ gap: t - last, from: batchesAtLast });
    last = t;
    batchesAtLast = batchesDone;
  }, 5);
  let batchMax = 0;
  for (const b of [...dels, ...puts]) {
    const t = performance.now();
    await s.batch(b);
    batchMax = Math.max(batchMax, performance.now() - t);
    batchesDone += 1;
  }
  await new Promise((resolve) => setTimeout(resolve, 5000));
  clearInterval(timer);
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  const gapMax = Math.max(...gaps.map((g) => g.gap));
  const gapAfterStart = Math.max(...gaps.filter((g) => g.from >= FIRST_BATCHES).map((g) => g.gap));
  console.log(JSON.stringify({ batchMax, gapMax, gapAfterStart }));
}

if (process.env.PASS_STALL_CHILD) {
  await child(process.env.PASS_STALL_CHILD, Number(process.env.PASS_STALL_N));
} else {
  const n = flag("--n", 1_000_000);
  const rounds = flag("--rounds", 3);
  const trees = args.length > 0 ? args : [path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")];
  const res = trees.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let t = 0; t < trees.length; t++) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, PASS_STALL_CHILD: trees[t], PASS_STALL_N: String(n) }, encoding: "utf8" });
      const x = JSON.parse(out.trim().split("\n").pop());
      res[t].push(x);
      console.log(`round ${r} ${trees[t]}: longest batch ${x.batchMax.toFixed(0)} ms, longest gap ${x.gapMax.toFixed(0)} ms, after the first 50 batches ${x.gapAfterStart.toFixed(0)} ms`);
    }
  }
  const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  for (let t = 0; t < trees.length; t++) {
    const m = (k) => med(res[t].map((x) => x[k])).toFixed(0);
    console.log(`${trees[t]} (n ${n}, medians of ${rounds}): longest batch ${m("batchMax")} ms, longest gap ${m("gapMax")} ms, after the first 50 batches ${m("gapAfterStart")} ms`);
  }
}
