/**
 * The owner's side of a shared store: a Unix socket server that turns each client call into the
 * same call on the owner's own Store and answers only after that call resolved — so an
 * acknowledged client call is an acknowledged owner call (same durability, same group commits).
 *
 * Every connection is bounded: frames by the frame limit (checked on the length prefix), calls in
 * flight (counted per call: past the limit the calls already read wait at the owner and the socket
 * stops being read — TCP-style backpressure), the reply bytes queued for it (above the bound the
 * owner takes no new call from it until they drain), the reply bytes it holds — queued, the most
 * each running call's reply can take (counted before the call starts), and an answered call's
 * reply at its size — per connection and for all of them, exactly, list cursors, and the time a half-sent frame, a missing hello or a reader that
 * takes no slice of its replies may linger. While the owner itself is not
 * reading a connection it sends `held` frames, so the client knows the owner is alive (it cannot
 * read the client's pings then). A peer that breaks any rule loses its connection; nobody else notices.
 * Only the operations of the API can be called, with arguments the Store checks as its own.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import { InvalidArgumentError, LimitExceededError, NotSupportedError } from "../rules/errors.js";
import type { Backend, ListEntry, StoreStats } from "../rules/types.js";
import { assert } from "../rules/assert.js";
import { KEY_BYTES_MAX } from "../rules/limits.js";
import {
  BATCH_BYTES_TARGET,
  CALLS_PER_FRAME_MAX,
  decodeBody,
  errorToWire,
  FrameDecoder,
  FrameWriter,
  LEGACY_VERSIONS,
  ProtocolError,
  PROTOCOL_VERSION,
  replyReserveOf,
  roughBytes,
  SERVED_VERSIONS,
  SMALL_REPLY_BYTES,
  type Message,
  type WireError,
} from "./protocol.js";

/**
 * Calls one connection may have in flight (started, not answered). Counted per call: calls read
 * past it wait at the owner, and the socket is not read again until half of them are answered.
 */
export const CALLS_IN_FLIGHT_MAX = 256;
/**
 * Keep-alive period towards a client whose hello names no deadline (one of protocol 3, before
 * `deadlineMs`): short enough for any deadline from 100 ms (its pings after half of it go unread
 * while the owner pauses), and sent only while paused. Until the fifty-fifth session such a
 * client was refused, and the period was 1 s.
 */
export const KEEP_ALIVE_MS_DEFAULT = 25;
/** Bounds of the keep-alive period (a quarter of the client's deadline, as its own watchdog's period). */
const KEEP_ALIVE_MS_MIN = 5;
const KEEP_ALIVE_MS_MAX = 1000;
/**
 * How long one stats() snapshot answers every client: stats() walks the whole keydir, so N
 * clients asking must not cost the owner N walks.
 */
export const STATS_CACHE_MS = 250;
/** Connections served at once (each may buffer up to one frame): more are refused at accept. */
export const CONNECTIONS_MAX = 256;
/** Open list cursors per connection. */
export const CURSORS_MAX = 16;
/** Entries per list page (keys are at most 1 KiB: a page stays far below the frame limit). */
export const LIST_PAGE_ENTRIES = 512;
/** A cursor page stops growing past this many bytes (export pages carry values; one value may exceed it). */
export const PAGE_BYTES_MAX = 4 * 1024 * 1024;
/** Bytes counted per page entry besides its value (names, numbers, framing). */
const PAGE_ENTRY_OVERHEAD_BYTES = 128;
/** How long a closing owner lets its bye and last replies drain to a client before cutting it off. */
export const CLOSE_LINGER_MS = 1000;
/**
 * Calls that go through the commit log. The owner runs them in the check phase right after the
 * poll phase that read them (setImmediate), not at once: the calls that several clients' sockets
 * delivered in one turn of the event loop then reach the commit log together and share one
 * commit group — run at once, the first connection's calls would start a group (and an fsync) of
 * their own, the others' waiting for the next one. Reads run at once (they do not commit).
 */
const COMMIT_OPS: ReadonlySet<string> = new Set(["write", "forget", "forgetScope", "undelete", "batch"]);

/** Most arguments of a call (write has three). */
const ARGS_MAX = 4;

/**
 * Largest piece of a connection's reply bytes handed to its socket at once: each piece the kernel
 * takes is progress the write stall timer sees, so a reader slowly taking a 16 MiB reply is not
 * taken for one that takes nothing (see FrameWriter).
 */
export const REPLY_SLICE_BYTES = 1024 * 1024;
/**
 * The default bound of reply bytes one connection holds (ServerLimits.replyBytesHeldMax), in
 * frame limits: its queued replies up to writeBufferBytesMax (2 frames) and two results of up to
 * a frame each being computed — about 68 MiB with the default 17 MiB frame.
 */
export const REPLY_HELD_FRAMES = 4;
/** The default bound of reply bytes all connections hold together (ServerLimits.ownerReplyBytesHeldMax), in per-connection bounds. */
export const OWNER_REPLY_HELD_CONNECTIONS = 4;
/**
 * Operations whose reply is as large as the values they return (a read, a list or export page),
 * and whose result is flat enough for roughBytes to bound its encoded size from above (strings,
 * bytes and numbers at most three levels deep). Each holds a whole frame while it runs — the most
 * its reply can take, whatever the store holds — and, once answered, only its reply's size
 * (SettledReply): a small read gives its frame back in the same turn, so the next one starts at
 * once and a turn's small reads still leave in one `replies` frame.
 */
const MEASURED_REPLY_OPS: ReadonlySet<string> = new Set(["read", "listOpen", "listNext", "exportOpen"]);
/** Bytes counted per answered reply besides its result's roughBytes: its id, its ok flag, its share of the frame's envelope. */
const REPLY_ENVELOPE_BYTES = 64;

/** One accepted call: its id, its checked operation, its arguments, and the reply bytes held for it while it runs. */
interface Call {
  id: number;
  op: string;
  args: unknown[];
  reserve: number;
}

/** A call's checked operation name; throws ProtocolError for anything outside the API. */
function opOf(op: unknown): string {
  if (typeof op !== "string" || !Object.hasOwn(OPS, op)) throw new ProtocolError(`no such operation ${JSON.stringify(op)}`);
  return op;
}

/** A call's checked argument list. */
function argsOf(args: unknown): unknown[] {
  if (!Array.isArray(args) || args.length > ARGS_MAX) throw new ProtocolError(`call args must be an array of at most ${ARGS_MAX}`);
  return args;
}

/** A call's checked id (the first of a `calls` frame: the frame's last one must be safe too). */
function idOf(id: unknown, count: number): number {
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0 || !Number.isSafeInteger(id + count)) throw new ProtocolError("call id must be a non-negative integer");
  return id;
}

/**
 * The checked calls of one `calls` frame, all of them before any runs (a frame with one bad call
 * runs none): 1 to CALLS_PER_FRAME_MAX calls, ops and args of the same length.
 */
