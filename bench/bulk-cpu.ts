/**
 * CPU time of W3's bulk load and W2's durable batches, per record: N puts of 256 B in random key
 * order, atomic batches of 1000, one batch in flight; durability "none" (bulk, timed up to and
 * including close) or "sync" (durable). Measured as the main thread's time on CPU
 * (/proc/thread-self/schedstat) and wall time. Given several built trees (their `dist/`), it
 * alternates them round by round, each round in a child process of its own (two trees in one
 * process favoured whichever ran first by 10–20 %), so a loaded machine shifts all of them alike.
 * `--mode delete` and `--mode rewrite` time W5's write phases instead (bench/workloads.ts w5): N
 * keys loaded untimed (durability "none"), reopened durable, then 50% forgotten and 25% rewritten
 * in random order, atomic batches of 1000; the per-op figures are of the phase named.
 * `--mode overwrite` loads N keys untimed (durability "none") and, in the same process with no
 * reopen, times writing every key again in another random order (batches of 1000, "none"): the
 * names a batch wrote are then compact rows (engine/compact-slots.ts) that the overwrite's
 * decisions make Slots.
 * A tree named `DIST#nohint` is DIST run with engine/hints.ts's `unsafeActiveHintForTests.none`
 * set: the segments its store creates keep no hint (no entry collected as groups commit, none
 * written at seal or close). `dist dist#nohint` alternates the two: what keeping the active
 * segment's hint current costs (docs/PERFORMANCE.md, bulk load).
 *
 *   node --import tsx bench/bulk-cpu.ts [--n 200000] [--rounds 4] [--mode bulk|durable|delete|rewrite|overwrite] [--dir D] distA distB ...
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { keyOf, permutation } from "./common.js";

type Op = { op: "write"; key: string; value: Uint8Array } | { op: "forget"; key: string };
interface Store {
  batch(ops: Op[]): Promise<unknown>;
  close(): Promise<void>;
}
interface EngramModule {
  Engram: { open(dir: string, options: object): Promise<Store> };
}

const args = process.argv.slice(2);
function flag(name: string, fallback: string): string {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = args[i + 1] ?? fallback;
  args.splice(i, 2);
  return v;
}
const n = Number(flag("--n", "200000"));
const rounds = Number(flag("--rounds", "4"));
const mode = flag("--mode", "bulk");
const base = flag("--dir", os.tmpdir());
const child = flag("--child", "");
const trees = args;
const MODES = ["bulk", "durable", "delete", "rewrite", "overwrite"];
if ((child === "" && trees.length === 0) || !MODES.includes(mode)) throw new Error("usage: bulk-cpu.ts [--n N] [--rounds R] [--mode bulk|durable|delete|rewrite|overwrite] [--dir D] distA [distB ...]");

/** The main thread's time on CPU so far, in µs (schedstat's first field is ns). */
function mainCpuUs(): number {
  return Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1000;
}

const values = Array.from({ length: 1024 }, (_, i) => new Uint8Array(256).fill(i & 0xff));
const perm = permutation(n, 31);
const batches: Op[][] = [];
for (let b = 0; b < n; b += 1000) {
  const batch: Op[] = [];
  for (let j = b; j < Math.min(b + 1000, n); j++) batch.push({ op: "write", key: keyOf(perm[j] as number), value: values[j % 1024] as Uint8Array });
  batches.push(batch);
}

/** W5's two write phases as batches of 1000 (workloads.ts w5's choice of keys): forgets of 50%, then rewrites of 25%. */
function w5Phases(): { dels: Op[][]; puts: Op[][] } {
  const order = permutation(n, 52);
  const chunked = (ops: Op[]): Op[][] => Array.from({ length: Math.ceil(ops.length / 1000) }, (_, b) => ops.slice(b * 1000, b * 1000 + 1000));
  const v2 = new Uint8Array(256).fill(2);
  return {
    dels: chunked([...order].filter((i) => i % 2 === 0).map((i): Op => ({ op: "forget", key: keyOf(i) }))),
    puts: chunked([...order].filter((i) => i % 8 === 0).map((i): Op => ({ op: "write", key: keyOf(i), value: v2 }))),
  };
}

/**
 * Runs `timed` on `db` one batch at a time and closes it: main-thread CPU and wall µs per op of
 * the batches, and of the close too when `closeTimed` (the bulk load is timed up to and including
 * close, as W3 is; the other phases are not).
 */
async function timeBatches(db: Store, timed: readonly Op[][], closeTimed: boolean): Promise<{ main: number; wall: number }> {
  const ops = timed.reduce((sum, b) => sum + b.length, 0);
  const m0 = mainCpuUs();
  const t0 = process.hrtime.bigint();
  for (const b of timed) await db.batch(b);
  if (closeTimed) await db.close();
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / ops;
  const main = (mainCpuUs() - m0) / ops;
  if (!closeTimed) await db.close();
  return { main, wall };
}

