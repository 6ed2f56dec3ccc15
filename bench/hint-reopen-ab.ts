/**
 * Reopen cost by hint version, in one process (so the machine's load hits both alike): a 200k-key
 * store (256 B values, batches of 1000, non-durable) is written twice, once with version-2 hints
 * (setHintVersionWritten, the test hook) and once with version 3; then each is reopened
 * alternately, timing Engram.open + one readSync (what bench W3's reopen row times), REPS times.
 * Prints the hint bytes of each and the median and minimum open + first read per version.
 *
 *   node --import tsx bench/hint-reopen-ab.ts [keys] [reps]
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Engram } from "../src/index.js";
import { setHintVersionWritten } from "../segments/hint.js";

const n = Number(process.argv[2] ?? 200_000);
const reps = Number(process.argv[3] ?? 15);
const key = (i: number): string => `k${String(i).padStart(9, "0")}`;

/** A store of n keys with hints of `version`; returns its directory. */
async function make(version: 2 | 3): Promise<string> {
  setHintVersionWritten(version);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hint-reopen-v${version}-`));
  const s = await Engram.open(dir, { durability: "none" });
  for (let b = 0; b < n; b += 1000) {
    const ops = [];
    for (let i = b; i < Math.min(n, b + 1000); i++) ops.push({ op: "write" as const, scope: "default", key: key((i * 7919) % n), value: new Uint8Array(256).fill(i & 0xff) });
    await s.batch(ops);
  }
  await s.close();
  setHintVersionWritten(3);
  return dir;
}

/** Bytes of a directory's hint files. */
function hintBytes(dir: string): number {
  const seg = path.join(dir, "segments");
  return fs.readdirSync(seg).filter((f) => f.endsWith(".hint")).reduce((t, f) => t + fs.statSync(path.join(seg, f)).size, 0);
}

const dirs = { 2: await make(2), 3: await make(3) } as const;
const times: Record<2 | 3, number[]> = { 2: [], 3: [] };
for (let r = 0; r < reps; r++) {
  for (const v of r % 2 === 0 ? ([2, 3] as const) : ([3, 2] as const)) {
    const t0 = performance.now();
    const s = await Engram.open(dirs[v], { durability: "none" });
    s.readSync(key(12345 % n), { scope: "default" });
    times[v].push(performance.now() - t0);
    await s.close();
  }
}
for (const v of [2, 3] as const) {
  const t = [...times[v]].sort((a, b) => a - b);
  console.log(`hint v${v}: ${hintBytes(dirs[v])} bytes; open + first read median ${(t[t.length >> 1] as number).toFixed(2)} ms, min ${(t[0] as number).toFixed(2)} ms over ${reps}`);
  fs.rmSync(dirs[v], { recursive: true, force: true });
}
