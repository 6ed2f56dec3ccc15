/**
 * The markdown report: what each metric means, a table per workload (store, median, min–max,
 * engram / best peer, target), issue 6's targets and issue 11's goals checked against the run,
 * the engram-only rows, the fsync honesty check, the machine's physical limits and its description.
 */
import { fmt, median, STORES, type StoreName } from "./common.js";
import { formatTable } from "./format.js";
import { limitsTable } from "./limits.js";

export type Better = "higher" | "lower";

export interface RowDef {
  id: string;
  label: string;
  unit: string;
  better: Better;
  /** Issue 6's target for engram (full run sizes). */
  target?: number;
  /** No engram / best peer ratio: the peers' figure is not comparable (e.g. 0 by construction). */
  noRatio?: boolean;
}

export interface TableDef {
  title: string;
  about: string;
  rows: RowDef[];
  /** Only engram reports these rows. */
  engramOnly?: boolean;
}

export const TABLES: TableDef[] = [
  {
    title: "W1 — durable single puts",
    about: "New keys in random order, 256 B values, on a durable store; a put counts when its promise resolves. Each phase stops at its count or time cap. The 1-in-flight phase runs first in the fresh child process (the target's row), and again on another fresh directory after 3000 untimed puts there (\"warm\": the store's code compiled).",
    rows: [
      { id: "w1.single", label: "puts/s, 1 in flight", unit: "ops/s", better: "higher", target: 9000 },
      { id: "w1.single.p50", label: "latency p50, 1 in flight", unit: "µs", better: "lower" },
      { id: "w1.single.p99", label: "latency p99, 1 in flight", unit: "µs", better: "lower" },
      { id: "w1.inflight64", label: "puts/s, 64 in flight", unit: "ops/s", better: "higher", target: 100000 },
      { id: "w1.singleWarm", label: "warm: puts/s, 1 in flight, after 3000 untimed puts", unit: "ops/s", better: "higher" },
      { id: "w1.singleWarm.p50", label: "warm: latency p50, 1 in flight", unit: "µs", better: "lower" },
      { id: "w1.singleWarm.p99", label: "warm: latency p99, 1 in flight", unit: "µs", better: "lower" },
      { id: "w1.single.faultsPerOp", label: "page faults per put, 1 in flight (first touches: the limits' fresh-memory row gives their cost)", unit: "faults", better: "lower" },
      { id: "w1.singleWarm.faultsPerOp", label: "warm: page faults per put, 1 in flight", unit: "faults", better: "lower" },
      { id: "w1.single.mainCpuPerOp", label: "main thread's CPU per put, 1 in flight (the write and fdatasync calls' kernel time included)", unit: "µs", better: "lower" },
      { id: "w1.single.otherCpuPerOp", label: "CPU per put of the process's other threads, 1 in flight (engram and better-sqlite3: V8's compiler and GC helpers; lmdb and classic-level also write there)", unit: "µs", better: "lower" },
      { id: "w1.singleWarm.mainCpuPerOp", label: "warm: main thread's CPU per put", unit: "µs", better: "lower" },
      { id: "w1.singleWarm.otherCpuPerOp", label: "warm: CPU per put of the other threads", unit: "µs", better: "lower" },
    ],
  },
  {
    title: "W2 — durable batches",
    about: "Atomic batches of 100 or 1000 puts (256 B), one batch in flight, durable store; entries per second.",
    rows: [
      { id: "w2.batch100", label: "batch of 100", unit: "entries/s", better: "higher" },
      { id: "w2.batch1000", label: "batch of 1000", unit: "entries/s", better: "higher", target: 180000 },
    ],
  },
  {
    title: "W3 — bulk load",
    about: "N × 256 B in random key order, atomic batches of 1000, non-durable mode, timed up to and including close(). Then the store is reopened: time to open and serve the first read, and JS heap growth per key across the reopen (after gc). Peers keep their index off the JS heap (native memory / mmap), so their heap rows are near 0 by construction. Last, the same load again on a fresh directory in the same process (\"warm\"), and the JS heap it grew by while open, after gc and before its close (untimed).",
    rows: [
      { id: "w3.bulk", label: "bulk load", unit: "entries/s", better: "higher", target: 340000 },
      { id: "w3.closeMs", label: "of which close() (engram's writes its boot-stamped prefix hint and, since the twenty-sixth session, syncs nothing, as the peers' non-durable modes)", unit: "ms", better: "lower" },
      { id: "w3.bulkWarm", label: "warm: the same bulk load again, on a fresh directory", unit: "entries/s", better: "higher" },
      { id: "w3.bulk.faultsPerKey", label: "page faults per entry, bulk load (first touches)", unit: "faults", better: "lower" },
      { id: "reopen.ms", label: "reopen (open + first read)", unit: "ms", better: "lower", target: 500 },
      { id: "reopen.scanMs", label: "engram only: the same reopen with its hint files removed (a full scan)", unit: "ms", better: "lower", noRatio: true },
      { id: "heap.perKey", label: "JS heap per key after reopen", unit: "B/key", better: "lower" , noRatio: true },
      { id: "heap.perKeyAfterPass", label: "engram only: JS heap per key after reopen and one compact() pass (its plan walks every name: what a long-lived store holds after its first compaction)", unit: "B/key", better: "lower", noRatio: true },
      { id: "heap.perKeyWritten", label: "JS heap per key written, before close (the warm load; its key strings are the caller's, not counted)", unit: "B/key", better: "lower" , noRatio: true },
      { id: "external.perKey", label: "ArrayBuffer memory (shared ones included) per key after reopen", unit: "B/key", better: "lower" , noRatio: true },
      { id: "w3.verifyErrors", label: "wrong values in a 2001-key sample after reopen", unit: "count", better: "lower" , noRatio: true },
    ],
  },
  {
    title: "W4 — hot gets",
    about: "Random existing keys on a reopened store whose files are in the page cache (tinybench; 1000 sync or 256 async gets per iteration). Stores without an async get (lmdb, better-sqlite3) are measured through a promise wrapper.",
    rows: [
      { id: "w4.getSync", label: "sync get", unit: "ops/s", better: "higher", target: 455000 },
      { id: "w4.getAsync1", label: "async get, 1 in flight", unit: "ops/s", better: "higher", target: 330000 },
      { id: "w4.getAsync16", label: "async get, 16 in flight", unit: "ops/s", better: "higher" },
      { id: "w4.getSync.p50", label: "sync get latency p50 (one call timed alone)", unit: "µs", better: "lower" },
      { id: "w4.getSync.p99", label: "sync get latency p99", unit: "µs", better: "lower" },
      { id: "w4.getSync.p999", label: "sync get latency p99.9", unit: "µs", better: "lower" },
    ],
  },
  {
    title: "W5 — delete 50%, rewrite 25% of the deleted, read all and verify",
    about: "On N keys (loaded non-durably, then the store is reopened durable): delete every even key, then rewrite every 8th key with a new value (durable atomic batches of 1000, random order), then read all N keys with the sync get and check every value (deleted keys must be absent). Timed from the first delete to the last check. Then close, reopen, and read and verify all N again (timed separately).",
    rows: [
      { id: "w5.seconds", label: "delete + rewrite + read-all-verify", unit: "s", better: "lower", target: 1.8 },
      { id: "w5.delete.seconds", label: "of which delete", unit: "s", better: "lower" },
      { id: "w5.rewrite.seconds", label: "of which rewrite", unit: "s", better: "lower" },
      { id: "w5.verify.seconds", label: "of which read-all-verify", unit: "s", better: "lower" },
      { id: "w5.faultsPerKey", label: "page faults per key, delete + rewrite + read-all-verify (first touches)", unit: "faults", better: "lower" },
      { id: "w5.verify.faultsPerKey", label: "of which read-all-verify", unit: "faults", better: "lower" },
      { id: "w5.reopenVerify.seconds", label: "reopen + read-all-verify", unit: "s", better: "lower" },
      { id: "w5.verifyErrors", label: "wrong or resurrected values (both passes)", unit: "count", better: "lower" , noRatio: true },
    ],
  },
  {
    title: "W6 — disk bytes vs live bytes",
    about: "Allocated bytes (st_blocks × 512, like du) of the store's directory after close, divided by live key+value bytes. After W3: N live keys; after W5: N/2 + N/8 live keys.",
    rows: [
      { id: "w6.w3.ratio", label: "after W3 (× live)", unit: "×", better: "lower" },
      { id: "w6.w3.allocated", label: "after W3, allocated", unit: "bytes", better: "lower" },
      { id: "w6.w5.ratio", label: "after W5 (× live)", unit: "×", better: "lower", target: 1.1 },
      { id: "w6.w5.allocated", label: "after W5, allocated", unit: "bytes", better: "lower" },
    ],
  },
  {
    title: "Engram only — compaction",
    about: "N keys in 4 MiB segments (512 KiB in quick runs), auto compaction off, non-durable writes; one sealed segment is compacted first as a warm-up (worker start-up is not timed). Round A: forget 25%, then compact() alone: segment bytes processed (report.bytesBefore) per wall-clock second. Round B: forget another 25%; read latency idle, then while compact() runs (one async read and one readSync alternating, one at a time, yielding to the event loop every 16 pairs in both phases). A read that fails closed counts in 'failed closed' and not in the latency.",
    engramOnly: true,
    rows: [
      { id: "compact.cow.MBps", label: "copy-on-write compaction", unit: "MB/s", better: "higher", target: 200 },
      { id: "compact.inplace.MBps", label: "in-place compaction", unit: "MB/s", better: "higher", target: 200 },
      { id: "compact.cow.faults", label: "copy-on-write compaction: page faults in the pass (first touches)", unit: "faults", better: "lower" },
      { id: "compact.inplace.faults", label: "in-place compaction: page faults in the pass", unit: "faults", better: "lower" },
      { id: "compact.cow.cpu.main", label: "copy-on-write compaction: main thread's CPU in the pass", unit: "ms", better: "lower" },
      { id: "compact.cow.cpu.worker", label: "copy-on-write compaction: the compaction worker's CPU in the pass (the busiest other thread)", unit: "ms", better: "lower" },
      { id: "compact.cow.cpu.rest", label: "copy-on-write compaction: CPU of every other thread in the pass (V8's compiler and GC helpers, libuv's pool)", unit: "ms", better: "lower" },
      { id: "compact.inplace.cpu.main", label: "in-place compaction: main thread's CPU in the pass", unit: "ms", better: "lower" },
      { id: "compact.inplace.cpu.worker", label: "in-place compaction: the compaction worker's CPU in the pass", unit: "ms", better: "lower" },
      { id: "compact.inplace.cpu.rest", label: "in-place compaction: CPU of every other thread in the pass", unit: "ms", better: "lower" },
      { id: "compact.cow.underReads.MBps", label: "copy-on-write compaction while reads run", unit: "MB/s", better: "higher" },
      { id: "compact.inplace.underReads.MBps", label: "in-place compaction while reads run", unit: "MB/s", better: "higher" },
      { id: "lat.cow.async.idle.p50", label: "copy-on-write: async read p50, idle", unit: "µs", better: "lower" },
      { id: "lat.cow.async.busy.p50", label: "copy-on-write: async read p50, during compaction", unit: "µs", better: "lower" },
      { id: "lat.cow.async.idle.p99", label: "copy-on-write: async read p99, idle", unit: "µs", better: "lower" },
      { id: "lat.cow.async.busy.p99", label: "copy-on-write: async read p99, during compaction", unit: "µs", better: "lower" },
      { id: "lat.cow.async.p99ratio", label: "copy-on-write: async p99 during / idle", unit: "×", better: "lower", target: 2 },
      { id: "lat.cow.sync.idle.p99", label: "copy-on-write: readSync p99, idle", unit: "µs", better: "lower" },
      { id: "lat.cow.sync.busy.p99", label: "copy-on-write: readSync p99, during compaction", unit: "µs", better: "lower" },
      { id: "lat.cow.sync.p99ratio", label: "copy-on-write: readSync p99 during / idle", unit: "×", better: "lower", target: 2 },
      { id: "lat.inplace.async.idle.p50", label: "in-place: async read p50, idle", unit: "µs", better: "lower" },
      { id: "lat.inplace.async.busy.p50", label: "in-place: async read p50, during compaction", unit: "µs", better: "lower" },
      { id: "lat.inplace.async.idle.p99", label: "in-place: async read p99, idle", unit: "µs", better: "lower" },
      { id: "lat.inplace.async.busy.p99", label: "in-place: async read p99, during compaction", unit: "µs", better: "lower" },
      { id: "lat.inplace.async.p99ratio", label: "in-place: async p99 during / idle", unit: "×", better: "lower", target: 2 },
      { id: "lat.inplace.sync.idle.p99", label: "in-place: readSync p99, idle", unit: "µs", better: "lower" },
      { id: "lat.inplace.sync.busy.p99", label: "in-place: readSync p99, during compaction", unit: "µs", better: "lower" },
      { id: "lat.inplace.sync.p99ratio", label: "in-place: readSync p99 during / idle", unit: "×", better: "lower", target: 2 },
      { id: "lat.cow.busy.reads", label: "copy-on-write: read pairs completed during compaction", unit: "count", better: "higher" },
      { id: "lat.inplace.busy.reads", label: "in-place: read pairs completed during compaction", unit: "count", better: "higher" },
      { id: "lat.cow.failedClosed", label: "copy-on-write: reads failed closed", unit: "count", better: "lower" },
      { id: "lat.inplace.failedClosed", label: "in-place: reads failed closed", unit: "count", better: "lower" },
      { id: "lat.cow.wrong", label: "copy-on-write: wrong values read", unit: "count", better: "lower" },
      { id: "lat.inplace.wrong", label: "in-place: wrong values read", unit: "count", better: "lower" },
    ],
  },
];

