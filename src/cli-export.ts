/**
 * `engram export`: a store (or one scope's subtree) as JSON Lines on stdout, and the line format
 * that `engram import` reads back (docs/CLI-MCP.md "export / import").
 *
 * Lines, in order: one header, one line per slot in scope then key order — a live value (bytes
 * as base64) with its version, generation and expiry, or a retention record (state, version,
 * generation, tombstone sequence) with no value at all — and one end line carrying the counts and
 * the store's commit sequence at the end of the export. A file without its end line is a
 * truncated export, and import refuses it.
 */
import type { Engram } from "./engram.js";
import type { ExportEntry } from "./types.js";
import { errnoOf, OutputError, writeChunk } from "./cli-io.js";

/** The format version written in the header line. */
export const EXPORT_FORMAT = 1;
/** Progress goes to stderr every this many slots, for stores at least this large. */
const PROGRESS_EVERY = 10_000;
/** An interrupt is noticed within this many slots. */
const CHECK_EVERY = 1000;

/** The header line. */
export interface ExportHeader {
  engram: "export";
  format: number;
  scope: string;
  sequence: number;
}

/** A value line. */
export interface ValueLine {
  kind: "value";
  scope: string;
  key: string;
  version: number;
  generation: number;
  expiresAt: number | null;
  value?: string;
  base64?: string;
}

/** A retention line. */
export interface RetentionLine {
  kind: "retention";
  scope: string;
  key: string;
  state: string;
  version: number | null;
  generation: number | null;
  tombstoneSeq: number | null;
}

/** The end line. */
export interface EndLine {
  kind: "end";
  values: number;
  retention: number;
  sequence: number;
}

/** The line of one exported slot. */
export function lineOf(e: ExportEntry): ValueLine | RetentionLine {
  if (e.kind === "retention") {
    return { kind: "retention", scope: e.scope, key: e.key, state: e.state, version: e.version, generation: e.generation, tombstoneSeq: e.tombstoneSeq };
  }
  const base = { kind: "value" as const, scope: e.scope, key: e.key, version: e.version, generation: e.generation, expiresAt: e.expiresAt };
  return typeof e.value === "string" ? { ...base, value: e.value } : { ...base, base64: Buffer.from(e.value).toString("base64") };
}

/** Lines are written to the stream in chunks of about this many characters (one write call each). */
const CHUNK_CHARS = 64 * 1024;

/** Buffers lines and writes them in chunks, one at a time, each taken by the stream before the next. */
class LineWriter {
  #pending: string[] = [];
  #chars = 0;
  /** Lines handed to the stream so far. */
  written = 0;
  #queued = 0;
  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly where: string,
    private readonly lost: string,
    private readonly stop?: AbortSignal,
  ) {}

  /** Queues one JSON line; writes the chunk once it is large enough. */
  async line(doc: unknown): Promise<void> {
    const text = `${JSON.stringify(doc)}\n`;
    this.#pending.push(text);
    this.#chars += text.length;
    this.#queued += 1;
    if (this.#chars >= CHUNK_CHARS) await this.flush();
  }

  /**
   * Writes everything queued. A stream that fails (a reader that closed the pipe, a full disk) is
   * an OutputError saying how far the output got, never an uncaught 'error' event.
   */
  async flush(): Promise<void> {
    if (this.#pending.length === 0) return;
    const chunk = this.#pending.join("");
    this.#pending = [];
    this.#chars = 0;
    try {
      await writeChunk(this.out, chunk, this.stop);
    } catch (err) {
      if (err === this.stop?.reason) throw err;
      throw new OutputError(errnoOf(err), this.where, `the export stopped after ${this.written} lines written; ${this.lost}`);
    }
    this.written += this.#queued;
    this.#queued = 0;
  }
}

/**
 * Where the export goes and how it reports: `where` names the output in errors and `lost` says
 * what a failed write leaves there; `stop` aborts it (an interrupt).
 */
export interface ExportSink {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  where: string;
  lost: string;
  stop?: AbortSignal;
}

/** Exports `scope`'s subtree of `store` to `sink.out`; reports progress on `sink.err` for large stores. Returns the counts. */
export async function exportStore(store: Engram, scope: string, sink: ExportSink, progress?: boolean): Promise<EndLine> {
  const stats = store.stats();
  const header: ExportHeader = { engram: "export", format: EXPORT_FORMAT, scope, sequence: stats.sequence };
  const w = new LineWriter(sink.out, sink.where, sink.lost, sink.stop);
  await w.line(header);
  const show = progress ?? stats.slots >= PROGRESS_EVERY;
  let values = 0;
  let retention = 0;
  for await (const e of store.exportEntries({ scope })) {
    await w.line(lineOf(e));
    if (e.kind === "value") values += 1;
    else retention += 1;
    if ((values + retention) % CHECK_EVERY === 0) sink.stop?.throwIfAborted();
    if (show && (values + retention) % PROGRESS_EVERY === 0) sink.err.write(`engram export: ${values + retention} of about ${stats.slots} slots\n`);
  }
  sink.stop?.throwIfAborted();
  const end: EndLine = { kind: "end", values, retention, sequence: store.stats().sequence };
  await w.line(end);
  await w.flush();
  return end;
}
