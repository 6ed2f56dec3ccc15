// Compaction passes of one store in one process, the first cold and the later ones warm (sixteenth
// session). Usage: node bench/compact-warm.mjs [TREE] [MODE] [WORKERS]
//   TREE has a built dist/ (default: this checkout); MODE copy-on-write (default) or in-place;
//   WORKERS compaction.workers (default 1). Env: PASSES (8), KEYS (100000).
// The bench's compaction shape (bench/workloads.ts compact): KEYS keys of 256 B in 4 MiB segments,
// durability "none", auto compaction off. Each pass forgets one residue class of the keys mod 4
// (a quarter), times compact() and, after it, writes that quarter back, so every pass meets ~30 MB
// with a quarter of it garbage. Prints per pass MB/s (report.bytesBefore per wall second), the
// segments compacted and the process's CPU ms during compact() (the worker thread's included).
// Pass 1 is the bench's round A without its warm-up; the later ones run code V8 has compiled and
// memory the process has touched before.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [treeArg, mode = "copy-on-write", workers = "1"] = process.argv.slice(2);
const tree = treeArg ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const passes = Number(process.env.PASSES ?? 8);
const keys = Number(process.env.KEYS ?? 100_000);
const { Engram } = await import(pathToFileURL(path.join(tree, "dist/src/index.js")).href);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compact-warm-"));
const store = await Engram.open(dir, { durability: "none", segmentBytes: 4 << 20, compaction: { mode, auto: false, workers: Number(workers) } });
const value = new Uint8Array(256).fill(7);
const key = (j) => `k${String(j).padStart(9, "0")}`;

/** Writes (op "write") or forgets (op "forget") the keys ≡ `rem` mod `step`, in batches of up to 1000. */
async function each(op, step, rem) {
  for (let i = 0; i < keys; i += 1000 * step) {
    const ops = [];
    for (let j = i + rem; j < Math.min(keys, i + 1000 * step); j += step) ops.push(op === "write" ? { op, scope: "s", key: key(j), value } : { op, scope: "s", key: key(j) });
    await store.batch(ops);
  }
}

await each("write", 1, 0);
const lines = [];
for (let p = 0; p < passes; p++) {
  await each("forget", 4, p % 4);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const report = await store.compact({ mode });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lines.push(`pass ${p + 1}: ${(report.bytesBefore / seconds / 1e6).toFixed(0)} MB/s (${(report.bytesBefore / 1e6).toFixed(1)} MB, ${report.segments.length} segments, CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms)`);
  await each("write", 4, p % 4);
}
console.log(`${mode}, workers ${workers}, ${keys} keys:\n  ${lines.join("\n  ")}\n  load ${os.loadavg()[0].toFixed(2)}`);
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
