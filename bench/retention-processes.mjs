// Retention records left by processes that each live LIFE_MS, restarted ROUNDS times, under a
// window of WINDOW_MS > LIFE_MS. Each process: open (default automatic compaction), forget PER
// keys written by the round before (so values die), write PER new keys, live LIFE_MS, close.
// Usage: node bench/retention-processes.mjs [TREE] [ROUNDS]   (TREE has a built dist/; default this checkout; 12 rounds)
// Env LIFE_MS (3000: each process's life) and GAP_MS (0: the wait between two processes);
// LIFE_MS=0 GAP_MS=1000 makes each round a CLI command a second after the one before.
// Prints one JSON line: the retention records (tombstones) and bytes left after the last round.
// On 7dd5293 (every open restarted the windows) 12 rounds left all 5,500; after the carried reclaim times, 500
// (as CLI commands: 5,500 and 1,500).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const [tree = here, roundsArg, dirArg, child] = process.argv.slice(2);
const dir = dirArg ?? fs.mkdtempSync(path.join(os.tmpdir(), "retention-processes-"));
const ROUNDS = Number(roundsArg ?? 12), PER = 500, WINDOW_MS = 4000;
const LIFE_MS = Number(process.env.LIFE_MS ?? 3000), GAP_MS = Number(process.env.GAP_MS ?? 0);
const opts = { durability: "none", segmentBytes: 64 * 1024, retention: { tombstoneRetentionMs: WINDOW_MS } };
const { Engram } = await import(pathToFileURL(path.join(tree, "dist/src/index.js")).href);
if (child !== undefined) {
  const r = Number(child);
  const s = await Engram.open(dir, opts);
  if (r > 0) await s.batch(Array.from({ length: PER }, (_, i) => ({ op: "forget", key: `r${r - 1}k${i}` })));
  await s.batch(Array.from({ length: PER }, (_, i) => ({ op: "write", key: `r${r}k${i}`, value: "x".repeat(200) })));
  await new Promise((res) => setTimeout(res, LIFE_MS));
  await s.close();
  process.exit(0);
}
for (let r = 0; r < ROUNDS; r++) {
  const out = spawnSync(process.execPath, [process.argv[1], tree, String(ROUNDS), dir, String(r)], { stdio: "inherit" });
  if (out.status !== 0) throw new Error(`round ${r} failed`);
  if (GAP_MS > 0) await new Promise((res) => setTimeout(res, GAP_MS));
}
const s = await Engram.open(dir, { ...opts, compaction: { auto: false } });
const st = s.stats();
console.log(JSON.stringify({ tree, rounds: ROUNDS, lifeMs: LIFE_MS, gapMs: GAP_MS, forgotten: PER * (ROUNDS - 1), tombstones: st.tombstones, slots: st.slots, totalBytes: st.totalBytes, liveBytes: st.liveBytes }));
await s.close();
fs.rmSync(dir, { recursive: true, force: true });
