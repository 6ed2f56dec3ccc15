// What a segment's rotation costs the batch that causes it: N keys of 256 B written in atomic
// batches of 1000 (durability DUR: "sync" or "none"), auto compaction off, default 64 MiB
// segments, each tree in a fresh child process, trees alternated round by round. A batch that
// rotates pays the new segment's creation and the old one's seal (its truncate, fdatasync, sealed
// header and hint) in its turn. Prints per round the rotating batches' latencies (ms) and the
// median batch, then per tree the median of the rotating batches over all rounds.
//   DUR=sync node bench/rotation-stall.mjs [--n 500000] [--rounds 3] TREE [TREE ...]
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { takeFlag } from "./script-args.mjs";
import { keyOf, valueOf } from "./w5-shared.mjs";

const args = process.argv.slice(2);
const n = Number(takeFlag(args, "--n", "500000"));
const rounds = Number(takeFlag(args, "--rounds", "3"));
const durability = process.env.DUR ?? "sync";
const child = process.env.ROTATION_STALL_CHILD;

/** Loads `n` keys into a fresh store of `tree`; returns [the rotating batches' ms, the median batch's ms]. */
async function load(tree) {
  const { Store } = await import(pathToFileURL(path.join(tree, "dist/engine/store.js")).href);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rot-"));
  const s = await Store.open(dir, { durability, compaction: { auto: false } });
  const values = Array.from({ length: 64 }, (_, i) => valueOf(i, 1));
  const times = [];
  const rotating = [];
  for (let b = 0; b < n; b += 1000) {
    const ops = [];
    for (let j = b; j < Math.min(n, b + 1000); j++) ops.push({ op: "write", key: keyOf(j), value: values[j & 63] });
    const active = s.log.activeSegment.id;
    const t0 = performance.now();
    await s.batch(ops);
    const ms = performance.now() - t0;
    times.push(ms);
    if (s.log.activeSegment.id !== active) rotating.push(ms);
  }
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  times.sort((a, b) => a - b);
  return [rotating, times[times.length >> 1]];
}

if (child !== undefined) {
  process.stdout.write(JSON.stringify(await load(child)));
} else {
  const trees = args.map((t) => path.resolve(t));
  const all = trees.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let t = 0; t < trees.length; t++) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, ROTATION_STALL_CHILD: trees[t] } });
      const [rotating, median] = JSON.parse(out.toString());
      all[t].push(...rotating);
      console.log(`round ${r} ${trees[t]} (${durability}): rotating batches ${rotating.map((x) => x.toFixed(1)).join(", ")} ms; median batch ${median.toFixed(2)} ms`);
    }
  }
  for (let t = 0; t < trees.length; t++) {
    const xs = [...all[t]].sort((a, b) => a - b);
    console.log(`${trees[t]} (${durability}): rotating batch median ${xs[xs.length >> 1].toFixed(1)} ms (${xs[0].toFixed(1)}–${xs[xs.length - 1].toFixed(1)}, ${xs.length} rotations)`);
  }
}
