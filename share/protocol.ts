/**
 * The wire protocol between a shared store's owner and its clients: frames of a 4-byte big-endian
 * length followed by one msgpackr-encoded message. msgpackr carries strings as strings and bytes
 * as bytes (bin), so values cross exactly as written. Every frame is bounded by a size limit that
 * the receiver checks on the length prefix alone, before buffering a single byte of the body, so
 * a 4 GiB length claim costs nothing but a closed connection.
 *
 * Messages (client → owner): hello, calls (N calls of one turn; call: one), ping. (owner → client):
 * welcome or refused, replies (N results of one turn), retry, bye, pong, held (the owner is alive
 * but not reading this connection now). A frame of calls is not a transaction: each call runs as
 * its own operation and gets its own result or error.
 */
import { createRequire } from "node:module";
import type { Packr } from "msgpackr";
import * as E from "../rules/errors.js";
import { assert } from "../rules/assert.js";

/**
 * Protocol version; an owner refuses a client speaking another one with a `refused` frame that
 * names both versions. 3: calls and replies travel N to a frame (calls, replies). 4: the hello
 * names the client's deadline, and an owner that is not reading a connection (flow control) sends
 * it `held` keep-alives, since it cannot read the client's pings then.
 */
export const PROTOCOL_VERSION = 4;
/**
 * Versions an owner serves as its own. Version 3 differs from 4 only in what 4 added — the hello's
 * `deadlineMs` and the `held` frame — and a version-3 client counts any frame as hearing from the
 * owner and ignores a message it does not know, so it is served (a rolling upgrade needs no
 * stop); its keep-alives come at the period for a client that names no deadline. A client refused
 * by an owner of a version in this set says hello again in that version (Link.connect).
 */
export const SERVED_VERSIONS: ReadonlySet<number> = new Set([3, PROTOCOL_VERSION]);
/** Most calls in one `calls` frame, and most results in one `replies` frame. */
export const CALLS_PER_FRAME_MAX = 256;
/**
 * A frame of calls (or replies) stops growing past about this many bytes of arguments (results):
 * small calls share frames, a large one travels alone, and no batch is built far past the limit
 * only to be refused.
 */
export const BATCH_BYTES_TARGET = 1024 * 1024;
/** Bytes of the length prefix. */
export const PREFIX_BYTES = 4;
/** Room in a frame beyond the largest value (key, scope, options, message fields). */
export const FRAME_OVERHEAD_BYTES = 1024 * 1024;
/** Smallest frame limit: a frame must always fit a default-sized (16 MiB) value. */
export const FRAME_BYTES_MIN = 16 * 1024 * 1024 + FRAME_OVERHEAD_BYTES;

/** The frame limit for an owner that accepts values up to `maxValueBytes`. */
export function frameBytesMaxFor(maxValueBytes: number): number {
  return Math.max(FRAME_BYTES_MIN, maxValueBytes + FRAME_OVERHEAD_BYTES);
}

/** A client's first message. */
export interface Hello {
  t: "hello";
  version: number;
  pid: number;
  /** The client's shareTimeoutMs: how long it lets the owner be silent (the owner's keep-alives come 4 times as often). */
  deadlineMs?: number;
}

/** The owner's answer to hello: who it is, its limits, and a first stats snapshot. */
export interface Welcome {
  t: "welcome";
  version: number;
  pid: number;
  frameBytesMax: number;
  maxValueBytes: number;
  stats: unknown;
}

/** The owner's answer to a hello of another protocol version: why, then a closed connection. */
export interface Refused {
  t: "refused";
  version: number;
  message: string;
}

/**
 * Oldest protocol versions a refusal must reach in their own words: versions 1 and 2 know no
 * `refused` frame (their open took it for a missing owner and failed STORE_LOCKED at its
 * deadline), but they attach on any `welcome` and settle a call on a `reply` frame.
 */
export const LEGACY_VERSIONS: ReadonlySet<number> = new Set([1, 2]);

/**
 * The outcome of one call in protocols 1 and 2 — sent by this owner only to refuse their calls
 * (ok false, a NotSupportedError naming both versions), never to run one.
 */
export interface LegacyReply {
  t: "reply";
  id: number;
  ok: false;
  error: WireError;
}

/** One API call. `args` are the call's arguments exactly as the caller gave them. */
export interface Call {
  t: "call";
  id: number;
  op: string;
  args: unknown[];
}

/**
 * The calls one client issued in one turn: call i has id `id + i`, operation `ops[i]` and
 * arguments `args[i]`. At most CALLS_PER_FRAME_MAX; each runs (and fails) on its own.
 */