function callsOf(msg: Record<string, unknown>): Call[] {
  const ops = msg["ops"];
  const args = msg["args"];
  if (!Array.isArray(ops) || !Array.isArray(args) || ops.length !== args.length || ops.length === 0) throw new ProtocolError("a calls frame holds ops and args of one non-zero length");
  if (ops.length > CALLS_PER_FRAME_MAX) throw new ProtocolError(`a calls frame of ${ops.length} calls exceeds the limit of ${CALLS_PER_FRAME_MAX}`);
  const first = idOf(msg["id"], ops.length);
  const calls: Call[] = new Array<Call>(ops.length);
  for (let i = 0; i < ops.length; i++) calls[i] = { id: first + i, op: opOf(ops[i]), args: argsOf(args[i]), reserve: 0 };
  return calls;
}

/** The keep-alive period for a client whose hello names `deadlineMs` (its shareTimeoutMs): a quarter of it, bounded. */
function keepAliveMsOf(deadlineMs: unknown): number {
  if (typeof deadlineMs !== "number" || !Number.isFinite(deadlineMs) || deadlineMs <= 0) return unsafeShareFlowForTests.slowKeepAliveV3 ? 1000 : KEEP_ALIVE_MS_DEFAULT;
  return Math.min(KEEP_ALIVE_MS_MAX, Math.max(KEEP_ALIVE_MS_MIN, Math.floor(deadlineMs / 4)));
}

/** Why a client of protocol `version` cannot be served, in words that say what to do. */
function versionMessage(version: number): string {
  return `the owner (pid ${process.pid}) speaks share protocol version ${PROTOCOL_VERSION}, this client ${version}: run the same engram version in every process that shares the store`;
}

/** Tunables of a server (tests shorten the timeouts). */
export interface ServerLimits {
  frameBytesMax: number;
  maxValueBytes: number;
  /**
   * Reply bytes queued for one client (not yet handed to the kernel) above which the owner takes
   * no new call from it — it stops reading its socket and starts none of the calls waiting — until
   * they drain to half. Never a reason to cut a client off: only a lack of progress is.
   */
  writeBufferBytesMax: number;
  /**
   * Reply bytes one connection may hold at once: its queued replies, for each call running the
   * most its reply can take (replyReserveOf: a frame for a read or a page, 16 KiB for a write),
   * and for each call answered and not yet framed its reply's size (a read or page) or what was
   * held for it. A call starts only if that fits, so the bound is exact whatever the client does
   * and however the replies' sizes jump. At least a frame's reply (a drained connection can always
   * start any call, so a client that reads gets every answer).
   */
  replyBytesHeldMax: number;
  /**
   * Reply bytes all connections may hold together, counted the same way (at least
   * replyBytesHeldMax). While a call waits for room here that other connections' queued replies
   * hold (it would fit were they taken), a connection whose queued replies take no byte for
   * stallMs is cut off: a client that does not read cannot keep the others waiting. A call that
   * waits only for calls running elsewhere starves nobody: no one is cut off for it.
   */
  ownerReplyBytesHeldMax: number;
  /**
   * How long a half-sent frame or a missing hello may linger, and how long a client whose replies
   * are above writeBufferBytesMax (or queued while others wait for room) may take no byte of them
   * (then it does not read its replies). Progress is a slice (REPLY_SLICE_BYTES) reaching the kernel.
   */
  stallMs: number;
  /** unsafe.shareAckBeforeCommit: answer writes when queued (the failure the ack rule prevents). */
  unsafeAckBeforeCommit: boolean;
  /**
   * Test-only twin switch (set on a live server's limits): a closing owner's bye leaves ahead of
   * the replies still waiting for their frame — the failure the reply-before-bye rule prevents
   * (the client resends calls that ran). Never set outside test/share-batched-frames.test.ts.
   */
  unsafeByeBeforeReplies?: boolean;
  /**
   * Test-only twin switch: a protocol-1/2 hello gets the `refused` frame it cannot read (what
   * such a client met before: STORE_LOCKED at its deadline). Never set outside
   * test/share-old-protocol.test.ts.
   */
  unsafeRefuseLegacyByFrame?: boolean;
  /**
   * Longest a commit call is held to gather a fuller commit group (0: never held). See
   * ShareServer.shouldHold and docs/SHARING.md "Gathering commit groups".
   */
  gatherMs: number;
}

/** Operations queued in the commit log at most while its next group is held: past this many it starts at once. */
export const GATHER_CALLS_MAX = 1024;
/** Longest the next group is held at all (behind a slow fsync, or waiting for clients): then it starts. */
export const GATHER_BUSY_MS_MAX = 100;

/** Frames and calls a server has taken in, and reply frames it sent (tests and the bench read them). */
export interface ServerCounts {
  callFrames: number;
  calls: number;
  replyFrames: number;
  /** The most calls one connection had in flight at once (never above CALLS_IN_FLIGHT_MAX). */
  inFlightMax: number;
  /** `held` frames sent (keep-alives of connections the owner was not reading). */
  heldFrames: number;
  /** The most reply bytes one connection held at once, queued and held for calls running (never above replyBytesHeldMax). */
  replyBytesHeldMax: number;
  /** The most reply bytes one connection had queued at once (encoded or settled, not yet taken by the kernel). */
  replyBytesQueuedMax: number;
  /** The most reply bytes all connections held together (never above ownerReplyBytesHeldMax). */
  ownerReplyBytesHeldMax: number;
  /** Replies larger than the bytes held for them while their call ran (0 but under the twin `optimisticReserve`). */
  repliesOverReserve: number;
}

/** A backend that can say which sequence its last queued write took (the engine's Store). */
export type ServedStore = Backend & {
  readonly sequence?: number;
  readonly log?: { readonly queued: { ops: number }; readonly committed: { groups: number }; readonly writing: boolean; holdStarts(until: Promise<void>): void };
};

/** The operations a client may call, each as the owner's own call. */
type Op = (store: ServedStore, args: unknown[], conn: Connection) => unknown;
const OPS: Record<string, Op> = {
  write: (s, a) => s.write(a[0] as string, a[1] as string, a[2] as never),
  read: (s, a) => s.read(a[0] as string, a[1] as never),
  forget: (s, a) => s.forget(a[0] as string, a[1] as never),
  forgetScope: (s, a) => s.forgetScope(a[0] as string, a[1] as never),
  undelete: (s, a) => s.undelete(a[0] as string, a[1] as never),
  probe: (s, a) => s.probe(a[0] as string, a[1] as never),
  batch: (s, a) => s.batch(a[0] as never),
  compact: (s, a) => s.compact(a[0] as never),
  gc: (s) => s.gc(),
  stats: (_s, a, c) => c.stats(a[0] === true),
  verify: (s) => s.verify(),
  flush: (s) => s.flush(),
  listOpen: (s, a, c) => c.cursorOpen(keysAfter(s.list(a[0] as never), afterOf(a[1]))),
  exportOpen: (s, a, c) => c.cursorOpen(exportOf(s)(a[0] as never)),
  listScopes: (s) => callOptional(s.listScopes, s, []),
  listSlots: (s, a) => callOptional(s.listSlots, s, [a[0], a[1]]),
  backup: (s, a) => callOptional(s.backup, s, [a[0]]),
  raiseSequence: (s, a) => callOptional(s.raiseSequence, s, [a[0]]),
  listNext: (_s, a, c) => c.listNext(a[0]),
  listClose: (_s, a, c) => c.listClose(a[0]),
};

