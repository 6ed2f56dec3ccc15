/**
 * `engram import`: reads an export (cli-export.ts) into a new, empty store.
 *
 * Two passes over the file. The first checks every line — JSON, shape, scope and key grammar,
 * numbers, base64, no slot twice, header first, end line last with matching counts — and
 * refuses the file with the number of the first bad line before the store is even opened, so a
 * bad file writes nothing. The second raises the new store's commit sequence above every version
 * and tombstone sequence in the file (and the source's own sequence), then writes the values in
 * atomic batches. Afterwards versions never go backwards or repeat: every imported value and every
 * later write gets a version above anything the source ever issued, so a compare-and-set holding
 * an old version fails instead of matching a different value. Retention records are not
 * recreated: their versions only raise the floor. Generations restart in the new store.
 *
 * Stdin is spooled to a private temporary file first (0600), so that both passes read the same
 * bytes and an input of any size never has to fit in memory.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pipeline } from "node:stream/promises";
import { EngramError, InvalidArgumentError } from "../rules/errors.js";
import { Interrupted } from "./cli-io.js";
import { assertKey, assertScope } from "../rules/names.js";
import type { Engram } from "./engram.js";
import { EXPORT_FORMAT } from "./cli-export.js";
import type { BatchOp } from "./types.js";

/**
 * Longest line accepted, in bytes: a 16 MiB string value whose every byte JSON escapes as \uXXXX
 * (6 characters), with its key and fields. Longer lines are refused while being read, before
 * they are held in memory whole.
 */
const LINE_BYTES_MAX = 6 * 16 * 1024 * 1024 + 64 * 1024;
/** Operations and value bytes per import batch (each batch is atomic). */
const BATCH_OPS_MAX = 1000;
const BATCH_VALUE_BYTES_MAX = 8 * 1024 * 1024;
/** Progress goes to stderr every this many lines. */
const PROGRESS_EVERY = 10_000;
/** The first pass notices an interrupt within this many lines. */
const CHECK_EVERY = 1000;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** Largest value accepted: the default valueBytesMax of the store import opens (16 MiB). */
const VALUE_BYTES_MAX = 16 * 1024 * 1024;
const RETENTION_STATES = new Set(["tombstoned", "reclaimed", "expired"]);

/** What the first pass learned. */
interface Checked {
  values: number;
  retention: number;
  /** The highest sequence the source ever issued, as far as the file says. */
  floor: number;
}

/** What an import did. */
export interface ImportReport {
  values: number;
  retention: number;
  /** Values whose expiry passed between export and import: not written. */
  expired: number;
  /** The new store's sequence after the floor was raised (every imported version is above it). */
  floor: number;
  batches: number;
}

/** A refusal of line `n`. */
function bad(n: number, what: string): InvalidArgumentError {
  return new InvalidArgumentError(`line ${n}: ${what}; nothing was imported`);
}

type Doc = Record<string, unknown>;

/** Throws unless `d` has exactly the fields `required` plus any of `optional`. */
function fields(n: number, d: Doc, required: string[], optional: string[] = []): void {
  for (const f of required) if (!(f in d)) throw bad(n, `missing field "${f}"`);
  for (const f of Object.keys(d)) if (!required.includes(f) && !optional.includes(f)) throw bad(n, `unknown field "${f}"`);
}

/** A safe integer >= min, or (when allowed) null. */
function int(n: number, d: Doc, f: string, min: number, nullable: boolean): number | null {
  const v = d[f];
  if (v === null && nullable) return null;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) throw bad(n, `"${f}" must be ${nullable ? "null or " : ""}an integer >= ${min}, got ${typeof v === "number" ? String(v) : JSON.stringify(v)}`);
  return v;
}

/** Checks scope and key grammar, with the line number in the message. */
function slotOf(n: number, d: Doc): string {
  try {
    assertScope(d["scope"]);
    assertKey(d["key"]);
  } catch (err) {
    throw bad(n, (err as Error).message);
  }
  return `${d["scope"] as string}\u0000${d["key"] as string}`;
}

