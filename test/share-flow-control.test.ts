/**
 * Flow control between a sharing owner and a client: the owner's backpressure is a pause the
 * client can see, never a cut-off of a client that reads (fifty-fourth session, from an audit).
 *
 * How it works: owner and client are two handles in this process over the real Unix socket (the
 * client half is what another process runs), or a raw socket speaks the protocol by hand; the
 * owner's ShareServer reports cut-offs (onReject) and counts the calls in flight and the `held`
 * keep-alives it sent. Writes are held at the owner with the fault point write:after-sync (each
 * commit group pauses there until released), so calls pile up exactly as at a slow owner. One
 * case per defect the audit found: (1) a client that asks for 3 values of 15 MiB and 64 of 1 MiB
 * at once gets every one (the owner stops taking its calls while its replies are queued, and is
 * not cut off as "does not read its replies"); (2) 300 writes held at a live owner for three of
 * the client's deadlines are all acknowledged, none OWNER_LOST (the paused owner cannot read the
 * client's ping, so it sends `held` keep-alives); (3) 5,000 writes held with a 300 ms stall limit
 * are not cut off as "stalled mid-frame" (the half-frame timer does not run while the owner is the
 * one not reading); (4) 1,000 calls in one socket read never put more than CALLS_IN_FLIGHT_MAX in
 * flight, the rest wait at the owner and are all answered. And the protocol bump (fifty-fifth
 * session): (5) a version-3 client (no `deadlineMs`, no `held` in its protocol) is served, and while
 * 300 of its writes are held the owner's frames reach it at least every ~25 ms (KEEP_ALIVE_MS_DEFAULT),
 * so the real version-3 link (any frame is hearing from the owner; unknown messages are ignored)
 * keeps any deadline from 100 ms; another version is still refused; and a current client meeting a
 * version-3 owner (one by hand, answering as share/server.ts of 4c2d1fd^ did) says hello again in
 * version 3 and is served, and keeps what its calls in flight can be answered with under that
 * owner's cut-off (twice its frame limit unread, which the owner by hand applies as the old one
 * did): 3 reads of 15 MiB asked for at once all arrive. Each protection has a twin that
 * turns it off with `unsafeShareFlowForTests` (or `unsafeLinkForTests`) and must see the failure. Waits that stand for "the
 * owner holds it this long" are the property itself (a deadline passing), never synchronization.
 *
 * Property stressed: a client that reads its socket is never cut off and a live owner is never
 * declared lost, while the in-flight limit holds per call.
 */
import * as net from "node:net";
import * as path from "node:path";
import { frame, raw, resetShareFlowSwitches, stateAfter, until, within } from "./helpers/share-raw.js";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, OwnerLostError, type FaultPoint } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { readLockNote } from "../engine/lock.js";
import { shareFixture } from "./helpers/share-fixture.js";
import { decodeBody, FrameDecoder, FRAME_BYTES_MIN, PROTOCOL_VERSION } from "../share/protocol.js";
import { Link, unsafeLinkForTests, type LinkEnd } from "../share/link.js";
import { CALLS_IN_FLIGHT_MAX, unsafeShareFlowForTests, type ShareServer } from "../share/server.js";

const POINT: FaultPoint = "write:after-sync";
const OPTS = { durability: "none" as const, compaction: { workers: 0 } };
const { storeDir, open } = shareFixture("share-flow");

/** Owner handles opened with writes pausing at POINT, closed after each case while POINT is released. */
const heldOwners: SharedStore[] = [];

afterEach(async () => {
  // A held owner may still have groups paused at POINT once its client gave up on them (the
  // twins' OWNER_LOST) or went away: its close drains its calls in flight, so it is released
  // until closed — left to the fixture's close, it waited for ever (a CI run under load).
  for (const h of heldOwners.splice(0)) await releaseUntil(h, h.close(), 30_000);
  unsafeLinkForTests.noFallback = false;
  unsafeLinkForTests.noV3ReplyBudget = false;
  resetShareFlowSwitches();
});