/** The `after` argument of listOpen (a reopened list: keys after the last one its client returned); undefined: none. */
function afterOf(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "string" || Buffer.byteLength(v) > KEY_BYTES_MAX) throw new InvalidArgumentError("a list's resume key must be a string no longer than a key");
  return v;
}

/** The entries of `it` whose key sorts after `after` (all of them when null). The owner's list is in key order, each key once. */
async function* keysAfter(it: AsyncIterable<ListEntry>, after: string | null): AsyncGenerator<ListEntry> {
  for await (const e of it) if (after === null || e.key > after) yield e;
}

/** Calls an optional Backend method the owner's store may lack (NOT_SUPPORTED then, like Engram's own check). */
function callOptional(fn: ((...args: never[]) => unknown) | undefined, store: ServedStore, args: unknown[]): unknown {
  if (fn === undefined) throw new NotSupportedError("the owner's store does not support this call");
  return (fn as (...a: unknown[]) => unknown).apply(store, args);
}

/** The owner's exportEntries, or a refusal when its store has none. */
function exportOf(store: ServedStore): (options: unknown) => AsyncIterable<unknown> {
  const fn = store.exportEntries;
  if (fn === undefined) throw new NotSupportedError("the owner's store does not support export");
  return (options) => fn.call(store, options as never);
}

/** Rough bytes an entry adds to a page: its value's, if any, plus a fixed overhead. */
function entryBytes(entry: unknown): number {
  const value = (entry as { value?: unknown }).value;
  const valueBytes = typeof value === "string" ? value.length * 3 : value instanceof Uint8Array ? value.length : 0;
  return valueBytes + PAGE_ENTRY_OVERHEAD_BYTES;
}

/**
 * An open list or export iteration of one connection: the iterator, and the entry a page left
 * for the next one (`held`) because it would have carried the page past PAGE_BYTES_MAX.
 */
interface Cursor {
  it: AsyncIterator<unknown>;
  held: { value: unknown } | null;
}

/** One client connection. */
class Connection {
  readonly socket: net.Socket;
  private readonly server: ShareServer;
  private readonly decoder: FrameDecoder;
  private greeted = false;
  /** Refused at hello (another protocol version): the connection is closing, its bytes are ignored. */
  private refused = false;
  /**
   * The reason every call of a protocol-1/2 client is refused (it was welcomed so that it hears
   * the reason on its first call instead of waiting out its deadline); null: a current client.
   */
  private legacyRefusal: WireError | null = null;
  private inFlight = 0;
  /**
   * Calls read past CALLS_IN_FLIGHT_MAX (or while the replies are over their bound), in order, not
   * yet started. Bounded without a count of its own: the socket is paused as soon as calls in
   * flight and waiting reach the limit, so only the rest of the read being decoded lands here.
   */
  private readonly waiting: Call[] = [];
  /** The owner is not reading this socket (calls in flight or reply bytes over their bounds). */
  private paused = false;
  /** Sends `held` every keepAliveMs while paused: the client's pings are not read meanwhile. */
  private keepAlive: NodeJS.Timeout | null = null;
  private keepAliveMs = KEEP_ALIVE_MS_DEFAULT;
  /** Armed while the reply bytes are over their bound; restarted whenever a chunk reaches the kernel. */
  private writeStall: NodeJS.Timeout | null = null;
  /** The bye is queued: nothing may follow it (the client reads nothing after a bye). */
  private byeSent = false;
  /** Calls of this connection accepted and waiting for the server's next deferred run. */
  private deferred = 0;
  /**
   * Answered down to nothing in flight by a commit call, and silent since: a writing client in a
   * loop sends again within a round trip, so the server may wait that long for it (gathering; a
   * client that does not come back within gatherMs loses this mark until it calls again).
   */
  expectedBack = false;
  private readonly writer: FrameWriter;
  /** Results settled this turn and not yet framed: flat triples of id, ok, result or WireError. */
  private replies: unknown[] = [];
  private replyBytes = 0;
  /** Reply bytes held for the calls running: the most each one's reply can take (replyReserveOf). */
  private reserved = 0;
  /** Reply bytes held for the calls answered into `replies` and not yet framed (ShareServer.answered; framed, their exact bytes count instead). */
  private unframedHeld = 0;
  /** This connection's part of the server's heldBytes, as last noted (noteHeld). */
  private heldNoted = 0;
  /** This connection's part of the server's queuedBytes, as last noted (noteHeld). */
  queuedNoted = 0;
  private closed = false;
  private repliesScheduled = false;
  private lastSendError: unknown = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private readonly cursors = new Map<number, Cursor>();
  private nextCursor = 1;

