/**
 * CPU time of a lone durable put: N awaited `write`s of 256 B values, one in flight, durability
 * "sync", measured as the main thread's time on CPU (/proc/thread-self/schedstat, ns), the whole
 * process's user + system (process.cpuUsage: the workers are idle) and wall time, after a warm-up. Given several built trees (their `dist/`), it alternates them
 * round by round in one process, so a loaded machine shifts all of them alike.
 *
 *   node --import tsx bench/put-cpu.ts [--n 3000] [--rounds 4] [--dir /dev/shm] distA distB ...
 *
 * On tmpfs (`--dir /dev/shm`) fdatasync is nearly free, so wall time is the put path's own cost.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

interface Store {
  write(key: string, value: Uint8Array): Promise<unknown>;
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
const n = Number(flag("--n", "3000"));
const rounds = Number(flag("--rounds", "4"));
const base = flag("--dir", os.tmpdir());
const trees = args;
if (trees.length === 0) throw new Error("usage: put-cpu.ts [--n N] [--rounds R] [--dir D] distA [distB ...]");

/** One round on tree `dist`: per-put CPU (user, system) and wall µs over n puts after 2,000 warm-up puts. */
/** The main thread's time on CPU so far, in µs (schedstat's first field is ns). */
function mainCpuUs(): number {
  return Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1000;
}

async function round(dist: string): Promise<{ main: number; user: number; sys: number; wall: number }> {
  const mod = (await import(pathToFileURL(path.resolve(dist, "src/index.js")).href)) as EngramModule;
  const dir = fs.mkdtempSync(path.join(base, "put-cpu-"));
  const db = await mod.Engram.open(dir, { durability: "sync" });
  const value = new Uint8Array(256).fill(7);
  for (let i = 0; i < 2000; i++) await db.write(`w${i}`, value); // warm-up: JIT tiers
  const m0 = mainCpuUs();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await db.write(`k${i % 10_000}`, value);
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / n;
  const c = process.cpuUsage(c0);
  const main = (mainCpuUs() - m0) / n;
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { main, user: c.user / n, sys: c.system / n, wall };
}

/** The median of `xs` (not empty). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

const rows: Record<string, Array<{ main: number; user: number; sys: number; wall: number }>> = {};
for (let r = 0; r < rounds; r++) {
  for (const t of trees) (rows[t] ??= []).push(await round(t));
}
console.log(`load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${n} puts x ${rounds} rounds in ${base}; µs per put: main-thread CPU (process user+system, wall) per round, then medians`);
for (const t of trees) {
  const ms = rows[t] ?? [];
  const each = ms.map((m) => `${m.main.toFixed(1)} (${(m.user + m.sys).toFixed(1)}, ${m.wall.toFixed(1)})`).join(" | ");
  console.log(`${t}: ${each} || median main ${median(ms.map((m) => m.main)).toFixed(1)}, process ${median(ms.map((m) => m.user + m.sys)).toFixed(1)}, wall ${median(ms.map((m) => m.wall)).toFixed(1)}`);
}
