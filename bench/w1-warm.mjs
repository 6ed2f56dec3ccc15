// W1's lone durable puts as a process warms up, beside the device's own loop (sixteenth session).
// Usage: node bench/w1-warm.mjs [TREE]        (TREE has a built dist/; default: this checkout)
// Env: ROUNDS (4), N (3000 puts per round).
// One durable store (durability "sync", default options) in a fresh process: ROUNDS rounds of N
// puts of new 10-byte keys with 256 B values, one in flight, each timed alone. Per round: puts/s,
// p50 and p99, the puts over 500 µs, and the CPU time the process's other threads used meanwhile
// (/proc/self/task: V8's compiler and GC threads — nothing else runs). Then the same count of
// 335-byte pwrites + fdatasyncs in a loop on one pre-zeroed file (the bytes a lone put appends,
// the syscalls it makes, no engine): what the device gives a single writer. Prints one line per
// round and one for the loop.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const tree = process.argv[2] ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const rounds = Number(process.env.ROUNDS ?? 4);
const n = Number(process.env.N ?? 3000);
const { Engram } = await import(pathToFileURL(path.join(tree, "dist/src/index.js")).href);

/** CPU ms used so far by this process's threads other than the main one (utime + stime, 10 ms ticks). */
function otherThreadsMs() {
  let ticks = 0;
  for (const tid of fs.readdirSync("/proc/self/task")) {
    if (tid === String(process.pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ticks * 10;
}

/** "puts/s, p50, p99, over 500 µs" of `lat` (ms each) taken in `elapsedMs`. */
function summary(lat, elapsedMs) {
  const s = [...lat].sort((a, b) => a - b);
  const us = (q) => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))] * 1000);
  return `${Math.round((lat.length / elapsedMs) * 1000)}/s p50 ${us(0.5)} µs p99 ${us(0.99)} µs, over 500 µs ${s.filter((x) => x > 0.5).length}`;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "w1-warm-"));
const store = await Engram.open(path.join(dir, "store"), { durability: "sync" });
const value = new Uint8Array(256).fill(3);
for (let r = 0; r < rounds; r++) {
  const lat = new Float64Array(n);
  const others = otherThreadsMs();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await store.write(`k${String(r * n + i).padStart(9, "0")}`, value);
    lat[i] = performance.now() - t;
  }
  console.log(`engram round ${r + 1} (puts ${r * n + 1}–${(r + 1) * n}): ${summary(lat, performance.now() - t0)}; other threads' CPU ${otherThreadsMs() - others} ms`);
}
await store.close();

// The device alone: the same appends and fdatasyncs on a file zeroed and synced ahead.
const fd = fs.openSync(path.join(dir, "loop"), "w+");
const RECORD = 335;
fs.writeSync(fd, Buffer.alloc(n * RECORD + 4096), 0, n * RECORD + 4096, 0);
fs.fdatasyncSync(fd);
const record = Buffer.alloc(RECORD, 7);
const lat = new Float64Array(n);
const t0 = performance.now();
for (let i = 0; i < n; i++) {
  const t = performance.now();
  fs.writeSync(fd, record, 0, RECORD, 4096 + i * RECORD);
  fs.fdatasyncSync(fd);
  lat[i] = performance.now() - t;
}
console.log(`pwrite + fdatasync loop, ${n} × ${RECORD} B: ${summary(lat, performance.now() - t0)}; load ${os.loadavg()[0].toFixed(2)}`);
fs.closeSync(fd);
fs.rmSync(dir, { recursive: true, force: true });