  constructor(socket: net.Socket, server: ShareServer) {
    this.socket = socket;
    this.server = server;
    this.decoder = new FrameDecoder(server.limits.frameBytesMax);
    this.writer = new FrameWriter(socket, server.limits.frameBytesMax, this.onWritten, replySliceBytes);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => undefined); // a reset peer: 'close' follows
    socket.on("close", () => this.onClose());
    this.armStall();
  }

  /** Calls accepted and not yet answered. */
  get pending(): number {
    return this.inFlight;
  }

  private onData(chunk: Buffer): void {
    if (this.refused) return;
    try {
      for (const body of this.decoder.push(chunk)) this.onMessage(decodeBody(body));
      this.armStall();
    } catch (err) {
      this.kill(err instanceof Error ? err.message : String(err));
    }
  }

  /**
   * A half frame (or no hello) may linger only `stallMs`: then the peer is cut off. Not while the
   * owner itself paused the socket: the rest of the frame is in the socket, unread by the owner.
   */
  private armStall(): void {
    if (this.stallTimer !== null) clearTimeout(this.stallTimer);
    this.stallTimer = null;
    if (this.greeted && this.decoder.pendingBytes === 0) return;
    if (this.paused && !unsafeShareFlowForTests.stallWhilePaused) return;
    this.stallTimer = setTimeout(() => this.kill("stalled mid-frame or never said hello"), this.server.limits.stallMs);
    this.stallTimer.unref();
  }

  private onMessage(m: unknown): void {
    if (typeof m !== "object" || m === null) throw new ProtocolError("a message must be a map");
    const msg = m as Record<string, unknown>;
    if (!this.greeted) return this.onHello(msg);
    if (msg["t"] === "ping") return this.send({ t: "pong" }); // liveness: answered even while closing
    if (this.legacyRefusal !== null) return this.refuseLegacyCall(msg);
    const counts = this.server.counts;
    if (msg["t"] === "calls") {
      const calls = callsOf(msg);
      counts.callFrames += 1;
      counts.calls += calls.length;
      for (const call of calls) this.onCall(call, false);
      this.flow(); // once per frame: what it decides depends on the whole frame's calls, not on each
      return;
    }
    if (msg["t"] !== "call") throw new ProtocolError(`unexpected message ${String(msg["t"])}`);
    const call = { id: idOf(msg["id"], 0), op: opOf(msg["op"]), args: argsOf(msg["args"]), reserve: 0 };
    counts.callFrames += 1;
    counts.calls += 1;
    this.onCall(call);
  }

  private onHello(msg: Record<string, unknown>): void {
    if (msg["t"] === "hello" && typeof msg["version"] === "number" && LEGACY_VERSIONS.has(msg["version"]) && this.server.limits.unsafeRefuseLegacyByFrame !== true) return this.welcomeLegacy(msg["version"]);
    if (msg["t"] === "hello" && typeof msg["version"] === "number" && !this.served(msg["version"])) {
      // An engram of another version: say so before the connection closes (its open() then fails with this reason).
      const message = versionMessage(msg["version"]);
      this.send({ t: "refused", version: PROTOCOL_VERSION, message });
      this.refused = true;
      this.server.onReject?.(message);
      this.end(); // after the refusal has been written; whatever the peer sends next is ignored
      return;
    }
    if (msg["t"] !== "hello" || typeof msg["version"] !== "number" || !this.served(msg["version"])) throw new ProtocolError(`expected hello of protocol version ${PROTOCOL_VERSION}`);
    this.greeted = true;
    this.keepAliveMs = keepAliveMsOf(msg["deadlineMs"]);
    const limits = this.server.limits;
    this.send({ t: "welcome", version: PROTOCOL_VERSION, pid: process.pid, frameBytesMax: limits.frameBytesMax, maxValueBytes: limits.maxValueBytes, stats: this.stats() });
  }

  /** Whether a client of protocol `version` is served as a current one (SERVED_VERSIONS; the twin refuses 3). */
  private served(version: number): boolean {
    return SERVED_VERSIONS.has(version) && !(version === 3 && unsafeShareFlowForTests.refuseV3);
  }

  /**
   * A protocol-1/2 client: it knows no `refused` frame, so it is welcomed (it attaches) and each
   * call it sends is answered, unrun, with NOT_SUPPORTED naming both versions — its caller fails
   * at once with the reason instead of STORE_LOCKED at its deadline. It can reach nothing else.
   */
  private welcomeLegacy(version: number): void {
    const message = versionMessage(version);
    this.legacyRefusal = errorToWire(new NotSupportedError(message));
    this.greeted = true;
    this.server.onReject?.(message);
    const limits = this.server.limits;
    this.send({ t: "welcome", version: PROTOCOL_VERSION, pid: process.pid, frameBytesMax: limits.frameBytesMax, maxValueBytes: limits.maxValueBytes, stats: this.stats() }); // its stats() reads this snapshot: null would throw StoreClosedError there
  }

  /** Answers a protocol-1/2 `call` with the refusal (nothing runs); any other message breaks the protocol. */
  private refuseLegacyCall(msg: Record<string, unknown>): void {
    if (msg["t"] !== "call") throw new ProtocolError(`unexpected message ${String(msg["t"])} from a protocol-2 client`);
    this.send({ t: "reply", id: idOf(msg["id"], 0), ok: false, error: this.legacyRefusal as WireError });
  }

  /** Takes one call read from the socket: started now if there is room, else it waits (in order). */
  /** Starts `call` if it has room (else it waits, in order); `flowAfter`: run flow control now (a `calls` frame runs it once, after its last call). */
  private onCall(call: Call, flowAfter = true): void {
    this.expectedBack = false; // it came back
    if (this.server.closing) return this.send({ t: "retry", id: call.id });
    if (this.waiting.length === 0 && (this.hasRoom(call) || unsafeShareFlowForTests.limitPerRead)) this.start(call);
    else this.waiting.push(call);
    if (flowAfter) this.flow();
  }

  /**
   * Whether `call` may start: fewer than CALLS_IN_FLIGHT_MAX in flight, queued replies under
   * writeBufferBytesMax, and room for the most its reply can take (ShareServer.reserveOf) under
   * this connection's and the owner's bounds of reply bytes held (a call already running is
   * answered whatever its result, so its reply is counted before it starts).
   */
  private hasRoom(call: Call): boolean {
    const limits = this.server.limits;
    if (this.inFlight >= CALLS_IN_FLIGHT_MAX || this.queuedReplyBytes() > limits.writeBufferBytesMax) return false;
    if (unsafeShareFlowForTests.unboundedReplies) return true;
    if (call.reserve === 0) this.server.reserveOf(call); // once per call: a waiting call is checked again at each answer
    if (this.heldBytes() + call.reserve > limits.replyBytesHeldMax) return false;
    return this.server.roomFor(this, call.reserve);
  }

  /** Reply bytes this connection holds: queued, and held for the calls running or answered and not yet framed. */
  private heldBytes(): number {
    return this.reserved + this.unframedHeld + this.writer.queuedBytes + this.socket.writableLength;
  }

  /** Brings the server's total of reply bytes held (and the counters of the most held) up to date with this connection's. */
  noteHeld(): void {
    const held = this.closed ? 0 : this.heldBytes();
    const counts = this.server.counts;
    if (held > counts.replyBytesHeldMax) counts.replyBytesHeldMax = held;
    const queued = this.closed ? 0 : this.queuedReplyBytes();
    if (queued > counts.replyBytesQueuedMax) counts.replyBytesQueuedMax = queued;
    const queuedDelta = queued - this.queuedNoted;
    this.queuedNoted = queued;
    this.server.addHeld(held - this.heldNoted, queuedDelta);
    this.heldNoted = held;
  }

  /** Reply bytes of this connection not yet handed to the kernel (results not yet framed included). */
  private queuedReplyBytes(): number {
    return this.replyBytes + this.writer.queuedBytes + this.socket.writableLength;
  }

  /** Starts one call: it is in flight from now until answered. */
  private start(call: Call): void {
    this.inFlight += 1;
    this.reserved += call.reserve;
    const counts = this.server.counts;
    if (this.inFlight > counts.inFlightMax) counts.inFlightMax = this.inFlight;
    // A call behind a deferred one is deferred too: one connection's calls run in the order sent.
    if (!COMMIT_OPS.has(call.op) && this.deferred === 0) return this.run(call);
    this.deferred += 1;
    this.server.defer(this, call);
  }

  /**
   * Flow control, after anything that changes the calls in flight or the reply bytes queued:
   * starts waiting calls while there is room (hasRoom); stops reading the socket at
   * CALLS_IN_FLIGHT_MAX calls (in flight and waiting) or reply bytes over their bound, and reads
   * it again once both are down to half; notes the reply bytes held; watches a client whose
   * replies are over the bound (or queued while others starve) for progress.
   */
  private flow(): void {
    if (this.socket.destroyed) return;
    if (this.server.closing) this.retryWaiting();
    while (this.waiting.length > 0 && this.hasRoom(this.waiting[0] as Call)) this.start(this.waiting.shift() as Call);
    const calls = this.inFlight + this.waiting.length;
    const bytes = this.queuedReplyBytes();
    const bound = this.server.limits.writeBufferBytesMax;
    if (!this.paused && (calls >= CALLS_IN_FLIGHT_MAX || bytes > bound)) this.pause();
    else if (this.paused && calls < CALLS_IN_FLIGHT_MAX / 2 && bytes <= bound / 2) this.resume();
    this.noteHeld();
    this.rewatch();
  }

  /**
   * Arms the write stall timer while this client's queued replies are over writeBufferBytesMax,
   * or queued at all while another connection waits for room under the owner's bound that
   * queued replies hold (a client that does not read must not hold that room forever); disarms it otherwise.
   */
  rewatch(): void {
    if (this.socket.destroyed) return;
    const bytes = this.queuedReplyBytes();
    const starving = this.server.starvingBesides(this) && !unsafeShareFlowForTests.noStarvedCutOff;
    this.watchWrites(bytes > this.server.limits.writeBufferBytesMax || (starving && bytes > 0));
  }

  /** Tries the waiting calls again (the owner's bound of reply bytes held has room again). */
  flowAgain(): void {
    this.flow();
  }

  /** A closing owner runs no waiting call: each is answered `retry` (not run: the client resends it to the next owner). */
  retryWaiting(): void {
    for (const call of this.waiting.splice(0)) this.send({ t: "retry", id: call.id });
  }

  /** Stops reading the socket; tells the client at once and every keepAliveMs that the owner is alive. */
  private pause(): void {
    this.paused = true;
    this.socket.pause();
    this.armStall(); // the half-frame timer does not run while the owner is the one not reading
    this.sendHeld();
    this.keepAlive = setInterval(this.sendHeld, this.keepAliveMs);
    this.keepAlive.unref();
  }

  private resume(): void {
    this.paused = false;
    if (this.keepAlive !== null) clearInterval(this.keepAlive);
    this.keepAlive = null;
    this.socket.resume();
    this.armStall();
  }

  /**
   * A keep-alive while paused: the client's ping waits unread in the socket, so without it a
   * client would take this live owner for a stalled one after its deadline.
   */
  private readonly sendHeld = (): void => {
    if (unsafeShareFlowForTests.noKeepAlive || this.byeSent || this.socket.destroyed) return;
    this.server.counts.heldFrames += 1;
    this.sendNow({ t: "held" });
  };

  /**
   * While the reply bytes are over their bound the client must take some of them every stallMs
   * (each chunk the kernel takes restarts the timer, see onWritten): one that takes none does not
   * read its replies, and is cut off. A client that reads, however slowly, is never cut off.
   */
  private watchWrites(over: boolean): void {
    if (!over) {
      if (this.writeStall !== null) clearTimeout(this.writeStall);
      this.writeStall = null;
      return;
    }
    if (this.writeStall !== null) return;
    this.armWriteStall(0);
  }

  /**
   * Arms the write stall timer for stallMs. One that fires more than stallLateMs late found the
   * owner's own event loop blocked (a long task, a GC pause, a starved CPU): what the client took
   * meanwhile is not seen yet (the kernel's write completions are handled after the timers), so
   * the client gets a fresh stallMs of the owner running, at most STALL_LATE_TURNS_MAX times in a
   * row. Before the fifty-seventh session a steady reader was cut off after such a block (a
   * clean-clone CI run on a loaded machine, share-reply-memory (4), stallMs 400).
   */
  private armWriteStall(lateTurns: number): void {
    const ms = this.server.limits.stallMs;
    const due = Date.now() + ms;
    this.writeStall = setTimeout(() => {
      const late = Date.now() - due > stallLateMs(ms) && !unsafeShareFlowForTests.stallIgnoresLag;
      if (late && lateTurns < STALL_LATE_TURNS_MAX) return this.armWriteStall(lateTurns + 1);
      this.kill(`does not read its replies: none of ${this.queuedReplyBytes()} bytes taken in ${ms} ms`);
    }, ms);
    this.writeStall.unref();
  }

  /** A chunk of frames reached the kernel: progress (restarts the write stall timer); room for waiting calls. */
  private readonly onWritten = (): void => {
    if (this.writeStall !== null) clearTimeout(this.writeStall);
    this.writeStall = null;
    this.flow();
  };

  /** Runs a call the server deferred to its check phase. */
  runDeferred(call: Call): void {
    this.deferred -= 1;
    assert(this.deferred >= 0, "deferred calls never go below zero");
    this.run(call);
  }

  /** Runs one accepted call on the owner's store and answers it once it settled (S1). */
  private run(call: Call): void {
    const op = OPS[call.op] as Op;
    let outcome: Promise<unknown>;
    try {
      outcome = Promise.resolve(op(this.server.store, call.args, this));
    } catch (err) {
      outcome = Promise.reject(err);
    }
    if (this.server.limits.unsafeAckBeforeCommit && call.op === "write") {
      outcome.catch(() => undefined); // unsafe: the caller already heard "ok"
      return this.answer(call, true, { ok: true, version: this.server.store.sequence ?? 0, generation: 0 }, true);
    }
    const commit = COMMIT_OPS.has(call.op);
    outcome.then(
      (result) => this.answer(call, true, result, commit),
      (err: unknown) => this.answer(call, false, errorToWire(err), commit),
    );
  }

  /**
   * Queues the outcome of `call` into this turn's `replies` frame (framed on process.nextTick:
   * the results of one commit group reach this client in one frame and one write). `commit`: it
   * went through the commit log (a client answered down to nothing after one is expected back).
   * Until it is framed it holds its reply's size (a read or page) or what was held for it
   * (ShareServer.answered); framed, its frame's bytes count.
   */
  private answer(call: Call, ok: boolean, result: unknown, commit: boolean): void {
    this.inFlight -= 1;
    assert(this.inFlight >= 0, "calls in flight never go below zero");
    const bytes = roughBytes(result);
    if (this.replies.length >= 3 * CALLS_PER_FRAME_MAX || this.replyBytes + bytes > BATCH_BYTES_TARGET) this.frameReplies();
    this.replies.push(call.id, ok, result);
    this.replyBytes += bytes;
    this.reserved -= call.reserve;
    this.unframedHeld += this.server.answered(call, bytes);
    if (!this.repliesScheduled) {
      this.repliesScheduled = true;
      process.nextTick(this.frameRepliesTick);
    }
    this.flow();
    if (this.inFlight === 0 && this.waiting.length === 0 && commit) this.expectedBack = true;
    this.server.settled();
  }

  private readonly frameRepliesTick = (): void => {
    this.repliesScheduled = false;
    this.frameReplies();
    this.writer.flush(); // already at the end of this turn's results: no second tick for the write
    this.flow(); // framed, the replies count their own bytes, less than was held for them: room for waiting calls
  };

  /**
   * Frames the queued results as one `replies` frame; past the frame limit, one frame each, and a
   * result too large even alone becomes its caller's LimitExceededError instead of a silence.
   */
  private frameReplies(): void {
    const r = this.replies;
    if (r.length === 0) return;
    this.replies = [];
    this.replyBytes = 0;
    this.unframedHeld = 0; // from here the frames' own bytes count (queued in the writer, then the socket)
    this.server.counts.replyFrames += 1;
    if (this.trySend({ t: "replies", r })) return;
    for (let i = 0; i < r.length; i += 3) {
      if (this.trySend({ t: "replies", r: [r[i], r[i + 1], r[i + 2]] })) continue;
      this.trySend({ t: "replies", r: [r[i], false, errorToWire(this.lastSendError)] });
    }
  }

  /** Sends `message`; false (the error kept in lastSendError) when it cannot be framed. */
  private trySend(message: Message): boolean {
    try {
      this.sendNow(message);
      return true;
    } catch (err) {
      this.lastSendError = err;
      return false;
    }
  }

  /**
   * Queues a frame, after the results queued before it (a bye must never overtake a reply: the
   * client would resend a call that ran). Frames queued in one turn leave in one write.
   */
  send(message: Message): void {
    if (message.t === "bye") this.stopKeepAlive();
    if (this.server.limits.unsafeByeBeforeReplies === true && message.t === "bye") return this.sendNow(message);
    this.frameReplies();
    this.sendNow(message);
  }

  /** Nothing follows a bye: no more keep-alives. */
  private stopKeepAlive(): void {
    this.byeSent = true;
    if (this.keepAlive !== null) clearInterval(this.keepAlive);
    this.keepAlive = null;
  }

  /** Queues a frame (flow control watches the bytes queued: see flow()). */
  private sendNow(message: Message): void {
    if (this.socket.destroyed) return;
    this.writer.send(message);
    this.noteHeld();
    // The twin: the rule before, a client with too many reply bytes queued is cut off, reading or not.
    if (unsafeShareFlowForTests.cutOffUnread && this.queuedReplyBytes() > this.server.limits.writeBufferBytesMax) this.kill("does not read its replies");
  }

  /** Hands every queued frame to the socket now. */
  flush(): void {
    this.frameReplies();
    this.writer.flush();
  }

  /** Ends the connection once every frame queued so far (replies, then the bye or refusal) has reached the socket. */
  end(): void {
    this.frameReplies();
    this.writer.end();
  }

  /** The owner's stats, shared by every client for STATS_CACHE_MS unless `fresh`. */
  stats(fresh = false): StoreStats {
    return this.server.cachedStats(fresh);
  }

  /** Registers a cursor over `iterable` (list or export) and returns its first page. */
  cursorOpen(iterable: AsyncIterable<unknown>): Promise<unknown> {
    if (this.cursors.size >= CURSORS_MAX) {
      return Promise.reject(new LimitExceededError(`at most ${CURSORS_MAX} list or export iterations may be open on one connection: finish or break out of an earlier one first`));
    }
    const cursor: Cursor = { it: iterable[Symbol.asyncIterator](), held: null };
    const id = this.nextCursor++;
    this.cursors.set(id, cursor);
    return this.page(id, cursor);
  }

  listNext(id: unknown): Promise<unknown> {
    const cursor = typeof id === "number" ? this.cursors.get(id) : undefined;
    if (cursor === undefined) return Promise.reject(new InvalidArgumentError("no such list cursor: it ended, was closed, or belonged to an owner that went away"));
    return this.page(id as number, cursor);
  }

  async listClose(id: unknown): Promise<null> {
    const cursor = typeof id === "number" ? this.cursors.get(id) : undefined;
    if (cursor === undefined) return null;
    this.cursors.delete(id as number);
    await cursor.it.return?.();
    return null;
  }

  /**
   * Up to LIST_PAGE_ENTRIES entries of cursor `id`, and no more than PAGE_BYTES_MAX bytes but for
   * a page of one entry: an entry that would carry a page past it waits for the next page (so that
   * a page always fits a frame, whose limit is one value's and some; until the fifty-third session
   * a 4 MiB page took one more value of up to the value limit, and its frame was refused). Done
   * closes the cursor; so does a failure.
   */
  private async page(id: number, cursor: Cursor): Promise<{ cursor: number; entries: unknown[]; done: boolean }> {
    const entries: unknown[] = [];
    let bytes = 0;
    try {
      while (entries.length < LIST_PAGE_ENTRIES) {
        const next = cursor.held ?? (await cursor.it.next());
        cursor.held = null;
        if ("done" in next && next.done === true) {
          this.cursors.delete(id);
          return { cursor: id, entries, done: true };
        }
        const size = entryBytes(next.value);
        // The twin keeps the rule before: a page under the bound takes the next entry whatever its size.
        const full = unsafeSharePagesForTests.overfill ? bytes >= PAGE_BYTES_MAX : entries.length > 0 && bytes + size > PAGE_BYTES_MAX;
        if (full) {
          cursor.held = { value: next.value };
          break;
        }
        entries.push(next.value);
        bytes += size;
      }
    } catch (err) {
      this.cursors.delete(id);
      throw err;
    }
    return { cursor: id, entries, done: false };
  }

  /** Cuts this connection off (a broken rule); the owner and every other client carry on. */
  kill(why: string): void {
    if (this.socket.destroyed) return;
    this.server.onReject?.(why);
    this.socket.destroy();
  }

  private onClose(): void {
    this.closed = true;
    this.noteHeld(); // its reply bytes are the socket's garbage now; calls still running hold nothing either
    if (this.stallTimer !== null) clearTimeout(this.stallTimer);
    if (this.writeStall !== null) clearTimeout(this.writeStall);
    this.stopKeepAlive();
    this.waiting.length = 0; // not run, never answered: the client reports them as it reports every call of a lost connection
    for (const cursor of this.cursors.values()) void cursor.it.return?.()?.catch?.(() => undefined);
    this.cursors.clear();
    this.server.forget(this);
  }
}

