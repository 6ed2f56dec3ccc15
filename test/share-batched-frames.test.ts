/**
 * Batched frames of the share protocol (version 3): the calls a client issues in one turn travel
 * in one `calls` frame and the results the owner settles in one turn in one `replies` frame, and
 * a frame is not a transaction — each call keeps its own result or its own typed error.
 *
 * How it works: owner and client are two handles in this process over the real Unix socket (the
 * client half is what another process runs), and raw socket connections speak the protocol by
 * hand. The owner's ShareServer counts the frames and calls it takes in, so the cases can say how
 * many frames a turn cost. The cases: one turn of writes, conflicting writes, invalid keys,
 * reads and a forget arrives as one frame and settles each call on its own (the failures wrote
 * nothing); a turn of 600 calls is cut into frames of CALLS_PER_FRAME_MAX; a call too large for
 * any frame rejects alone with LimitExceededError while large legal values travel alone; raw
 * frames past the call-count limit, with ops and args of different lengths, with one call
 * outside the API, or with ids that overflow are cut off before any of their calls runs, while
 * a frame of exactly the limit is served; a hello of a newer protocol version is answered with a
 * `refused` frame naming both versions, and a link meeting such an answer rejects with
 * NOT_SUPPORTED. Last, the ordering rule a closing owner keeps: every reply leaves before its
 * bye (a client resends what the bye left unanswered). Its twin (`unsafeByeBeforeReplies`)
 * sends the bye first, and the resent create-only writes then fail with VERSION_CONFLICT at
 * the next owner — they had run.
 *
 * Property stressed: batching changes how calls travel, never what each call does or whether it
 * runs once; every frame is bounded in calls and bytes, and an over-limit frame runs nothing.
 */
import * as net from "node:net";
import * as path from "node:path";
import { frame, raw } from "./helpers/share-raw.js";
import { describe, expect, it } from "vitest";
import { Engram, EngramError, InvalidArgumentError, LimitExceededError, NotSupportedError, VersionConflictError } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { Link, ProtocolMismatchError } from "../share/link.js";
import { readLockNote } from "../engine/lock.js";
import { shareFixture } from "./helpers/share-fixture.js";
import { CALLS_PER_FRAME_MAX, FRAME_BYTES_MIN, PROTOCOL_VERSION } from "../share/protocol.js";
import type { ShareServer } from "../share/server.js";

const OPTS = { durability: "none" as const, compaction: { workers: 0 } };
const { storeDir, open } = shareFixture("share-f");


/** An owner handle (its server observable) and a client handle on one fresh directory. */
async function pair(extra: object = {}): Promise<{ dir: string; ownerHandle: SharedStore; server: ShareServer; owner: Engram; client: Engram }> {
  const dir = storeDir();
  const ownerHandle = await SharedStore.open(dir, { ...OPTS, ...extra, share: true });
  open.push(ownerHandle);
  const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true }));
  open.push(client);
  expect(ownerHandle.role).toBe("owner");
  expect(client.role).toBe("client");
  return { dir, ownerHandle, server: ownerHandle.shareServer as ShareServer, owner: Engram.fromBackend(ownerHandle), client };
}

/** The settled outcome of `p`: its value, or its error. */
async function outcome<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Resolves when `p` does, or fails after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);
}


