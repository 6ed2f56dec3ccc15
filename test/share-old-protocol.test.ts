/**
 * A client of an older share protocol (version 2, or 1) against this owner (version 3) fails at
 * once with a typed error that says what to do — not with STORE_LOCKED at its deadline.
 *
 * How it works: such a client cannot be changed, so the test speaks its protocol by hand,
 * exactly as protocol 2's share/link.ts did (`git show 679a64a^:share/link.ts`): a `hello` of
 * version 2; the first message back must be a `welcome` (anything else rejected its connect, and
 * its open kept retrying until STORE_LOCKED at shareTimeoutMs); each call is one `call` frame,
 * settled by a `reply` frame of its id (other messages with no such id were ignored). The owner
 * welcomes it and answers every call, unrun, with a NOT_SUPPORTED error naming both versions;
 * the test checks the error rebuilds as NotSupportedError, arrives within a fraction of a
 * deadline, wrote nothing, that pings are still answered, that a frame only protocol 3 knows
 * (`calls`) from such a client costs its connection, and that current clients are served all
 * along. The twin (`unsafeRefuseLegacyByFrame`) sends the old client the `refused` frame it
 * cannot read: its connect then fails the way it retried into STORE_LOCKED. (The same was checked
 * once with the real protocol-2 tree against this owner: open as client in 17 ms, the first
 * write NOT_SUPPORTED 3 ms later — docs/SHARING.md "Versions".)
 *
 * Property stressed: a version mismatch is reported at the first call, in words, and runs nothing.
 */
import * as net from "node:net";
import { frame } from "./helpers/share-raw.js";
import { describe, expect, it } from "vitest";
import { Engram, NotSupportedError } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { readLockNote } from "../engine/lock.js";
import { shareFixture } from "./helpers/share-fixture.js";
import { decodeBody, errorFromWire, FrameDecoder, FRAME_BYTES_MIN, PROTOCOL_VERSION, type WireError } from "../share/protocol.js";
import type { ShareServer } from "../share/server.js";

const OPTS = { durability: "none" as const, compaction: { workers: 0 } };
/** Far below any shareTimeoutMs a client would use (10 s by default): "at once". */
const FAST_MS = 2000;
const { storeDir, open } = shareFixture("share-o");

/** An owner handle (its server observable) and a current client on one fresh directory. */
async function pair(): Promise<{ dir: string; server: ShareServer; owner: Engram; client: Engram; rejects: string[] }> {
  const dir = storeDir();
  const ownerHandle = await SharedStore.open(dir, { ...OPTS, share: true });
  open.push(ownerHandle);
  const client = await Engram.open(dir, { ...OPTS, share: true });
  open.push(client);
  const server = ownerHandle.shareServer as ShareServer;
  const rejects: string[] = [];
  server.onReject = (why) => rejects.push(why);
  return { dir, server, owner: Engram.fromBackend(ownerHandle), client, rejects };
}

/** Resolves when `p` does, or fails after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** A protocol-2 client, as share/link.ts of version 2 behaved on the wire. */
interface OldClient {
  socket: net.Socket;
  welcome: Record<string, unknown>;
  /** Sends one `call` frame; settles on the `reply` of its id (ok: its result; not ok: the rebuilt error). */
  call(op: string, args: unknown[]): Promise<unknown>;
  /** Resolves on the next `pong`. */
  ping(): Promise<void>;
  closed: Promise<void>;
}

/** Connects as protocol `version`; rejects as the old connect did when the first message is not a welcome. */
function oldClient(socketPath: string, version: number): Promise<OldClient> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    const decoder = new FrameDecoder(FRAME_BYTES_MIN);
    const waiting = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
    const pongs: Array<() => void> = [];
    let client: OldClient | null = null;
    let nextId = 1;
    const closed = new Promise<void>((r) => socket.on("close", () => r()));
    socket.on("error", () => undefined);
    socket.on("close", () => reject(new Error("the owner closed the connection before its welcome")));
    socket.once("connect", () => socket.write(frame({ t: "hello", version, pid: process.pid })));
    socket.on("data", (chunk: Buffer) => {
      for (const body of decoder.push(chunk)) {
        const m = decodeBody(body) as Record<string, unknown>;
        if (client === null) {
          if (m["t"] !== "welcome") return reject(new Error(`expected welcome, got ${String(m["t"])}`));
          client = {
            socket,
            welcome: m,
            closed,
            call(op, args) {
              const id = nextId++;
              socket.write(frame({ t: "call", id, op, args }));
              return new Promise((res, rej) => waiting.set(id, { resolve: res, reject: rej }));
            },
            ping() {
              socket.write(frame({ t: "ping" }));
              return new Promise<void>((res) => pongs.push(res));
            },
          };
          resolve(client);
          continue;
        }
        if (m["t"] === "pong") {
          pongs.shift()?.();
          continue;
        }
        const w = waiting.get(m["id"] as number);
        if (m["t"] !== "reply" || w === undefined) continue; // as version 2 did: unknown ids are ignored
        waiting.delete(m["id"] as number);
        if (m["ok"] === true) w.resolve(m["result"]);
        else w.reject(errorFromWire(m["error"] as WireError));
      }
    });
  });
}