/** The socket server of a sharing owner. */
export class ShareServer {
  readonly store: ServedStore;
  readonly socketPath: string;
  readonly limits: ServerLimits;
  /** Called with the reason whenever a connection is cut off (tests, logs). */
  onReject: ((why: string) => void) | null = null;
  /** Frames and calls taken in, reply frames sent, since listen. */
  readonly counts: ServerCounts = { callFrames: 0, calls: 0, replyFrames: 0, inFlightMax: 0, heldFrames: 0, replyBytesHeldMax: 0, replyBytesQueuedMax: 0, ownerReplyBytesHeldMax: 0, repliesOverReserve: 0 };
  closing = false;
  private readonly server: net.Server;
  private readonly connections = new Set<Connection>();
  private drained: (() => void) | null = null;
  /** Calls deferred to this turn's check phase, as pairs of connection and call, in arrival order. */
  private deferredRuns: Array<Connection | Call> = [];
  private deferredImmediate: NodeJS.Immediate | null = null;
  /** Opens the commit log's start gate (null: not holding). */
  private gateOpen: (() => void) | null = null;
  /** The safety bound while held behind a busy log, then the wait for clients expected back. */
  private gatherTimer: NodeJS.Timeout | null = null;
  private gatherWaitingBack = false;
  private recheck: NodeJS.Immediate | null = null;
  private statsAt = 0;
  private statsValue: StoreStats | null = null;
  /** Reply bytes all connections hold (each connection's heldBytes as last noted). */
  private heldBytes = 0;
  /** The part of heldBytes queued (each connection's replies not yet taken by the kernel, as last noted). */
  private queuedBytes = 0;
  /** Connections whose next call waits for room under ownerReplyBytesHeldMax (rechecked whenever less is held). */
  private readonly waitingRoom = new Set<Connection>();
  /**
   * Those of waitingRoom whose call would fit were the other connections' queued replies taken:
   * they wait for clients that do not read (whose stall watch then runs). The others wait only
   * for calls running (or for their own replies): nobody is cut off for that.
   */
  private readonly starved = new Set<Connection>();
  private starvedRecheck: NodeJS.Immediate | null = null;
  private recheckingStarved = false;

