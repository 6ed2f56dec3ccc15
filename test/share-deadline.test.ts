/**
 * Deadlines: a call in flight at an owner that is stalled — SIGSTOP, not dead, so its socket stays
 * open and nothing tells the client — rejects by its deadline instead of hanging.
 *
 * How it works: a real child process owns the store (test/helpers/share-child.ts); this process
 * attaches as a client with a short shareTimeoutMs. The child is stopped with SIGSTOP; a write
 * sent then must reject with OWNER_LOST ("did not answer") no sooner than the deadline and
 * not much later; a call issued after it (the client is in handover, the stopped owner still
 * holds the flock, so nobody can take over) waits its own deadline in the queue and rejects
 * unrun. After SIGCONT the client re-attaches to the same owner and is served again; the queued
 * call is absent from the store (it was not run). The twin is the link as it was before
 * deadlines: a Link whose deadline is an hour keeps the same call pending long past the point
 * where the guarded one gave up — the hang the deadline prevents. The last case guards against
 * the opposite failure: a call the owner holds longer than the deadline while alive (paused at a
 * fault point, as a long compact() would be) is not cut off, because the owner answers pings.
 * Every child is SIGKILLed when the file ends.
 *
 * Property stressed: no client call hangs past its deadline at a stalled owner, and a slow call at
 * a live owner is not mistaken for a stalled one.
 */
import { afterAll, describe, expect, it } from "vitest";
import { Engram, OwnerLostError } from "../src/index.js";
import { SharedStore } from "../share/handle.js";
import { Link } from "../share/link.js";
import { readLockNote } from "../engine/lock.js";
import { ShareProc, spawnedProcs, storeDir } from "./helpers/share-proc.js";

const DEADLINE_MS = 600;
const OPTS = { durability: "sync" as const, compaction: { workers: 0 } };
const procs = spawnedProcs();
const handles: Engram[] = [];
afterAll(async () => {
  for (const p of procs) if (p.child.signalCode === "SIGSTOP" || p.child.exitCode === null) p.child.kill("SIGCONT");
  for (const h of handles) await h.close().catch(() => undefined);
});

/** The rejection of `p` (fails the test if it resolves), and how long it took. */
async function rejectionOf(p: Promise<unknown>): Promise<{ err: unknown; ms: number }> {
  const t0 = Date.now();
  const err = await p.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
  return { err, ms: Date.now() - t0 };
}

/** Resolves with "pending" if `p` has not settled within `ms`, else with how it settled. */
async function stateAfter(p: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<string>((resolve) => (timer = setTimeout(() => resolve("pending"), ms)));
  const settled = p.then(
    () => "resolved",
    () => "rejected",
  );
  const state = await Promise.race([pending, settled]);
  clearTimeout(timer);
  return state;
}

/** A child owner over a fresh store, and this process attached to it as a client. */
async function ownerAndClient(label: string, ownerOptions: object | "shared" = "shared"): Promise<{ owner: ShareProc; client: Engram; dir: string }> {
  const dir = storeDir(label);
  const owner = new ShareProc(dir, 10_000, ownerOptions);
  procs.push(owner);
  expect(await owner.opened()).toBe("owner");
  const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true, shareTimeoutMs: DEADLINE_MS }));
  handles.push(client);
  expect(client.role).toBe("client");
  return { owner, client, dir };
}

describe("a call at a stalled owner", () => {
  it("rejects OWNER_LOST by its deadline; a queued call rejects unrun; after SIGCONT the client is served again", async () => {
    const { owner, client } = await ownerAndClient("share-dl");
    await client.write("before", "1");
    owner.child.kill("SIGSTOP");
    try {
      const inflight = await rejectionOf(client.write("inflight", "x"));
      expect(inflight.err).toBeInstanceOf(OwnerLostError);
      expect(String((inflight.err as Error).message)).toMatch(/did not answer for \d+ ms/);
      expect(inflight.ms).toBeGreaterThanOrEqual(DEADLINE_MS - 20);
      expect(inflight.ms).toBeLessThan(DEADLINE_MS + 4000); // one watchdog period late at most, plus a loaded machine
      const queued = await rejectionOf(client.write("queued", "never"));
      expect(queued.err).toBeInstanceOf(OwnerLostError);
      expect(String((queued.err as Error).message)).toMatch(/was not run/);
      expect(queued.ms).toBeGreaterThanOrEqual(DEADLINE_MS - 20);
      expect(queued.ms).toBeLessThan(DEADLINE_MS + 4000);
    } finally {
      owner.child.kill("SIGCONT");
    }
    await client.write("after", "2"); // waits in the handover queue until the woken owner welcomes it
    expect(client.role).toBe("client");
    expect(await client.read("before")).toMatchObject({ value: "1" });
    expect(await client.read("after")).toMatchObject({ value: "2" });
    expect(await client.read("queued")).toEqual({ status: "NOT_FOUND" });
    const inflightNow = await client.read("inflight"); // its outcome was unknown: either is allowed, but it is one of them
    expect(["OK", "NOT_FOUND"]).toContain(inflightNow.status);
    await owner.kill();
  });

  it("twin: a link without a deadline leaves the same call pending long past it", async () => {
    const { owner, dir } = await ownerAndClient("share-dl-twin");
    const note = readLockNote(dir);
    expect(note?.socket).toBeDefined();
    const link = await Link.connect(note?.socket as string, 2000, 3_600_000);
    owner.child.kill("SIGSTOP");
    try {
      const call = new Promise((resolve, reject) => link.call({ op: "write", args: ["k", "v", undefined], resolve, reject }));
      expect(await stateAfter(call, 3 * DEADLINE_MS)).toBe("pending");
    } finally {
      owner.child.kill("SIGCONT");
      link.close();
    }
    await owner.kill();
  });

  it("a call the live owner holds longer than the deadline is answered, not cut off (pings keep the link)", async () => {
    const point = "write:after-sync";
    const { owner, client } = await ownerAndClient("share-dl-slow", { faults: { pauseAt: [point] } });
    const slow = client.write("slow", "v");
    await owner.ask(`waitfor ${point}`, "paused", 10_000);
    expect(await stateAfter(slow, 3 * DEADLINE_MS)).toBe("pending"); // held three deadlines, owner alive
    await owner.ask(`release ${point}`, "released", 10_000);
    expect(await slow).toMatchObject({ ok: true });
    expect(client.role).toBe("client");
    await owner.kill();
  });
});
