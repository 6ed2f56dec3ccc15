/**
 * Speaking the share protocol by hand, for tests that must send what no client would (a frame of
 * any message, a hello of another version, more calls than a client sends) and see every frame
 * the owner answers with.
 */
import * as net from "node:net";
import { pack } from "msgpackr";
import { decodeBody, FrameDecoder, FRAME_BYTES_MIN } from "../../share/protocol.js";

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
