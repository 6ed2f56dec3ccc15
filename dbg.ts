import { Engram } from "./src/engram.js";
import * as fs from "node:fs";
const N = Number(process.argv[2]);
const dir = fs.mkdtempSync("/tmp/dbg-big-");
const store = await Engram.open(dir, { durability: "none", compaction: { workers: 0, auto: false } });
let t = performance.now();
for (let i = 0; i < N; i += 100_000) {
  await store.batch(Array.from({ length: Math.min(100_000, N - i) }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: "v", scope: "user:big" })));
}
console.log("load", (performance.now() - t).toFixed(0), "ms", process.memoryUsage().rss >> 20, "MiB");
t = performance.now();
try {
  const r = await store.forgetScope("user:big");
  console.log("forgetScope", r.slots, (performance.now() - t).toFixed(0), "ms");
} catch (e) { console.log("forgetScope failed", String(e).slice(0, 200)); }
await store.close();
t = performance.now();
const s2 = await Engram.open(dir, { durability: "none", compaction: { workers: 0, auto: false } });
console.log("reopen", (performance.now() - t).toFixed(0), "ms", (await s2.read("k5", { scope: "user:big" })).status);
await s2.close();
fs.rmSync(dir, { recursive: true });
