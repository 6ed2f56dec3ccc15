/**
 * The commit log's start gate (engine/commit.ts holdStarts), which a sharing owner uses to gather
 * its clients' calls into one commit group while deciding and encoding each call as it arrives
 * (share/server.ts). The rule it must keep: a gate moves only when a group *starts* — a call
 * decided under a closed gate is neither acknowledged nor visible (I1, I10) before the group
 * holding it is written and synced — and a gate never starves the log.
 *
 * How it works: first on an exclusive Store (sync durability): a write issued under a closed
 * gate is queued (decided: it has its sequence) but unresolved and unread; opening the gate
 * commits it; a gate re-closed right after opening still lets one group start. Then at a sharing
 * owner with a long gathering window (400 ms) and client B expected back: client A's write is
 * decided at once (the owner's log holds it queued long before the window ends) while it stays
 * unanswered and unread until its group commits. Twin: with unsafe.shareAckBeforeCommit the
 * owner answers A's write while the gate still holds it — the check sees an acknowledgment of a
 * write nobody can read yet.
 *
 * Property stressed: deciding early never acknowledges early.
 */
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { Store } from "../engine/store.js";
import type { ShareServer } from "../share/server.js";
import { shareFixture } from "./helpers/share-fixture.js";

const WINDOW_MS = 400;
const { storeDir, open } = shareFixture("share-gate");


/** Whether `p` has settled after the event loop ran its pending I/O and timers once more. */
async function settledYet(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 20));
  return done;
}

/** Waits (bounded) until `pred` holds, checking each 2 ms. */
async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe("the commit log's start gate", () => {
  it("a write decided under a closed gate is queued, unacknowledged and unread until the gate opens", async () => {
    const store = await Store.open(storeDir(), { durability: "sync", compaction: { workers: 0 } });
    open.push(store);
    let openGate: () => void = () => undefined;
    store.log.holdStarts(new Promise<void>((r) => (openGate = r)));
    const before = store.sequence;
    const w = store.write("k", "v");
    expect(store.sequence).toBe(before + 1); // decided now: it has its sequence
    expect(store.log.queued.ops).toBe(1);
    expect(await settledYet(w)).toBe(false);
    expect(store.log.writing).toBe(false); // the group did not start
    expect((await store.read("k")).status).toBe("NOT_FOUND"); // I10: not visible before it is durable
    openGate();
    expect((await w).ok).toBe(true);
    expect(await store.read("k")).toMatchObject({ status: "OK", value: "v" });
    expect(store.log.queued.ops).toBe(0);
  });

  it("a gate never starves the log: one group starts after each opened gate, even when a new one closes at once", async () => {
    const store = await Store.open(storeDir(), { durability: "sync", compaction: { workers: 0 } });
    open.push(store);
    let openFirst: () => void = () => undefined;
    store.log.holdStarts(new Promise<void>((r) => (openFirst = r)));
    const w1 = store.write("a", "1");
    expect(await settledYet(w1)).toBe(false);
    openFirst();
    let openSecond: () => void = () => undefined;
    store.log.holdStarts(new Promise<void>((r) => (openSecond = r))); // closed again in the same turn
    expect((await w1).ok).toBe(true); // the first gate's group started and committed anyway
    const w2 = store.write("b", "2");
    expect(await settledYet(w2)).toBe(false); // the second gate holds the next group
    openSecond();
    expect((await w2).ok).toBe(true);
  });
});

/** An owner (sync durability) and clients A and B; B wrote once and is expected back; the window is long. */
async function gathering(unsafe: boolean): Promise<{ server: ShareServer; owner: Engram; a: Engram; b: Engram }> {
  const dir = storeDir();
  const opts = { durability: "sync" as const, compaction: { workers: 0 } };
  const ownerHandle = await SharedStore.open(dir, { ...opts, share: true, ...(unsafe ? { unsafe: { shareAckBeforeCommit: true } } : {}) });
  open.push(ownerHandle);
  const a = Engram.fromBackend(await SharedStore.open(dir, { ...opts, share: true }));
  const b = Engram.fromBackend(await SharedStore.open(dir, { ...opts, share: true }));
  open.push(a, b);
  const server = ownerHandle.shareServer as ShareServer;
  server.limits.gatherMs = WINDOW_MS;
  await b.write("b", "once"); // answered down to nothing in flight: the owner expects B back
  return { server, owner: Engram.fromBackend(ownerHandle), a, b };
}

describe("a sharing owner decides each call as it arrives, and answers it only after its group committed", () => {
  it("A's write is queued at the owner at once, unanswered and unread while the group waits for B; then acknowledged and present", async () => {
    const { server, owner, a } = await gathering(false);
    const log = server.store.log as NonNullable<ShareServer["store"]["log"]>;
    const t0 = performance.now();
    const w = a.write("k", "decided early");
    await until(() => log.queued.ops === 1, WINDOW_MS / 2, "A's write decided at the owner");
    expect(performance.now() - t0).toBeLessThan(WINDOW_MS / 2);
    expect(server.holding).toBe(true);
    expect((await owner.read("k")).status).toBe("NOT_FOUND");
    expect(await settledYet(w)).toBe(false);
    const r = await w;
    expect(r.ok).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(WINDOW_MS * 0.75); // its group waited for B
    expect(await owner.read("k")).toMatchObject({ status: "OK", value: "decided early", version: r.version });
  });

  it("twin (unsafe.shareAckBeforeCommit): A's write is acknowledged while the gate still holds it, and nobody can read it yet", async () => {
    const { server, owner, a } = await gathering(true);
    const log = server.store.log as NonNullable<ShareServer["store"]["log"]>;
    const r = await a.write("k", "acked early");
    expect(r.ok).toBe(true);
    expect(log.queued.ops).toBe(1); // acknowledged, yet not even started
    expect((await owner.read("k")).status).toBe("NOT_FOUND");
  });
});
