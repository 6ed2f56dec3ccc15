/**
 * Zeroed preallocation (issue 11, durable put): in `sync` mode the commit log writes real zeros
 * ahead of the append point (SegmentWriter.zeroAhead, fault point io:preallocate), so that a
 * durable append overwrites allocated blocks instead of filling an ftruncate hole.
 *
 * How it works, on real files: (1) the allocation itself is read back from the file system —
 * `st_blocks` of the active segment after a few durable puts must cover a whole zero step past
 * the data; the twin, `durability: "none"` (which writes no zeros), must show the hole, so the
 * check can tell the two apart. (2) Zeros must read as unwritten space: the segment files of an
 * open store (as a SIGKILL leaves them: data, then written zeros, no seal) are copied and the
 * copy reopened; every acknowledged value is there, nothing else, and appends go on after them.
 * Its twin flips a byte inside the zeroed space: recovery must then see a torn tail, not a
 * clean end, and still return every acknowledged value. (3) A failed zero write (`failAt`
 * io:preallocate, ENOSPC) rejects only the call it belonged to, with nothing of it written,
 * and the store goes on and reopens to the same state. (4) A new segment's first zero step is
 * written by its creation, before the fdatasync that makes the file durable (createSegmentFile's
 * `zeroBytes`): right after a fresh `sync` store opens, before any put, the segment's blocks
 * cover the step, and the first 20 puts write no zeros (io observer). Its twin, `durability:
 * "none"`, shows the hole at open and writes no zeros either, so the checks tell the two apart.
 * Property stressed: the zero fill changes where blocks are allocated, never what recovery reads.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, type OpenOptions } from "../src/index.js";
import { DATA_START } from "../segments/constants.js";
import { setIoObserver } from "../segments/io.js";
import { ZERO_STEP_BYTES } from "../segments/writer.js";
import { tempDir } from "./helpers/tmp.js";
import { expectIoError, segmentFiles, settle, within } from "./helpers/io-faults.js";

const T = 20_000;
const BASE: OpenOptions = { compaction: { auto: false } };
const value = (i: number): string => `v${i}:${"x".repeat(250)}`;

/** The newest segment file of a store directory. */
function activeSegment(dir: string): string {
  const files = segmentFiles(dir).filter((f) => f.endsWith(".seg")).sort();
  const last = files[files.length - 1];
  if (last === undefined) throw new Error(`no segment in ${dir}`);
  return path.join(dir, "segments", last);
}

/** Bytes the file system allocated to `file` (st_blocks × 512, like du). */
function allocatedBytes(file: string): number {
  return fs.statSync(file).blocks * 512;
}

async function writeSome(store: Engram, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await within(T, store.write(`k${i}`, value(i)), `write k${i}`);
}

describe("zeroed preallocation allocates blocks ahead of durable appends", () => {
  it("sync mode: the active segment's blocks cover a whole zero step past the data", async () => {
    const dir = tempDir("zero-sync");
    const store = await Engram.open(dir, { ...BASE, durability: "sync" });
    await writeSome(store, 20);
    const file = activeSegment(dir);
    expect(fs.statSync(file).size).toBeGreaterThanOrEqual(DATA_START + ZERO_STEP_BYTES);
    expect(allocatedBytes(file)).toBeGreaterThanOrEqual(DATA_START + ZERO_STEP_BYTES);
    await store.close();
  });

  it("twin: durability none writes no zeros, and the same check sees the ftruncate hole", async () => {
    const dir = tempDir("zero-none");
    const store = await Engram.open(dir, { ...BASE, durability: "none" });
    await writeSome(store, 20);
    await store.flush();
    const file = activeSegment(dir);
    expect(fs.statSync(file).size).toBeGreaterThanOrEqual(DATA_START + ZERO_STEP_BYTES); // the hole is there
    expect(allocatedBytes(file)).toBeLessThan(ZERO_STEP_BYTES / 2); // and is not allocated
    await store.close();
  });
});

