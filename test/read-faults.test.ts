/**
 * A read of the bytes a store holds that fails (fault point `io:read`: segments/io.ts readAt)
 * fails exactly the call that asked, as an IoError with the errno, and changes nothing else: the
 * next read of the same key returns its value, the caches hold nothing of the failed read, writes
 * go on, and the store closes and reopens clean. At open, a failed read of a segment that recovery
 * must scan rejects the open; it is never taken for the end of the segment's data, which would
 * make the acknowledged records after it look like a torn tail.
 *
 * Method: real stores on real files. Record reads are tried through the block cache (a failed
 * whole-block fill) and without it (the record's own pread), with readSync and read(), EIO and
 * ENOSPC; values the caches already hold are read with a failure armed, which must not fire (no
 * file was read). Recovery is tried on a copy of a store's directory taken while it is open (as a
 * crash leaves it: its active segment has no hint, so the open scans it). The twin of that case
 * (`unsafeWholeFileForTests.failedReadEnds`: a failed read ends the file, as a naive reader's loop
 * does) opens the copy without complaint and answers NOT_FOUND for acknowledged keys, which the
 * test must see. Compaction's reads are swept with every other I/O point by
 * test/compaction-fault-sweep.test.ts and test/auto-compaction-fault-sweep.test.ts, the open's by
 * test/open-close-fault-sweep.test.ts.
 */
import * as fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError, type OpenOptions, type ReadResult } from "../src/index.js";
import { unsafeWholeFileForTests } from "../segments/whole-file.js";
import { readAt } from "../segments/io.js";
import { expectIoError, fdCount, guardUnhandledRejections } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

guardUnhandledRejections();
afterEach(() => {
  unsafeWholeFileForTests.failedReadEnds = false;
});

const KEYS = 200;
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "r");
const BASE: OpenOptions = { durability: "sync", faults: {}, compaction: { workers: 0, auto: false } };

/** A store of KEYS keys in scope "s", closed and reopened with `opts` (its caches cold). */
async function reopened(label: string, opts: OpenOptions): Promise<{ dir: string; store: Engram }> {
  const dir = tempDir(label);
  const first = await Engram.open(dir, BASE);
  for (let i = 0; i < KEYS; i++) await first.write(`k${i}`, valueOf(i), { scope: "s" });
  await first.close();
  return { dir, store: await Engram.open(dir, opts) };
}

/** The value a read returned (undefined when it found none). */
const got = (r: ReadResult): unknown => (r.status === "OK" ? r.value : undefined);

/** Every key reads back its value. */
async function readsAll(store: Engram, what: string): Promise<void> {
  for (let i = 0; i < KEYS; i++) expect(got(await store.read(`k${i}`, { scope: "s" })), `${what}: k${i}`).toBe(valueOf(i));
}