/** Every value of one metric of one store, one per repetition. */
export type Samples = Map<string, Map<StoreName, number[]>>;

export function addSample(samples: Samples, store: StoreName, metrics: Record<string, number>): void {
  for (const [id, v] of Object.entries(metrics)) {
    if (!Number.isFinite(v)) continue;
    let byStore = samples.get(id);
    if (byStore === undefined) samples.set(id, (byStore = new Map()));
    let xs = byStore.get(store);
    if (xs === undefined) byStore.set(store, (xs = []));
    xs.push(v);
  }
}

/** Adds the derived ratio metrics (p99 during / idle) to one child's metrics. */
export function deriveMetrics(m: Record<string, number>): void {
  for (const tag of ["cow", "inplace"]) {
    for (const kind of ["async", "sync"]) {
      const busy = m[`lat.${tag}.${kind}.busy.p99`];
      const idle = m[`lat.${tag}.${kind}.idle.p99`];
      if (busy !== undefined && idle !== undefined && idle > 0) m[`lat.${tag}.${kind}.p99ratio`] = busy / idle;
    }
  }
}

function medianOf(samples: Samples, id: string, store: StoreName): number {
  return median(samples.get(id)?.get(store) ?? []);
}

function spread(xs: readonly number[]): string {
  if (xs.length === 0) return "–";
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return xs.length === 1 ? `${fmt(lo)} (1 run)` : `${fmt(lo)} – ${fmt(hi)}`;
}