  private constructor(store: ServedStore, socketPath: string, limits: ServerLimits) {
    this.store = store;
    this.socketPath = socketPath;
    this.limits = limits;
    this.server = net.createServer({ allowHalfOpen: false, pauseOnConnect: false }, (socket) => {
      if (this.closing || this.connections.size >= CONNECTIONS_MAX) return void socket.destroy();
      this.connections.add(new Connection(socket, this));
    });
  }

  /**
   * Listens on `socketPath` (0600). The caller holds the directory lock, so a socket file left
   * there by a dead owner is stale and is removed first.
   */
  static async listen(store: ServedStore, socketPath: string, limits: ServerLimits): Promise<ShareServer> {
    const whole = replyReserveOf("read", [], limits.frameBytesMax);
    assert(limits.replyBytesHeldMax >= whole && limits.ownerReplyBytesHeldMax >= limits.replyBytesHeldMax, "a drained connection can always start any call");
    fs.rmSync(socketPath, { force: true });
    const s = new ShareServer(store, socketPath, limits);
    await new Promise<void>((resolve, reject) => {
      s.server.once("error", reject);
      s.server.listen(socketPath, () => {
        s.server.off("error", reject);
        resolve();
      });
    });
    fs.chmodSync(socketPath, 0o600);
    // After listen, a failed accept (EMFILE, ...) must not become an uncaught 'error' that kills the owner.
    s.server.on("error", (err: Error) => s.onReject?.(`accept failed: ${err.message}`));
    return s;
  }

