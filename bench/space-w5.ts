/**
 * W5's space question in one process, with the store's own accounting printed at each step:
 * n keys (values 256 B) loaded non-durably, reopened durable (default options: auto compaction),
 * delete 50% then rewrite 25% of the deleted in durable batches of 1000 (random order), read all
 * synchronously, close, reopen, read all, close; then allocated bytes ÷ live bytes (as bench W6).
 * Usage: node --import tsx bench/space-w5.ts [tree] [keys]. Prints one line per step (SPACE_FILES=1:
 * then each file with its size and allocated bytes; SPACE_BREAKDOWN=1: bytes per live key by file
 * kind and by record kind — live PUTs, dead PUTs, tombstones, group frames, batch commits, headers,
 * unused tail — read from the segment files with the record codec of this tree; SPACE_RETENTION_MS=N:
 * every open with `retention.tombstoneRetentionMs` N instead of the API's 24 h default, to measure
 * what the retention records the default keeps cost; SPACE_LINGER_MS=N: the reopened store is left
 * open N ms before its close, for the background's time checks — with a short retention window,
 * the tombstones whose window ended go then).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const tree = process.argv[2] ?? ".";
const n = Number(process.argv[3] ?? 200_000);
const built = path.resolve(tree, "dist/src/index.js");
const entry = process.env["AB_SOURCE"] === undefined && fs.existsSync(built) ? built : path.resolve(tree, "src/index.ts");
const { Engram } = (await import(pathToFileURL(entry).href)) as typeof import("../src/index.js");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "space-w5-"));
const key = (i: number): string => `k${String(i).padStart(9, "0")}`;
const retentionMs = process.env["SPACE_RETENTION_MS"];
const retention = retentionMs === undefined ? {} : { retention: { tombstoneRetentionMs: Number(retentionMs) } };
const value = (i: number, v: number): Uint8Array => new Uint8Array(256).fill((i + v) & 0xff);
let seed = 52;
const rnd = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const perm = Array.from({ length: n }, (_, i) => i);
for (let i = n - 1; i > 0; i--) {
  const j = Math.floor(rnd() * (i + 1));
  [perm[i], perm[j]] = [perm[j] as number, perm[i] as number];
}
function allocated(): number {
  let total = 0;
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else total += fs.statSync(p).blocks * 512;
    }
  };
  walk(dir);
  return total;
}
const live = (n - Math.ceil(n / 2) + Math.ceil(n / 8)) * (10 + 256);
type Store = Awaited<ReturnType<typeof Engram.open>>;
const t0 = performance.now();
function show(step: string, s: Store | null): void {
  const st = s?.stats();
  const sealed = st?.segments.filter((x) => x.sealed) ?? [];
  const info = st === undefined ? "" : ` segments ${st.segments.length} (sealed ${sealed.length}) dead ${(st.deadBytes / 1e6).toFixed(1)} MB of ${(st.totalBytes / 1e6).toFixed(1)} MB, compactions ${st.compactions}`;
  console.log(`${((performance.now() - t0) / 1000).toFixed(2).padStart(6)} s ${step.padEnd(14)} disk ${(allocated() / live).toFixed(3)}× live${info}`);
}
{
  const l = await Engram.open(dir, { durability: "none", ...retention });
  for (let b = 0; b < n; b += 1000) {
    const ops = [];
    for (let i = b; i < Math.min(n, b + 1000); i++) ops.push({ op: "write" as const, scope: "default", key: key(perm[i] as number), value: value(perm[i] as number, 1) });
    await l.batch(ops);
  }
  await l.close();
}
const s = await Engram.open(dir, { durability: "sync", ...retention });
show("open", s);
let ops: Array<{ op: "forget"; scope: string; key: string } | { op: "write"; scope: string; key: string; value: Uint8Array }> = [];
for (const i of perm) {
  if (i % 2 !== 0) continue;
  ops.push({ op: "forget", scope: "default", key: key(i) });
  if (ops.length === 1000) (await s.batch(ops), (ops = []));
}
if (ops.length > 0) (await s.batch(ops), (ops = []));
show("deleted", s);
for (const i of perm) {
  if (i % 8 !== 0) continue;
  ops.push({ op: "write", scope: "default", key: key(i), value: value(i, 2) });
  if (ops.length === 1000) (await s.batch(ops), (ops = []));
}
if (ops.length > 0) (await s.batch(ops), (ops = []));
show("rewritten", s);
for (let i = 0; i < n; i++) s.readSync(key(i));
show("verified", s);
await s.close();
show("closed", null);
const s2 = await Engram.open(dir, { durability: "sync", ...retention });
show("reopened", s2);
for (let i = 0; i < n; i++) s2.readSync(key(i));
const lingerMs = Number(process.env["SPACE_LINGER_MS"] ?? 0);
if (lingerMs > 0) {
  await new Promise((resolve) => setTimeout(resolve, lingerMs));
  show(`after ${lingerMs} ms`, s2);
}
await s2.close();
show("closed again", null);
if (process.env["SPACE_FILES"] !== undefined) for (const f of fs.readdirSync(path.join(dir, "segments"))) console.error(f, fs.statSync(path.join(dir, "segments", f)).size, fs.statSync(path.join(dir, "segments", f)).blocks * 512);
if (process.env["SPACE_BREAKDOWN"] !== undefined) await breakdown(path.join(dir, "segments"));
fs.rmSync(dir, { recursive: true, force: true });

/**
 * Prints where every byte of the segments directory goes, in bytes per live key: each segment's
 * records by kind (a PUT is live when it is its name's newest keyed record and that is not a
 * tombstone), the record frames and scopes separately from keys and values, and the other files.
 */