/** The best peer's median for a row, or null when no peer has it. */
function bestPeer(samples: Samples, row: RowDef): { store: StoreName; value: number } | null {
  let best: { store: StoreName; value: number } | null = null;
  for (const store of STORES) {
    if (store === "engram") continue;
    const v = medianOf(samples, row.id, store);
    if (!Number.isFinite(v)) continue;
    if (best === null || (row.better === "higher" ? v > best.value : v < best.value)) best = { store, value: v };
  }
  return best;
}

function ratioText(samples: Samples, row: RowDef): string {
  const e = medianOf(samples, row.id, "engram");
  const b = bestPeer(samples, row);
  if (!Number.isFinite(e) || b === null) return "–";
  if (b.value === 0) return e === 0 ? `1.00 (${b.store})` : `∞ (${b.store})`;
  return `${(e / b.value).toFixed(2)} (${b.store})`;
}

function meets(row: RowDef, v: number): boolean {
  if (row.target === undefined) return true;
  return row.better === "higher" ? v >= row.target : v <= row.target;
}

function targetText(row: RowDef): string {
  if (row.target === undefined) return "";
  return `${row.better === "higher" ? "≥" : "≤"} ${fmt(row.target)}`;
}

function valueText(v: number, unit: string): string {
  if (unit === "bytes") return Number.isFinite(v) ? `${(v / 1e6).toFixed(1)} MB` : "–";
  return fmt(v);
}

