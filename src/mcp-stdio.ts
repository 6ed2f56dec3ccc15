/**
 * The MCP server's stdio transport: the SDK's StdioServerTransport, but a request line over the
 * 10 MiB limit gets a JSON-RPC error reply and the connection stays open.
 *
 * The SDK's transport buffers a line whole and, past its 10 MiB read buffer, closes itself
 * without a word: the client's request never gets an answer and every later one fails. Here a
 * line is buffered only up to the limit; past it the line is discarded as it streams (nothing of
 * it kept but a scanner's few bytes of state), the scanner picking the request's top-level `id`
 * wherever it stands, and at its newline the request is answered with a JSON-RPC error (code
 * -32600, Invalid Request) whose `data` is engram's wire error `{ ok: false, error:
 * "LIMIT_EXCEEDED", message }`. An `id` that cannot be found or parsed is answered with id null,
 * as JSON-RPC 2.0 says; a notification or a response (no id to answer) is only logged. A line
 * within the limit that is not JSON, or no JSON-RPC request, is answered too (-32700 Parse error,
 * -32600 Invalid Request: malformedReply), where the SDK's transport only logged it.
 */
import process from "node:process";
import { deserializeMessage, serializeMessage, STDIO_DEFAULT_MAX_BUFFER_SIZE } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { InvalidArgumentError, LimitExceededError } from "../rules/errors.js";
import { toWireError } from "./tools.js";

/** Most bytes of one message line (the SDK's own stdio limit, 10 MiB). */
export const MCP_LINE_BYTES_MAX = STDIO_DEFAULT_MAX_BUFFER_SIZE;

/** JSON-RPC 2.0's code for a request that is not a valid Request object. */
const INVALID_REQUEST = -32600;
/** Most bytes kept of a top-level key or of the `id` value while scanning an oversized line. */
const KEY_BYTES_KEPT = 16;
const ID_BYTES_KEPT = 256;

/** What the scan of an oversized line found. */
export interface OversizedLine {
  /** The line's length in bytes, without its newline. */
  bytes: number;
  /** The top-level `id` when it was found and is a string or a number; else null. */
  id: string | number | null;
  /** "request" (a method and an id), "notification" (a method, no id), "response" (a result or an error, no method), or "unknown" (not a well-formed object: answered with id null). */
  kind: "request" | "notification" | "response" | "unknown";
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** True for JSON's whitespace bytes. */
function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

/**
 * Scans a JSON text fed in pieces for its top-level members, keeping only their names and the raw
 * text of `id` (at most ID_BYTES_KEPT bytes): memory stays constant however long the line is.
 * UTF-8 continuation bytes are ≥ 0x80, so no byte of a multi-byte character is taken for JSON syntax.
 */
export class MemberScanner {
  #depth = 0;
  #started = false;
  #broken = false;
  #closed = false;
  #inString = false;
  #escape = false;
  #expectKey = false;
  #key: number[] | null = null;
  #keyTooLong = false;
  #member = "";
  #id: number[] | null = null;
  #idTooLong = false;
  /** The raw text of the top-level `id` once its value ended. */
  #idText: string | undefined;
  /** Every top-level member name seen (of at most KEY_BYTES_KEPT bytes). */
  readonly #names = new Set<string>();

