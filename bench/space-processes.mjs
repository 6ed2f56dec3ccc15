/**
 * Space used by short processes: each round is a separate node process that opens the store, makes
 * 20 overwrites of random keys among 2,000 and closes (as a CLI command does), with default
 * automatic compaction and 64 KiB segments; every 20 rounds a reopen without compaction prints the
 * segment bytes over the live bytes. Before the dead-byte estimates (segments/DEADBYTES, twenty-ninth
 * session) this grew without bound (1.72x after 60 rounds).
 * Usage: node bench/space-processes.mjs [TREE] [ROUNDS]   (TREE: a checkout with a built dist/)
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const tree = path.resolve(process.argv[2] ?? ".");
const rounds = Number(process.argv[3] ?? 60);
const entry = JSON.stringify(path.join(tree, "dist/src/index.js"));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "space-processes-"));
const child = `
const { Engram } = await import(${entry});
const [dir, round] = [process.argv[1], Number(process.argv[2])];
const s = await Engram.open(dir, { segmentBytes: 64 * 1024 });
if (round === 0) {
  for (let i = 0; i < 2000; i += 100) await s.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write", key: "k" + (i + j), value: "v".repeat(250) })));
} else {
  let x = round * 7919;
  for (let j = 0; j < 20; j++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    await s.write("k" + (x % 2000), "w" + round + "x".repeat(248));
  }
}
await s.close();
`;
const measure = `
const { Engram } = await import(${entry});
const s = await Engram.open(process.argv[1], { compaction: { auto: false } });
const t = s.stats();
console.log((t.totalBytes / t.liveBytes).toFixed(3));
await s.close();
`;
try {
  for (let round = 0; round <= rounds; round++) {
    execFileSync(process.execPath, ["--input-type=module", "-e", child, dir, String(round)], { stdio: "inherit" });
    if (round > 0 && (round % 20 === 0 || round === rounds)) {
      const ratio = execFileSync(process.execPath, ["--input-type=module", "-e", measure, dir], { encoding: "utf8" }).trim();
      console.log(`round ${round}: segment bytes / live bytes ${ratio}`);
    }
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
