/**
 * A client's connection to the owner: sends calls as frames, matches replies by id. It knows
 * nothing about failover: when the socket goes it reports the calls still unanswered, and whether
 * the owner said "bye" first (then none of them ran and they may be sent again) or simply vanished
 * (then each one's outcome is unknown).
 *
 * Deadline (docs/SHARING.md "Deadlines"): while a call is unanswered, the owner must be heard from
 * at least every `deadlineMs` (shareTimeoutMs). After half of that in silence the link sends a ping (the owner
 * answers it from its event loop, whatever its calls are doing: a long compact() is not silence);
 * after all of it the owner counts as stalled (SIGSTOP, a wedged event loop): the link ends as
 * `silent`, and its unanswered calls are reported exactly like those of a vanished owner. Every
 * byte from the owner counts as hearing from it: replies, pongs, and the `held` keep-alives an
 * owner sends while it is not reading this connection (flow control: the pings wait unread then).
 *
 * A version-3 owner (a rolling upgrade) has no such flow control: it cuts off a client whose
 * replies pile up past twice its frame limit, reading or not. On such a link the client keeps the
 * most its calls in flight can be answered with under that bound (V3_REPLY_BUDGET_FRAMES), and
 * holds back the calls past it, in order, until answers make room: a client that reads is never
 * cut off by an old owner either.
 */
import * as net from "node:net";
import { InternalError, NotSupportedError } from "../rules/errors.js";
import { assert } from "../rules/assert.js";
import { VALUE_BYTES_MAX } from "../rules/limits.js";
import {
  BATCH_BYTES_TARGET,
  CALLS_PER_FRAME_MAX,
  decodeBody,
  encodeFrame,
  errorFromWire,
  FRAME_BYTES_MIN,
  frameBytesMaxFor,
  FrameDecoder,
  FrameWriter,
  PROTOCOL_VERSION,
  replyReserveOf,
  roughBytes,
  SERVED_VERSIONS,
  SMALL_REPLY_BYTES,
  type Refused,
  type Welcome,
  type WireError,
} from "./protocol.js";

/** The owner refused this process's protocol version: attaching cannot work until both run one engram version. */
export class ProtocolMismatchError extends NotSupportedError {}

/** The calls of one turn not yet framed: ids `id`, `id + 1`, ... */
interface Batch {
  id: number;
  ops: string[];
  args: unknown[][];
  bytes: number;
}

/** A call sent and not yet answered. */
export interface Sent {
  op: string;
  args: unknown[];
  resolve(value: unknown): void;
  reject(err: unknown): void;
  /**
   * The link a call is bound to (a list cursor's next page or close: the cursor lives in that
   * connection at that owner). A bound call is never sent on another link, nor resent after a bye.
   */
  bound?: Link;
}

/**
 * Why a link ended: the owner said bye (calls not run), the socket just closed, or the owner was
 * silent for the whole deadline while calls waited (`silentMs`: how long; 0 when it was not).
 */
export type LinkEnd = { bye: boolean; silentMs: number; unanswered: Sent[] };

/**
 * What a version-3 owner lets pile up unread for one client before it cuts it off, in its frame
 * limits (its writeBufferBytesMax: share/server.ts and handle.ts of 4c2d1fd^, checked on every
 * frame it queues). A client of such an owner keeps the replies its calls in flight can take
 * under it, less SMALL_REPLY_BYTES for pongs and frame envelopes.
 */
export const V3_REPLY_BUDGET_FRAMES = 2;

/** Shortest and longest period of the deadline watchdog. */
const WATCH_MS_MIN = 5;
const WATCH_MS_MAX = 1000;

/** A live connection to an owner. */
export class Link {
  readonly welcome: Welcome;
  private readonly socket: net.Socket;
  private readonly decoder: FrameDecoder;
  private readonly sent = new Map<number, Sent>();
  private nextId = 1;
  private bye = false;
  private ended = false;
  private readonly writer: FrameWriter;
  /** Calls of this turn not yet framed. */
  private batch: Batch | null = null;
  private batchScheduled = false;
  private onEnd: ((end: LinkEnd) => void) | null = null;
  private endedWith: LinkEnd | null = null;
  /** How long the owner may be silent while a call waits. */
  private readonly deadlineMs: number;
  private readonly watchMs: number;
  private readonly watch: NodeJS.Timeout;
  /** When the owner was last heard from (or when the first of the calls now waiting was sent). */
  private heardAt = Date.now();
  private watchedAt = Date.now();
  private pinged = false;
  /**
   * The most reply bytes this link's calls in flight may be answered with (Infinity but at a
   * version-3 owner, which cuts off a client past V3_REPLY_BUDGET_FRAMES frames of unread replies).
   */
  private readonly replyBudget: number;
  /** The most the replies of the calls sent and unanswered can take (replyReserveOf each), when replyBudget is finite. */
  private replyOwed = 0;
  private readonly owed = new Map<number, number>();
  /** Calls not yet sent because their replies would not fit replyBudget beside those owed, in order. */
  private readonly heldBack: Sent[] = [];

