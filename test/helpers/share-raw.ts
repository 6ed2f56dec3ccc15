/**
 * Speaking the share protocol by hand, for tests that must send what no client would (a frame of
 * any message, a hello of another version, more calls than a client sends) and see every frame
 * the owner answers with.
 */
import * as net from "node:net";
import { pack } from "msgpackr";
import { decodeBody, FrameDecoder, FRAME_BYTES_MIN } from "../../share/protocol.js";
import { unsafeShareFlowForTests } from "../../share/server.js";

/** One frame: the 4-byte big-endian length, then `message` packed with msgpackr. */
export function frame(message: unknown): Buffer {
  const body = pack(message);
  const f = Buffer.alloc(4 + body.length);
  f.writeUInt32BE(body.length, 0);
  body.copy(f, 4);
  return f;
}

/** A raw connection to the owner at `socketPath`: every message it received, decoded, and its close. */
export async function raw(socketPath: string): Promise<{ s: net.Socket; messages: Array<Record<string, unknown>>; closed: Promise<void> }> {
  const s = net.createConnection(socketPath);
  const decoder = new FrameDecoder(FRAME_BYTES_MIN);
  const messages: Array<Record<string, unknown>> = [];
  s.on("data", (d: Buffer) => {
    for (const body of decoder.push(d)) messages.push(decodeBody(body) as Record<string, unknown>);
  });
  s.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => s.on("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    s.once("connect", resolve);
    s.once("error", reject);
  });
  return { s, messages, closed };
}

/** Resolves with `p`, or fails after `ms` naming `what`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Waits (bounded by `ms`) until `pred` holds, polling each 5 ms. */
export async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** "pending" if `p` has not settled within `ms` (the owner holding it that long is the property checked), else "settled". */
export async function stateAfter(p: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<string>((resolve) => (timer = setTimeout(() => resolve("pending"), ms)));
  const state = await Promise.race([pending, p.then(() => "settled")]);
  clearTimeout(timer);
  return state;
}

/** Turns every flow-control test switch off (an afterEach of the files that set them: none is forgotten when one is added). */
export function resetShareFlowSwitches(): void {
  for (const name of Object.keys(unsafeShareFlowForTests) as Array<keyof typeof unsafeShareFlowForTests>) unsafeShareFlowForTests[name] = false;
}