  /** The owner's stats, computed at most once per STATS_CACHE_MS for all clients. */
  cachedStats(fresh: boolean): StoreStats {
    const now = Date.now();
    if (fresh || this.statsValue === null || now - this.statsAt >= STATS_CACHE_MS) {
      this.statsValue = this.store.stats();
      this.statsAt = now;
    }
    return this.statsValue;
  }

  /** Runs `call` of `conn` in the check phase of this turn, with every other call deferred in it, in order. */
  defer(conn: Connection, call: Call): void {
    this.deferredRuns.push(conn, call);
    this.deferredImmediate ??= setImmediate(this.runDeferred);
  }

  /**
   * Runs this turn's deferred calls in arrival order. When gathering, the log's next group is
   * gated first, so the calls are decided and encoded now (the owner's CPU overlaps the fsync in
   * flight and the other clients' round trips) while the group they join waits to start.
   */
  private readonly runDeferred = (): void => {
    const runs = this.deferredRuns;
    this.deferredRuns = [];
    this.deferredImmediate = null;
    if (this.shouldHold() !== null) this.closeGate();
    for (let i = 0; i < runs.length; i += 2) (runs[i] as Connection).runDeferred(runs[i + 1] as Call);
    this.releaseOrHold();
  };

  /** Whether the log's next group is held now (connections answered meanwhile are expected back). */
  get holding(): boolean {
    return this.gateOpen !== null;
  }

  /**
   * Gathering commit groups: whether the next group should wait a little longer before it starts.
   * Started at once, it would carry only the calls that reached the owner so far, without those
   * of the clients the group in flight is about to answer; those come back one round trip later
   * and would form a group (and an fsync) of their own — with several clients the groups stay
   * split in two alternating halves. So the next group waits while the group in flight is busy
   * (at most GATHER_BUSY_MS_MAX: it could not start sooner anyway), then until every connection
   * answered meanwhile has sent again — at most `gatherMs` more — never past GATHER_CALLS_MAX
   * queued operations, nor while closing. Each call runs as its own operation, in its
   * connection's order, as soon as it arrives; only the moment its group starts moves.
   */
  private shouldHold(): "busy" | "back" | null {
    const log = this.store.log;
    if (this.limits.gatherMs <= 0 || log === undefined || this.closing || log.queued.ops >= GATHER_CALLS_MAX) return null;
    if (log.writing) return "busy"; // while the gate is closed, this is the group in flight when it closed
    for (const c of this.connections) if (c.expectedBack) return "back";
    return null;
  }

  /** Holds the start of the log's next group until release() (bounded: every hold arms a timer). */
  private closeGate(): void {
    if (this.gateOpen !== null) return;
    const log = this.store.log;
    assert(log !== undefined, "only a store with a commit log is gated");
    log.holdStarts(new Promise<void>((resolve) => (this.gateOpen = resolve)));
    this.gatherTimer = setTimeout(this.releaseByTimer, GATHER_BUSY_MS_MAX);
  }

  private releaseOrHold(): void {
    if (this.gateOpen === null) return;
    const hold = this.shouldHold();
    if (hold === null) return this.release();
    if (hold === "busy" || this.gatherWaitingBack) return; // the busy bound is armed (closeGate)
    // The wait that delays groups: at most gatherMs for the clients just answered to send again.
    this.gatherWaitingBack = true;
    if (this.gatherTimer !== null) clearTimeout(this.gatherTimer);
    this.gatherTimer = setTimeout(this.releaseByTimer, this.limits.gatherMs);
  }

  /** The gathering window ended: whoever did not come back is not expected next time either. */
  private readonly releaseByTimer = (): void => {
    this.gatherTimer = null;
    for (const c of this.connections) c.expectedBack = false;
    this.release();
  };

  /** Lets the log's next group start (with every call run meanwhile). */
  private release(): void {
    if (this.gatherTimer !== null) clearTimeout(this.gatherTimer);
    this.gatherTimer = null;
    this.gatherWaitingBack = false;
    const open = this.gateOpen;
    this.gateOpen = null;
    open?.();
  }

  /**
   * Sets the reply bytes held for `call` while it runs (call.reserve): the most its reply can
   * take (replyReserveOf; the twin `optimisticReserve` holds SMALL_REPLY_BYTES for a read or page).
   */
  reserveOf(call: Call): void {
    const optimistic = unsafeShareFlowForTests.optimisticReserve && MEASURED_REPLY_OPS.has(call.op);
    call.reserve = optimistic ? SMALL_REPLY_BYTES : replyReserveOf(call.op, call.args, this.limits.frameBytesMax);
  }

  /**
   * The reply bytes `call`, answered with a reply of about `bytes` (roughBytes), holds until it is
   * framed: for a read or page its reply's size (roughBytes bounds their flat results from above,
   * and no frame exceeds the frame limit, so never more than was held), else what was held for it.
   */
  answered(call: Call, bytes: number): number {
    const whole = this.limits.frameBytesMax + SMALL_REPLY_BYTES;
    const size = Math.min(bytes + REPLY_ENVELOPE_BYTES, whole);
    if (size > call.reserve) this.counts.repliesOverReserve += 1;
    if (!MEASURED_REPLY_OPS.has(call.op) || unsafeShareFlowForTests.wholeFrameReserve) return Math.max(size, call.reserve);
    return size;
  }

  /** Whether a connection other than `conn` waits for room that queued replies hold (then every other connection's queued replies must progress). */
  starvingBesides(conn: Connection): boolean {
    return this.starved.size > 1 || (this.starved.size === 1 && !this.starved.has(conn));
  }

  /**
   * Whether `bytes` more reply bytes fit under ownerReplyBytesHeldMax for `conn`; if not, `conn`
   * waits for room (rechecked as soon as any connection holds fewer bytes), and counts as starved
   * only when the other connections' queued replies are what it waits for.
   */
  roomFor(conn: Connection, bytes: number): boolean {
    conn.noteHeld();
    const cap = this.limits.ownerReplyBytesHeldMax;
    if (this.heldBytes + bytes <= cap) {
      if (this.waitingRoom.size > 0 && this.waitingRoom.delete(conn) && this.starved.delete(conn) && this.starved.size === 0) this.scheduleStarvedRecheck(); // disarm the others' watch
      return true;
    }
    this.waitingRoom.add(conn);
    const othersQueued = this.queuedBytes - conn.queuedNoted;
    const byQueued = this.heldBytes - othersQueued + bytes <= cap || unsafeShareFlowForTests.starvedByAnyWait;
    if (byQueued === this.starved.has(conn)) return false;
    if (byQueued) this.starved.add(conn);
    else this.starved.delete(conn);
    this.scheduleStarvedRecheck(); // arm or disarm the others' watch
    return false;
  }

