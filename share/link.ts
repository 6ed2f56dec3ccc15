/**
 * A client's connection to the owner: sends calls as frames, matches replies by id. It knows
 * nothing about failover: when the socket goes it reports the calls still unanswered, and whether
 * the owner said "bye" first (then none of them ran and they may be sent again) or simply vanished
 * (then each one's outcome is unknown).
 */
import * as net from "node:net";
import { InternalError } from "../rules/errors.js";
import { assert } from "../rules/assert.js";
import { VALUE_BYTES_MAX } from "../rules/limits.js";
import { decodeBody, encodeFrame, errorFromWire, FRAME_BYTES_MIN, frameBytesMaxFor, FrameDecoder, FrameWriter, PROTOCOL_VERSION, type Reply, type Welcome } from "./protocol.js";

/** A call sent and not yet answered. */
export interface Sent {
  op: string;
  args: unknown[];
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** Why a link ended: the owner said bye (calls not run), or the socket just closed. */
export type LinkEnd = { bye: boolean; unanswered: Sent[] };

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
  private onEnd: ((end: LinkEnd) => void) | null = null;
  private endedWith: LinkEnd | null = null;

  private constructor(socket: net.Socket, decoder: FrameDecoder, welcome: Welcome) {
    this.socket = socket;
    this.decoder = decoder;
    this.welcome = welcome;
    this.writer = new FrameWriter(socket, welcome.frameBytesMax);
  }

  /** Connects to `socketPath` and says hello; rejects when nobody answers within `timeoutMs`. */
  static connect(socketPath: string, timeoutMs: number): Promise<Link> {
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
      const timer = setTimeout(() => fail(new InternalError(`no welcome from ${socketPath} within ${timeoutMs} ms`)), timeoutMs);
      socket.once("error", fail);
      socket.once("close", () => fail(new InternalError("the owner closed the connection before its welcome")));
      socket.once("connect", () => socket.write(encodeFrame({ t: "hello", version: PROTOCOL_VERSION, pid: process.pid }, FRAME_BYTES_MIN)));
      const onData = (chunk: Buffer): void => {
        try {
          const bodies = decoder.push(chunk);
          if (bodies.length === 0) return;
          const welcome = decodeBody(bodies[0] as Buffer) as Welcome;
          if (welcome.t !== "welcome") throw new InternalError(`expected welcome, got ${String(welcome.t)}`);
          done = true;
          clearTimeout(timer);
          socket.removeAllListeners();
          const link = new Link(socket, decoder, welcome);
          link.attach(bodies.slice(1));
          resolve(link);
        } catch (err) {
          fail(err);
        }
      };
      socket.on("data", onData);
    });
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

  /** Unanswered calls now. */
  get inFlight(): number {
    return this.sent.size;
  }

  /** Sends one call; its promise settles with the owner's reply. Throws (sync) when it cannot be framed. */
  call(s: Sent): void {
    assert(!this.ended, "no call is sent on an ended link");
    const id = this.nextId++;
    this.writer.send({ t: "call", id, op: s.op, args: s.args }); // calls made in one turn leave in one write
    this.sent.set(id, s);
  }

  /** Whether the link can still carry calls. */
  get open(): boolean {
    return !this.ended && !this.bye;
  }

  private onData(chunk: Buffer): void {
    try {
      for (const body of this.decoder.push(chunk)) this.onBody(body);
    } catch {
      this.socket.destroy(); // a broken owner: treated as gone
    }
  }

  private onBody(body: Buffer): void {
    const m = decodeBody(body) as Reply | { t: "retry"; id: number } | { t: "bye" };
    if (m.t === "bye") {
      this.bye = true;
      this.socket.destroy();
      return;
    }
    const s = this.sent.get(m.id);
    if (s === undefined) return;
    if (m.t === "retry") return; // stays unanswered: resent to the next owner (it did not run)
    this.sent.delete(m.id);
    if (m.ok) s.resolve(m.result);
    else s.reject(errorFromWire(m.error as NonNullable<Reply["error"]>));
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    const unanswered = [...this.sent.values()];
    this.sent.clear();
    this.endedWith = { bye: this.bye, unanswered };
    this.onEnd?.(this.endedWith);
  }

  /** Closes the connection; unanswered calls are reported through whenEnded. */
  close(): void {
    this.socket.destroy();
  }
}