/** Waits (bounded) until `pred` holds, polling each 5 ms. */
async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("batched frames: N calls in one frame, each on its own", () => {
  it("one turn of mixed calls is one calls frame; each call keeps its own result or typed error; failures write nothing", async () => {
    const { server, owner, client } = await pair();
    const seeded = await owner.write("exists", "v1");
    await client.read("exists"); // the link is up and idle
    const before = { ...server.counts };
    const bytes = new Uint8Array(256).map((_, i) => i);
    // All issued in this one turn (no await between them):
    const writes = Array.from({ length: 100 }, (_, i) => outcome(client.write(`k${i}`, `value-${i}`)));
    const conflict = outcome(client.write("exists", "never", { expectedVersion: seeded.version + 999 }));
    const badKey = outcome(client.write("", "never"));
    const created = outcome(client.write("fresh", bytes, { expectedVersion: null }));
    const readBack = outcome(client.read("exists"));
    const missing = outcome(client.read("missing"));
    const forgot = outcome(client.forget("k0")); // after k0's write in the same frame: calls run in the order sent
    const scoped = outcome(client.write("k1", "in-b", { scope: "b" }));

    for (const [i, w] of (await Promise.all(writes)).entries()) expect(w, `write k${i}`).toMatchObject({ ok: true, value: { ok: true } });
    const c = await conflict;
    expect(c.ok).toBe(false);
    if (!c.ok) {
      expect(c.error).toBeInstanceOf(VersionConflictError);
      expect(c.error).toMatchObject({ code: "VERSION_CONFLICT", expected: seeded.version + 999, actual: seeded.version });
    }
    const b = await badKey;
    expect(b.ok === false && b.error instanceof InvalidArgumentError && b.error.code === "INVALID_ARGUMENT").toBe(true);
    expect(await created).toMatchObject({ ok: true, value: { ok: true } });
    expect(await readBack).toMatchObject({ ok: true, value: { status: "OK", value: "v1" } });
    expect(await missing).toMatchObject({ ok: true, value: { status: "NOT_FOUND" } });
    const f = await forgot;
    expect(f.ok && f.value.tombstoneSeq !== null).toBe(true);
    expect(await scoped).toMatchObject({ ok: true, value: { ok: true } });

    // One frame carried the whole turn; its results came back in far fewer frames than calls.
    expect(server.counts.callFrames - before.callFrames).toBe(1);
    expect(server.counts.calls - before.calls).toBe(107);
    expect(server.counts.replyFrames - before.replyFrames).toBeGreaterThanOrEqual(1);
    expect(server.counts.replyFrames - before.replyFrames).toBeLessThanOrEqual(8);

    // The owner's own view: the successes are there, the failures wrote nothing.
    expect(await owner.read("exists")).toMatchObject({ status: "OK", value: "v1", version: seeded.version });
    expect(await owner.read("k0")).toMatchObject({ status: "NOT_FOUND" });
    for (let i = 1; i < 100; i++) expect(await owner.read(`k${i}`)).toMatchObject({ status: "OK", value: `value-${i}` });
    expect(await owner.read("k1", { scope: "b" })).toMatchObject({ status: "OK", value: "in-b" });
    const fresh = await owner.read("fresh");
    expect(fresh.status === "OK" && fresh.value instanceof Uint8Array && Buffer.from(fresh.value).equals(Buffer.from(bytes))).toBe(true);
  });

  it(`a turn of 600 calls is cut into frames of at most ${CALLS_PER_FRAME_MAX}`, async () => {
    const { server, owner, client } = await pair();
    await client.read("warm");
    const before = { ...server.counts };
    const results = await Promise.all(Array.from({ length: 600 }, (_, i) => client.write(`n${i}`, `v${i}`)));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(server.counts.callFrames - before.callFrames).toBe(Math.ceil(600 / CALLS_PER_FRAME_MAX));
    expect(server.counts.calls - before.calls).toBe(600);
    expect(await owner.read("n599")).toMatchObject({ status: "OK", value: "v599" });
  });

  it("a call too large for any frame rejects alone with LIMIT_EXCEEDED; large legal values of the same turn travel alone", async () => {
    const { server, owner, client } = await pair();
    await client.read("warm");
    const before = { ...server.counts };
    const big = 6 * 1024 * 1024;
    const small = Array.from({ length: 10 }, (_, i) => outcome(client.write(`s${i}`, `x${i}`)));
    const large = Array.from({ length: 3 }, (_, i) => outcome(client.write(`l${i}`, new Uint8Array(big).fill(i + 1))));
    const huge = outcome(client.write("huge", new Uint8Array(FRAME_BYTES_MIN + 1)));
    const after = Array.from({ length: 10 }, (_, i) => outcome(client.write(`t${i}`, `y${i}`)));
    const h = await huge;
    expect(h.ok).toBe(false);
    if (!h.ok) {
      expect(h.error).toBeInstanceOf(LimitExceededError);
      expect((h.error as EngramError).code).toBe("LIMIT_EXCEEDED");
      expect(String((h.error as Error).message)).toMatch(/frame limit/);
    }
    for (const r of await Promise.all([...small, ...large, ...after])) expect(r.ok).toBe(true);
    expect(await owner.read("huge")).toMatchObject({ status: "NOT_FOUND" });
    for (let i = 0; i < 3; i++) {
      const r = await owner.read(`l${i}`);
      expect(r.status === "OK" && r.value instanceof Uint8Array && r.value.length === big && r.value[big - 1] === i + 1).toBe(true);
    }
    // 10 small calls in one frame, each large value alone, the huge one never sent, then the rest.
    expect(server.counts.callFrames - before.callFrames).toBe(5);
    expect(server.counts.calls - before.calls).toBe(23);
  });

  it("raw frames past the limits are cut off before any of their calls runs; a frame of exactly the limit is served", async () => {
    const { dir, server, owner, client } = await pair();
    const socketPath = readLockNote(dir)?.socket as string;
    const rejected: string[] = [];
    server.onReject = (why) => rejected.push(why);
    const hello = frame({ t: "hello", version: PROTOCOL_VERSION, pid: 1 });
    const writes = (prefix: string, n: number): { ops: string[]; args: unknown[][] } => ({
      ops: Array.from({ length: n }, () => "write"),
      args: Array.from({ length: n }, (_, i) => [`${prefix}${i}`, "x", undefined]),
    });
    const over = writes("over", CALLS_PER_FRAME_MAX + 1);
    const uneven = writes("uneven", 3);
    const outside = writes("outside", 5);
    const cases: Array<[string, Record<string, unknown>, RegExp, string]> = [
      ["over the call limit", { t: "calls", id: 1, ...over }, new RegExp(`exceeds the limit of ${CALLS_PER_FRAME_MAX}`), "over"],
      ["ops and args of different lengths", { t: "calls", id: 1, ops: uneven.ops, args: uneven.args.slice(0, 2) }, /one non-zero length/, "uneven"],
      ["one call outside the API", { t: "calls", id: 1, ops: [...outside.ops, "close"], args: [...outside.args, []] }, /no such operation/, "outside"],
      ["ids that overflow", { t: "calls", id: Number.MAX_SAFE_INTEGER - 1, ...writes("overflow", 4) }, /call id/, "overflow"],
      ["no calls", { t: "calls", id: 1, ops: [], args: [] }, /one non-zero length/, "none"],
    ];
    for (const [what, message, reason, prefix] of cases) {
      const c = await raw(socketPath);
      c.s.write(Buffer.concat([hello, frame(message)]));
      await within(c.closed, 10_000, `${what}: closed`);
      expect(rejected.some((r) => reason.test(r)), `${what}: cut off for ${String(reason)}, got ${JSON.stringify(rejected)}`).toBe(true);
      expect(c.messages.some((m) => m["t"] === "replies"), `${what}: no call answered`).toBe(false);
      expect(await owner.read(`${prefix}0`), `${what}: nothing ran`).toMatchObject({ status: "NOT_FOUND" });
      const w = await within(client.write(`alive-${prefix}`, "yes"), 10_000, `${what}: the client is still served`);
      expect(w.ok).toBe(true);
    }
    // Exactly the limit: served, every call answered once, in as few frames as the owner settled them in.
    const c = await raw(socketPath);
    const full = writes("full", CALLS_PER_FRAME_MAX);
    c.s.write(Buffer.concat([hello, frame({ t: "calls", id: 10, ...full })]));
    const answered = (): Set<number> => {
      const ids = new Set<number>();
      for (const m of c.messages) if (m["t"] === "replies") for (let i = 0; i < (m["r"] as unknown[]).length; i += 3) ids.add((m["r"] as number[])[i] as number);
      return ids;
    };
    await until(() => answered().size === CALLS_PER_FRAME_MAX, 10_000, "a full frame answered");
    expect(Math.min(...answered())).toBe(10);
    expect(Math.max(...answered())).toBe(10 + CALLS_PER_FRAME_MAX - 1);
    expect(await owner.read(`full${CALLS_PER_FRAME_MAX - 1}`)).toMatchObject({ status: "OK", value: "x" });
    c.s.destroy();
  });

  it("a hello of a newer protocol version gets a refused frame naming both versions; a link meeting one rejects with NOT_SUPPORTED", async () => {
    const { dir, client } = await pair();
    const socketPath = readLockNote(dir)?.socket as string;
    const c = await raw(socketPath);
    c.s.write(frame({ t: "hello", version: PROTOCOL_VERSION + 1, pid: 1 })); // versions 1 and 2: test/share-old-protocol.test.ts
    await within(c.closed, 10_000, "an old hello closed");
    expect(c.messages).toHaveLength(1);
    expect(c.messages[0]).toMatchObject({ t: "refused", version: PROTOCOL_VERSION });
    expect(String(c.messages[0]?.["message"])).toMatch(new RegExp(`version ${PROTOCOL_VERSION}, this client ${PROTOCOL_VERSION + 1}`));
    expect((await client.write("still", "served")).ok).toBe(true);

    // The other side: an owner of another version, as this process's Link sees it.
    const fake = path.join(path.dirname(dir), "fake.sock");
    const other = net.createServer((s) => {
      s.on("error", () => undefined);
      s.once("data", () => s.end(frame({ t: "refused", version: PROTOCOL_VERSION + 1, message: "speaks version 4" })));
    });
    await new Promise<void>((resolve) => other.listen(fake, resolve));
    try {
      const err = await Link.connect(fake, 5000, 5000).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ProtocolMismatchError);
      expect(err).toBeInstanceOf(NotSupportedError);
      expect((err as EngramError).code).toBe("NOT_SUPPORTED");
      expect(String((err as Error).message)).toMatch(/refused this process: speaks version 4/);
    } finally {
      other.close();
    }
  });
});

