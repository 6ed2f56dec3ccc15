/**
 * Bad clients of a shared store's owner: each one breaks the protocol in its own way, and the
 * owner must cut off that connection alone and keep serving everyone else.
 *
 * How it works: the owner is a real child process (test/helpers/share-child.ts, half-frame stall
 * limit shortened to 1 s with ENGRAM_SHARE_STALL_MS); the test process attaches to it as a good
 * client with `share: true`. Raw Unix-socket connections then send: random bytes; a well-framed
 * body that is not msgpack; a length prefix claiming 4 GiB; a hello of another protocol
 * version; a call to an operation outside the API ("close", "__proto__", "constructor"); a
 * half-sent frame left hanging; and a client that floods read calls for a 1 MiB value and never
 * reads a reply. After each, the good client must still write and read, the owner process must
 * be alive, and the owner must report the cut-off with its reason (the half frame after its stall
 * limit, the non-reader once its unread replies are past the per-connection bound and it has
 * taken none of them for the stall limit — a client that reads is never cut off, see
 * share-flow-control.test.ts). A
 * frame split across writes at every boundary is also served correctly (framing is a stream).
 *
 * Property stressed: a malformed, oversized, stalled or non-reading client costs the owner one
 * closed connection — never a crash, a stall, or unbounded memory.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { frame } from "./helpers/share-raw.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { ShareProc } from "./helpers/share-proc.js";
import { readLockNote } from "../engine/lock.js";
import { tempDir } from "./helpers/tmp.js";
import { PROTOCOL_VERSION } from "../share/protocol.js";

let base: string;
let dir: string;
let owner: ShareProc;
let good: Engram;
let socketPath: string;
const sockets: net.Socket[] = [];

beforeAll(async () => {
  base = tempDir("share-b");
  dir = path.join(base, "store");
  process.env["ENGRAM_SHARE_STALL_MS"] = "1000";
  owner = new ShareProc(dir);
  delete process.env["ENGRAM_SHARE_STALL_MS"];
  expect(await owner.opened()).toBe("owner");
  good = await Engram.open(dir, { share: true });
  expect(good.role).toBe("client");
  socketPath = readLockNote(dir)?.socket as string;
  expect(fs.statSync(socketPath).mode & 0o777).toBe(0o600);
  expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await good?.close();
  if (owner !== undefined && owner.child.exitCode === null) await owner.kill();
  fs.rmSync(base, { recursive: true, force: true });
});

const HELLO = frame({ t: "hello", version: PROTOCOL_VERSION, pid: 1 });

/** A raw connection; `closed` resolves when the owner hangs up. */
async function raw(): Promise<{ s: net.Socket; closed: Promise<void>; data: () => Buffer }> {
  const s = net.createConnection(socketPath);
  sockets.push(s);
  let got = Buffer.alloc(0);
  s.on("data", (d: Buffer) => (got = Buffer.concat([got, d])));
  s.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => s.on("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    s.once("connect", resolve);
    s.once("error", reject);
  });
  return { s, closed, data: () => got };
}

/** Resolves when `p` does, or fails the test after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);
}

/** The good client still writes and reads, and the owner process lives. */
async function ownerServes(tag: string): Promise<void> {
  const w = await within(good.write(`after-${tag}`, tag), 10_000, `write after ${tag}`);
  expect(await good.read(`after-${tag}`)).toMatchObject({ status: "OK", value: tag, version: w.version });
  expect(owner.child.exitCode).toBeNull();
}

async function cutOff(reason: RegExp): Promise<void> {
  await owner.next((l) => l["ev"] === "event" && reason.test(String(l["text"])), 15_000, `a cut-off matching ${String(reason)}`);
}

describe("bad clients of a sharing owner", () => {
  it("random bytes, a non-msgpack body, a 4 GiB length claim, a wrong hello: closed, the owner serves on", async () => {
    const cases: Array<[string, Buffer]> = [
      ["random", Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) & 0xff))],
      ["non-msgpack", Buffer.concat([HELLO, Buffer.from([0, 0, 0, 3, 0xc1, 0xc1, 0xc1])])],
      ["4GiB", Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3])],
      ["wrong-hello", frame({ t: "hello", version: 99, pid: 1 })],
    ];
    for (const [tag, bytes] of cases) {
      const c = await raw();
      c.s.write(bytes);
      await within(c.closed, 10_000, `${tag} closed`);
      await ownerServes(tag);
    }
  });

  it("calls outside the API are refused with a closed connection", async () => {
    for (const op of ["close", "__proto__", "constructor", "toString", "readSync"]) {
      const c = await raw();
      c.s.write(Buffer.concat([HELLO, frame({ t: "call", id: 1, op, args: [] })]));
      await within(c.closed, 10_000, `${op} closed`);
      expect(c.data().includes(Buffer.from("replies"))).toBe(false); // no answer: the call never ran ("close" would have closed the owner)
      await ownerServes(`op-${op}`);
    }
  });

  it("a frame split at every byte is served; a half frame left hanging is cut off after the stall limit", async () => {
    const c = await raw();
    const call = frame({ t: "call", id: 7, op: "write", args: ["split", "by bytes", undefined] });
    c.s.write(HELLO);
    for (const b of call) {
      c.s.write(Buffer.from([b]));
      await new Promise((r) => setImmediate(r));
    }
    await within(
      (async () => {
        while (!c.data().includes(Buffer.from("replies"))) await new Promise((r) => setTimeout(r, 5));
      })(),
      10_000,
      "reply to a split frame",
    );
    expect(await good.read("split")).toMatchObject({ status: "OK", value: "by bytes" });

    const half = await raw();
    half.s.write(Buffer.concat([HELLO, call.subarray(0, 9)]));
    await ownerServes("while-half"); // the owner is not waiting for the rest
    await within(half.closed, 10_000, "half frame cut off");
    await cutOff(/stalled/);
    await ownerServes("half");
  });

  it("a client that floods calls and never reads is cut off; the others are served meanwhile", async () => {
    await good.write("big", new Uint8Array(1024 * 1024).fill(7));
    const c = await raw();
    c.s.pause(); // never read
    c.s.write(HELLO);
    const call = frame({ t: "call", id: 1, op: "read", args: ["big", undefined] });
    for (let i = 0; i < 200; i++) c.s.write(call);
    await ownerServes("during-flood");
    await cutOff(/does not read/);
    await ownerServes("flood");
    const big = await good.read("big");
    expect(big.status === "OK" && big.value instanceof Uint8Array && big.value.length).toBe(1024 * 1024);
  });
});