/** The error `fn` throws (fails the test when it returns). */
async function thrown(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

describe("a failed read of a record fails that read alone", () => {
  const cases = [
    { caches: "the block cache", blockCacheBytes: undefined, call: "readSync", errno: "EIO" },
    { caches: "the block cache", blockCacheBytes: undefined, call: "read", errno: "ENOSPC" },
    { caches: "no block cache", blockCacheBytes: 0, call: "readSync", errno: "ENOSPC" },
    { caches: "no block cache", blockCacheBytes: 0, call: "read", errno: "EIO" },
  ] as const;
  for (const c of cases) {
    it(`${c.caches}, ${c.call}, ${c.errno}`, async () => {
      const opts: OpenOptions = { ...BASE, ...(c.blockCacheBytes === undefined ? {} : { blockCacheBytes: c.blockCacheBytes }) };
      const { dir, store } = await reopened("read-faults", opts);
      try {
        const readOf = (k: string): unknown => (c.call === "readSync" ? store.readSync(k, { scope: "s" }) : store.read(k, { scope: "s" }));
        store.faults.failAt?.("io:read", c.errno, 1);
        const err = await thrown(() => readOf("k7"));
        expectIoError(err, c.errno);
        expect((err as IoError).message, "the error names the read and the file").toMatch(/^read failed with .*\.seg, injected at io:read/);
        expect(store.faults.failuresLeft?.(), "the armed failure fired once").toBe(0);
        expect(await readOf("k7"), "the next read of the key").toMatchObject({ status: "OK", value: valueOf(7) });
        await readsAll(store, "after the failed read");
        await store.write("k7", "after", { scope: "s" });
        await store.forget("k8", { scope: "s" });
        expect(got(store.readSync("k7", { scope: "s" }))).toBe("after");
        expect((await store.verify()).problems).toEqual([]);
      } finally {
        await store.close();
      }
      const again = await Engram.open(dir, BASE);
      try {
        expect(got(again.readSync("k7", { scope: "s" }))).toBe("after");
        expect(again.readSync("k8", { scope: "s" }).status).toBe("NOT_FOUND");
        expect(got(again.readSync("k9", { scope: "s" }))).toBe(valueOf(9));
      } finally {
        await again.close();
      }
    });
  }

  it("a value the caches hold is served without a read: the armed failure waits for the next read of the file", async () => {
    const { store } = await reopened("read-faults-cached", { ...BASE, blockCacheBytes: 0 });
    try {
      expect(got(store.readSync("k3", { scope: "s" }))).toBe(valueOf(3)); // now in the value cache
      store.faults.failAt?.("io:read", "EIO", 1);
      expect(got(store.readSync("k3", { scope: "s" })), "a cached value").toBe(valueOf(3));
      expect(store.faults.failuresLeft?.(), "no file was read").toBe(1);
      expectIoError(await thrown(() => store.readSync("k4", { scope: "s" })), "EIO");
      expect(store.faults.failuresLeft?.()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("times N: exactly the next N reads of files fail, then every read is served", async () => {
    const { store } = await reopened("read-faults-times", { ...BASE, blockCacheBytes: 0 });
    try {
      store.faults.failAt?.("io:read", "EIO", 3);
      const outcomes: string[] = [];
      for (let i = 10; i < 16; i++) {
        try {
          outcomes.push(got(store.readSync(`k${i}`, { scope: "s" })) === valueOf(i) ? "value" : "wrong");
        } catch (err) {
          outcomes.push(err instanceof IoError ? "IoError" : String(err));
        }
      }
      expect(outcomes).toEqual(["IoError", "IoError", "IoError", "value", "value", "value"]);
      await readsAll(store, "after three failed reads");
    } finally {
      await store.close();
    }
  });
});

it("a read the kernel refuses is an IoError too, with the kernel's errno (a descriptor already closed: EBADF)", () => {
  const dir = tempDir("read-faults-ebadf");
  const fd = fs.openSync(`${dir}/f`, "w+");
  fs.writeSync(fd, "bytes");
  fs.closeSync(fd);
  let err: unknown = null;
  try {
    readAt(fd, Buffer.alloc(5), 0, 5, 0);
  } catch (e) {
    err = e;
  }
  expectIoError(err, "EBADF");
});

describe("a failed read at open", () => {
  /** A copy of a store of KEYS durable keys taken while it is open: its active segment has no hint, so an open scans it. */
  async function crashedCopy(): Promise<string> {
    const dir = tempDir("read-faults-live");
    const store = await Engram.open(dir, BASE);
    for (let i = 0; i < KEYS; i++) await store.write(`k${i}`, valueOf(i), { scope: "s" });
    const copy = tempDir("read-faults-crashed");
    fs.cpSync(dir, copy, { recursive: true });
    await store.close();
    return copy;
  }

  it("rejects the open with the IoError, leaves no descriptor, and the next open reads every acknowledged key", async () => {
    const copy = await crashedCopy();
    const fds = fdCount();
    const err = await thrown(() => Engram.open(copy, { ...BASE, faults: { failAt: { point: "io:read", errno: "EIO" } } }));
    expectIoError(err, "EIO");
    expect(fdCount(), "the failed open closed what it opened").toBe(fds);
    const store = await Engram.open(copy, BASE);
    try {
      await readsAll(store, "after the failed open");
    } finally {
      await store.close();
    }
  });

  it("twin: a failed read taken for the end of the data answers NOT_FOUND for acknowledged keys", async () => {
    const copy = await crashedCopy();
    unsafeWholeFileForTests.failedReadEnds = true;
    const store = await Engram.open(copy, { ...BASE, faults: { failAt: { point: "io:read", errno: "EIO" } } });
    unsafeWholeFileForTests.failedReadEnds = false;
    try {
      let absent = 0;
      for (let i = 0; i < KEYS; i++) if (store.readSync(`k${i}`, { scope: "s" }).status === "NOT_FOUND") absent++;
      expect(absent, "the naive reader lost acknowledged keys").toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });
});
