/**
 * The contract of a shared store's client (API.md "Sharing one store between processes"), with
 * owner and client in this one process talking over the real Unix socket — the client half is
 * exactly what another process runs, so each case is cheap and deterministic.
 *
 * How it works: an owner is opened with `share: true`, then a client on the same directory. The
 * cases: roles and the one `Engram` type; errors cross the socket as their own classes with
 * their fields (VersionConflictError.expected/actual, TombstonedSlotError.tombstoneSeq,
 * InvalidArgumentError); strings and bytes come back exactly (all 256 byte values, empty string
 * vs empty bytes, non-ASCII); list pages through the owner's cursor beyond one page and stops
 * early; stats() is the owner's snapshot; readSync and faults refuse on a client, and faults or
 * unsafe options on an attaching opener are refused; exclusive and sharing openers refuse each
 * other with a message that says which; a store path too long for a socket name puts the socket
 * in a private 0700 runtime directory named in DIR/LOCK; shareTimeoutMs is checked; and when the
 * owner hangs up without a bye while still holding the lock, the call in flight rejects with
 * OWNER_LOST, a call made meanwhile rejects by its deadline without running, and once the lock is
 * free the client takes over and serves.
 *
 * Property stressed: a client handle is indistinguishable from the owner's except where API.md
 * says so (role, readSync, faults, stats freshness), and no call outlives its deadline.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { pack } from "msgpackr";
import { describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError, NotSupportedError, OwnerLostError, StoreLockedError, TombstonedSlotError, VersionConflictError } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { readLockNote } from "../engine/lock.js";
import { shareFixture } from "./helpers/share-fixture.js";
import { PROTOCOL_VERSION } from "../share/protocol.js";

const OPTS = { durability: "none" as const, compaction: { workers: 0 } };
const { storeDir, open } = shareFixture("share-c");


async function pair(extra: object = {}): Promise<{ dir: string; owner: Engram; client: Engram }> {
  const dir = storeDir();
  const owner = await Engram.open(dir, { ...OPTS, ...extra, share: true });
  open.push(owner);
  const client = await Engram.open(dir, { ...OPTS, share: true });
  open.push(client);
  return { dir, owner, client };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
}

describe("a shared store's client", () => {
  it("has the owner's type, roles, and errors as their own classes with their fields", async () => {
    const { owner, client } = await pair({ tombstoneWrites: "require-clear" });
    expect(owner).toBeInstanceOf(Engram);
    expect(client).toBeInstanceOf(Engram);
    expect([owner.role, client.role]).toEqual(["owner", "client"]);
    const w = await client.write("k", "v1");
    const conflict = await rejection(client.write("k", "v2", { expectedVersion: w.version + 5 }));
    expect(conflict).toBeInstanceOf(VersionConflictError);
    expect(conflict).toMatchObject({ code: "VERSION_CONFLICT", expected: w.version + 5, actual: w.version });
    const f = await client.forget("k");
    const tomb = await rejection(client.write("k", "v3"));
    expect(tomb).toBeInstanceOf(TombstonedSlotError);
    expect(tomb).toMatchObject({ code: "TOMBSTONED", tombstoneSeq: f.tombstoneSeq });
    const bad = await rejection(client.write("", "x"));
    expect(bad).toBeInstanceOf(InvalidArgumentError);
    expect(await client.probe("k")).toEqual(await owner.probe("k"));
    expect((await client.write("k", "v4", { clearTombstone: true })).generation).toBeGreaterThan(1);
  });

  it("returns strings and bytes exactly as written", async () => {
    const { owner, client } = await pair();
    const all = new Uint8Array(256).map((_, i) => i);
    const cases: Array<[string, string | Uint8Array]> = [
      ["bytes", all],
      ["empty-bytes", new Uint8Array(0)],
      ["empty-string", ""],
      ["unicode", "grüße \u{1F600} \u0000 end"],
    ];
    for (const [k, v] of cases) await client.write(k, v);
    for (const [k, v] of cases) {
      for (const h of [client, owner]) {
        const r = await h.read(k);
        expect(r.status).toBe("OK");
        if (r.status !== "OK") continue;
        expect(typeof r.value).toBe(typeof v);
        if (typeof v === "string") expect(r.value).toBe(v);
        else expect(Buffer.from(r.value as Uint8Array).equals(Buffer.from(v))).toBe(true);
        if (typeof v !== "string") expect(Buffer.isBuffer(r.value)).toBe(Buffer.isBuffer(v));
      }
    }
  });

  it("lists beyond one page, in key order, and stops early", async () => {
    const { owner, client } = await pair();
    await client.batch(Array.from({ length: 1300 }, (_, i) => ({ op: "write" as const, key: `key-${String(i).padStart(5, "0")}`, value: "x" })));
    const viaClient: string[] = [];
    for await (const e of client.list()) viaClient.push(e.key);
    const viaOwner: string[] = [];
    for await (const e of owner.list()) viaOwner.push(e.key);
    expect(viaClient).toHaveLength(1300);
    expect(viaClient).toEqual(viaOwner);
    let n = 0;
    for await (const _e of client.list({ prefix: "key-0" })) if (++n === 3) break;
    expect(n).toBe(3);
    expect(await client.read("key-00001")).toMatchObject({ status: "OK" }); // the early stop left the link usable
  });

  it("stats() is the owner's snapshot; readSync and faults refuse; faults/unsafe on an attaching opener are refused", async () => {
    const { dir, owner, client } = await pair();
    await client.write("s", "1");
    await client.flush();
    expect(client.stats().sequence).toBe(owner.stats().sequence);
    expect(() => client.readSync("s")).toThrow(NotSupportedError);
    expect(owner.readSync("s")).toMatchObject({ status: "OK", value: "1" });
    expect(await rejection(client.faults.waitFor("read:after-authorize"))).toBeInstanceOf(NotSupportedError);
    for (const extra of [{ faults: { pauseAt: ["read:after-authorize" as const] } }, { unsafe: { skipReadValidation: true } }]) {
      expect(await rejection(Engram.open(dir, { ...OPTS, ...extra, share: true }))).toBeInstanceOf(NotSupportedError);
    }
    for (const shareTimeoutMs of [0, -1, 1.5, Number.NaN, 4_000_000]) {
      expect(await rejection(Engram.open(dir, { share: true, shareTimeoutMs }))).toBeInstanceOf(InvalidArgumentError);
    }
  });

  it("exclusive and sharing openers refuse each other, saying which", async () => {
    const { dir } = await pair();
    const excl = await rejection(Engram.open(dir, OPTS));
    expect(excl).toBeInstanceOf(StoreLockedError);
    expect(String((excl as Error).message)).toMatch(/shared by its owner, pid \d+: open it with share: true/);

    const other = storeDir();
    const holder = await Engram.open(other, OPTS);
    try {
      const t0 = Date.now();
      const shared = await rejection(Engram.open(other, { ...OPTS, share: true, shareTimeoutMs: 5000 }));
      expect(shared).toBeInstanceOf(StoreLockedError);
      expect(String((shared as Error).message)).toMatch(/opened exclusively by pid \d+/);
      expect(Date.now() - t0).toBeLessThan(4000); // told at once, not after the handover deadline
    } finally {
      await holder.close();
    }
  });

  it("a store path too long for a socket name serves from a private runtime directory named in DIR/LOCK", async () => {
    let dir = storeDir();
    while (Buffer.byteLength(path.join(dir, "engram.sock")) <= 110) dir = path.join(dir, "a-rather-long-directory-name");
    const owner = await Engram.open(dir, { ...OPTS, share: true });
    open.push(owner);
    const note = readLockNote(dir);
    expect(note?.mode).toBe("shared");
    const socket = note?.socket as string;
    expect(socket.startsWith(dir)).toBe(false);
    expect(Buffer.byteLength(socket)).toBeLessThanOrEqual(100);
    expect(fs.statSync(path.dirname(socket)).mode & 0o777).toBe(0o700);
    expect(fs.statSync(socket).mode & 0o777).toBe(0o600);
    const client = await Engram.open(dir, { ...OPTS, share: true });
    open.push(client);
    expect(client.role).toBe("client");
    await client.write("deep", "yes");
    expect(await owner.read("deep")).toMatchObject({ value: "yes" });
    await client.close();
    await owner.close();
    expect(fs.existsSync(socket)).toBe(false);
  });

  it("an owner closes on time even while a client that never reads holds unread replies", async () => {
    const dir = storeDir();
    const owner = await Engram.open(dir, { ...OPTS, share: true });
    open.push(owner);
    await owner.write("big", new Uint8Array(1024 * 1024));
    const socket = readLockNote(dir)?.socket as string;
    const s = net.createConnection(socket);
    s.on("error", () => undefined);
    const closed = new Promise<void>((resolve) => s.on("close", () => resolve()));
    await new Promise<void>((resolve) => s.once("connect", () => resolve()));
    s.pause(); // never reads
    const frame = (m: unknown): Buffer => {
      const body = pack(m);
      return Buffer.concat([Buffer.from([body.length >>> 24, (body.length >>> 16) & 255, (body.length >>> 8) & 255, body.length & 255]), body]);
    };
    s.write(frame({ t: "hello", version: PROTOCOL_VERSION, pid: 1 }));
    for (let id = 1; id <= 6; id++) s.write(frame({ t: "call", id, op: "read", args: ["big", undefined] }));
    // Replies have begun to arrive (more than the welcome is buffered unread): the owner took the calls.
    const deadline = Date.now() + 10_000;
    while (s.readableLength < 16 * 1024) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 5));
    }
    const t0 = Date.now();
    await owner.close();
    expect(Date.now() - t0).toBeLessThan(5000);
    s.destroy();
    await closed;
  });

  it("owner hangs up holding the lock: in-flight call OWNER_LOST, a queued call rejects by its deadline unrun, then takeover", async () => {
    const dir = storeDir();
    const owner = await SharedStore.open(dir, { ...OPTS, share: true });
    open.push(owner);
    const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true, shareTimeoutMs: 300 }));
    open.push(client);
    expect(client.role).toBe("client");
    await client.write("before", "1");
    const inflight = client.write("inflight", "x");
    owner.shareServer?.abort();
    const lost = await rejection(inflight);
    expect(lost).toBeInstanceOf(OwnerLostError);
    const t0 = Date.now();
    const queued = await rejection(client.write("queued", "never"));
    const waited = Date.now() - t0;
    expect(queued).toBeInstanceOf(OwnerLostError);
    expect(String((queued as Error).message)).toMatch(/was not run/);
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(3000);
    await owner.close(); // frees the lock: the client's handover loop takes it
    const after = await client.write("after", "2");
    expect(client.role).toBe("owner");
    expect(await client.read("before")).toMatchObject({ value: "1" });
    expect(await client.read("queued")).toEqual({ status: "NOT_FOUND" });
    expect(await client.read("after")).toMatchObject({ version: after.version });
  });
});