interface Pair {
  dir: string;
  server: ShareServer;
  ownerHandle: SharedStore;
  owner: Engram;
  client: Engram;
  rejects: string[];
}

/** An owner handle (server observable; `held`: writes pause at POINT) and a client with `shareTimeoutMs`. */
async function pair(held: boolean, shareTimeoutMs = 10_000): Promise<Pair> {
  const dir = storeDir();
  const ownerHandle = await SharedStore.open(dir, { ...OPTS, share: true, ...(held ? { faults: { pauseAt: [POINT] } } : {}) });
  open.push(ownerHandle);
  if (held) heldOwners.push(ownerHandle);
  const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true, shareTimeoutMs }));
  open.push(client);
  expect([ownerHandle.role, client.role]).toEqual(["owner", "client"]);
  const server = ownerHandle.shareServer as ShareServer;
  const rejects: string[] = [];
  server.onReject = (why) => rejects.push(why);
  return { dir, server, ownerHandle, owner: Engram.fromBackend(ownerHandle), client, rejects };
}

/** Releases POINT each time a commit group pauses there, until `all` settled (bounded by `ms`). */
async function releaseUntil(h: SharedStore, all: Promise<unknown>, ms: number): Promise<void> {
  let done = false;
  const settled = all.then(() => (done = true));
  const deadline = Date.now() + ms;
  while (!done) {
    if (Date.now() > deadline) throw new Error(`the held calls did not all settle within ${ms} ms`);
    h.faults.release(POINT);
    await within(Promise.race([settled, h.faults.waitFor(POINT)]), ms, "the next group at the fault point, or the end");
  }
}

/** Writes k0..k<n-1> from the client in one turn: each call's outcome ("ok", or the error code). */
function writeMany(client: Engram, n: number): Promise<string[]> {
  const value = "v".repeat(37); // frames of an odd size: the owner's socket reads end mid-frame
  return Promise.all(Array.from({ length: n }, (_, i) => client.write(`k${i}`, value).then(() => "ok", (e: unknown) => (e instanceof OwnerLostError ? e.code : String(e)))));
}

/** Counts of each outcome. */
function tally(outcomes: string[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const o of outcomes) t[o] = (t[o] ?? 0) + 1;
  return t;
}


const MiB = 1024 * 1024;

/** Reads `keys` from the client all at once: the byte length of each value, or the error code. */
function readAll(client: Engram, keys: string[]): Promise<Array<number | string>> {
  return Promise.all(keys.map((k) => client.read(k).then((r) => (r.status === "OK" && r.value instanceof Uint8Array ? r.value.length : r.status), (e: unknown) => (e instanceof OwnerLostError ? e.code : String(e)))));
}

/** Writes 3 values of 15 MiB and 64 of 1 MiB at the owner; returns their keys. */
async function seedLarge(owner: Engram): Promise<{ big: string[]; small: string[] }> {
  const big = ["b0", "b1", "b2"];
  const small = Array.from({ length: 64 }, (_, i) => `s${i}`);
  for (const k of big) await owner.write(k, new Uint8Array(15 * MiB).fill(k.charCodeAt(1)));
  for (const k of small) await owner.write(k, new Uint8Array(MiB).fill(1));
  return { big, small };
}