export function workloadTable(samples: Samples, t: TableDef, stores: readonly StoreName[]): string {
  const out: string[] = [`### ${t.title}`, "", t.about, ""];
  out.push("| row | store | median | min – max | engram / best peer | target |", "|---|---|---:|---:|---:|---|");
  for (const row of t.rows) {
    const present = stores.filter((s) => samples.get(row.id)?.get(s)?.length);
    if (present.length === 0) continue;
    let first = true;
    for (const store of present) {
      const xs = samples.get(row.id)?.get(store) ?? [];
      const med = median(xs);
      const isEngram = store === "engram";
      const label = first ? `${row.label} (${row.unit}, ${row.better} is better)` : "";
      const ratio = isEngram && !t.engramOnly && row.noRatio !== true ? ratioText(samples, row) : "";
      const unitIsBytes = row.unit === "bytes";
      const target = isEngram && row.target !== undefined ? `${targetText(row)} ${meets(row, med) ? "met" : "**missed**"}` : "";
      out.push(
        `| ${label} | ${store} | ${valueText(med, row.unit)} | ${unitIsBytes ? xs.map((x) => (x / 1e6).toFixed(1)).join(", ") : spread(xs)} | ${ratio} | ${target} |`,
      );
      first = false;
    }
  }
  return out.join("\n");
}

