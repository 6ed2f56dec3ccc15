// JS heap per key of a reopened store before and after its first compact() pass (thirty-third
// session). Usage: node --expose-gc bench/heap-pass.mjs [TREE] [N]
//   TREE has a built dist/ (default: this checkout); N keys (default 200000) of 256 B.
// Loads N keys non-durably (batches of 1000) and closes; then, measuring the JS heap and the
// ArrayBuffer memory after full collections against the figure before the reopen: the reopen
// (open + one read), an overwrite of every 20th key (garbage, one batch per 1000), one compact()
// (its plan walks every name: the lazy reopen's deferred names are all built), a lazy forgetScope
// of a 100-name scope written after it (thirty-fourth session: it walks only its subtree), and a
// readSync of every key. Prints B/key at each step, the pass's, the erasure's and the read-all's
// ms, and the reads that failed.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tree = process.argv[2] ?? here;
const n = Number(process.argv[3] ?? 200_000);
const { Engram } = await import(pathToFileURL(path.join(tree, "dist/src/index.js")).href);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "heap-pass-"));
const value = new Uint8Array(256).fill(3);

/** Writes every `step`-th key from 0 (batches of up to 1000). */
async function writeEvery(store, step) {
  for (let i = 0; i < n; i += 1000 * step) {
    const ops = [];
    for (let j = i; j < Math.min(n, i + 1000 * step); j += step) ops.push({ op: "write", key: `k${j}`, value });
    await store.batch(ops);
  }
}

/** JS heap and ArrayBuffer bytes after two full collections. */
function memory() {
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers };
}

let store = await Engram.open(dir, { durability: "none" });
await writeEvery(store, 1);
await store.close();
const base = memory();
const line = (what) => {
  const m = memory();
  console.log(`${what}: JS heap ${((m.heap - base.heap) / n).toFixed(1)} B/key, ArrayBuffers ${((m.buffers - base.buffers) / n).toFixed(1)} B/key`);
};
store = await Engram.open(dir, { durability: "none" });
store.readSync("k1");
line("reopen");
await writeEvery(store, 20);
line("overwrite 5 %");
const t0 = performance.now();
const report = await store.compact();
line(`compact() ${(performance.now() - t0).toFixed(0)} ms, ${report.segments.length} segments`);
const scope = "user:bob/session:1";
await store.batch(Array.from({ length: 100 }, (_, i) => ({ op: "write", key: `s${i}`, value, scope })));
const t2 = performance.now();
await store.forgetScope(scope, { reclaim: "lazy" });
line(`forgetScope of a 100-name sibling scope ${(performance.now() - t2).toFixed(0)} ms`);
const t1 = performance.now();
let failed = 0;
for (let j = 0; j < n; j++) if (store.readSync(`k${j}`).status !== "OK") failed++;
line(`readSync of every key ${(performance.now() - t1).toFixed(0)} ms, ${failed} failed`);
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
if (failed > 0) process.exitCode = 1;
