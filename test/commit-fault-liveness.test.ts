/**
 * After a failed I/O call in the commit log, every call that waits on the log settles: the
 * failed ones reject with an IoError, and barriers (flush, close, a forget of nothing), passes and
 * gc() neither hang nor wait for a write that may never come. Two paths an audit of
 * engine/commit.ts found hanging in the fifty-third session.
 *
 * Method, part 1 (durability `none` and `batch`, where no zeros are written ahead and the file is
 * extended by ftruncate as reservations cross its allocated end): values of 256 KiB fill the
 * active segment to within one value of its allocated end, `io:append` is armed to fail once (the
 * extension), and the next write crosses that end. It must reject with an IoError at once, leave
 * nothing queued, and then a forget of an absent key, flush() and close() settle within a
 * deadline; a write after the failure succeeds, and a reopen reads every acknowledged value and
 * not the failed one. The twin (`unsafeEnqueueForTests.allocateLate`, the rule before: the new
 * group's frame reserved and the group queued before the op's own bytes were allocated) leaves
 * an empty group queued that no drain starts, and flush() misses the deadline.
 *
 * Part 2 (durability `sync`): a write's group is held between its write and its fdatasync
 * (`pauseAt write:after-append`) while gc() rotates its segment out and waits for the seal; then
 * `io:sync` fails twice — the group's fdatasync and the repair's (engine/commit.ts failFrom: the
 * cut of the failed tail) — so the segment stays broken. gc() must reject with the repair's
 * IoError within the deadline (only an append retried the repair before); a later write repairs
 * the log, the next gc() resolves, close() settles and a reopen reads the acknowledged value; a
 * close() right after the refusal settles as well (its own repair succeeds). The
 * twin (`unsafeSealWaitForTests.keepWaitersOfBroken`) leaves gc() waiting past the deadline.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeEnqueueForTests, unsafeSealWaitForTests } from "../engine/commit.js";
import { IoError } from "../rules/errors.js";
import type { OpenOptions } from "../rules/types.js";
import { settle, within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE_MS = 3_000;
const FILL_BYTES = 256 * 1024;
const options = (durability: "none" | "batch" | "sync", extra: Partial<OpenOptions> = {}): OpenOptions => ({ durability, faults: {}, compaction: { auto: false, workers: 0 }, ...extra });

afterEach(() => {
  unsafeEnqueueForTests.allocateLate = false;
  unsafeSealWaitForTests.keepWaitersOfBroken = false;
});

/** Bytes between the active segment's reserved end and its allocated end. */
function room(s: Store): number {
  const w = s.log.activeSegment.writer;
  if (w === null) throw new Error("the active segment has a writer");
  return w.allocatedEnd - w.end;
}

/** Fills the active segment with FILL_BYTES values until less than two of them fit before its allocated end; returns the keys written. */
async function fillToEdge(s: Store): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; room(s) >= 2 * FILL_BYTES; i++) {
    keys.push(`f${i}`);
    await s.write(`f${i}`, new Uint8Array(FILL_BYTES).fill(i & 0xff));
    expect(i, "the fill ends within one preallocation step").toBeLessThan(1_000);
  }
  return keys;
}

/** Opens `dir`, checks that every key of `keys` holds its fill value and `absent` reads nothing; closes. */
async function reopenAndCheck(dir: string, keys: readonly string[], absent: string): Promise<void> {
  const s = await Store.open(dir, { compaction: { auto: false, workers: 0 } });
  keys.forEach((k, i) => {
    const got = s.readSync(k);
    // Compared as bytes (Buffer.equals): toEqual walks 256 KiB element by element, seconds a key.
    expect(got.status === "OK" && Buffer.from(got.value as Uint8Array).equals(new Uint8Array(FILL_BYTES).fill(i & 0xff)), `${k} reads its fill value`).toBe(true);
  });
  expect(s.readSync(absent).status, `${absent} was never acknowledged`).not.toBe("OK");
  expect((await s.verify()).problems).toEqual([]);
  await s.close();
}

describe("a failed extension of the active segment while a write is queued", () => {
  for (const durability of ["none", "batch"] as const) {
    it(`${durability}: rejects that write alone, leaves nothing queued, and every later barrier settles`, async () => {
      const dir = tempDir(`enqueue-extend-${durability}`);
      const s = await Store.open(dir, options(durability));
      const keys = await fillToEdge(s);
      s.faults.failAt?.("io:append", "EIO", 1);
      const big = await settle(DEADLINE_MS, s.write("big", new Uint8Array(room(s) + 16)), "the crossing write");
      expect(big.ok, "the crossing write is refused").toBe(false);
      expect(big.ok ? null : big.error).toBeInstanceOf(IoError);
      expect(s.faults.failuresLeft?.(), "the armed failure fired").toBe(0);
      expect(s.log.queued, "nothing is left queued").toEqual({ ops: 0, bytes: 0 });
      const none = await within(DEADLINE_MS, s.forget("absent"), "a forget of nothing");
      expect(none.tombstoneSeq).toBeNull();
      await within(DEADLINE_MS, s.flush(), "flush");
      keys.push("after");
      await within(DEADLINE_MS, s.write("after", new Uint8Array(FILL_BYTES).fill((keys.length - 1) & 0xff)), "a write after the failure");
      await within(DEADLINE_MS, s.close(), "close");
      await reopenAndCheck(dir, keys, "big");
    });
  }

  it("twin: with the new group queued before the op's bytes are allocated, flush() waits for ever", async () => {
    unsafeEnqueueForTests.allocateLate = true;
    const s = await Store.open(tempDir("enqueue-extend-twin"), options("none"));
    await fillToEdge(s);
    s.faults.failAt?.("io:append", "EIO", 1);
    const big = await settle(DEADLINE_MS, s.write("big", new Uint8Array(room(s) + 16)), "the crossing write");
    expect(big.ok ? null : big.error).toBeInstanceOf(IoError);
    expect(s.log.queued.ops, "the twin leaves a group of no op behind").toBe(0);
    expect(s.log.queued.bytes, "the twin leaves a group of no op behind").toBeGreaterThan(0);
    const flushed = await settle(DEADLINE_MS, s.flush(), "flush").catch((err: unknown) => ({ ok: false as const, error: err }));
    expect(String((flushed as { error?: unknown }).error), "flush did not settle").toMatch(/^Error: deadline/);
  });
});