/** Every row with an engram target: met or missed, with the figure and the best peer. */
export function targetsTable(samples: Samples): string {
  const out = ["| row | target | engram (median) | best peer (median) | engram / best peer | verdict |", "|---|---|---:|---:|---:|---|"];
  for (const t of TABLES) {
    for (const row of t.rows) {
      if (row.target === undefined) continue;
      const e = medianOf(samples, row.id, "engram");
      const b = t.engramOnly ? null : bestPeer(samples, row);
      const verdict = !Number.isFinite(e) ? "not measured" : meets(row, e) ? "met" : "**missed**";
      out.push(
        `| ${t.title.split(" — ")[0]}: ${row.label} (${row.unit}) | ${targetText(row)} | ${fmt(e)} | ${b === null ? "–" : `${fmt(b.value)} (${b.store})`} | ${b === null ? "–" : ratioText(samples, row)} | ${verdict} |`,
      );
    }
  }
  return out.join("\n");
}

/** Where engram stands against one of issue 11's goals in a run: its figure as the goal states it, and the verdict. */
interface GoalCheck {
  figure: string;
  met: boolean;
}

/** One of issue 11's goals ("Done when": every goal met in a full run, or a missed one's bound shown). */
interface Goal {
  what: string;
  goal: string;
  /** Null when the run lacks a metric the goal needs (a partial run). */
  check(samples: Samples): GoalCheck | null;
}

