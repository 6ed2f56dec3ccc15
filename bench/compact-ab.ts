/**
 * A/B timing of compact() alone, for comparing two source trees on a shared machine.
 * Usage: node --import tsx bench/compact-ab.ts <tree> [keys] [mode] [workers]
 * Loads `keys` keys (values 256 B) into 4 MiB segments (non-durable, auto compaction off),
 * compacts one sealed segment as a warm-up, forgets every fourth key, and times compact():
 * prints one JSON line {tree, mode, workers, MBps, seconds, cpuSeconds (the whole process, worker
 * threads included: less sensitive to a busy machine), userS, systemS, MBperCpuS, segments, load,
 * and syncs: the file fdatasyncs and directory fsyncs compact() made, counted by segments/io.ts's
 * observer of the main thread — so only with workers 0, where every call runs there}.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const tree = process.argv[2] ?? ".";
const keys = Number(process.argv[3] ?? 100_000);
const mode = (process.argv[4] ?? "copy-on-write") as "copy-on-write" | "in-place";
const workers = Number(process.argv[5] ?? 1);
const built = path.resolve(tree, "dist/src/index.js");
const entry = process.env["AB_SOURCE"] === undefined && fs.existsSync(built) ? built : path.resolve(tree, "src/index.ts");
const { Engram } = (await import(pathToFileURL(entry).href)) as typeof import("../src/index.js");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compact-ab-"));
const store = await Engram.open(dir, { durability: "none", segmentBytes: 4 << 20, compaction: { mode, auto: false, workers } });
const value = new Uint8Array(256).fill(7);
for (let i = 0; i < keys; i += 1000) {
  const ops = [];
  for (let j = i; j < Math.min(keys, i + 1000); j++) ops.push({ op: "write" as const, scope: "s", key: `k${String(j).padStart(9, "0")}`, value });
  await store.batch(ops);
}
const first = store.stats().segments.find((x) => x.sealed);
if (first !== undefined) await store.compact({ mode, segments: [first.id] });
for (let i = 0; i < keys; i += 4000) {
  const ops = [];
  for (let j = i; j < Math.min(keys, i + 4000); j += 4) ops.push({ op: "forget" as const, scope: "s", key: `k${String(j).padStart(9, "0")}` });
  await store.batch(ops);
}
const prof = process.env["AB_PROFILE"];
let session: import("node:inspector/promises").Session | null = null;
if (prof !== undefined) {
  const inspector = await import("node:inspector/promises");
  session = new inspector.Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
}
const syncs = { file: 0, dir: 0, unlink: 0, rename: 0 };
const ioEntry = entry.endsWith(".ts") ? path.resolve(tree, "segments/io.ts") : path.resolve(tree, "dist/segments/io.js");
const io = (await import(pathToFileURL(ioEntry).href)) as typeof import("../segments/io.js");
if (workers === 0) {
  io.setIoObserver((e) => {
    if (e.op === "sync") syncs.file += 1;
    else if (e.op === "dir-sync") syncs.dir += 1;
    else if (e.op === "unlink") syncs.unlink += 1;
    else if (e.op === "rename") syncs.rename += 1;
  });
}
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const rep = await store.compact({ mode });
io.setIoObserver(null);
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
if (session !== null && prof !== undefined) {
  const { profile } = await session.post("Profiler.stop");
  fs.writeFileSync(prof, JSON.stringify(profile));
}
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ tree, mode, workers, MBps: +(rep.bytesBefore / seconds / 1e6).toFixed(1), seconds: +seconds.toFixed(3), cpuSeconds: +cpuSeconds.toFixed(3), userS: +(cpu.user / 1e6).toFixed(3), systemS: +(cpu.system / 1e6).toFixed(3), MBperCpuS: +(rep.bytesBefore / cpuSeconds / 1e6).toFixed(1), segments: rep.segments.length, ...(workers === 0 ? { syncs } : {}), load: (os.loadavg()[0] ?? 0).toFixed(2) }));