export interface Calls {
  t: "calls";
  id: number;
  ops: string[];
  args: unknown[][];
}

/**
 * Results the owner settled in one turn, for one client, as flat triples: id, ok, and the
 * result (ok) or a WireError (not ok). At most CALLS_PER_FRAME_MAX triples.
 */
export interface Replies {
  t: "replies";
  r: unknown[];
}

/** The owner is closing and did not run this call: send it to the next owner. */
export interface Retry {
  t: "retry";
  id: number;
}

/** The owner is closing: every call it accepted has been answered. */
export interface Bye {
  t: "bye";
}

/** Are you there? Sent by a client whose calls have waited half their deadline in silence. */
export interface Ping {
  t: "ping";
}

/** The owner's answer to a ping, sent from its event loop at once. */
export interface Pong {
  t: "pong";
}

/**
 * The owner is alive but not reading this connection now (calls in flight at the limit, or replies
 * queued past their bound): sent when it stops reading and every quarter of the client's deadline
 * until it reads again, because the client's pings wait unread meanwhile.
 */
export interface Held {
  t: "held";
}

export type Message = Hello | Welcome | Refused | LegacyReply | Call | Calls | Replies | Retry | Bye | Ping | Pong | Held;

/**
 * Reply bytes held for a call whose result is small whatever it is asked (a write's version, a
 * forget's, a probe, or the error any call may end in: messages name at most a key and a scope).
 */
export const SMALL_REPLY_BYTES = 16 * 1024;
/** Reply bytes held per operation of a batch (its result is one WriteResult or ForgetResult each). */
const BATCH_REPLY_BYTES_PER_OP = 512;
/** Operations whose result is small whatever their arguments (SMALL_REPLY_BYTES each). */
const SMALL_REPLY_OPS: ReadonlySet<string> = new Set(["write", "forget", "forgetScope", "undelete", "probe", "flush", "raiseSequence", "listClose"]);
/**
 * The most bytes the reply of a call of `op` with `args` can take once framed: small for the
 * operations that answer a few numbers, one per operation of a batch, else a whole frame (a read,
 * a list or export page, stats, a report: a result larger than a frame becomes its caller's
 * LIMIT_EXCEEDED). The owner holds it for each call it runs (share/server.ts); a client of a
 * version-3 owner keeps the sum of its calls in flight under that owner's cut-off (share/link.ts).
 */
export function replyReserveOf(op: string, args: unknown[], frameBytesMax: number): number {
  const whole = frameBytesMax + SMALL_REPLY_BYTES;
  if (SMALL_REPLY_OPS.has(op)) return SMALL_REPLY_BYTES;
  const ops = args[0];
  if (op === "batch" && Array.isArray(ops)) return Math.min(whole, SMALL_REPLY_BYTES + ops.length * BATCH_REPLY_BYTES_PER_OP);
  return whole;
}

/** Depth to which roughBytes looks into arrays and objects (a batch's ops and their values). */
const ROUGH_DEPTH_MAX = 3;

/**
 * About how many bytes `v` takes in a message: strings at 3 bytes per UTF-16 unit (their UTF-8
 * bound), bytes at their length, containers as the sum of their first levels. Only decides where
 * a batch of calls or replies is cut; the frame limit itself is checked on the encoded bytes.
 */
export function roughBytes(v: unknown, depth = 0): number {
  if (typeof v === "string") return 5 + 3 * v.length;
  if (v instanceof Uint8Array) return 5 + v.byteLength;
  if (typeof v !== "object" || v === null || depth >= ROUGH_DEPTH_MAX) return 9;
  let n = 5;
  if (Array.isArray(v)) for (const x of v) n += roughBytes(x, depth + 1);
  else for (const k in v) n += 5 + k.length + roughBytes((v as Record<string, unknown>)[k], depth + 1);
  return n;
}

/** An error as it crosses the socket. */
export interface WireError {
  name: string;
  code: string;
  message: string;
  fields: Record<string, unknown>;
}

/** A peer broke the protocol (bad frame, bad message): its connection is closed. */
export class ProtocolError extends Error {}

/** The codec, made by codec() when a frame is first encoded or decoded in this process. */
let packr: Packr | null = null;

/**
 * The msgpackr codec, loaded on first use: an owner that no client ever reaches — a CLI command
 * holding its store alone, an MCP server nobody attaches to — never loads msgpackr and its native
 * extension (31–40 ms to import alone, 9–23 ms of a CLI command, thirty-sixth session). It is
 * loaded synchronously (msgpackr's CommonJS build, the same code as its ESM one), so that every
 * frame is still encoded and decoded in the turn that has it: the first costs the load once.
 */
