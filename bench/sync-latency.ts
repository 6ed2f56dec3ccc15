/**
 * The sync latencies compaction pays, measured on this machine's temp file system: median of 40
 * fdatasyncs of a 4 KiB overwrite, 40 directory fsyncs after a create, and 5 fdatasyncs of a fresh
 * 16 MiB file (its write-back rate). Prints one JSON line with the load average.
 * Usage: node --import tsx bench/sync-latency.ts
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sync-latency-"));
const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1] ?? 0;
const small = Buffer.alloc(4096, 1);
const big = Buffer.alloc(16 << 20, 2);
const data: number[] = [];
const dirs: number[] = [];
const bigs: number[] = [];
const f = fs.openSync(path.join(dir, "f"), "w+");
for (let i = 0; i < 40; i++) {
  fs.writeSync(f, small, 0, small.length, i * small.length);
  let t = performance.now();
  fs.fdatasyncSync(f);
  data.push(performance.now() - t);
  const d = fs.openSync(dir, "r");
  fs.writeFileSync(path.join(dir, `x${i}`), "x");
  t = performance.now();
  fs.fsyncSync(d);
  dirs.push(performance.now() - t);
  fs.closeSync(d);
}
fs.closeSync(f);
for (let i = 0; i < 5; i++) {
  const g = fs.openSync(path.join(dir, `g${i}`), "w");
  fs.writeSync(g, big);
  const t = performance.now();
  fs.fdatasyncSync(g);
  bigs.push(performance.now() - t);
  fs.closeSync(g);
}
fs.rmSync(dir, { recursive: true, force: true });
const bigMs = median(bigs);
console.log(JSON.stringify({ fdatasync4KiBMs: +median(data).toFixed(2), dirFsyncMs: +median(dirs).toFixed(2), fdatasync16MiBMs: +bigMs.toFixed(1), writeBackMBps: Math.round(big.length / 1e6 / (bigMs / 1000)), load: (os.loadavg()[0] ?? 0).toFixed(2) }));