describe("flow control: the owner's backpressure is a pause the client can see", () => {
  it("(1) 3 values of 15 MiB, and 64 of 1 MiB, asked for at once by a reading client all arrive: paused, never cut off", async () => {
    const { server, owner, client, rejects } = await pair(false);
    const { big, small } = await seedLarge(owner);
    expect(server.limits.writeBufferBytesMax).toBeLessThan(45 * MiB); // both asks pass the bound of queued reply bytes
    expect(await within(readAll(client, big), 60_000, "3 × 15 MiB")).toEqual([15 * MiB, 15 * MiB, 15 * MiB]);
    expect(await within(readAll(client, small), 60_000, "64 × 1 MiB")).toEqual(small.map(() => MiB));
    expect(rejects).toEqual([]);
    expect(server.counts.heldFrames).toBeGreaterThan(0); // the owner did stop reading it meanwhile
    expect(client.role).toBe("client");
  }, 120_000);

  it("(1) twin: cut off once its queued replies pass the bound (cutOffUnread), the reading client loses its calls", async () => {
    const { owner, client, rejects } = await pair(false);
    const { big, small } = await seedLarge(owner);
    unsafeShareFlowForTests.cutOffUnread = true;
    const got = [...(await within(readAll(client, big), 60_000, "3 × 15 MiB")), ...(await within(readAll(client, small), 60_000, "64 × 1 MiB"))];
    expect(got).toContain("OWNER_LOST");
    expect(rejects.some((r) => /does not read its replies/.test(r))).toBe(true);
  }, 120_000);

  it("(2) 300 writes held at a live owner for three deadlines are all acknowledged, none OWNER_LOST (held keep-alives)", async () => {
    const DEADLINE_MS = 600;
    const { server, ownerHandle, client, rejects } = await pair(true, DEADLINE_MS);
    const all = writeMany(client, 300);
    await within(ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    expect(await stateAfter(all, 3 * DEADLINE_MS)).toBe("pending"); // held three deadlines, the owner alive
    expect(server.counts.heldFrames).toBeGreaterThanOrEqual(3);
    await releaseUntil(ownerHandle, all, 30_000);
    expect(tally(await all)).toEqual({ ok: 300 });
    expect(rejects).toEqual([]);
    expect(client.role).toBe("client");
  }, 60_000);

  it("(2) twin: without keep-alives (noKeepAlive) the paused owner's client takes it for stalled: every held write OWNER_LOST", async () => {
    const DEADLINE_MS = 600;
    const { ownerHandle, client } = await pair(true, DEADLINE_MS);
    unsafeShareFlowForTests.noKeepAlive = true;
    const all = writeMany(client, 300);
    await within(ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    expect(await stateAfter(all, 3 * DEADLINE_MS)).toBe("settled");
    await releaseUntil(ownerHandle, all, 30_000);
    expect(tally(await all)["OWNER_LOST"]).toBeGreaterThanOrEqual(256);
  }, 60_000);

  it("(3) 5,000 writes held past a 300 ms stall limit: the paused connection is not cut off as stalled mid-frame", async () => {
    const STALL_MS = 300;
    const { server, ownerHandle, client, rejects } = await pair(true);
    server.limits.stallMs = STALL_MS;
    const all = writeMany(client, 5000);
    await within(ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    expect(await stateAfter(all, 3 * STALL_MS)).toBe("pending");
    expect(rejects).toEqual([]);
    await releaseUntil(ownerHandle, all, 60_000);
    expect(tally(await all)).toEqual({ ok: 5000 });
    expect(rejects).toEqual([]);
  }, 90_000);

  it("(3) twin: the half-frame timer running while paused (stallWhilePaused) cuts the client off", async () => {
    const STALL_MS = 300;
    const { server, ownerHandle, client, rejects } = await pair(true);
    server.limits.stallMs = STALL_MS;
    unsafeShareFlowForTests.stallWhilePaused = true;
    const all = writeMany(client, 5000);
    await within(ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    await until(() => rejects.length > 0, 10 * STALL_MS, "a cut-off");
    expect(rejects.some((r) => /stalled mid-frame/.test(r))).toBe(true);
    await releaseUntil(ownerHandle, all, 60_000);
    expect(tally(await all)["OWNER_LOST"]).toBeGreaterThan(0);
  }, 90_000);

  /** Sends 1,000 write calls in one socket write (one read at the owner) while writes are held; returns the raw client. */
  async function thousandInOneRead(p: Pair): Promise<{ s: net.Socket; messages: Array<Record<string, unknown>> }> {
    const socketPath = readLockNote(p.dir)?.socket as string;
    const c = await raw(socketPath);
    const calls = Array.from({ length: 1000 }, (_, i) => frame({ t: "call", id: i + 1, op: "write", args: [`r${i}`, "x", null] }));
    const bytes = Buffer.concat([frame({ t: "hello", version: PROTOCOL_VERSION, pid: process.pid, deadlineMs: 10_000 }), ...calls]);
    expect(bytes.length).toBeLessThan(64 * 1024); // one read of the owner's socket
    c.s.write(bytes);
    await within(p.ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    await until(() => p.server.counts.calls === 1000, 10_000, "the owner read all 1,000 calls");
    return c;
  }

  /** Settled ids of a raw client's replies. */
  function answered(messages: Array<Record<string, unknown>>): number {
    let n = 0;
    for (const m of messages) if (m["t"] === "replies") n += (m["r"] as unknown[]).length / 3;
    return n;
  }

  it("(4) 1,000 calls in one socket read: at most CALLS_IN_FLIGHT_MAX in flight, the rest wait at the owner; all answered", async () => {
    const p = await pair(true);
    const c = await thousandInOneRead(p);
    expect(p.server.counts.inFlightMax).toBe(CALLS_IN_FLIGHT_MAX);
    await until(() => c.messages.some((m) => m["t"] === "held"), 10_000, "a held keep-alive on the raw connection");
    const done = until(() => answered(c.messages) === 1000, 60_000, "1,000 replies");
    await releaseUntil(p.ownerHandle, done, 60_000);
    expect(p.server.counts.inFlightMax).toBe(CALLS_IN_FLIGHT_MAX);
    expect((await p.owner.read("r999")).status).toBe("OK");
    expect(p.rejects).toEqual([]);
    c.s.destroy();
  }, 90_000);

  it("(4) twin: the limit checked per read (limitPerRead) puts all 1,000 in flight at once", async () => {
    const p = await pair(true);
    unsafeShareFlowForTests.limitPerRead = true;
    const c = await thousandInOneRead(p);
    expect(p.server.counts.inFlightMax).toBeGreaterThan(CALLS_IN_FLIGHT_MAX);
    const done = until(() => answered(c.messages) === 1000, 60_000, "1,000 replies");
    await releaseUntil(p.ownerHandle, done, 60_000);
    c.s.destroy();
  }, 90_000);

  /**
   * A version-3 client by hand (its hello names no deadline) sends 300 writes while writes are held:
   * the longest silence it hears while they wait (600 ms after the owner paused it), and whether
   * all 300 are then answered.
   */
  async function versionThreeHeld(p: Pair): Promise<{ silentMs: number; answered: number }> {
    const c = await raw(readLockNote(p.dir)?.socket as string);
    const heard: number[] = [];
    c.s.on("data", () => heard.push(Date.now()));
    const calls = (first: number, n: number): Buffer => frame({ t: "calls", id: first, ops: Array.from({ length: n }, () => "write"), args: Array.from({ length: n }, (_, i) => [`v3-${first + i}`, "x", null]) });
    c.s.write(Buffer.concat([frame({ t: "hello", version: 3, pid: process.pid }), calls(1, 256), calls(257, 44)]));
    await within(p.ownerHandle.faults.waitFor(POINT), 10_000, "a group held at the fault point");
    await until(() => c.messages.some((m) => m["t"] === "held"), 10_000, "the owner pauses the connection");
    const from = Date.now();
    const done = until(() => answered(c.messages) === 300, 60_000, "300 replies");
    expect(await stateAfter(done, 600)).toBe("pending"); // held: the client's calls wait
    const to = Date.now();
    const marks = [from, ...heard.filter((t) => t > from && t < to), to];
    let silentMs = 0;
    for (let i = 1; i < marks.length; i++) silentMs = Math.max(silentMs, (marks[i] as number) - (marks[i - 1] as number));
    await releaseUntil(p.ownerHandle, done, 60_000);
    c.s.destroy();
    expect(c.messages[0]).toMatchObject({ t: "welcome", version: 4 });
    return { silentMs, answered: answered(c.messages) };
  }

  it("(5) a version-3 client is served: while its writes are held it hears the owner every ~25 ms, and all 300 are answered", async () => {
    const p = await pair(true);
    const r = await versionThreeHeld(p);
    expect(r.silentMs).toBeLessThan(150); // a version-3 link with a deadline from 300 ms never even pings
    expect(r.answered).toBe(300);
    expect((await p.owner.read("v3-300")).status).toBe("OK");
    expect(p.rejects).toEqual([]);
  }, 90_000);

  it("(5) twin: keep-alives every second to a client that names no deadline (slowKeepAliveV3): silences a version-3 deadline under 1 s would not survive", async () => {
    const p = await pair(true);
    unsafeShareFlowForTests.slowKeepAliveV3 = true;
    const r = await versionThreeHeld(p);
    expect(r.silentMs).toBeGreaterThanOrEqual(500);
  }, 90_000);

  it("(5) the hello of another version (5, or 3 with refuseV3 as before) gets the refused frame, naming both versions", async () => {
    const { dir, client } = await pair(false);
    expect(PROTOCOL_VERSION).toBe(4);
    for (const version of [5, 3]) {
      unsafeShareFlowForTests.refuseV3 = version === 3;
      const c = await raw(readLockNote(dir)?.socket as string);
      c.s.write(frame({ t: "hello", version, pid: process.pid }));
      await until(() => c.messages.length > 0, 10_000, `the answer to a version-${version} hello`);
      expect(c.messages[0]).toMatchObject({ t: "refused", version: 4 });
      expect(String(c.messages[0]?.["message"])).toMatch(new RegExp(`speaks share protocol version 4, this client ${version}: run the same engram version`));
      c.s.destroy();
    }
    expect((await client.write("current", "served")).ok).toBe(true);
  });

  /**
   * An owner of protocol 3 by hand, as share/server.ts of 4c2d1fd^ answered: a hello of another
   * version gets `refused` naming version 3, a version-3 hello a `welcome`, each call (alone or in
   * a `calls` frame) a reply — a write's version, a read's value of `valueBytes` — and, as that
   * owner checked on every frame it queued, a client with more than twice its frame limit of
   * replies unread is cut off (`cutOffs` counts them).
   */
  async function versionThreeOwner(socketPath: string, valueBytes = 0): Promise<{ server: net.Server; hellos: unknown[]; cutOffs: number[] }> {
    const hellos: unknown[] = [];
    const cutOffs: number[] = [];
    const answer = (s: net.Socket, id: unknown, op: unknown): void => {
      if (s.destroyed) return;
      const result = op === "read" ? { status: "OK", value: Buffer.alloc(valueBytes, 1), version: 7, generation: 1, scope: "global" } : { ok: true, version: 7, generation: 1 };
      s.write(frame({ t: "replies", r: [id, true, result] }));
      if (s.writableLength <= 2 * FRAME_BYTES_MIN) return;
      cutOffs.push(s.writableLength);
      s.destroy();
    };
    const server = net.createServer((s) => {
      s.on("error", () => undefined);
      const decoder = new FrameDecoder(FRAME_BYTES_MIN);
      s.on("data", (d: Buffer) => {
        for (const body of decoder.push(d)) {
          const m = decodeBody(body) as Record<string, unknown>;
          if (m["t"] === "call") answer(s, m["id"], m["op"]);
          if (m["t"] === "calls") (m["ops"] as unknown[]).forEach((op, i) => answer(s, (m["id"] as number) + i, op));
          if (m["t"] !== "hello") continue;
          hellos.push(m["version"]);
          if (m["version"] !== 3) return void s.end(frame({ t: "refused", version: 3, message: `speaks share protocol version 3, this client ${String(m["version"])}` }));
          s.write(frame({ t: "welcome", version: 3, pid: 1, frameBytesMax: FRAME_BYTES_MIN, maxValueBytes: 16 * 1024 * 1024, stats: null }));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    return { server, hellos, cutOffs };
  }

  /** Connects a Link to a version-3 owner by hand and writes once: the write's result, or the connect's error. */
  async function attachToVersionThree(): Promise<{ result: unknown; hellos: unknown[] }> {
    const { server, hellos } = await versionThreeOwner(path.join(path.dirname(storeDir()), "v3.sock"));
    try {
      const link = await within(Link.connect(server.address() as string, 5000, 5000), 10_000, "the connect");
      const written = new Promise((resolve, reject) => link.call({ op: "write", args: ["k", "v", undefined], resolve, reject }));
      const result = await within(written, 10_000, "the write");
      link.close();
      return { result, hellos };
    } catch (err) {
      return { result: err, hellos };
    } finally {
      server.close();
    }
  }

  it("(5) a current client meeting a version-3 owner (a rolling upgrade) says hello again in version 3 and is served", async () => {
    const { result, hellos } = await attachToVersionThree();
    expect(hellos).toEqual([PROTOCOL_VERSION, 3]);
    expect(result).toMatchObject({ ok: true, version: 7 });
  });

  /**
   * Connects a Link to a version-3 owner by hand whose reads answer 15 MiB, and reads three times
   * at once: the values' lengths, or how many calls the cut-off left unanswered; and the cut-offs.
   */
  async function readBigFromVersionThree(): Promise<{ outcome: { values: number[] } | { unanswered: number }; cutOffs: number[] }> {
    const { server, cutOffs } = await versionThreeOwner(path.join(path.dirname(storeDir()), "v3big.sock"), 15 * MiB);
    try {
      const link = await within(Link.connect(server.address() as string, 5000, 5000), 10_000, "the connect");
      const ended = new Promise<LinkEnd>((resolve) => link.whenEnded(resolve));
      const read = (): Promise<{ value: Uint8Array }> => new Promise((resolve, reject) => link.call({ op: "read", args: ["big", undefined], resolve: (v) => resolve(v as { value: Uint8Array }), reject }));
      const reads = Promise.all([read(), read(), read()]).then((rs) => ({ values: rs.map((r) => r.value.length) }));
      const outcome = await within(Promise.race([reads, ended.then((e) => ({ unanswered: e.unanswered.length }))]), 30_000, "the reads, or the cut-off");
      link.close();
      return { outcome, cutOffs };
    } finally {
      server.close();
    }
  }

  it("(5) a current client of a version-3 owner keeps what its calls can be answered with under that owner's cut-off: 3 reads of 15 MiB at once all arrive", async () => {
    const { outcome, cutOffs } = await readBigFromVersionThree();
    expect(cutOffs).toEqual([]);
    expect(outcome).toEqual({ values: [15 * MiB, 15 * MiB, 15 * MiB] });
  }, 60_000);

  it("(5) twin: every call sent to the version-3 owner at once (noV3ReplyBudget), the same reads get the client cut off", async () => {
    unsafeLinkForTests.noV3ReplyBudget = true;
    const { outcome, cutOffs } = await readBigFromVersionThree();
    expect(cutOffs.length).toBe(1);
    expect(outcome).toMatchObject({ unanswered: expect.any(Number) });
  }, 60_000);

  it("(5) twin: without the second hello (noFallback) the same connect fails NOT_SUPPORTED", async () => {
    unsafeLinkForTests.noFallback = true;
    const { result, hellos } = await attachToVersionThree();
    expect(hellos).toEqual([PROTOCOL_VERSION]);
    expect(result).toMatchObject({ code: "NOT_SUPPORTED" });
  });
});