/** One W5 round on tree `dist` (mode delete or rewrite): main-thread CPU and wall µs per op of that phase. */
async function roundW5(mod: EngramModule, dir: string): Promise<{ main: number; wall: number }> {
  const loader = await mod.Engram.open(dir, { durability: "none" });
  for (const b of batches) await loader.batch(b);
  await loader.close();
  const db = await mod.Engram.open(dir, { durability: "sync" });
  const { dels, puts } = w5Phases();
  if (mode === "rewrite") for (const b of dels) await db.batch(b); // untimed: the phase before
  return timeBatches(db, mode === "delete" ? dels : puts, false);
}

/** One overwrite round (mode overwrite): main-thread CPU and wall µs per record of the second pass. */
async function roundOverwrite(mod: EngramModule, dir: string): Promise<{ main: number; wall: number }> {
  const db = await mod.Engram.open(dir, { durability: "none" });
  for (const b of batches) await db.batch(b);
  const again = permutation(n, 77);
  const v2 = new Uint8Array(256).fill(7);
  const second: Op[][] = [];
  for (let b = 0; b < n; b += 1000) second.push(Array.from(again.subarray(b, Math.min(b + 1000, n)), (i): Op => ({ op: "write", key: keyOf(i), value: v2 })));
  return timeBatches(db, second, false);
}

/** Sets the bench switch of tree `dist` that keeps no hint for the segments its stores create. */
async function keepNoHint(dist: string): Promise<void> {
  const hints = (await import(pathToFileURL(path.resolve(dist, "engine/hints.js")).href)) as { unsafeActiveHintForTests?: { none: boolean } };
  if (hints.unsafeActiveHintForTests === undefined) throw new Error(`${dist}: this tree has no unsafeActiveHintForTests (engine/hints.ts); #nohint needs one that has`);
  hints.unsafeActiveHintForTests.none = true;
}

/** One round on tree `spec` (a dist/ directory, `#nohint` after it for the switch): main-thread CPU and wall µs per record. */
async function round(spec: string): Promise<{ main: number; wall: number }> {
  const [dist = spec, variant] = spec.split("#");
  if (variant !== undefined && variant !== "nohint") throw new Error(`${spec}: the only variant is #nohint`);
  if (variant === "nohint") await keepNoHint(dist);
  const mod = (await import(pathToFileURL(path.resolve(dist, "src/index.js")).href)) as EngramModule;
  const dir = fs.mkdtempSync(path.join(base, "bulk-cpu-"));
  if (mode === "delete" || mode === "rewrite" || mode === "overwrite") {
    const res = mode === "overwrite" ? await roundOverwrite(mod, dir) : await roundW5(mod, dir);
    fs.rmSync(dir, { recursive: true, force: true });
    return res;
  }
  const db = await mod.Engram.open(dir, { durability: mode === "bulk" ? "none" : "sync" });
  const res = await timeBatches(db, batches, true);
  fs.rmSync(dir, { recursive: true, force: true });
  return res;
}

if (child !== "") {
  process.stdout.write(JSON.stringify(await round(child)));
  process.exit(0);
}

/** One round of tree `dist` in a child process of its own (same flags). */
function roundApart(dist: string): { main: number; wall: number } {
  const me = fileURLToPath(import.meta.url);
  const out = execFileSync(process.execPath, [...process.execArgv, me, "--n", String(n), "--mode", mode, "--dir", base, "--child", dist], { encoding: "utf8", maxBuffer: 1 << 20 });
  return JSON.parse(out) as { main: number; wall: number };
}

const got = new Map<string, Array<{ main: number; wall: number }>>(trees.map((t) => [t, []]));
for (let r = 0; r < rounds; r++) {
  for (const t of r % 2 === 0 ? trees : [...trees].reverse()) {
    const res = roundApart(t);
    got.get(t)?.push(res);
    process.stderr.write(`round ${r + 1} ${t}: main ${res.main.toFixed(2)} µs/record, wall ${res.wall.toFixed(2)}\n`);
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
for (const [t, rs] of got) {
  process.stdout.write(`${t}: ${mode} n=${n}, median of ${rs.length}: main-thread CPU ${median(rs.map((x) => x.main)).toFixed(2)} µs/record, wall ${median(rs.map((x) => x.wall)).toFixed(2)} µs/record (${Math.round(1e6 / median(rs.map((x) => x.wall)))}/s)\n`);
}
process.exit(0);
