/**
 * list() across a handover: an iteration in progress at a client survives its owner's SIGKILL.
 *
 * How it works: a child process A owns a fresh store and writes 1500 keys in one scope; a child C
 * attaches and lists the scope, pausing after 600 entries (pages are 512 entries, so C holds part
 * of its second page and the cursor at A is open). A is SIGKILLed. Then C is told to go on: its
 * next page is lost with A, so the list is reopened after the last key C returned — locally when
 * C took the store over (the first case), or at the new owner when another process did (the
 * second: C is SIGSTOPped across the kill so that this test process deterministically becomes the
 * owner, and writes one key sorting before C's position and one after it before C is let go).
 * Checked: C's keys are exactly the scope's keys in key order, none twice, none missing, plus the
 * key written after its position and not the one before (a reopened list reads the new owner's
 * state past the last key returned). A third case, in one process, checks that the caller's
 * limit is kept across a reopen even when a key was written before the position meanwhile (a
 * limit applied at the owner before skipping would count that key, and come up one short). The twin is an export, which does not reopen: the same kill
 * mid-export rejects it with OWNER_LOST — proof that the kill does interrupt a live cursor, which
 * is what the list survives. A fifth case, in one process, retries an export cut by its owner's
 * clean close at once — while the handover is still under way (the handle's events say so) —
 * and the retrying process wins the store: its export, queued during the handover, must run on
 * its own store (until the fifty-fifth session the queued open found no cursor operation there
 * and failed with OWNER_LOST a second time); its twin turns the retried open off
 * (`unsafeHandoverForTests.noReopenLostOpen`) and must see that OWNER_LOST. Every child is SIGKILLed when the file ends.
 *
 * Property stressed: a list iteration spanning an owner change returns each key once, in order.
 */
import { afterAll, describe, expect, it } from "vitest";
import { Engram, OwnerLostError } from "../src/index.js";
import { SharedStore, unsafeHandoverForTests } from "../share/handle.js";
import { ShareProc, spawnedProcs, storeDir } from "./helpers/share-proc.js";

const KEYS = 1500;
const PAUSE_AT = 600;
const SCOPE = "user:lister";
const OPTS = { durability: "sync" as const, compaction: { workers: 0 } };
const procs = spawnedProcs();
const handles: Engram[] = [];
afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGCONT");
  for (const h of handles) await h.close().catch(() => undefined);
});

/** The keys share-child's `write` makes, in the order list() returns them (string order). */
function expectedKeys(): string[] {
  return Array.from({ length: KEYS }, (_, i) => `k${i}`).sort();
}

/** A child's role now (its answer to `role`, not one of the event lines, which also carry a role). */
async function roleOf(p: ShareProc): Promise<unknown> {
  p.send("role");
  return (await p.next((l) => "role" in l && !("ev" in l), 30_000, "its role"))["role"];
}

/** Owner A with KEYS keys in SCOPE, and lister C paused after PAUSE_AT entries. */
async function pausedList(label: string): Promise<{ a: ShareProc; c: ShareProc; dir: string }> {
  const dir = storeDir(label);
  const a = new ShareProc(dir);
  procs.push(a);
  expect(await a.opened()).toBe("owner");
  const w = await a.ask(`write ${SCOPE} 0 ${KEYS} 16`, "acked", 60_000);
  expect((w["acked"] as unknown[]).length).toBe(KEYS);
  const c = new ShareProc(dir);
  procs.push(c);
  expect(await c.opened()).toBe("client");
  await c.ask(`list ${SCOPE} ${PAUSE_AT}`, "listing");
  return { a, c, dir };
}