/** The row of `id` in TABLES (every goal names a row that exists). */
function rowOf(id: string): RowDef {
  for (const t of TABLES) for (const row of t.rows) if (row.id === id) return row;
  throw new Error(`no report row ${id}`);
}

/** engram's median over the best peer's for row `id`, and that peer; null when either is missing. */
function peerRatio(samples: Samples, id: string): { ratio: number; store: StoreName } | null {
  const e = medianOf(samples, id, "engram");
  const b = bestPeer(samples, rowOf(id));
  if (!Number.isFinite(e) || b === null || !(b.value > 0)) return null;
  return { ratio: e / b.value, store: b.store };
}

/** A goal on engram / best peer for row `id`: at least `min` (a higher-is-better row) or at most `max` (lower). */
function ratioGoal(what: string, id: string, bound: { min: number } | { max: number }): Goal {
  const goal = "min" in bound ? `≥ ${bound.min}× best peer` : `≤ ${bound.max}× best peer`;
  return {
    what,
    goal,
    check(samples) {
      const r = peerRatio(samples, id);
      if (r === null) return null;
      return { figure: `${r.ratio.toFixed(2)}× (${r.store})`, met: "min" in bound ? r.ratio >= bound.min : r.ratio <= bound.max };
    },
  };
}

/** A goal on engram's own median of row `id`: at least `min` or at most `max`, in the row's unit. */
function valueGoal(what: string, id: string, bound: { min: number } | { max: number }): Goal {
  const unit = rowOf(id).unit;
  return {
    what,
    goal: "min" in bound ? `≥ ${fmt(bound.min)} ${unit}` : `≤ ${fmt(bound.max)} ${unit}`,
    check(samples) {
      const v = medianOf(samples, id, "engram");
      if (!Number.isFinite(v)) return null;
      return { figure: `${fmt(v)} ${unit}`, met: "min" in bound ? v >= bound.min : v <= bound.max };
    },
  };
}

/** Issue 11's table of goals, each checked against the run's medians. */
export const ISSUE_11_GOALS: readonly Goal[] = [
  {
    what: "durable put, 1 in flight",
    goal: "≥ 1.0× best peer and p99 ≤ 1 ms",
    check(samples) {
      const r = peerRatio(samples, "w1.single");
      const p99 = medianOf(samples, "w1.single.p99", "engram");
      if (r === null || !Number.isFinite(p99)) return null;
      return { figure: `${r.ratio.toFixed(2)}× (${r.store}), p99 ${fmt(p99)} µs`, met: r.ratio >= 1 && p99 <= 1000 };
    },
  },
  ratioGoal("durable batch of 1000", "w2.batch1000", { min: 2 }),
  ratioGoal("bulk load (non-durable, batches of 1000, up to and including close)", "w3.bulk", { min: 3 }),
  ratioGoal("sync get, hot", "w4.getSync", { min: 1.5 }),
  ratioGoal("async get, 1 in flight", "w4.getAsync1", { min: 1.2 }),
  ratioGoal("delete 50% + rewrite 25% + read all (time)", "w5.seconds", { max: 0.5 }),
  valueGoal("disk after that workload, default auto compaction", "w6.w5.ratio", { max: 1.1 }),
  {
    what: "reopen of W3's store (open + first read)",
    goal: "≤ 25× best peer, and ≥ 10× faster than a full scan",
    check(samples) {
      const r = peerRatio(samples, "reopen.ms");
      const ms = medianOf(samples, "reopen.ms", "engram");
      const scan = medianOf(samples, "reopen.scanMs", "engram");
      if (r === null || !Number.isFinite(scan) || !(ms > 0)) return null;
      return { figure: `${r.ratio.toFixed(2)}× (${r.store}); ${(scan / ms).toFixed(1)}× faster than the scan (${fmt(scan)} ms)`, met: r.ratio <= 25 && scan / ms >= 10 };
    },
  },
  {
    what: "JS heap per key after reopen",
    goal: "≤ 100 B/key, and still after the first compact() pass",
    check(samples) {
      const v = medianOf(samples, "heap.perKey", "engram");
      const pass = medianOf(samples, "heap.perKeyAfterPass", "engram");
      if (!Number.isFinite(v)) return null;
      // A run from before the row existed has no after-pass figure: judged on the reopen alone, as then.
      if (!Number.isFinite(pass)) return { figure: `${fmt(v)} B/key`, met: v <= 100 };
      return { figure: `${fmt(v)} B/key; ${fmt(pass)} B/key after a compact() pass`, met: v <= 100 && pass <= 100 };
    },
  },
  valueGoal("compaction, copy-on-write", "compact.cow.MBps", { min: 150 }),
  valueGoal("compaction, in place", "compact.inplace.MBps", { min: 150 }),
];