/** Checks one value line; returns its highest sequence. */
function checkValue(n: number, d: Doc): number {
  fields(n, d, ["kind", "scope", "key", "version", "generation", "expiresAt"], ["value", "base64"]);
  if (("value" in d) === ("base64" in d)) throw bad(n, `a value line has exactly one of "value" (a string) and "base64" (bytes)`);
  if ("value" in d && typeof d["value"] !== "string") throw bad(n, `"value" must be a string`);
  if ("base64" in d && (typeof d["base64"] !== "string" || !BASE64.test(d["base64"]))) throw bad(n, `"base64" must be standard base64`);
  const bytes = "value" in d ? Buffer.byteLength(d["value"] as string, "utf8") : Math.floor(((d["base64"] as string).length * 3) / 4);
  if (bytes > VALUE_BYTES_MAX) throw bad(n, `the value is ${bytes} bytes; at most ${VALUE_BYTES_MAX}`);
  int(n, d, "generation", 1, false);
  int(n, d, "expiresAt", 0, true);
  return int(n, d, "version", 1, false) as number;
}

/** Checks one retention line; returns its highest sequence. */
function checkRetention(n: number, d: Doc): number {
  fields(n, d, ["kind", "scope", "key", "state", "version", "generation", "tombstoneSeq"]);
  if (typeof d["state"] !== "string" || !RETENTION_STATES.has(d["state"])) throw bad(n, `"state" must be tombstoned, reclaimed or expired`);
  int(n, d, "generation", 0, true);
  return Math.max(int(n, d, "version", 1, true) ?? 0, int(n, d, "tombstoneSeq", 1, true) ?? 0);
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** One line's bytes as text: a byte-order mark on line 1 and a CR before the newline are dropped; bad UTF-8 is refused. */
function textOf(n: number, bytes: Buffer): string {
  let b = n === 1 && bytes.subarray(0, 3).equals(BOM) ? bytes.subarray(3) : bytes;
  if (b.length > 0 && b[b.length - 1] === 0x0d) b = b.subarray(0, b.length - 1);
  try {
    return UTF8.decode(b);
  } catch {
    throw bad(n, "not valid UTF-8 (an export is UTF-8 JSON; was the file re-encoded?)");
  }
}

/**
 * The lines of a file with their numbers (1-based), split on bytes: a line is refused once it
 * passes LINE_BYTES_MAX, before the rest of it is read (a file without newlines never has to
 * fit in memory), and each line is decoded as strict UTF-8.
 */
async function* linesOf(file: string): AsyncGenerator<[number, string]> {
  let parts: Buffer[] = [];
  let held = 0;
  let n = 0;
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, from)) {
      n += 1;
      if (held + nl - from > LINE_BYTES_MAX) throw bad(n, `longer than ${LINE_BYTES_MAX} bytes`);
      parts.push(chunk.subarray(from, nl));
      yield [n, textOf(n, Buffer.concat(parts))];
      parts = [];
      held = 0;
      from = nl + 1;
    }
    held += chunk.length - from;
    if (held > LINE_BYTES_MAX) throw bad(n + 1, `longer than ${LINE_BYTES_MAX} bytes`);
    if (from < chunk.length) parts.push(chunk.subarray(from));
  }
  if (held > 0) yield [n + 1, textOf(n + 1, Buffer.concat(parts))];
}

/**
 * The names of a JSON object's fields as written, a repeated one twice (JSON.parse keeps only the
 * last, so `{"key":"a","key":"b"}` would import "b" silently). `text` is valid JSON.
 */
function writtenFields(text: string): string[] {
  const names: string[] = [];
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      if (depth === 1 && /^\s*:/.test(text.slice(j + 1, j + 64))) names.push(JSON.parse(text.slice(i, j + 1)) as string);
      i = j;
    } else if (c === "{" || c === "[") depth += 1;
    else if (c === "}" || c === "]") depth -= 1;
  }
  return names;
}

