/**
 * Gathering commit groups at a sharing owner (share/server.ts shouldHold): the owner may hold a
 * client's commit call a little — behind the group in flight, then up to `gatherMs` for the
 * clients it has just answered — so that several clients' calls share one commit group. The
 * rules this must keep, each checked here: the hold is bounded (a client that does not come
 * back costs one window, after which nobody is waited for), one connection's calls still run in
 * the order sent (a read issued after a held write sees it), and a call held when the owner
 * closes is run and answered before the bye (never lost, never resent).
 *
 * How it works: owner and two clients are handles in this process over the real Unix socket;
 * the test sets the live server's `gatherMs` to a long window (400 ms) so that a hold is plain
 * to see in wall time against the ~ms a write takes here (durability none), with margins wide
 * enough for a loaded machine. Client B writes once and goes quiet, so the owner expects it back;
 * client A's next write is then held for the window. Twin: with gathering off (gatherMs 0) the
 * same write is not held — the timing check does see a hold when there is one.
 *
 * Property stressed: gathering moves when a call reaches the commit log, never whether or in
 * which order it runs, and never for longer than its window.
 */
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import type { ShareServer } from "../share/server.js";
import { shareFixture } from "./helpers/share-fixture.js";

const OPTS = { durability: "none" as const, compaction: { workers: 0 } };
const WINDOW_MS = 400;
const { storeDir, open } = shareFixture("share-g");

/** An owner and clients A and B; the owner's server gathers for `gatherMs`. B has written once and gone quiet. */
async function setup(gatherMs: number): Promise<{ ownerHandle: SharedStore; server: ShareServer; a: Engram; b: Engram }> {
  const dir = storeDir();
  const ownerHandle = await SharedStore.open(dir, { ...OPTS, share: true });
  open.push(ownerHandle);
  const a = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true }));
  const b = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true }));
  open.push(a, b);
  const server = ownerHandle.shareServer as ShareServer;
  server.limits.gatherMs = gatherMs;
  await b.write("b", "once"); // answered down to nothing in flight: the owner expects B back
  return { ownerHandle, server, a, b };
}

async function timed<T>(p: Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await p;
  return { value, ms: performance.now() - t0 };
}

describe("gathering commit groups at the owner", () => {
  it("a write waiting for a client that does not come back is held one window, then nobody is waited for", async () => {
    const { a } = await setup(WINDOW_MS);
    const held = await timed(a.write("k", "v1"));
    expect(held.value.ok).toBe(true);
    expect(held.ms).toBeGreaterThanOrEqual(WINDOW_MS * 0.75); // held for B
    expect(held.ms).toBeLessThan(WINDOW_MS + 5000); // but bounded by the window
    // B did not come back within the window: it is expected no longer, A's next writes go at once.
    for (let i = 0; i < 5; i++) expect((await timed(a.write(`k${i}`, "v"))).ms).toBeLessThan(WINDOW_MS * 0.75);
  });

  it("twin (gathering off): the same write is not held, so the check above does see a hold", async () => {
    const { a } = await setup(0);
    const t = await timed(a.write("k", "v1"));
    expect(t.value.ok).toBe(true);
    expect(t.ms).toBeLessThan(WINDOW_MS * 0.75);
  });

  it("a client whose last call was a read is not waited for (its next call would be a read, never held)", async () => {
    const { a, b } = await setup(WINDOW_MS);
    await new Promise((r) => setTimeout(r, WINDOW_MS + 100)); // B's mark from its write expires with one held write below
    await a.write("expire", "B's mark");
    await b.read("b"); // B answered down to nothing by a read
    const t = await timed(a.write("k", "v1"));
    expect(t.value.ok).toBe(true);
    expect(t.ms).toBeLessThan(WINDOW_MS * 0.75);
  });

  it("a client that comes back ends the wait: its call and the held one are released together", async () => {
    const { a, b } = await setup(WINDOW_MS);
    const held = timed(a.write("k", "v1"));
    await new Promise((r) => setTimeout(r, 20));
    const back = await timed(b.write("b2", "again"));
    const h = await held;
    expect(h.value.ok && back.value.ok).toBe(true);
    expect(h.ms).toBeLessThan(WINDOW_MS * 0.75); // released when B came back, not by the window
  });

  it("one connection's calls run in the order sent: a held write, then a read, a forget and a read answer as on the owner itself", async () => {
    const { ownerHandle, a } = await setup(WINDOW_MS);
    const owner = Engram.fromBackend(ownerHandle);
    /** The same four calls issued in one turn, as a local caller of `s` would. */
    const sequence = (s: Engram, key: string): Promise<unknown[]> =>
      Promise.all([s.write(key, "written"), s.read(key), s.forget(key), s.read(key)]).then(([w, r, f, r2]) => [
        (w as { ok: boolean }).ok,
        (r as { status: string }).status,
        (f as { tombstoneSeq: number | null }).tombstoneSeq !== null,
        (r2 as { status: string }).status,
      ]);
    const local = await sequence(owner, "local");
    const t0 = performance.now();
    const remote = await sequence(a, "remote");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(WINDOW_MS * 0.75); // the write was held, and the read behind it too
    expect(remote).toEqual(local);
    expect(await a.read("remote")).toEqual(await owner.read("remote"));
  });

  it("a call held when the owner closes runs and is answered before the bye: acknowledged once, present after the takeover", async () => {
    const { ownerHandle, a } = await setup(10_000);
    const held = timed(a.write("at-close", "kept", { expectedVersion: null }));
    await new Promise((r) => setTimeout(r, 20));
    await ownerHandle.close();
    const h = await held;
    expect(h.value.ok).toBe(true); // not OWNER_LOST, and not resent (a create-only resend would conflict)
    expect(h.ms).toBeLessThan(5000); // the close released it, not the 10 s window
    expect(await a.read("at-close")).toMatchObject({ status: "OK", value: "kept", version: h.value.version });
  });
});