  private constructor(socket: net.Socket, decoder: FrameDecoder, welcome: Welcome, deadlineMs: number) {
    assert(Number.isInteger(deadlineMs) && deadlineMs >= 1, "a link's deadline is a positive number of ms");
    this.socket = socket;
    this.decoder = decoder;
    this.welcome = welcome;
    this.writer = new FrameWriter(socket, welcome.frameBytesMax);
    this.deadlineMs = deadlineMs;
    this.watchMs = Math.min(WATCH_MS_MAX, Math.max(WATCH_MS_MIN, Math.floor(deadlineMs / 4)));
    this.watch = setInterval(() => this.onWatch(), this.watchMs);
    this.watch.unref();
    const v3 = welcome.version === 3 && !unsafeLinkForTests.noV3ReplyBudget;
    this.replyBudget = v3 ? V3_REPLY_BUDGET_FRAMES * welcome.frameBytesMax - SMALL_REPLY_BYTES : Infinity;
  }

  /**
   * Connects to `socketPath` and says hello; rejects when nobody answers within `connectMs`.
   * Once attached, the owner must be heard from every `deadlineMs` while a call waits. An owner
   * that refuses this version but speaks one this process also serves (SERVED_VERSIONS: a
   * version-3 owner during a rolling upgrade) is asked again in its version, once.
   */
  static connect(socketPath: string, connectMs: number, deadlineMs: number, version = PROTOCOL_VERSION): Promise<Link> {
    const started = Date.now();
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      const decoder = new FrameDecoder(frameBytesMaxFor(VALUE_BYTES_MAX)); // the owner's own limit is not known before its welcome
      let done = false;
      const fail = (err: unknown): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(() => fail(new InternalError(`no welcome from ${socketPath} within ${connectMs} ms`)), connectMs);
      socket.once("error", fail);
      socket.once("close", () => fail(new InternalError("the owner closed the connection before its welcome")));
      socket.once("connect", () => socket.write(encodeFrame({ t: "hello", version, pid: process.pid, deadlineMs }, FRAME_BYTES_MIN)));
      const onData = (chunk: Buffer): void => {
        try {
          const bodies = decoder.push(chunk);
          if (bodies.length === 0) return;
          const welcome = decodeBody(bodies[0] as Buffer) as Welcome | Refused;
          if (welcome.t === "refused" && Link.speaksAlso(version, welcome.version) && !unsafeLinkForTests.noFallback) {
            done = true;
            clearTimeout(timer);
            socket.destroy();
            return resolve(Link.connect(socketPath, Math.max(1, connectMs - (Date.now() - started)), deadlineMs, welcome.version));
          }
          if (welcome.t === "refused") throw new ProtocolMismatchError(`the owner of the shared store refused this process: ${String(welcome.message)}`);
          if (welcome.t !== "welcome") throw new InternalError(`expected welcome, got ${String((welcome as { t: unknown }).t)}`);
          done = true;
          clearTimeout(timer);
          socket.removeAllListeners();
          const link = new Link(socket, decoder, welcome, deadlineMs);
          link.attach(bodies.slice(1));
          resolve(link);
        } catch (err) {
          fail(err);
        }
      };
      socket.on("data", onData);
    });
  }

  /** Whether a hello of `asked` refused by an owner of version `theirs` should be sent again in `theirs` (once: only from the current version). */
  private static speaksAlso(asked: number, theirs: unknown): theirs is number {
    return asked === PROTOCOL_VERSION && typeof theirs === "number" && theirs !== asked && SERVED_VERSIONS.has(theirs);
  }

  private attach(early: Buffer[]): void {
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    this.socket.on("error", () => undefined);
    this.socket.on("close", () => this.finish());
    for (const body of early) this.onBody(body);
  }

  /** Calls `fn` once when the link ends (at once if it already did). */
  whenEnded(fn: (end: LinkEnd) => void): void {
    if (this.endedWith !== null) return fn(this.endedWith);
    this.onEnd = fn;
  }

  /** Unanswered calls now (held back ones included). */
  get inFlight(): number {
    return this.sent.size + this.heldBack.length;
  }

  /**
   * Sends one call; its promise settles with the owner's reply. The calls of one turn travel in
   * one `calls` frame (cut at CALLS_PER_FRAME_MAX calls or about BATCH_BYTES_TARGET bytes), framed
   * on process.nextTick; a call that cannot be framed rejects with LimitExceededError, alone. At a
   * version-3 owner a call whose reply would not fit replyBudget waits here, in order, until it does.
   */
  call(s: Sent): void {
    assert(!this.ended, "no call is sent on an ended link");
    if (this.heldBack.length > 0 || !this.fits(s)) return void this.heldBack.push(s);
    this.send(s);
  }

  /** Whether the reply of `s` fits replyBudget beside the replies owed (always when none is owed: a lone call goes whatever it asks). */
  private fits(s: Sent): boolean {
    if (this.replyBudget === Infinity || this.replyOwed === 0) return true;
    return this.replyOwed + replyReserveOf(s.op, s.args, this.welcome.frameBytesMax) <= this.replyBudget;
  }

  /** Sends the calls held back while their replies fit replyBudget (answers made room). */
  private sendHeldBack(): void {
    while (this.heldBack.length > 0 && !this.ended && this.fits(this.heldBack[0] as Sent)) this.send(this.heldBack.shift() as Sent);
  }

  /** Frames `s` into this turn's batch (see call). */
  private send(s: Sent): void {
    const id = this.nextId++;
    if (this.replyBudget !== Infinity) {
      const most = replyReserveOf(s.op, s.args, this.welcome.frameBytesMax);
      this.owed.set(id, most);
      this.replyOwed += most;
    }
    if (this.sent.size === 0) this.heardAt = Date.now(); // silence counts from the first call that waits
    this.sent.set(id, s);
    const bytes = roughBytes(s.args);
    let batch = this.batch;
    if (batch !== null && (batch.ops.length >= CALLS_PER_FRAME_MAX || batch.bytes + bytes > BATCH_BYTES_TARGET)) {
      this.frameBatch();
      batch = null;
    }
    if (batch === null) {
      batch = { id, ops: [], args: [], bytes: 0 };
      this.batch = batch;
      if (!this.batchScheduled) {
        this.batchScheduled = true;
        process.nextTick(this.frameBatchTick);
      }
    }
    assert(batch.id + batch.ops.length === id, "a batch's calls have consecutive ids");
    batch.ops.push(s.op);
    batch.args.push(s.args);
    batch.bytes += bytes;
  }

  private readonly frameBatchTick = (): void => {
    this.batchScheduled = false;
    this.frameBatch();
    this.writer.flush(); // already at the end of this turn's calls: no second tick for the write
  };

  /**
   * Frames the open batch (the FrameWriter sends every frame of this turn in one write). A batch
   * past the frame limit goes as one frame per call instead; a call too large even alone rejects.
   */
  private frameBatch(): void {
    const batch = this.batch;
    this.batch = null;
    if (batch === null || this.ended) return;
    try {
      this.writer.send(batch.ops.length === 1 ? { t: "call", id: batch.id, op: batch.ops[0] as string, args: batch.args[0] as unknown[] } : { t: "calls", id: batch.id, ops: batch.ops, args: batch.args });
      return;
    } catch (err) {
      if (batch.ops.length === 1) return this.refuse(batch.id, err);
    }
    for (let i = 0; i < batch.ops.length; i++) {
      try {
        this.writer.send({ t: "call", id: batch.id + i, op: batch.ops[i] as string, args: batch.args[i] as unknown[] });
      } catch (err) {
        this.refuse(batch.id + i, err);
      }
    }
  }

  /** Rejects call `id`, which was never sent (it cannot be framed). */
  private refuse(id: number, err: unknown): void {
    const s = this.sent.get(id);
    this.sent.delete(id);
    this.settleOwed(id);
    s?.reject(err);
    if (this.heldBack.length > 0) this.sendHeldBack(); // it may have been what held them back
  }

  /** Call `id` is answered (or was never sent): its reply no longer counts against replyBudget. */
  private settleOwed(id: number): void {
    if (this.replyBudget === Infinity) return;
    this.replyOwed -= this.owed.get(id) ?? 0;
    this.owed.delete(id);
  }

  /**
   * The deadline watchdog: pings after half the deadline in silence, ends the link after all of
   * it. A late tick means this process itself was stalled (its own loop blocked, or it was
   * stopped): replies may sit unread in the socket, so only one period of that gap counts as
   * the owner's silence. (Not none: then a process whose every tick is late — a starved one —
   * would never see its deadline pass; this way each tick adds at least one period.)
   */
  private onWatch(): void {
    const now = Date.now();
    const gap = now - this.watchedAt;
    this.watchedAt = now;
    if (this.ended || this.sent.size === 0) {
      this.heardAt = now;
      this.pinged = false;
      return;
    }
    if (gap > 2 * this.watchMs + WATCH_MS_MIN) this.heardAt = Math.min(now, this.heardAt + (gap - this.watchMs));
    const silentMs = now - this.heardAt;
    if (silentMs >= this.deadlineMs) return this.finish(silentMs);
    if (silentMs * 2 >= this.deadlineMs && !this.pinged) {
      this.pinged = true;
      this.writer.send({ t: "ping" });
    }
  }

  /** Whether the link can still carry calls. */
  get open(): boolean {
    return !this.ended && !this.bye;
  }

  private onData(chunk: Buffer): void {
    this.heardAt = Date.now();
    this.pinged = false;
    try {
      for (const body of this.decoder.push(chunk)) {
        if (this.bye) break; // nothing follows a bye: the owner answered everything before it
        this.onBody(body);
      }
    } catch {
      this.socket.destroy(); // a broken owner: treated as gone
    }
  }

  private onBody(body: Buffer): void {
    const m = decodeBody(body) as { t: "replies"; r: unknown[] } | { t: "retry"; id: number } | { t: "bye" } | { t: "pong" } | { t: "held" };
    if (m.t === "replies") return this.onReplies(m.r);
    if (m.t === "bye") {
      this.bye = true;
      this.socket.destroy();
      return;
    }
    // pong, held: heard from (onData restarted the silence clock; a held owner is alive but not
    // reading this connection, so it cannot answer a ping); retry: the call did not run and stays
    // unanswered, to be resent to the next owner
  }

  /** Settles the calls of a `replies` frame: triples of id, ok, result or error. */
  private onReplies(r: unknown[]): void {
    if (!Array.isArray(r) || r.length % 3 !== 0) throw new InternalError("a replies frame holds triples");
    for (let i = 0; i < r.length; i += 3) {
      const id = r[i] as number;
      const s = this.sent.get(id);
      if (s === undefined) continue;
      this.sent.delete(id);
      this.settleOwed(id);
      if (r[i + 1] === true) s.resolve(r[i + 2]);
      else s.reject(errorFromWire(r[i + 2] as WireError));
    }
    if (this.heldBack.length > 0) this.sendHeldBack();
  }

  /** Ends the link once (the socket closed, or `silentMs` of silence): reports the unanswered calls. */
  private finish(silentMs = 0): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.watch);
    this.batch = null; // its calls are in `sent`: reported below, never sent
    if (silentMs > 0) this.socket.destroy(); // a stalled owner that wakes finds this connection gone
    const unanswered = [...this.sent.values(), ...this.heldBack.splice(0)]; // held back: never sent, reported as the batch's are
    this.sent.clear();
    this.endedWith = { bye: this.bye, silentMs, unanswered };
    this.onEnd?.(this.endedWith);
  }

  /** Closes the connection; unanswered calls are reported through whenEnded. */
  close(): void {
    this.socket.destroy();
  }
}

/**
 * Test switches, never set by the engine or any option (test/share-flow-control.test.ts):
 * `noFallback` fails a connect refused by a version-3 owner, as before the fifty-fifth session;
 * `noV3ReplyBudget` sends every call to a version-3 owner at once, as before the fifty-sixth (its
 * replies may pass that owner's cut-off, and the client is cut off reading).
 */
export const unsafeLinkForTests = { noFallback: false, noV3ReplyBudget: false };
