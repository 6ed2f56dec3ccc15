/**
 * What the xxh64 of segments/checksum.ts costs per call and per byte: one checksum64 (xxhash-wasm
 * h64Raw) per record, as the record-by-record walk did; firstBadSum over windows of records, as
 * walkSealed does now; and one checksum64 over a whole 4 MiB buffer (the per-byte rate).
 * Records of `recordBytes` (default 322: a 256 B value's record), best of 5 rounds each.
 * Usage: node --import tsx bench/checksum-cost.ts [recordBytes]
 * Prints one JSON line: µs per record for both walks, MB/s of each, whole-buffer GB/s, load.
 */
import * as os from "node:os";
import { checksum64, firstBadSum, initChecksum } from "../segments/checksum.js";

await initChecksum();
const recordBytes = Number(process.argv[2] ?? 322);
const total = 4 << 20;
const n = Math.floor(total / recordBytes);
const buf = Buffer.allocUnsafe(n * recordBytes);
for (let i = 0; i < buf.length; i++) buf[i] = (i * 131) & 255;
const starts = new Int32Array(n);
const lengths = new Int32Array(n).fill(recordBytes);
for (let i = 0; i < n; i++) {
  const at = i * recordBytes;
  starts[i] = at;
  const sumAt = at + recordBytes - 8;
  buf.writeBigUInt64LE(checksum64(buf, at, sumAt), sumAt);
}
const best = (f: () => void): number => {
  let min = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    f();
    min = Math.min(min, performance.now() - t0);
  }
  return min;
};
const perCall = best(() => {
  for (let i = 0; i < n; i++) {
    const at = starts[i] as number;
    if (checksum64(buf, at, at + recordBytes - 8) !== buf.readBigUInt64LE(at + recordBytes - 8)) throw new Error("bad sum");
  }
});
const WINDOW = 4096;
const windowed = best(() => {
  for (let i = 0; i < n; i += WINDOW) {
    const k = Math.min(WINDOW, n - i);
    const from = starts[i] as number;
    const to = (starts[i + k - 1] as number) + recordBytes;
    if (firstBadSum(buf, from, to, starts.subarray(i, i + k), lengths.subarray(i, i + k), k) !== -1) throw new Error("bad sum");
  }
});
const whole = best(() => void checksum64(buf, 0, buf.length));
console.log(JSON.stringify({
  recordBytes, records: n,
  perCallUsPerRecord: +((perCall * 1000) / n).toFixed(3), perCallMBps: +(buf.length / perCall / 1000).toFixed(0),
  windowedUsPerRecord: +((windowed * 1000) / n).toFixed(3), windowedMBps: +(buf.length / windowed / 1000).toFixed(0),
  wholeBufferGBps: +(buf.length / whole / 1e6).toFixed(2), load: (os.loadavg()[0] ?? 0).toFixed(2),
}));