/** Issue 11's goals: engram's figure in this run and the verdict of each. */
export function goalsTable(samples: Samples): string {
  const out = ["| workload | goal | engram in this run | verdict |", "|---|---|---|---|"];
  for (const g of ISSUE_11_GOALS) {
    const c = g.check(samples);
    out.push(`| ${g.what} | ${g.goal} | ${c === null ? "–" : c.figure} | ${c === null ? "not measured" : c.met ? "met" : "**missed**"} |`);
  }
  return out.join("\n");
}

/**
 * W5's floor against its goal: the floor store's W5 time (bench/w5-floor.ts, in this run's limits)
 * over the best peer's, beside engram's, and the answering floor's (by pread and through mmap) when measured; null
 * when the floor or the best peer was not measured.
 */
export function w5FloorLine(samples: Samples, limits: Record<string, number> | string): string | null {
  if (typeof limits === "string") return null;
  const floor = limits["limit.w5floor.seconds"];
  const answers = limits["limit.w5floor.answers.seconds"];
  const mapped = limits["limit.w5floor.answers.mmap.seconds"];
  const best = bestPeer(samples, rowOf("w5.seconds"));
  const engram = medianOf(samples, "w5.seconds", "engram");
  if (floor === undefined || !Number.isFinite(floor) || best === null || !(best.value > 0)) return null;
  const answering =
    answers === undefined || !Number.isFinite(answers)
      ? ""
      : ` Answering as the contract asks (a state lookup before each write and forget): ${fmt(answers)} s, ${(answers / best.value).toFixed(2)}× ${best.store}'s; engram is ${(engram / answers).toFixed(2)}× it.`;
  const throughMmap =
    mapped === undefined || !Number.isFinite(mapped)
      ? ""
      : ` The same, its log read through mmap (a native addon, as lmdb reads its file): ${fmt(mapped)} s, ${(mapped / best.value).toFixed(2)}× ${best.store}'s.`;
  return (
    `W5's floor in this run (bench/w5-floor.ts: a durable log that does W5 and nothing else, meeting the reopen and heap goals): ` +
    `${fmt(floor)} s, ${(floor / best.value).toFixed(2)}× ${best.store}'s ${fmt(best.value)} s; engram ${fmt(engram)} s is ${(engram / floor).toFixed(2)}× the floor.${answering}${throughMmap}`
  );
}

export interface FsyncRow {
  store: StoreName;
  singleAcked: number;
  singleSyncs: number;
  inflightAcked: number;
  inflightSyncs: number;
  error?: string;
}

export function fsyncTable(rows: FsyncRow[]): string {
  const out = [
    "| store | puts acked, 1 in flight | sync calls | per put | puts acked, 64 in flight | sync calls | per put | verdict |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const r of rows) {
    if (r.error !== undefined) {
      out.push(`| ${r.store} | – | – | – | – | – | – | ${r.error} |`);
      continue;
    }
    const p1 = r.singleAcked > 0 ? r.singleSyncs / r.singleAcked : Number.NaN;
    const p64 = r.inflightAcked > 0 ? r.inflightSyncs / r.inflightAcked : Number.NaN;
    const verdict = p1 >= 0.99 ? "ok: ≥ 1 sync per put at 1 in flight" : "**fewer syncs than acknowledged puts**";
    out.push(`| ${r.store} | ${r.singleAcked} | ${r.singleSyncs} | ${p1.toFixed(2)} | ${r.inflightAcked} | ${r.inflightSyncs} | ${p64.toFixed(3)} | ${verdict} |`);
  }
  return out.join("\n");
}

