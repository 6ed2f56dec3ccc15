/**
 * The actions behind the CLI subcommands. Key-level commands go through handleToolCall, so the CLI
 * validates exactly like the agent tools and `--json` prints the same snake_case wire shapes.
 */
import { Engram } from "./engram.js";
import { formatBytes, formatPairs, formatPercent, formatTable, ProgressBar } from "./cli-format.js";
import type { Cell } from "./cli-format.js";
import { isPostgresUrl } from "../postgres/index.js";
import { EXIT, printJson, reportWireError, requireDir, requireStoreDir, withStore } from "./cli-store.js";
import type { GlobalOptions } from "./cli-store.js";
import { handleToolCall, isWireError } from "./tools.js";
import type {
  WireError,
  WireForgetResult,
  WireForgetScopeResult,
  WireListResult,
  WireProbeResult,
  WireReadResult,
  WireResult,
  WireUndeleteResult,
  WireValue,
  WireWriteResult,
} from "./tools.js";
import type { CompactionReport, StoreStats, VerifyReport } from "./types.js";

/** Options of `put`. */
export interface PutOptions extends GlobalOptions {
  scope?: string;
  expectedVersion?: number | null;
  clearTombstone?: boolean;
  ttl?: number | null;
}

/** Options of `get`. */
export interface GetOptions extends GlobalOptions {
  scope?: string;
  inherit?: boolean;
}

/** Options of commands that take only a scope. */
export interface ScopedOptions extends GlobalOptions {
  scope?: string;
}

/** Options of `ls`. */
export interface LsOptions extends GlobalOptions {
  scope?: string;
  prefix?: string;
  inherit?: boolean;
  limit?: number;
}

/** Options of `verify`. */
export interface VerifyOptions extends GlobalOptions {
  progress?: boolean;
}

/** Without --progress, a terminal gets a progress bar once verify has run this long. */
const PROGRESS_AFTER_MS = 300;