/** Parses a line as a JSON object whose fields each appear once. */
function parse(n: number, line: string): Doc {
  let d: unknown;
  try {
    d = JSON.parse(line);
  } catch (err) {
    throw bad(n, `not JSON (${(err as Error).message})`);
  }
  if (typeof d !== "object" || d === null || Array.isArray(d)) throw bad(n, "not a JSON object");
  const names = writtenFields(line);
  if (names.length !== Object.keys(d).length) {
    const twice = names.find((f, i) => names.indexOf(f) !== i);
    throw bad(n, `field ${JSON.stringify(twice)} appears twice`);
  }
  return d as Doc;
}

/** The first pass: every line checked, nothing written; `stop` (an interrupt) is honoured every CHECK_EVERY lines. */
export async function checkExport(file: string, stop?: AbortSignal): Promise<Checked> {
  const seen = new Set<string>();
  let floor = 0;
  let values = 0;
  let retention = 0;
  let ended = 0;
  let last = 0;
  for await (const [n, line] of linesOf(file)) {
    last = n;
    if (n % CHECK_EVERY === 0) stop?.throwIfAborted();
    if (ended > 0) throw bad(n, `a line after the end line (line ${ended})`);
    const d = parse(n, line);
    if (n === 1) {
      fields(n, d, ["engram", "format", "scope", "sequence"]);
      if (d["engram"] !== "export" || d["format"] !== EXPORT_FORMAT) throw bad(n, `not an engram export of format ${EXPORT_FORMAT}`);
      floor = Math.max(floor, int(n, d, "sequence", 0, false) as number);
      continue;
    }
    if (d["kind"] === "end") {
      fields(n, d, ["kind", "values", "retention", "sequence"]);
      if (d["values"] !== values || d["retention"] !== retention) throw bad(n, `the end line counts ${String(d["values"])} values and ${String(d["retention"])} retention records; the file has ${values} and ${retention}`);
      floor = Math.max(floor, int(n, d, "sequence", 0, false) as number);
      ended = n;
      continue;
    }
    const slot = slotOf(n, d);
    if (seen.has(slot)) throw bad(n, `slot ${JSON.stringify(d["scope"])}/${JSON.stringify(d["key"])} appears twice`);
    seen.add(slot);
    if (d["kind"] === "value") {
      floor = Math.max(floor, checkValue(n, d));
      values += 1;
    } else if (d["kind"] === "retention") {
      floor = Math.max(floor, checkRetention(n, d));
      retention += 1;
    } else {
      throw bad(n, `"kind" must be "value", "retention" or "end", got ${JSON.stringify(d["kind"])}`);
    }
  }
  if (last === 0) throw bad(1, "the file is empty");
  if (ended === 0) throw bad(last, "the file ends without its end line (a truncated export?)");
  // Each value takes a sequence and each batch one more: they must all stay below 2^53.
  if (floor > Number.MAX_SAFE_INTEGER - 2 * (values + 1)) throw bad(ended, `sequence ${floor} leaves no room below 2^53 for ${values} values`);
  return { values, retention, floor };
}

/** Copies stdin to a private temporary file; returns its path. An interrupt (`stop`) removes the file and throws. */
export async function spoolStdin(stop?: AbortSignal): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-import-"));
  const file = path.join(dir, `${randomUUID()}.jsonl`);
  try {
    await pipeline(process.stdin, fs.createWriteStream(file, { mode: 0o600, flags: "wx" }), stop === undefined ? {} : { signal: stop });
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw stop?.aborted === true ? stop.reason : err;
  }
  return file;
}

/** Throws unless `store` holds nothing at all (import makes a new store, it does not merge). */
function assertEmpty(store: Engram): void {
  const s = store.stats();
  if (s.slots > 0 || s.sequence > 0) {
    throw new InvalidArgumentError(`import needs a new or empty store; ${store.dir} holds ${s.slots} slots (sequence ${s.sequence}). Import into a new directory`);
  }
}