export interface ReportInput {
  title: string;
  command: string;
  startedAt: Date;
  seconds: number;
  quick: boolean;
  reps: number;
  sizesText: string;
  machine: string[];
  stores: { name: StoreName; status: string; durability: string }[];
  samples: Samples;
  fsync: FsyncRow[] | string;
  limits: Record<string, number> | string;
  format: Record<string, number> | string;
  notes: string[];
}

export function renderReport(r: ReportInput): string {
  const ran = r.stores.filter((s) => s.status === "ok").map((s) => s.name);
  const out: string[] = [];
  out.push(`# ${r.title}`, "");
  out.push(`Run ${r.startedAt.toISOString()} · ${r.quick ? "quick" : "full"} · ${r.reps} repetition${r.reps === 1 ? "" : "s"} per store and workload · ${r.seconds.toFixed(0)} s in all.`, "");
  out.push("Command: `" + r.command + "`", "");
  out.push("## Machine", "", ...r.machine.map((l) => `- ${l}`), "");
  out.push("## Stores", "", "| store | status | durable means |", "|---|---|---|");
  for (const s of r.stores) out.push(`| ${s.name} | ${s.status} | ${s.durability} |`);
  out.push("");
  out.push(
    "Each store and workload ran in its own child process on a fresh directory, stores in rotating order. " +
      "Median over repetitions; min – max is the spread. \"engram / best peer\" divides engram's median by the best peer median " +
      "(above 1 is better for engram where higher is better, below 1 where lower is better). " +
      `Sizes: ${r.sizesText}.` +
      (r.quick ? " **Quick run: small sizes and 1 repetition; targets apply to the full run (`npm run bench`).**" : ""),
    "",
  );
  out.push("## Targets (issue 6)", "", targetsTable(r.samples), "");
  out.push(
    "## Goals (issue 11)",
    "",
    "Issue 11's table, checked against this run: every ratio is engram's median over the best peer's median from the same run. " +
      "Its \"Done when\" asks for every goal met, or, for one missed, the profile of what bounds it (docs/PERFORMANCE.md, \"Issue 11: where each goal stands\").",
    "",
    goalsTable(r.samples),
    "",
  );
  const floor = w5FloorLine(r.samples, r.limits);
  if (floor !== null) out.push(floor, "");
  out.push("## Workloads", "");
  for (const t of TABLES) {
    out.push(workloadTable(r.samples, t, t.engramOnly ? ["engram"] : ran), "");
  }
  out.push("## fsync honesty check", "");
  out.push(
    "Durable puts traced with `strace -f -e trace=fdatasync,fsync,msync,sync_file_range` (plus access(2) markers that fence the " +
      "measured phase, so syncs of open and close are not counted). At 1 in flight every acknowledged put needs its own sync; " +
      "at 64 in flight fewer syncs than puts means group commit.",
    "",
  );
  out.push(typeof r.fsync === "string" ? r.fsync : fsyncTable(r.fsync), "");
  out.push("## Physical limits of this machine", "", "Measured on the same filesystem as the stores by `bench/limits.ts`.", "");
  out.push(typeof r.limits === "string" ? r.limits : limitsTable(r.limits), "");
  out.push("## Segment codec", "", "`bench/format.ts` (tinybench) on the segment format of `segments/`.", "");
  out.push(typeof r.format === "string" ? r.format : formatTable(r.format), "");
  if (r.notes.length > 0) out.push("## Notes", "", ...r.notes.map((n) => `- ${n}`), "");
  return out.join("\n");
}