describe("written zeros read as unwritten space", () => {
  /** Copies the segment files of an open store, as a kill would leave them. */
  function snapshot(dir: string): string {
    const copy = tempDir("zero-copy");
    fs.mkdirSync(path.join(copy, "segments"), { recursive: true });
    for (const name of segmentFiles(dir)) fs.copyFileSync(path.join(dir, "segments", name), path.join(copy, "segments", name));
    return copy;
  }

  it("a killed store's copy reopens with every acknowledged value, and appends go on after them", async () => {
    const dir = tempDir("zero-kill");
    const store = await Engram.open(dir, { ...BASE, durability: "sync" });
    await writeSome(store, 50);
    const copy = snapshot(dir);
    await store.close();
    const again = await Engram.open(copy, { ...BASE, durability: "sync" });
    for (let i = 0; i < 50; i++) expect(again.readSync(`k${i}`), `k${i}`).toMatchObject({ value: value(i) });
    expect(again.readSync("k50")).toEqual({ status: "NOT_FOUND" });
    await within(T, again.write("after", "the zeros"), "write after reopen");
    await again.close();
    const third = await Engram.open(copy, BASE);
    expect(third.readSync("after")).toMatchObject({ value: "the zeros" });
    expect(third.readSync("k49")).toMatchObject({ value: value(49) });
    await third.close();
  });

  it("twin: a non-zero byte in the zeroed space is not a clean end — recovery cuts it as a torn tail", async () => {
    const dir = tempDir("zero-flip");
    const store = await Engram.open(dir, { ...BASE, durability: "sync" });
    await writeSome(store, 50);
    const copy = snapshot(dir);
    await store.close();
    const file = activeSegment(copy);
    const bytes = fs.readFileSync(file);
    const stray = DATA_START + ZERO_STEP_BYTES - 100; // inside the zero step, far past 50 records
    expect(bytes[stray]).toBe(0);
    const fd = fs.openSync(file, "r+");
    fs.writeSync(fd, Buffer.from([0x5a]), 0, 1, stray);
    fs.closeSync(fd);
    const again = await Engram.open(copy, BASE);
    for (let i = 0; i < 50; i++) expect(again.readSync(`k${i}`), `k${i}`).toMatchObject({ value: value(i) });
    await again.close();
    expect(fs.readFileSync(file)[stray], "recovery cut the stray byte (a torn tail), it did not read past it as data").toBe(0);
  });
});

describe("a failed zero write", () => {
  it("rejects only its own call (ENOSPC), writes nothing of it, and the store goes on and reopens the same", async () => {
    const dir = tempDir("zero-fail");
    const options: OpenOptions = { ...BASE, durability: "sync", segmentBytes: 4096, faults: {} };
    const store = await Engram.open(dir, options);
    await writeSome(store, 3);
    store.faults.failAt?.("io:preallocate", "ENOSPC", 1);
    // With 4 KiB segments each rotation starts a fresh zero fill, so the armed failure fires within a few writes.
    let failedAt = -1;
    for (let i = 3; i < 40 && failedAt < 0; i++) {
      const r = await settle(T, store.write(`k${i}`, value(i)), `write k${i}`);
      if (!r.ok) {
        expectIoError(r.error, "ENOSPC");
        failedAt = i;
      }
    }
    expect(failedAt, "the injected failure fired").toBeGreaterThan(2);
    expect(store.readSync(`k${failedAt}`)).toEqual({ status: "NOT_FOUND" });
    await within(T, store.write("later", "fine"), "a later write");
    await within(T, store.close(), "close");
    const again = await Engram.open(dir, BASE);
    for (let i = 0; i < failedAt; i++) expect(again.readSync(`k${i}`), `k${i}`).toMatchObject({ value: value(i) });
    expect(again.readSync(`k${failedAt}`)).toEqual({ status: "NOT_FOUND" });
    expect(again.readSync("later")).toMatchObject({ value: "fine" });
    await again.close();
  });
});

describe("a new segment's first zero step is written by its creation", () => {
  afterEach(() => setIoObserver(null));

  /** Opens a fresh store, checks its segment's allocation before any put, and returns the largest write of its first 20 puts. */
  async function openAndPut(name: string, durability: "sync" | "none"): Promise<{ allocatedAtOpen: number; largestWrite: number }> {
    const dir = tempDir(name);
    const store = await Engram.open(dir, { ...BASE, durability });
    const allocatedAtOpen = allocatedBytes(activeSegment(dir));
    let largestWrite = 0;
    setIoObserver((e) => {
      if (e.op === "write") largestWrite = Math.max(largestWrite, e.bytes);
    });
    await writeSome(store, 20);
    setIoObserver(null);
    await store.close();
    return { allocatedAtOpen, largestWrite };
  }

  it("sync mode: the step is allocated at open, before any put, and no put writes zeros", async () => {
    const r = await openAndPut("zero-create-sync", "sync");
    expect(r.allocatedAtOpen, "the creation's zeros are blocks, not a hole").toBeGreaterThanOrEqual(DATA_START + ZERO_STEP_BYTES);
    expect(r.largestWrite, "each put writes its group only (frame and record), no zero step").toBeLessThan(4096);
    expect(r.largestWrite).toBeGreaterThan(256);
  });

  it("twin: durability none creates the segment as a hole, so the same check sees no blocks at open", async () => {
    const r = await openAndPut("zero-create-none", "none");
    expect(r.allocatedAtOpen).toBeLessThan(ZERO_STEP_BYTES / 2);
    expect(r.largestWrite).toBeLessThan(4096);
  });
});