/** The error a promise rejects with (or a marker error when it resolves). */
function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
}

describe("a client of an older share protocol", () => {
  it("is welcomed, and each of its calls fails at once with NOT_SUPPORTED naming both versions, running nothing", async () => {
    const { dir, owner, client, rejects } = await pair();
    const socketPath = readLockNote(dir)?.socket as string;
    const started = Date.now();
    const old = await within(oldClient(socketPath, 2), FAST_MS, "welcome of a version-2 client");
    expect(old.welcome).toMatchObject({ t: "welcome", pid: process.pid });
    expect(old.welcome["stats"]).toMatchObject({ liveSlots: 0, sequence: 0 }); // its stats() reads this snapshot
    const err = await within(rejection(old.call("write", ["old", "never", {}])), FAST_MS, "the refusal of a write");
    expect(Date.now() - started).toBeLessThan(FAST_MS);
    expect(err).toBeInstanceOf(NotSupportedError);
    expect((err as NotSupportedError).code).toBe("NOT_SUPPORTED");
    expect(String((err as Error).message)).toMatch(new RegExp(`version ${PROTOCOL_VERSION}, this client 2: run the same engram version`));
    expect(await within(rejection(old.call("read", ["old"])), FAST_MS, "the refusal of a read")).toBeInstanceOf(NotSupportedError);
    expect(await within(rejection(old.call("forgetScope", [""])), FAST_MS, "the refusal of a forgetScope")).toBeInstanceOf(NotSupportedError);
    await within(old.ping(), FAST_MS, "a pong for the old client");
    expect((await owner.read("old")).status).toBe("NOT_FOUND"); // nothing ran
    expect(rejects.some((why) => why.includes("this client 2"))).toBe(true); // the owner's log names the reason
    expect((await client.write("current", "served")).ok).toBe(true);
    expect(await owner.read("current")).toMatchObject({ status: "OK", value: "served" });
    old.socket.destroy();
  });

  it("a protocol-1 client is refused the same way; a frame only protocol 3 knows costs an old client its connection", async () => {
    const { dir, owner, client } = await pair();
    const socketPath = readLockNote(dir)?.socket as string;
    const v1 = await within(oldClient(socketPath, 1), FAST_MS, "welcome of a version-1 client");
    const err = await within(rejection(v1.call("write", ["v1", "never", {}])), FAST_MS, "the refusal of a v1 write");
    expect(String((err as Error).message)).toMatch(/this client 1: run the same engram version/);
    const v2 = await within(oldClient(socketPath, 2), FAST_MS, "welcome of a version-2 client");
    v2.socket.write(frame({ t: "calls", id: 1, ops: ["write"], args: [["v2", "never", {}]] }));
    await within(v2.closed, FAST_MS, "the old client's connection closed");
    expect((await owner.read("v1")).status).toBe("NOT_FOUND");
    expect((await owner.read("v2")).status).toBe("NOT_FOUND");
    expect((await client.write("current", "served")).ok).toBe(true);
    v1.socket.destroy();
  });

  it("twin: refused by a frame it cannot read, an old client's connect fails as if no owner answered (its open retried into STORE_LOCKED)", async () => {
    const { dir, server, client } = await pair();
    server.limits.unsafeRefuseLegacyByFrame = true;
    const socketPath = readLockNote(dir)?.socket as string;
    const err = await within(rejection(oldClient(socketPath, 2)), FAST_MS, "the old connect's failure");
    expect(String((err as Error).message)).toMatch(/expected welcome, got refused/);
    expect((await client.write("current", "served")).ok).toBe(true);
  });
});