function codec(): Packr {
  if (packr === null) {
    const { Packr: Codec } = createRequire(import.meta.url)("msgpackr") as typeof import("msgpackr");
    packr = new Codec({ useRecords: false, mapsAsObjects: true, moreTypes: false, bundleStrings: false });
  }
  return packr;
}

/** Encodes one message as a frame (length prefix + body); throws LimitExceededError past `frameBytesMax`. */
export function encodeFrame(message: Message, frameBytesMax: number): Buffer {
  const body = codec().pack(message);
  if (body.length > frameBytesMax) {
    throw new E.LimitExceededError(`a message of ${body.length} bytes exceeds the shared store's frame limit of ${frameBytesMax}; split the batch or write smaller values`);
  }
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, PREFIX_BYTES);
  return frame;
}

/** The socket a FrameWriter writes to (a net.Socket). */
export interface FrameSink {
  write(chunk: Buffer, done?: (err?: Error | null) => void): boolean;
  end(): void;
  readonly destroyed: boolean;
  /** Bytes handed to the socket and not yet taken by the kernel. */
  readonly writableLength: number;
}

/**
 * Queues frames for one socket and writes every frame queued in one turn as one buffer, in one
 * write: the replies of one commit group (owner) or the calls issued in one turn (client) cost
 * one trip through the socket's stream machinery and one syscall, not one each. The flush runs on
 * process.nextTick, so nothing waits for a later turn of the event loop.
 *
 * With `sliceBytes` (the owner), a turn's buffer larger than that is handed to the socket one
 * slice at a time, the next once the socket holds less than a slice: each slice the kernel takes
 * calls `onWritten`, so a reader that takes a 16 MiB reply slowly shows progress every slice (one
 * write of the whole buffer reports only its end, and a socket merges the writes queued behind a
 * busy one into one writev that reports only its end as well). The slices not yet handed over
 * count in queuedBytes.
 */
export class FrameWriter {
  private readonly socket: FrameSink;
  private readonly frameBytesMax: number;
  /** Called when a written chunk has been handed to the kernel (the peer is taking bytes: flow control). */
  private readonly onWritten: (() => void) | undefined;
  /** Largest piece handed to the socket at once (Infinity: a turn's buffer whole). */
  private readonly sliceBytes: () => number;
  private frames: Buffer[] = [];
  private bytes = 0;
  private scheduled = false;
  /** Slices flushed but not yet handed to the socket (it still holds a slice or more). */
  private slices: Buffer[] = [];
  private sliceQueued = 0;
  /** end() was called: the socket ends once the last slice is handed to it. */
  private ending = false;
  private ended = false;

  constructor(socket: FrameSink, frameBytesMax: number, onWritten?: () => void, sliceBytes: () => number = () => Infinity) {
    assert(frameBytesMax > 0, "frame limit must be positive");
    this.socket = socket;
    this.frameBytesMax = frameBytesMax;
    this.onWritten = onWritten;
    this.sliceBytes = sliceBytes;
  }

  /** Frames queued and not yet handed to the socket (slices waiting included). */
  get queuedBytes(): number {
    return this.bytes + this.sliceQueued;
  }

  /** Encodes `message` and queues it; throws LimitExceededError (nothing queued) past the frame limit. */
  send(message: Message): void {
    const frame = encodeFrame(message, this.frameBytesMax);
    this.frames.push(frame);
    this.bytes += frame.length;
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => this.flush());
  }

  /** Hands every queued frame to the socket as one buffer (in slices of at most sliceBytes, see the class). */
  flush(): void {
    this.scheduled = false;
    const frames = this.frames;
    const bytes = this.bytes;
    this.frames = [];
    this.bytes = 0;
    if (frames.length === 0 || this.socket.destroyed) return this.pump();
    const chunk = frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames, bytes);
    assert(chunk.length === bytes, "one write carries exactly the frames queued");
    if (this.onWritten === undefined) return void this.socket.write(chunk);
    const slice = this.sliceBytes();
    if (chunk.length <= slice) this.slices.push(chunk); // the usual case: no view to make
    else for (let at = 0; at < chunk.length; at += slice) this.slices.push(chunk.subarray(at, at + slice));
    this.sliceQueued += chunk.length;
    this.pump();
  }

  /** Ends the socket once every frame queued so far has been handed to it. */
  end(): void {
    this.ending = true;
    this.flush();
  }

  /** Hands slices to the socket while it holds less than one slice; ends it after the last one if asked. */
  private pump(): void {
    if (this.socket.destroyed) {
      this.slices = [];
      this.sliceQueued = 0;
      return;
    }
    const slice = this.sliceBytes();
    while (this.slices.length > 0 && this.socket.writableLength < slice) {
      const piece = this.slices.shift() as Buffer;
      this.sliceQueued -= piece.length;
      this.socket.write(piece, this.afterSlice);
    }
    if (!this.ending || this.ended || this.slices.length > 0) return;
    this.ended = true;
    this.socket.end();
  }

  /** A slice reached the kernel: hand over the next one, then tell the owner (progress). */
  private readonly afterSlice = (): void => {
    this.pump();
    this.onWritten?.();
  };
}