  /** Feeds the next piece of the line. */
  feed(piece: Uint8Array): void {
    for (let i = 0; i < piece.length && !this.#broken; i += 1) this.#byte(piece[i] as number);
  }

  /** One byte outside any string (or hands it to #stringByte): tracks depth, member names and the `id` value. */
  #byte(b: number): void {
    if (this.#inString) return this.#stringByte(b);
    if (isSpace(b)) return;
    if (this.#closed || (!this.#started && b !== 0x7b)) {
      this.#broken = true;
      return;
    }
    this.#started = true;
    if (this.#depth === 1 && this.#id !== null && (b === 0x2c || b === 0x7d)) this.#endId();
    if (b === QUOTE) {
      this.#inString = true;
      if (this.#depth === 1 && this.#expectKey) {
        this.#key = [];
        this.#keyTooLong = false;
        this.#expectKey = false;
        return;
      }
    } else if (b === 0x7b || b === 0x5b) {
      this.#depth += 1;
      if (this.#depth === 1) this.#expectKey = true;
    } else if (b === 0x7d || b === 0x5d) {
      this.#depth -= 1;
      if (this.#depth === 0) this.#closed = true;
      if (this.#depth < 0) this.#broken = true;
    } else if (b === 0x2c && this.#depth === 1) {
      this.#expectKey = true;
      return;
    } else if (b === 0x3a && this.#depth === 1) {
      if (this.#member === "id") this.#id = [];
      return;
    }
    this.#keep(b);
  }

  /** One byte inside a string: ends it at an unescaped quote; keeps it for a member name or the `id`. */
  #stringByte(b: number): void {
    if (this.#escape) this.#escape = false;
    else if (b === BACKSLASH) this.#escape = true;
    else if (b === QUOTE) {
      this.#inString = false;
      if (this.#key !== null) {
        this.#member = this.#keyTooLong ? "" : Buffer.from(this.#key).toString("latin1");
        this.#names.add(this.#member);
        this.#key = null;
        return;
      }
    }
    if (this.#key !== null) {
      if (this.#key.length < KEY_BYTES_KEPT) this.#key.push(b);
      else this.#keyTooLong = true;
      return;
    }
    this.#keep(b);
  }

  /** Keeps a byte of the `id` value being read, if one is. */
  #keep(b: number): void {
    if (this.#id === null) return;
    if (this.#id.length < ID_BYTES_KEPT) this.#id.push(b);
    else this.#idTooLong = true;
  }

  /** Ends the `id` value being read: its raw text ("" when too long to be an id). */
  #endId(): void {
    this.#idText = this.#idTooLong || this.#id === null ? "" : Buffer.from(this.#id).toString("utf8");
    this.#id = null;
  }

  /** The id found (a string or a finite number), or null. */
  #parsedId(): string | number | null {
    if (this.#idText === undefined) return null;
    try {
      const v: unknown = JSON.parse(this.#idText);
      return typeof v === "string" || (typeof v === "number" && Number.isFinite(v)) ? v : null;
    } catch {
      return null;
    }
  }

  /** What was found, once the line has ended (`bytes` its length). */
  result(bytes: number): OversizedLine {
    const id = this.#parsedId();
    const whole = this.#closed && !this.#broken;
    const has = (n: string): boolean => this.#names.has(n);
    let kind: OversizedLine["kind"] = "unknown";
    if (whole && has("method")) kind = has("id") ? "request" : "notification";
    else if (whole && (has("result") || has("error"))) kind = "response";
    return { bytes, id, kind };
  }
}

/**
 * Splits a byte stream into lines of at most `maxLineBytes` bytes (without the newline). A line
 * that grows past it is no longer kept: its bytes go through a MemberScanner as they arrive and
 * `onOversized` gets the scan at its newline. Holds at most `maxLineBytes` bytes at any time.
 */
export class LineSplitter {
  #parts: Uint8Array[] = [];
  #size = 0;
  #scanner: MemberScanner | null = null;
  #scanned = 0;

  constructor(
    readonly maxLineBytes: number,
    readonly onLine: (line: Buffer) => void,
    readonly onOversized: (line: OversizedLine) => void,
  ) {}

  /** Bytes held now (of the line not yet ended): never more than maxLineBytes. */
  get bufferedBytes(): number {
    return this.#size;
  }

  /** Feeds the next chunk of the stream; calls onLine / onOversized for every line it ends. */
  push(chunk: Uint8Array): void {
    let from = 0;
    while (from < chunk.length) {
      const nl = chunk.indexOf(0x0a, from);
      this.#take(chunk.subarray(from, nl === -1 ? chunk.length : nl));
      if (nl === -1) return;
      this.#endLine();
      from = nl + 1;
    }
  }

  /** Drops the line not yet ended. */
  clear(): void {
    this.#parts = [];
    this.#size = 0;
    this.#scanner = null;
    this.#scanned = 0;
  }

  /** Adds a piece of the current line: kept while the line fits, else scanned and dropped. */
  #take(piece: Uint8Array): void {
    if (piece.length === 0) return;
    if (this.#scanner === null && this.#size + piece.length <= this.maxLineBytes) {
      this.#parts.push(piece);
      this.#size += piece.length;
      return;
    }
    if (this.#scanner === null) {
      // Past the limit: scan what was kept, then let it go.
      this.#scanner = new MemberScanner();
      for (const p of this.#parts) this.#scanner.feed(p);
      this.#scanned = this.#size;
      this.#parts = [];
      this.#size = 0;
    }
    this.#scanner.feed(piece);
    this.#scanned += piece.length;
  }

  /** Ends the current line at its newline: delivers it whole, or reports its scan. */
  #endLine(): void {
    const scanner = this.#scanner;
    const parts = this.#parts;
    const scanned = this.#scanned;
    this.clear();
    if (scanner !== null) this.onOversized(scanner.result(scanned));
    else this.onLine(Buffer.concat(parts));
  }
}

/** The reply to an oversized line: a JSON-RPC error carrying engram's wire error as `data`. */
export function oversizedReply(line: OversizedLine, maxLineBytes: number): string {
  const err = new LimitExceededError(
    `MCP request of ${line.bytes} bytes is over the ${maxLineBytes}-byte (10 MiB) limit of one stdio message and was not run; ` +
      "send smaller values (a value travels as JSON text or base64) or write large values with the API or `engram put`",
  );
  const data = toWireError(err);
  return `${JSON.stringify({ jsonrpc: "2.0", id: line.id, error: { code: INVALID_REQUEST, message: err.message, data } })}\n`;
}

/** JSON-RPC 2.0's code for a line that is not JSON. */
const PARSE_ERROR = -32700;

/**
 * The reply to a line of at most the limit that is no JSON-RPC message, or null for none: text
 * that is not JSON gets Parse error (-32700) with id null; JSON that is no valid message gets
 * Invalid Request (-32600) with its top-level id when that is a string or number, else id null.
 * A blank line, and what looks like a notification or a response (a method and no id; a result or
 * an error and no method, whatever its id), get nothing: nobody waits for their answer. `data` is engram's wire
 * error (INVALID_ARGUMENT), its message saying what to send instead.
 */
export function malformedReply(text: string): string | null {
  if (text.trim() === "") return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return errorLine(null, PARSE_ERROR, `MCP message line is not JSON (${(err as Error).message}); send one JSON-RPC 2.0 message per line`);
  }
  const obj = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  const notification = obj !== null && "method" in obj && !("id" in obj);
  const response = obj !== null && !("method" in obj) && ("result" in obj || "error" in obj);
  if (notification || response) return null;
  const id = obj?.["id"];
  const answerId = typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
  return errorLine(answerId, INVALID_REQUEST, "MCP message line is JSON but no JSON-RPC 2.0 request (it needs jsonrpc \"2.0\", a string method and a string or number id); batches are not supported");
}

/** One JSON-RPC error line whose `data` is engram's INVALID_ARGUMENT wire error. */
function errorLine(id: string | number | null, code: number, message: string): string {
  const data = toWireError(new InvalidArgumentError(message));
  return `${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message, data } })}\n`;
}

/**
 * A Transport on stdin/stdout as the SDK's StdioServerTransport (same framing, same
 * deserialization), with the line limit answered instead of closing the connection.
 */
export class LimitedStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Called for every oversized line, answered or not (the server logs it). */
  onoversized?: (line: OversizedLine) => void;
  readonly #stdin: NodeJS.ReadableStream;
  readonly #stdout: NodeJS.WritableStream;
  readonly #lines: LineSplitter;
  #started = false;

  constructor(stdin: NodeJS.ReadableStream = process.stdin, stdout: NodeJS.WritableStream = process.stdout, maxLineBytes = MCP_LINE_BYTES_MAX) {
    this.#stdin = stdin;
    this.#stdout = stdout;
    this.#lines = new LineSplitter(maxLineBytes, (line) => this.#message(line), (line) => this.#oversized(line));
  }

  readonly #ondata = (chunk: Buffer): void => this.#lines.push(chunk);
  readonly #onerror = (error: Error): void => this.onerror?.(error);

  /** Starts reading stdin (once: connect() calls it). */
  async start(): Promise<void> {
    if (this.#started) throw new Error("LimitedStdioServerTransport already started");
    this.#started = true;
    this.#stdin.on("data", this.#ondata);
    this.#stdin.on("error", this.#onerror);
  }

  /**
   * Parses one line as the SDK does and hands it on. A line that is no JSON-RPC message goes to
   * onerror, as there, and is answered as JSON-RPC 2.0 asks (malformedReply), where the SDK's
   * transport left the client waiting for ever; a handler that throws goes to onerror.
   */
  #message(line: Buffer): void {
    const text = line.toString("utf8").replace(/\r$/, "");
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(text);
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
      const reply = malformedReply(text);
      if (reply !== null) this.#stdout.write(reply);
      return;
    }
    try {
      this.onmessage?.(message);
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Answers an oversized request (id null when it had none readable); notifications and responses get no reply. */
  #oversized(line: OversizedLine): void {
    this.onoversized?.(line);
    if (line.kind === "notification" || line.kind === "response") return;
    this.#stdout.write(oversizedReply(line, this.#lines.maxLineBytes));
  }

  /** Stops reading stdin and drops any partial line; calls onclose. */
  async close(): Promise<void> {
    this.#stdin.off("data", this.#ondata);
    this.#stdin.off("error", this.#onerror);
    if (this.#stdin.listenerCount("data") === 0) this.#stdin.pause();
    this.#lines.clear();
    this.onclose?.();
  }

  /** Writes one message line; resolves once stdout took it (after "drain" when it was full). */
  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stdout.write(serializeMessage(message))) resolve();
      else this.#stdout.once("drain", resolve);
    });
  }
}