async function breakdown(segDir: string): Promise<void> {
  const { decodeRecord, isRecord } = await import("../segments/record.js");
  await (await import("../segments/checksum.js")).initChecksum();
  const C = await import("../segments/constants.js");
  const liveKeys = n - Math.ceil(n / 2) + Math.ceil(n / 8);
  const rows = new Map<string, number>();
  const add = (k: string, b: number): void => void rows.set(k, (rows.get(k) ?? 0) + b);
  const newest = new Map<string, { seq: number; type: number }>();
  const puts: Array<{ name: string; seq: number; frame: number; scope: number; key: number; value: number }> = [];
  for (const f of fs.readdirSync(segDir).sort()) {
    const file = path.join(segDir, f);
    const st = fs.statSync(file);
    if (!f.endsWith(".seg")) {
      add(`file ${f.replace(/^\d+/, "N")}`, st.blocks * 512);
      continue;
    }
    const bytes = fs.readFileSync(file);
    add("segment headers (2 × 64 B)", C.DATA_START);
    const version = new DataView(bytes.buffer, bytes.byteOffset).getUint16(C.H_VERSION, true);
    let at = C.DATA_START;
    for (;;) {
      // The segment's own record frame (format 2: 48 bytes; 3: varints), from its header; the value
      // is decoded so the frame is what is left of the record (a base tree ignores the version).
      const r = decodeRecord(bytes, at, bytes.length, true, undefined, version);
      if (!isRecord(r)) break;
      const valueBytes = r.value === null ? 0 : typeof r.value === "string" ? Buffer.byteLength(r.value) : r.value.byteLength;
      const scope = Buffer.byteLength(r.scope);
      const key = Buffer.byteLength(r.key);
      const name = `${r.scope}\u0000${r.key}`;
      if (r.type === C.RecordType.PUT) puts.push({ name, seq: r.seq, frame: r.length - scope - key - valueBytes, scope, key, value: valueBytes });
      else if (r.type === C.RecordType.TOMBSTONE) add("tombstones (frame + scope + key)", r.length);
      else if (r.type === C.RecordType.GROUP) add("group frames", r.length);
      else if (r.type === C.RecordType.BATCH_COMMIT) add("batch commits", r.length);
      else add(`records of type ${r.type}`, r.length);
      if (r.type === C.RecordType.PUT || r.type === C.RecordType.TOMBSTONE || r.type === C.RecordType.CLEAR) {
        const was = newest.get(name);
        if (was === undefined || r.seq > was.seq) newest.set(name, { seq: r.seq, type: r.type });
      }
      at += r.length;
    }
    add("segment bytes after the last record (allocated, unused)", st.blocks * 512 - at);
  }
  for (const p of puts) {
    const live = newest.get(p.name)?.seq === p.seq && newest.get(p.name)?.type === C.RecordType.PUT;
    if (live) {
      add("live PUT: key + value (the live bytes)", p.key + p.value);
      add("live PUT: record frame", p.frame);
      add("live PUT: scope", p.scope);
    } else add("dead PUTs (whole records)", p.frame + p.scope + p.key + p.value);
  }
  let total = 0;
  for (const b of rows.values()) total += b;
  console.log(`breakdown, bytes per live key (${liveKeys} live keys; live = ${liveKeys * 266} B):`);
  for (const [k, b] of [...rows].sort((a, b) => b[1] - a[1])) console.log(`  ${k.padEnd(58)} ${(b / liveKeys).toFixed(2).padStart(8)} B  ${(b / (liveKeys * 266)).toFixed(3)}×`);
  console.log(`  ${"total".padEnd(58)} ${(total / liveKeys).toFixed(2).padStart(8)} B  ${(total / (liveKeys * 266)).toFixed(3)}×`);
}