describe("a closing owner's replies leave before its bye", () => {
  /**
   * 64 create-only writes in one frame, paused in the owner's commit; the owner starts closing,
   * then the commit goes on. Returns how each write settled: a write the client had to resend
   * after the bye, although it ran, fails with VERSION_CONFLICT at the next owner.
   */
  async function closeDuringCommit(byeFirst: boolean): Promise<{ ok: number; conflicts: number; other: string[] }> {
    const dir = storeDir();
    const ownerHandle = await SharedStore.open(dir, { ...OPTS, share: true, faults: { pauseAt: ["write:after-append"] } });
    open.push(ownerHandle);
    const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true }));
    open.push(client);
    (ownerHandle.shareServer as ShareServer).limits.unsafeByeBeforeReplies = byeFirst;
    const writes = Array.from({ length: 64 }, (_, i) => outcome(client.write(`once${i}`, `v${i}`, { expectedVersion: null })));
    await within(ownerHandle.faults.waitFor("write:after-append"), 10_000, "a group paused in the owner's commit");
    const closing = ownerHandle.close();
    let closed = false;
    void closing.finally(() => (closed = true));
    // Let every group through (the point stays armed: each later group pauses there too).
    const releasing = (async () => {
      while (!closed) {
        ownerHandle.faults.release("write:after-append");
        await Promise.race([ownerHandle.faults.waitFor("write:after-append"), closing, new Promise((r) => setTimeout(r, 20))]);
      }
    })();
    const settled = await within(Promise.all(writes), 15_000, "every write settled");
    await within(closing, 15_000, "the owner closed");
    await releasing;
    await until(() => client.role === "owner", 10_000, "the client took over"); // and ran what the bye left unanswered
    const other: string[] = [];
    let ok = 0;
    let conflicts = 0;
    for (const s of settled) {
      if (s.ok) ok++;
      else if (s.error instanceof VersionConflictError) conflicts++;
      else other.push(String(s.error));
    }
    for (let i = 0; i < 64; i++) expect(await client.read(`once${i}`)).toMatchObject({ status: "OK", value: `v${i}` });
    return { ok, conflicts, other };
  }

  it("every write acknowledged once: none is resent after it ran", async () => {
    const r = await closeDuringCommit(false);
    expect(r).toEqual({ ok: 64, conflicts: 0, other: [] });
  });

  it("twin (unsafeByeBeforeReplies): the bye overtakes replies, the client resends writes that ran, and they conflict", async () => {
    const r = await closeDuringCommit(true);
    expect(r.other).toEqual([]);
    expect(r.conflicts).toBeGreaterThan(0);
    expect(r.ok + r.conflicts).toBe(64);
  });
});