/** How the second pass reports and stops: progress on `err`, every batch with `everyBatch`, none with `quiet`; `stop` aborts it between batches (an interrupt). */
export interface ImportSink {
  err: NodeJS.WritableStream;
  everyBatch?: boolean;
  /** `--quiet`: no progress lines at all (`everyBatch` included). */
  quiet?: boolean;
  stop?: AbortSignal;
}

/**
 * The error of an import that stopped after committing something, saying what the store now
 * holds and what to do: the batches before it are in the store (each batch is atomic), the rest
 * is not, and since import only fills an empty store the way on is a new directory.
 */
function stoppedAfter(err: unknown, dir: string, report: ImportReport, line: number): unknown {
  const what =
    `${report.values} values in ${report.batches} batches (the file's lines up to ${line}) were committed to ${dir} before it stopped, ` +
    `and its sequence raised to ${report.floor}; the store is partial: delete ${dir} and import the whole file again into a new directory`;
  if (err instanceof Interrupted) return new Interrupted(err.signal, what);
  if (err instanceof EngramError) return new EngramError(err.code, `${err.message}. ${what}`);
  return new Error(`${(err as Error).message ?? String(err)}. ${what}`);
}

/** The second pass: raises the sequence, then writes the values in atomic batches; a stop after the floor is raised says what was committed. */
export async function importExport(store: Engram, file: string, checked: Checked, sink: ImportSink): Promise<ImportReport> {
  assertEmpty(store);
  const report: ImportReport = { values: 0, retention: 0, expired: 0, floor: 0, batches: 0 };
  let committedLine = 1;
  let raised = false;
  try {
    report.floor = await store.raiseSequence(checked.floor);
    raised = true;
    await writeValues(store, file, report, sink, (n) => (committedLine = n));
  } catch (err) {
    throw raised ? stoppedAfter(err, store.dir, report, committedLine) : err;
  }
  return report;
}

/** Writes the value lines in batches; `committed(n)` learns the last line of each committed batch. */
async function writeValues(store: Engram, file: string, report: ImportReport, sink: ImportSink, committed: (line: number) => void): Promise<void> {
  let ops: BatchOp[] = [];
  let bytes = 0;
  let values = 0;
  const flush = async (line: number): Promise<void> => {
    sink.stop?.throwIfAborted();
    if (ops.length > 0) await store.batch(ops);
    if (ops.length > 0) report.batches += 1;
    report.values = values;
    committed(line);
    if (sink.everyBatch === true && sink.quiet !== true && ops.length > 0) sink.err.write(`engram import: batch ${report.batches} committed (${report.values} values)\n`);
    ops = [];
    bytes = 0;
  };
  let last = 1;
  for await (const [n, line] of linesOf(file)) {
    last = n;
    if (n === 1) continue;
    const d = parse(n, line);
    if (d["kind"] === "retention") report.retention += 1;
    if (d["kind"] !== "value") continue;
    const value = typeof d["value"] === "string" ? d["value"] : new Uint8Array(Buffer.from(d["base64"] as string, "base64"));
    const expiresAt = d["expiresAt"] as number | null;
    const ttlMs = expiresAt === null ? null : expiresAt - Date.now();
    if (ttlMs !== null && ttlMs <= 0) {
      report.expired += 1;
      continue;
    }
    ops.push({ op: "write", key: d["key"] as string, value, scope: d["scope"] as string, ttlMs });
    values += 1;
    bytes += typeof value === "string" ? value.length * 3 : value.length;
    if (ops.length >= BATCH_OPS_MAX || bytes >= BATCH_VALUE_BYTES_MAX) await flush(n);
    if (n % PROGRESS_EVERY === 0 && sink.quiet !== true) sink.err.write(`engram import: ${n} lines\n`);
  }
  await flush(last);
}