/**
 * Holds a write of "w" between its write and its fdatasync, starts gc() (which rotates the
 * segment out and waits for its seal), then fails that fdatasync and the repair's: returns the
 * store, the write's and gc()'s outcomes (gc's as a promise, not awaited).
 */
async function brokenBeneathGc(dir: string): Promise<{ s: Store; gc: Promise<unknown> }> {
  const s = await Store.open(dir, options("sync", { faults: { pauseAt: ["write:after-append"] } }));
  for (const v of ["v1", "v2"]) {
    const p = s.write("k", v);
    await within(DEADLINE_MS, s.faults.waitFor("write:after-append"), "the write's pause");
    s.faults.release("write:after-append");
    await within(DEADLINE_MS, p, "the write");
  }
  const held = s.log.activeSegment;
  const w = s.write("w", "W");
  await within(DEADLINE_MS, s.faults.waitFor("write:after-append"), "w's pause");
  const gc = s.gc();
  gc.catch(() => undefined); // settled below, or left waiting by the twin
  await within(DEADLINE_MS, until(() => s.log.activeSegment !== held), "gc's rotation");
  expect(held.writer, "the held segment is not sealed while its group is in flight").not.toBeNull();
  s.faults.failAt?.("io:sync", "EIO", 2);
  s.faults.release("write:after-append");
  const written = await settle(DEADLINE_MS, w, "w");
  expect(written.ok ? null : written.error).toBeInstanceOf(IoError);
  expect(s.faults.failuresLeft?.(), "both failures fired: the group's fdatasync and the repair's").toBe(0);
  expect(held.writer, "the broken segment is not sealed").not.toBeNull();
  return { s, gc };
}

/** Resolves once `done()` holds, checked on every timer turn (the caller puts a deadline on it). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setImmediate(resolve));
}

describe("a rotated-out segment whose failed group's repair failed too", () => {
  it("sync: gc() waiting for its seal rejects with the repair's IoError; a later write repairs, and gc() and close() settle", async () => {
    const dir = tempDir("seal-broken");
    const { s, gc } = await brokenBeneathGc(dir);
    const first = await settle(DEADLINE_MS, gc, "gc");
    expect(first.ok, "gc() is refused").toBe(false);
    expect(first.ok ? null : first.error).toBeInstanceOf(IoError);
    expect(s.readSync("k"), "reads still answer").toMatchObject({ status: "OK", value: "v2" });
    const z = s.write("z", "Z");
    await within(DEADLINE_MS, s.faults.waitFor("write:after-append"), "z's pause");
    s.faults.release("write:after-append");
    await within(DEADLINE_MS, z, "a write after the failures");
    await within(DEADLINE_MS, s.gc(), "gc after the repair");
    await within(DEADLINE_MS, s.close(), "close");
    const r = await Store.open(dir, { compaction: { auto: false, workers: 0 } });
    expect(r.readSync("k")).toMatchObject({ status: "OK", value: "v2" });
    expect(r.readSync("z")).toMatchObject({ status: "OK", value: "Z" });
    expect((await r.verify()).problems).toEqual([]);
    await r.close();
  });

  it("sync: close() right after gc()'s refusal settles (its own repair succeeds), and a reopen reads the acknowledged value", async () => {
    const dir = tempDir("seal-broken-close");
    const { s, gc } = await brokenBeneathGc(dir);
    expect((await settle(DEADLINE_MS, gc, "gc")).ok).toBe(false);
    await within(DEADLINE_MS, s.close(), "close");
    const r = await Store.open(dir, { compaction: { auto: false, workers: 0 } });
    expect(r.readSync("k")).toMatchObject({ status: "OK", value: "v2" });
    expect((await r.verify()).problems).toEqual([]);
    await r.close();
  });

  it("twin: with the waiters kept and no retry, gc() waits for an append that never comes", async () => {
    unsafeSealWaitForTests.keepWaitersOfBroken = true;
    const { gc } = await brokenBeneathGc(tempDir("seal-broken-twin"));
    const r = await settle(DEADLINE_MS, gc, "gc").catch((err: unknown) => ({ ok: false as const, error: err }));
    expect(String((r as { error?: unknown }).error), "gc did not settle").toMatch(/^Error: deadline/);
  });
});