/** Decodes one frame body; throws ProtocolError on bytes that are not one msgpack value. */
export function decodeBody(body: Buffer): unknown {
  try {
    return codec().unpack(body);
  } catch (err) {
    throw new ProtocolError(`undecodable message: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * Splits a byte stream into frame bodies. push() returns the complete bodies so far; it throws
 * ProtocolError as soon as a length prefix claims more than the limit (nothing of it is buffered).
 */
export class FrameDecoder {
  private readonly frameBytesMax: number;
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(frameBytesMax: number) {
    assert(frameBytesMax > 0, "frame limit must be positive");
    this.frameBytesMax = frameBytesMax;
  }

  /** Bytes of an incomplete frame held now (0 between frames). */
  get pendingBytes(): number {
    return this.buffered;
  }

  /** Adds `chunk`; returns every body it completed, in order. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const bodies: Buffer[] = [];
    while (this.buffered >= PREFIX_BYTES) {
      const head = this.peek(PREFIX_BYTES);
      const bodyBytes = head.readUInt32BE(0);
      if (bodyBytes > this.frameBytesMax) throw new ProtocolError(`frame of ${bodyBytes} bytes exceeds the limit of ${this.frameBytesMax}`);
      if (this.buffered < PREFIX_BYTES + bodyBytes) break;
      const frame = this.take(PREFIX_BYTES + bodyBytes);
      bodies.push(frame.subarray(PREFIX_BYTES));
    }
    return bodies;
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    if (first.length >= n) return first.subarray(0, n);
    const all = Buffer.concat(this.chunks);
    this.chunks = [all];
    return all.subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    const frame = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    assert(frame.length === n, "a taken frame has the size its prefix claims");
    return frame;
  }
}

/** The error classes that cross the socket by name; anything else arrives as InternalError. */
const ERROR_CLASSES: Record<string, new (...args: never[]) => E.EngramError> = {
  EngramError: E.EngramError,
  InvalidArgumentError: E.InvalidArgumentError,
  VersionConflictError: E.VersionConflictError,
  TombstonedSlotError: E.TombstonedSlotError,
  HalfReclaimedSlotError: E.HalfReclaimedSlotError,
  ScopeErasedDuringRead: E.ScopeErasedDuringRead,
  StoreLockedError: E.StoreLockedError,
  StoreClosedError: E.StoreClosedError,
  CorruptionError: E.CorruptionError,
  LimitExceededError: E.LimitExceededError,
  IoError: E.IoError,
  OwnerLostError: E.OwnerLostError,
  NotSupportedError: E.NotSupportedError,
  InternalError: E.InternalError,
};

/** An error as it crosses: its class name, code, message and own fields (expected, actual, ...). */
export function errorToWire(err: unknown): WireError {
  if (err instanceof E.EngramError) {
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(err)) if (k !== "code" && k !== "name" && k !== "message") fields[k] = v;
    return { name: err.constructor.name, code: err.code, message: err.message, fields };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { name: "InternalError", code: E.ErrorCode.INTERNAL, message: `internal error: ${message}; please report it`, fields: {} };
}

/** Rebuilds an error of the same class on this side, so `instanceof VersionConflictError` holds. */
export function errorFromWire(w: WireError): E.EngramError {
  const cls = ERROR_CLASSES[w.name] ?? E.InternalError;
  const err = Object.create(cls.prototype) as Record<string, unknown>;
  Object.defineProperty(err, "message", { value: String(w.message), writable: true, configurable: true });
  Object.defineProperty(err, "stack", { value: `${w.name}: ${w.message}\n    at the shared store's owner`, writable: true, configurable: true });
  err["code"] = w.code;
  err["name"] = w.name in ERROR_CLASSES ? w.name : "InternalError";
  for (const [k, v] of Object.entries(w.fields)) err[k] = v;
  return err as unknown as E.EngramError;
}
