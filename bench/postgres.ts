/**
 * PostgreSQL next to the embedded engine, in one run: `npm run bench:postgres [-- --quick]`.
 *
 *   node --import tsx bench/postgres.ts [--quick] [--ms N]
 *
 * Uses the server at ENGRAM_PG_URL, or starts a throwaway cluster exactly as the tests do
 * (test/setup/postgres.ts) and stops it afterwards. For each backend and for 1 and 8 concurrent
 * clients it measures, for a fixed time each: durable writes/s (durability "sync": the engine's
 * fdatasync with group commit; PostgreSQL's commit flush), batch throughput (batches of 100 writes,
 * rows/s) and read latency (p50 / p99 of read() on existing keys). A "client" of the engine is a
 * concurrent caller on one handle (one process owns a directory); a client of PostgreSQL is a
 * handle of its own (its own pool), as separate app servers would be — one handle orders its
 * mutations, so parallel transactions need several. Every client writes its own keys in its own
 * tenant. Prints a markdown table and writes bench/results/postgres-latest.md.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Engram } from "../src/index.js";
import { setup, teardown } from "../test/setup/postgres.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const msArg = argv.indexOf("--ms");
const PHASE_MS = msArg >= 0 ? Number(argv[msArg + 1]) : quick ? 700 : 3000;
const CLIENTS = [1, 8];
const BATCH = 100;
const VALUE = "v".repeat(100);

interface Row {
  backend: string;
  clients: number;
  writesPerSec: number;
  batchRowsPerSec: number;
  readP50Us: number;
  readP99Us: number;
}

/** Runs `op` in `clients` loops until the phase ends; returns operations done and their latencies (µs). */
async function phase(clients: number, op: (client: number, i: number) => Promise<unknown>): Promise<{ ops: number; seconds: number; lat: number[] }> {
  const lat: number[] = [];
  let ops = 0;
  const start = performance.now();
  const end = start + PHASE_MS;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; performance.now() < end; i++) {
        const t = performance.now();
        await op(c, i);
        lat.push((performance.now() - t) * 1000);
        ops += 1;
      }
    }),
  );
  return { ops, seconds: (performance.now() - start) / 1000, lat };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

/** One backend at one client count: `handles[c]` is client c's handle. */
async function measure(backend: string, handles: Engram[]): Promise<Row> {
  const clients = handles.length;
  const h = (c: number): Engram => handles[c] as Engram;
  const w = await phase(clients, (c, i) => h(c).write(`k${i}`, VALUE, { scope: `user:c${c}` }));
  const b = await phase(clients, (c, i) =>
    h(c).batch(Array.from({ length: BATCH }, (_, j) => ({ op: "write" as const, key: `b${i}-${j}`, value: VALUE, scope: `user:c${c}` }))),
  );
  const keys = Math.max(1, Math.floor(w.ops / clients));
  const r = await phase(clients, (c, i) => h(c).read(`k${i % keys}`, { scope: `user:c${c}` }));
  return {
    backend,
    clients,
    writesPerSec: w.ops / w.seconds,
    batchRowsPerSec: (b.ops * BATCH) / b.seconds,
    readP50Us: pct(r.lat, 50),
    readP99Us: pct(r.lat, 99),
  };
}

async function engineRows(): Promise<Row[]> {
  const rows: Row[] = [];
  for (const clients of CLIENTS) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-bench-pg-"));
    const store = await Engram.open(dir, { durability: "sync" });
    try {
      rows.push(await measure("engine (sync, one handle)", Array.from({ length: clients }, () => store)));
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return rows;
}

async function postgresRows(url: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (const clients of CLIENTS) {
    const at = `${url}${url.includes("?") ? "&" : "?"}schema=bench_${process.pid}_${clients}&poolMax=2`;
    const handles = await Promise.all(Array.from({ length: clients }, () => Engram.open(at, { durability: "sync" })));
    try {
      rows.push(await measure("PostgreSQL (sync, a handle per client)", handles));
    } finally {
      await Promise.all(handles.map((s) => s.close()));
    }
  }
  return rows;
}

function render(rows: Row[], serverNote: string): string {
  const f = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const lines = [
    `# PostgreSQL next to the embedded engine`,
    ``,
    `${new Date().toISOString()} · ${os.cpus().length} cores · Node ${process.version} · ${serverNote} · ${PHASE_MS} ms per phase`,
    ``,
    `| backend | clients | durable writes/s | batch rows/s (x${BATCH}) | read p50 µs | read p99 µs |`,
    `|---|---:|---:|---:|---:|---:|`,
    ...rows.map((r) => `| ${r.backend} | ${r.clients} | ${f(r.writesPerSec)} | ${f(r.batchRowsPerSec)} | ${f(r.readP50Us)} | ${f(r.readP99Us)} |`),
    ``,
  ];
  return lines.join("\n");
}

async function main(): Promise<void> {
  let started = false;
  if (process.env["ENGRAM_PG_URL"] === undefined) {
    await setup();
    started = true;
  }
  const url = process.env["ENGRAM_PG_URL"];
  try {
    if (url === undefined) throw new Error(`no PostgreSQL server: ${process.env["ENGRAM_PG_SKIP"] ?? "unknown reason"}`);
    const rows = [...(await engineRows()), ...(await postgresRows(url))];
    const report = render(rows, started ? "throwaway local PostgreSQL cluster (fsync on)" : "server at ENGRAM_PG_URL");
    fs.mkdirSync(path.join(here, "results"), { recursive: true });
    fs.writeFileSync(path.join(here, "results", "postgres-latest.md"), report);
    process.stdout.write(report);
  } finally {
    if (started) teardown();
  }
}

await main();
