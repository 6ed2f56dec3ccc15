/**
 * A retired segment's descriptor is closed on libuv's pool (engine/segment.ts closeUnlinked,
 * segments/io.ts closeInBackground): its file is already unlinked, so that close frees the
 * file's blocks, which took 1.6–6 ms per source on the main thread of a compaction's publication.
 * Moving it off that thread must not leak it: an unlinked file whose descriptor stays open keeps
 * its blocks (the disk never gets them back) and its bytes (an erased value stays readable
 * through /proc), and store close must not resolve while such a close is still pending.
 *
 * Method: real stores (copy-on-write, inline and with a worker) compact three times with writes
 * and forgets in between, which retires every source; after each pass and the background closes
 * settle, the process's descriptors (/proc/self/fd) must name no deleted file of the store's
 * directory; right after `await close()`, none of its files at all. Every key reads back before
 * the close and after a reopen. Twin: descriptors marked closed but never closed
 * (`unsafeRetiredCloseForTests.leave`): the same scan finds the retired files, still open and
 * deleted (they are closed by the test afterwards). That `backgroundCloses` waits for a close still
 * queued is shown with libuv's pool held busy: every pool thread blocks in open(2) of a FIFO no
 * writer has opened yet, so a close issued meanwhile cannot run; the descriptor must still be
 * open, and `backgroundCloses` unresolved, until the FIFOs get their writers (the measure's own
 * twin: an `fstat` on that descriptor succeeds while the close is queued and fails after).
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeRetiredCloseForTests } from "../engine/segment.js";
import { backgroundCloses, closeInBackground } from "../segments/io.js";
import type { OpenOptions } from "../rules/types.js";
import { modelMisreads } from "./helpers/model-reads.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  unsafeRetiredCloseForTests.leave = false;
});

/** The process's descriptors open on files under `dir` (deleted ones included), as fd → target. */
function descriptorsUnder(dir: string): Map<number, string> {
  const found = new Map<number, string>();
  for (const name of fs.readdirSync("/proc/self/fd")) {
    let target: string;
    try {
      target = fs.readlinkSync(path.join("/proc/self/fd", name));
    } catch {
      continue; // the directory listing's own descriptor, closed by now
    }
    if (target.startsWith(dir + path.sep)) found.set(Number(name), target);
  }
  return found;
}

/** The deleted files among `fds`. */
function deleted(fds: ReadonlyMap<number, string>): string[] {
  return [...fds.values()].filter((t) => t.endsWith(" (deleted)"));
}

/** Three passes of writes, forgets and a copy-on-write compaction; returns the deleted files still open after each pass, and the model. */
async function passes(store: Store, dir: string): Promise<{ leftOpen: number[]; model: Map<string, string> }> {
  const model = new Map<string, string>();
  const leftOpen: number[] = [];
  for (let pass = 0; pass < 3; pass++) {
    const ops = [];
    for (let i = 0; i < 1500; i++) {
      const key = `k${i}`;
      if ((i + pass) % 3 === 0) {
        ops.push({ op: "forget" as const, scope: "s", key });
        model.delete(key);
      } else {
        const value = `v${pass}-${i}-${"y".repeat(120)}`;
        ops.push({ op: "write" as const, scope: "s", key, value });
        model.set(key, value);
      }
    }
    await store.batch(ops);
    const rep = await store.compact({ mode: "copy-on-write" });
    expect(rep.segments.length).toBeGreaterThan(0); // sources were retired
    await backgroundCloses();
    leftOpen.push(deleted(descriptorsUnder(dir)).length);
  }
  return { leftOpen, model };
}

describe("retired segments' descriptors are closed in the background", () => {
  for (const workers of [0, 1]) {
    it(`workers ${workers}: no deleted file stays open after a pass, no file of the store after close`, async () => {
      const dir = tempDir(`retired-close-${workers}`);
      const opts: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, compaction: { mode: "copy-on-write", auto: false, workers } };
      const store = await Store.open(dir, opts);
      const { leftOpen, model } = await passes(store, dir);
      expect(leftOpen).toEqual([0, 0, 0]);
      expect(modelMisreads(store, model, 1500)).toBe(0);
      await store.close();
      expect([...descriptorsUnder(dir).values()]).toEqual([]);
      const again = await Store.open(dir, opts);
      expect(modelMisreads(again, model, 1500)).toBe(0);
      await again.close();
    });
  }

  it("twin: descriptors marked closed but left open are found, deleted and still open", async () => {
    const dir = tempDir("retired-close-twin");
    unsafeRetiredCloseForTests.leave = true;
    const store = await Store.open(dir, { durability: "none", segmentBytes: 64 * 1024, compaction: { mode: "copy-on-write", auto: false, workers: 0 } });
    try {
      const { leftOpen } = await passes(store, dir);
      expect(leftOpen[2]).toBeGreaterThan(0);
      expect(leftOpen[2]).toBeGreaterThanOrEqual(leftOpen[0] as number);
    } finally {
      await store.close();
      for (const fd of descriptorsUnder(dir).keys()) fs.closeSync(fd); // the leak this twin made
    }
  });

  it("backgroundCloses resolves only once a close queued behind a busy pool has run", async () => {
    const dir = tempDir("retired-close-pool");
    const threads = Number(process.env["UV_THREADPOOL_SIZE"] ?? 4);
    const fifos = Array.from({ length: threads }, (_, i) => path.join(dir, `fifo-${i}`));
    for (const f of fifos) execFileSync("mkfifo", [f]);
    const readers = fifos.map((f) => new Promise<number>((resolve, reject) => fs.open(f, "r", (err, fd) => (err === null ? resolve(fd) : reject(err)))));
    const fd = fs.openSync(path.join(dir, "file"), "w");
    closeInBackground(fd); // queued behind the blocked opens
    let settled = false;
    const waiting = backgroundCloses().then(() => {
      settled = true;
    });
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    expect(() => fs.fstatSync(fd)).not.toThrow(); // still open: the close has not run
    const writers = fifos.map((f) => fs.openSync(f, "w")); // each blocked open returns
    for (const r of await Promise.all(readers)) fs.closeSync(r);
    for (const w of writers) fs.closeSync(w);
    await waiting;
    expect(settled).toBe(true);
    expect(() => fs.fstatSync(fd)).toThrow(); // EBADF: closed
  });
});