  /**
   * Adds `delta` to the reply bytes held and `queuedDelta` to those queued (noted by a
   * connection). Less held may let a waiting connection go on; more queued may make one that
   * waited only for calls running wait for a client that does not read (it is rechecked).
   */
  addHeld(delta: number, queuedDelta: number): void {
    this.heldBytes += delta;
    this.queuedBytes += queuedDelta;
    assert(this.heldBytes >= 0 && this.queuedBytes >= 0, "reply bytes held never go below zero");
    if (this.heldBytes > this.counts.ownerReplyBytesHeldMax) this.counts.ownerReplyBytesHeldMax = this.heldBytes;
    if (this.waitingRoom.size > 0 && (delta < 0 || (queuedDelta > 0 && this.waitingRoom.size > this.starved.size))) this.scheduleStarvedRecheck();
  }

  private scheduleStarvedRecheck(): void {
    if (this.recheckingStarved) return;
    this.starvedRecheck ??= setImmediate(this.recheckStarved);
  }

  /**
   * Lets the starved connections try again (in the order they started waiting; those still
   * without room wait on), then re-evaluates every connection's write stall watch against the
   * outcome.
   */
  private readonly recheckStarved = (): void => {
    this.starvedRecheck = null;
    this.recheckingStarved = true;
    const waiting = [...this.waitingRoom];
    this.waitingRoom.clear();
    this.starved.clear();
    for (const c of waiting) c.flowAgain();
    this.recheckingStarved = false;
    for (const c of this.connections) c.rewatch();
  };

  /** Clients connected now. */
  get clientCount(): number {
    return this.connections.size;
  }

  forget(conn: Connection): void {
    this.connections.delete(conn);
    this.starved.delete(conn);
    if (this.waitingRoom.delete(conn)) this.scheduleStarvedRecheck();
    this.settled();
  }

  /** Called when a call settles or a connection goes: rechecks held calls; wakes close() once nothing is in flight. */
  settled(): void {
    if (this.gateOpen !== null) this.recheck ??= setImmediate(this.recheckHeld);
    if (this.drained === null) return;
    for (const c of this.connections) if (c.pending > 0) return;
    this.drained();
  }

  private readonly recheckHeld = (): void => {
    this.recheck = null;
    this.releaseOrHold();
  };

  /**
   * Drops every connection without a bye and stops listening, leaving the store open (and the
   * lock held): what clients see when an owner hangs up abruptly. For tests of the handover deadline.
   */
  abort(): void {
    this.closing = true;
    this.server.close();
    for (const c of this.connections) c.socket.destroy();
    fs.rmSync(this.socketPath, { force: true });
  }

  /**
   * Stops serving: new calls are answered "retry" (not run), calls in flight are answered, then
   * every client gets "bye" and the socket file is removed. The store stays open (the caller closes it).
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.release(); // calls run meanwhile were accepted: their group starts now, and they are answered before the bye
    for (const c of this.connections) c.retryWaiting(); // read but not started: not run, resent to the next owner
    const listening = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await new Promise<void>((resolve) => {
      this.drained = resolve;
      this.settled();
    });
    for (const c of this.connections) {
      c.send({ t: "bye" });
      c.end();
    }
    fs.rmSync(this.socketPath, { force: true });
    // A client that does not read would hold its connection (and this close) open forever.
    const linger = setTimeout(() => {
      for (const c of this.connections) c.socket.destroy();
    }, CLOSE_LINGER_MS);
    await listening;
    clearTimeout(linger);
  }
}

/**
 * Test switch, never set by the engine or any option (test/share-cursor-pages.test.ts):
 * `overfill` lets a page take an entry past PAGE_BYTES_MAX as before the fifty-third session, so
 * that a page of ~4 MiB followed by a value near the limit no longer fits a frame and the client's
 * export fails with LIMIT_EXCEEDED.
 */
export const unsafeSharePagesForTests = { overfill: false };

/**
 * Test switches of flow control, never set by the engine or any option
 * (test/share-flow-control.test.ts); each restores the rule before the fifty-fourth session:
 * `cutOffUnread` cuts a client off as soon as its queued replies pass writeBufferBytesMax, reading
 * or not; `noKeepAlive` sends no `held` frames while a connection is paused; `stallWhilePaused`
 * runs the half-frame timer while the owner itself is not reading; `limitPerRead` starts every
 * call one socket read delivered, however many (the in-flight limit then holds per read only).
 * And of the fifty-fifth session (test/share-reply-memory.test.ts): `unboundedReplies` starts calls
 * without counting their replies against replyBytesHeldMax and ownerReplyBytesHeldMax;
 * `unsliced` hands a turn's reply bytes to the socket whole (progress seen only at their end);
 * `noStarvedCutOff` never cuts off a non-reader that holds room other connections wait for;
 * `refuseV3` refuses a protocol-3 hello (as the fifty-fourth session did); `slowKeepAliveV3` sends
 * a client that names no deadline its keep-alives every second (the period before).
 * And of the fifty-sixth: `optimisticReserve` holds SMALL_REPLY_BYTES for a running read or page
 * instead of the most its reply can take (as the estimate of the fifty-fifth session did after
 * small replies: a jump to large replies overshoots the bounds by every read running);
 * `wholeFrameReserve` keeps an answered read's or page's whole frame held until it is framed (as
 * before the estimate: reads ran about four per reply frame); `starvedByAnyWait` counts every
 * connection that waits for the owner's room as starved, even when only calls running elsewhere
 * hold it (a non-reader under writeBufferBytesMax was cut off for it).
 * And of the fifty-seventh: `stallIgnoresLag` cuts a client off when the write stall timer fires
 * however late, even after the owner's own loop was blocked past stallMs.
 */
export const unsafeShareFlowForTests = {
  cutOffUnread: false,
  noKeepAlive: false,
  stallWhilePaused: false,
  limitPerRead: false,
  unboundedReplies: false,
  unsliced: false,
  noStarvedCutOff: false,
  refuseV3: false,
  slowKeepAliveV3: false,
  optimisticReserve: false,
  wholeFrameReserve: false,
  starvedByAnyWait: false,
  stallIgnoresLag: false,
};

/** Most fresh stall periods in a row a connection gets because the owner's loop was blocked when its write stall timer was due. */
const STALL_LATE_TURNS_MAX = 3;

/** How late a write stall timer may fire before the owner counts its own loop as blocked: a quarter of stallMs, at least 50 ms. */
function stallLateMs(stallMs: number): number {
  return Math.max(50, stallMs / 4);
}

/** The slice of reply bytes a connection hands its socket at once (the `unsliced` twin: a turn's bytes whole, as before). */
function replySliceBytes(): number {
  return unsafeShareFlowForTests.unsliced ? Infinity : REPLY_SLICE_BYTES;
}