function defined<T extends Record<string, unknown>>(obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Runs one tool against the store of `--dir`; prints a wire error and returns its exit code. */
async function callTool<T extends WireResult>(
  opts: GlobalOptions,
  mustExist: boolean,
  name: string,
  args: Record<string, unknown>,
): Promise<{ wire: T; exit: null } | { wire: WireError; exit: number }> {
  const wire = await withStore(opts, mustExist, (store) => handleToolCall(store, name, defined(args)));
  if (isWireError(wire)) return { wire, exit: reportWireError(wire, opts.json === true) ?? EXIT.ENGRAM };
  return { wire: wire as T, exit: null };
}

function wireValueArg(value: string | Uint8Array): WireValue {
  return typeof value === "string" ? value : { base64: Buffer.from(value).toString("base64") };
}

/** `engram put KEY [VALUE]`: writes a value (VALUE, or stdin when omitted). */
export async function cmdPut(key: string, value: string | Uint8Array, opts: PutOptions): Promise<number> {
  const args = {
    key,
    value: wireValueArg(value),
    scope: opts.scope,
    expected_version: opts.expectedVersion,
    clear_tombstone: opts.clearTombstone,
    ttl_ms: opts.ttl,
  };
  const res = await callTool<WireWriteResult>(opts, false, "memory_write", args);
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  if (opts.json === true) printJson(wire);
  else process.stdout.write(`ok version ${wire.version} generation ${String(wire.generation)}\n`);
  return EXIT.OK;
}

/** `engram get KEY`: prints the raw value (or the wire result with --json); exit 3 when not found. */
export async function cmdGet(key: string, opts: GetOptions): Promise<number> {
  const res = await callTool<WireReadResult>(opts, true, "memory_read", { key, scope: opts.scope, inherit: opts.inherit });
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  const read = wire;
  if (opts.json === true) printJson(read);
  if (read.status !== "OK") {
    if (opts.json !== true) process.stderr.write(`engram: ${key}: NOT_FOUND\n`);
    return EXIT.NOT_FOUND;
  }
  if (opts.json !== true) {
    const v = read.value;
    process.stdout.write(typeof v === "string" ? `${v}\n` : Buffer.from(v.base64, "base64"));
  }
  return EXIT.OK;
}

/** `engram forget KEY`: commits a tombstone in exactly one scope. */
export async function cmdForget(key: string, opts: ScopedOptions): Promise<number> {
  const res = await callTool<WireForgetResult>(opts, true, "memory_forget", { key, scope: opts.scope });
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  if (opts.json === true) printJson(wire);
  else {
    const seq = wire.tombstone_seq;
    process.stdout.write(
      seq === null
        ? "nothing live to forget (nothing written)\n"
        : `tombstone committed at seq ${seq} (value bytes are reclaimed later; \`engram probe\` tells)\n`,
    );
  }
  return EXIT.OK;
}

/** `engram undelete KEY`: clears a tombstone, leaving the slot empty and writable. */
export async function cmdUndelete(key: string, opts: ScopedOptions): Promise<number> {
  const res = await callTool<WireUndeleteResult>(opts, true, "memory_undelete", { key, scope: opts.scope });
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  if (opts.json === true) printJson(wire);
  else process.stdout.write(`tombstone cleared; slot generation ${String(wire.generation)}\n`);
  return EXIT.OK;
}

/** `engram forget-scope SCOPE [--eager]`: erases a scope and its descendants. */
export async function cmdForgetScope(scope: string, opts: GlobalOptions & { eager?: boolean }): Promise<number> {
  const reclaim = opts.eager === true ? "eager" : "lazy";
  const res = await callTool<WireForgetScopeResult>(opts, true, "memory_forget_scope", { scope, reclaim });
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  if (opts.json === true) printJson(wire);
  else {
    const bytes = wire.reclaimed_bytes === undefined ? "" : `, ${formatBytes(wire.reclaimed_bytes)} reclaimed`;
    process.stdout.write(`erased ${scope}: ${wire.slots} slots, seq ${wire.tombstone_seq}${bytes} (${reclaim})\n`);
  }
  return EXIT.OK;
}

/** `engram probe KEY`: the slot's value and retention records, reported separately. */
export async function cmdProbe(key: string, opts: ScopedOptions): Promise<number> {
  const res = await callTool<WireProbeResult>(opts, true, "memory_probe", { key, scope: opts.scope });
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  const p = wire;
  if (opts.json === true) printJson(p);
  else process.stdout.write(`${formatPairs(Object.entries(p))}\n`);
  return EXIT.OK;
}

/** `engram ls`: live keys in key order. */
export async function cmdLs(opts: LsOptions): Promise<number> {
  const args = { scope: opts.scope, prefix: opts.prefix, inherit: opts.inherit, limit: opts.limit ?? 1000 };
  const res = await callTool<WireListResult>(opts, true, "memory_list", args);
  if (res.exit !== null) return res.exit;
  const wire = res.wire;
  const list = wire;
  if (opts.json === true) printJson(list);
  else {
    const rows: Cell[][] = list.entries.map((e) => [e.key, e.scope, e.version]);
    process.stdout.write(`${formatTable(["KEY", "SCOPE", "VERSION"], rows)}\n`);
    if (list.truncated) process.stdout.write(`(more keys: raise --limit)\n`);
    if (list.entries.length === 0) {
      const where = opts.scope ?? "global";
      const parents = opts.inherit === false || where === "global" ? "" : " or its parents";
      process.stdout.write(`(no live keys in ${where}${parents}; --scope lists another scope)\n`);
    }
  }
  return EXIT.OK;
}

function segmentRows(stats: StoreStats): Cell[][] {
  return stats.segments.map((s) => [
    s.id,
    s.generation,
    s.bytes,
    s.liveBytes,
    formatPercent(s.bytes > 0 ? s.liveBytes / s.bytes : 0),
    s.records,
    s.tombstones,
    s.sealed ? "sealed" : "active",
  ]);
}

function totals(stats: StoreStats): Array<[string, Cell]> {
  return [
    ["segments", stats.segments.length],
    ["total", stats.totalBytes < 1024 ? formatBytes(stats.totalBytes) : `${formatBytes(stats.totalBytes)} (${stats.totalBytes} B)`],
    ["live", `${formatBytes(stats.liveBytes)} (${formatPercent(stats.totalBytes > 0 ? stats.liveBytes / stats.totalBytes : 0)})`],
    ["dead", formatBytes(stats.deadBytes)],
    ["slots", `${stats.slots} (${stats.liveSlots} live)`],
    ["tombstones", stats.tombstones],
    ["scopes", stats.scopes],
    ["sequence", stats.sequence],
    ["pending GC", `${stats.pendingGcSegments} segments`],
    ["compactions", stats.compactions],
  ];
}

/** `engram inspect`: a table of segments and the store totals, from stats(). */
export async function cmdInspect(opts: GlobalOptions): Promise<number> {
  const stats = await withStore(opts, true, async (store) => store.stats());
  if (opts.json === true) {
    printJson(stats);
    return EXIT.OK;
  }
  const header = ["SEGMENT", "GEN", "BYTES", "LIVE", "LIVE%", "RECORDS", "TOMBSTONES", "STATE"];
  process.stdout.write(`${formatTable(header, segmentRows(stats))}\n\n${formatPairs(totals(stats))}\n`);
  return EXIT.OK;
}

/** Makes the verify progress callback: a bar when forced, or on a terminal once the work is slow; `false` (--no-progress, --quiet) never draws. */
function verifyProgress(force: boolean | undefined): { onProgress: (done: number, total: number) => void; finish: () => void } {
  const bar = new ProgressBar(process.stderr, "verify");
  const started = Date.now();
  const auto = (): boolean => process.stderr.isTTY === true && Date.now() - started >= PROGRESS_AFTER_MS;
  return {
    onProgress: (done, total) => {
      if (force === true || (force === undefined && auto())) bar.update(done, total);
    },
    finish: () => bar.finish(),
  };
}

function printVerify(report: VerifyReport): void {
  const summary = `${report.segments} segments, ${report.records} records, ${formatBytes(report.bytes)}`;
  if (report.ok) {
    process.stdout.write(`verify: OK (${summary})\n`);
    return;
  }
  const rows: Cell[][] = report.problems.map((p) => [p.segment, p.offset, p.detail]);
  process.stdout.write(`${formatTable(["SEGMENT", "OFFSET", "PROBLEM"], rows)}\n`);
  const where = report.segments > 0 ? ` in ${summary}` : "";
  process.stdout.write(`verify: CORRUPTION: ${report.problems.length} problem(s)${where}\n`);
}

/** `engram verify`: checks every header and record checksum without opening the store; exit 2 on corruption. */
export async function cmdVerify(opts: VerifyOptions): Promise<number> {
  const dir = requireDir(opts);
  const url = isPostgresUrl(dir);
  if (!url) requireStoreDir(dir); // a path that holds no store is a usage error (exit 1), as for inspect
  const progress = verifyProgress(opts.quiet === true ? false : opts.progress);
  let report: VerifyReport;
  try {
    // A database is checked through an open handle (its rows against the rules); a directory's files without opening it.
    report = url ? await withStore(opts, true, (s) => s.verify({ onProgress: progress.onProgress })) : await Engram.verify(dir, { onProgress: progress.onProgress });
  } finally {
    progress.finish();
  }
  if (opts.json === true) printJson(report);
  else printVerify(report);
  if (!report.ok && opts.json !== true) process.stderr.write("hint: restore the store from a copy; the table lists each damaged record\n");
  return report.ok ? EXIT.OK : EXIT.ENGRAM;
}

function printCompaction(what: string, r: CompactionReport, extra = ""): void {
  const segs = r.segments.length === 0 ? "no segments" : `segments ${r.segments.join(", ")}`;
  process.stdout.write(
    `${what} (${r.mode}): ${segs}; ${formatBytes(r.bytesBefore)} -> ${formatBytes(r.bytesAfter)}; ` +
      `kept ${r.recordsKept}, dropped ${r.recordsDropped} records${extra}; ${r.durationMs.toFixed(0)} ms\n`,
  );
}

/** `engram compact [--mode MODE]`: compacts sealed segments now. */
export async function cmdCompact(opts: GlobalOptions & { mode?: "copy-on-write" | "in-place" }): Promise<number> {
  const report = await withStore(opts, true, (store) => store.compact(opts.mode === undefined ? {} : { mode: opts.mode }));
  if (opts.json === true) printJson(report);
  else printCompaction("compact", report);
  return EXIT.OK;
}

/** `engram gc`: reclaims by retention policy now (generation-keyed). */
export async function cmdGc(opts: GlobalOptions): Promise<number> {
  const report = await withStore(opts, true, (store) => store.gc());
  if (opts.json === true) printJson(report);
  else printCompaction("gc", report, `, ${report.retentionRecordsDropped} retention records dropped`);
  return EXIT.OK;
}