describe("list() spanning a handover", () => {
  it("the lister takes the store over and its list goes on locally after the last key it returned", async () => {
    const { a, c } = await pausedList("share-lh-local");
    await a.kill();
    await c.next((l) => l["ev"] === "event" && l["text"] === "owner", 30_000, "its takeover");
    const done = await c.ask("go", "listed", 30_000).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; lines: ${JSON.stringify(c.all)}`);
    });
    const keys = done["listed"] as string[];
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual(expectedKeys());
    expect(await roleOf(c)).toBe("owner");
  });

  it("another process takes over; the list is reopened at the new owner and reads its state past the last key", async () => {
    const { a, c, dir } = await pausedList("share-lh-remote");
    c.child.kill("SIGSTOP");
    let owner: Engram;
    try {
      await a.kill();
      owner = await Engram.open(dir, { ...OPTS, share: true }); // A is dead and C is stopped: this process owns
      handles.push(owner);
      expect(owner.role).toBe("owner");
      await owner.write("k00", "before C's position", { scope: SCOPE });
      await owner.write("kz", "after C's position", { scope: SCOPE });
    } finally {
      c.child.kill("SIGCONT");
    }
    const done = await c.ask("go", "listed", 30_000);
    const keys = done["listed"] as string[];
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual([...expectedKeys(), "kz"]);
    expect(await roleOf(c)).toBe("client");
  });

  it("the caller's limit holds across the reopen (counted on the client, not used up by keys skipped at the owner)", async () => {
    const dir = storeDir("share-lh-limit");
    const owner = await SharedStore.open(dir, { ...OPTS, share: true });
    const client = Engram.fromBackend(await SharedStore.open(dir, { ...OPTS, share: true }));
    handles.push(client);
    expect(client.role).toBe("client");
    await client.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: "v", scope: SCOPE })));
    const limit = 1200; // past the two pages (1,024 entries) fetched before the connection went
    const it = client.list({ scope: SCOPE, inherit: false, limit })[Symbol.asyncIterator]();
    const keys: string[] = [];
    for (let i = 0; i < PAUSE_AT; i++) keys.push(((await it.next()).value as { key: string }).key);
    owner.shareServer?.abort(); // the cursor's connection is gone without a bye
    // A key before the client's position: a limit applied at the owner before skipping would count it.
    await owner.write("k00", "v", { scope: SCOPE });
    await owner.close(); // the lock is free: the client takes over and lists locally
    for (let r = await it.next(); r.done !== true; r = await it.next()) keys.push(r.value.key);
    expect(client.role).toBe("owner");
    expect(keys).toEqual(expectedKeys().slice(0, limit));
  });

  it("twin: an export, which does not reopen, is cut by the same kill with OWNER_LOST", async () => {
    const dir = storeDir("share-lh-twin");
    const a = new ShareProc(dir);
    procs.push(a);
    expect(await a.opened()).toBe("owner");
    await a.ask(`write ${SCOPE} 0 ${KEYS} 16`, "acked", 60_000);
    const client = await Engram.open(dir, { ...OPTS, share: true });
    handles.push(client);
    expect(client.role).toBe("client");
    const it = client.exportEntries({ scope: SCOPE })[Symbol.asyncIterator]();
    for (let i = 0; i < PAUSE_AT; i++) expect((await it.next()).done).toBe(false);
    await a.kill();
    let err: unknown = null;
    try {
      for (let r = await it.next(); r.done !== true; r = await it.next());
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OwnerLostError);
  });

  /**
   * An owner handle and a client handle of KEYS keys; the client's export is cut after PAUSE_AT
   * entries by the owner's close and retried at once, during the handover. Resolves with the
   * retry's keys (or its error), once the close is done; the client then owns.
   */
  async function exportRetriedDuringHandover(label: string): Promise<unknown> {
    const dir = storeDir(label);
    const owner = await SharedStore.open(dir, { ...OPTS, share: true });
    const backend = await SharedStore.open(dir, { ...OPTS, share: true });
    const client = Engram.fromBackend(backend);
    handles.push(client);
    expect(client.role).toBe("client");
    const events: string[] = [];
    backend.onEvent = (e) => events.push(e);
    await client.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: "v", scope: SCOPE })));
    const all = async (): Promise<string[]> => {
      const keys: string[] = [];
      for await (const e of client.exportEntries({ scope: SCOPE })) keys.push(e.key);
      return keys;
    };
    const first = client.exportEntries({ scope: SCOPE })[Symbol.asyncIterator]();
    for (let i = 0; i < PAUSE_AT; i++) expect((await first.next()).done).toBe(false);
    const closed = owner.close(); // bye: the client's export is cut (it does not survive an owner change)
    const cut = await (async () => {
      for (let r = await first.next(); r.done !== true; r = await first.next());
    })().catch((e: unknown) => e); // the rest of the page in hand, then the next page is lost
    expect(cut).toBeInstanceOf(OwnerLostError);
    expect(events.at(-1)).toBe("owner closed: handover"); // the retry below starts during the handover
    const retried = await all().catch((e: unknown) => e);
    await closed;
    expect(client.role).toBe("owner");
    expect(events).toContain("owner");
    return retried;
  }

  it("an export retried during the handover its process wins runs on its own store (not OWNER_LOST a second time)", async () => {
    const retried = await exportRetriedDuringHandover("share-lh-export-retry");
    expect(Array.isArray(retried) ? [...(retried as string[])].sort() : retried).toEqual(expectedKeys());
  });

  it("twin: the cursor open lost across the owner change not tried again (noReopenLostOpen), the retry fails with OWNER_LOST", async () => {
    unsafeHandoverForTests.noReopenLostOpen = true;
    try {
      expect(await exportRetriedDuringHandover("share-lh-export-retry-twin")).toBeInstanceOf(OwnerLostError);
    } finally {
      unsafeHandoverForTests.noReopenLostOpen = false;
    }
  });
});
