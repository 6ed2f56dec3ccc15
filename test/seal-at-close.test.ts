/**
 * A syncing close seals a large active segment (engine/store.ts sealLargeActive): a short process
 * that appends a few records to a store whose active segment holds megabytes (a CLI write after a
 * bulk load) then writes that segment's whole hint once, at the seal, and the processes after it
 * append to a small new segment, instead of rewriting the large segment's prefix hint at every
 * close (~60 ms of `engram put` on 200k keys, thirty-sixth session).
 *
 * Method: 30,000 keys of 300 B (~10 MiB, over SEAL_AT_CLOSE_BYTES) are loaded with durability
 * `none` (a stamped prefix hint, the active segment left unsealed), then four short processes
 * each open it durably, write one key and close. The first close must seal the loaded segment and
 * leave a new active one; the later three must leave the loaded segment's hint file exactly as
 * they found it (same inode, size and mtime) and write only small hints; every key must read back
 * after a reopen. The twin (`unsafeSealAtCloseForTests.never`) keeps the old close: the loaded
 * segment stays active and each of the four closes replaces its hint, which the same observation
 * counts. Closes that must not seal: one with no write, one in `none` durability. Faults: ENOSPC
 * creating the new segment and EIO sealing the old one (twice: rotate's attempt and the waiter's
 * retry) make close reject with the IoError, and the next open still reads every key. A SIGKILL
 * inside the close's seal (crashAt `seal:after-truncate`, in a child process running the built
 * package) loses nothing acknowledged: the next open seals the rotated-out segment itself.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import { SEAL_AT_CLOSE_BYTES, unsafeSealAtCloseForTests } from "../engine/store.js";
import { assertBuilt, ROOT } from "./helpers/built.js";
import { within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE = 60_000;
const KEYS = 30_000;
const VALUE_BYTES = 300;

afterEach(() => {
  unsafeSealAtCloseForTests.never = false;
});

/** The value written for key i in round r (0: the load). */
function valueOf(i: number, r: number): string {
  return `${r}:${i}:`.padEnd(VALUE_BYTES, String.fromCharCode(97 + ((i + r) % 26)));
}

/** A store of KEYS keys loaded with durability `none` and closed (its active segment unsealed, over SEAL_AT_CLOSE_BYTES). */
async function loaded(name: string): Promise<string> {
  const dir = tempDir(name);
  const s = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
  for (let b = 0; b < KEYS; b += 1000) {
    const ops = [];
    for (let i = b; i < b + 1000; i++) ops.push({ op: "write" as const, key: `k${i}`, value: valueOf(i, 0) });
    await s.batch(ops);
  }
  const active = s.stats().segments.filter((x) => !x.sealed);
  expect(active.length).toBe(1);
  expect(active[0]!.bytes).toBeGreaterThan(SEAL_AT_CLOSE_BYTES);
  await s.close();
  return dir;
}

/** The identity of segment `id`'s hint file: a rewrite (a new file renamed over it) changes it. */
function hintIdentity(dir: string, id: number): string {
  const st = fs.statSync(path.join(dir, "segments", `${String(id).padStart(8, "0")}.hint`), { bigint: true });
  return `${st.ino}:${st.size}:${st.mtimeNs}`;
}

/** Bytes of every hint file but segment `id`'s. */
function otherHintBytes(dir: string, id: number): number {
  const own = `${String(id).padStart(8, "0")}.hint`;
  return fs
    .readdirSync(path.join(dir, "segments"))
    .filter((f) => f.endsWith(".hint") && f !== own)
    .reduce((n, f) => n + fs.statSync(path.join(dir, "segments", f)).size, 0);
}

/** Opens `dir` durably, writes key k{KEYS + r} and closes: one short process's write. */
async function shortWrite(dir: string, r: number): Promise<void> {
  const s = await within(DEADLINE, Engram.open(dir, { durability: "sync", compaction: { auto: false } }), "open");
  await s.write(`k${KEYS + r}`, valueOf(KEYS + r, r));
  await within(DEADLINE, s.close(), "close");
}

/** The value `key` reads now (null: none). */
function valueNow(s: Engram, key: string): unknown {
  const r = s.readSync(key);
  return r.status === "OK" ? r.value : null;
}

/** Every key's value after a reopen, checked against the load and the `rounds` short writes. */
async function expectEveryKey(dir: string, rounds: number): Promise<void> {
  const s = await within(DEADLINE, Engram.open(dir, { compaction: { auto: false } }), "reopen");
  try {
    let wrong = 0;
    for (let i = 0; i < KEYS; i++) if (valueNow(s, `k${i}`) !== valueOf(i, 0)) wrong++;
    for (let r = 1; r <= rounds; r++) if (valueNow(s, `k${KEYS + r}`) !== valueOf(KEYS + r, r)) wrong++;
    expect(wrong).toBe(0);
  } finally {
    await s.close();
  }
}

/** Runs four short writes on a loaded store; what the closes did to the loaded segment (id 1) and its hint. */
async function fourShortWrites(dir: string): Promise<{ sealed: boolean; segments: number; rewrites: number; otherHints: number }> {
  await shortWrite(dir, 1);
  let rewrites = 0;
  let before = hintIdentity(dir, 1);
  for (let r = 2; r <= 4; r++) {
    await shortWrite(dir, r);
    const now = hintIdentity(dir, 1);
    if (now !== before) rewrites++;
    before = now;
  }
  const s = await Engram.open(dir, { compaction: { auto: false } });
  const segs = s.stats().segments;
  await s.close();
  return { sealed: segs.find((x) => x.id === 1)?.sealed ?? false, segments: segs.length, rewrites, otherHints: otherHintBytes(dir, 1) };
}

/**
 * In a child process running the built package: opens `dir` durably with crashAt `point`, writes
 * key k{KEYS + 1} (printing "acked" once acknowledged) and closes (printing "closed"). Resolves how
 * it ended; killed past the deadline.
 */
async function crashingClose(dir: string, point: string): Promise<{ signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const index = pathToFileURL(path.join(ROOT, "dist", "src", "index.js")).href;
  const script = [
    `const { Engram } = await import(${JSON.stringify(index)});`,
    `const s = await Engram.open(${JSON.stringify(dir)}, { durability: "sync", compaction: { auto: false }, faults: { crashAt: ${JSON.stringify(point)} } });`,
    `await s.write(${JSON.stringify(`k${KEYS + 1}`)}, ${JSON.stringify(valueOf(KEYS + 1, 1))});`,
    `process.stdout.write("acked\\n");`,
    `await s.close();`,
    `process.stdout.write("closed\\n");`,
  ].join("\n");
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString("utf8")));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
  const deadline = setTimeout(() => child.kill("SIGKILL"), DEADLINE);
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, sig) => resolve(sig)));
  clearTimeout(deadline);
  return { signal, stdout, stderr };
}

describe("a syncing close seals a large active segment", () => {
  it("the first short write seals the loaded segment; the next three leave its hint alone and write small hints; every key reads back", async () => {
    const dir = await loaded("seal-at-close");
    const got = await fourShortWrites(dir);
    expect(got).toMatchObject({ sealed: true, segments: 2, rewrites: 0 });
    expect(got.otherHints).toBeLessThan(64 * 1024);
    await expectEveryKey(dir, 4);
  }, 120_000);

  it("twin: without the seal, the loaded segment stays active and every close rewrites its whole hint", async () => {
    unsafeSealAtCloseForTests.never = true;
    const dir = await loaded("seal-at-close-twin");
    const got = await fourShortWrites(dir);
    expect(got).toMatchObject({ sealed: false, segments: 1, rewrites: 3 });
    await expectEveryKey(dir, 4);
  }, 120_000);

  it("a close with nothing written and a close in none durability leave the segment unsealed", async () => {
    const dir = await loaded("seal-at-close-none");
    // A syncing close without the seal first: the load's stamped hint (and unsynced tail) would make any syncing close rewrite it.
    unsafeSealAtCloseForTests.never = true;
    await (await Engram.open(dir, { durability: "sync", compaction: { auto: false } })).close();
    unsafeSealAtCloseForTests.never = false;
    const reader = await Engram.open(dir, { durability: "sync", compaction: { auto: false } });
    expect(valueNow(reader, "k7")).toBe(valueOf(7, 0));
    await reader.close();
    const lazy = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
    await lazy.write(`k${KEYS + 1}`, valueOf(KEYS + 1, 1));
    await lazy.close();
    const s = await Engram.open(dir, { compaction: { auto: false } });
    expect(s.stats().segments.map((x) => x.sealed)).toEqual([false]);
    await s.close();
    await expectEveryKey(dir, 1);
  }, 120_000);

  it("a SIGKILL inside the close's seal loses nothing acknowledged; the next open seals the segment", async () => {
    assertBuilt();
    const dir = await loaded("seal-at-close-kill");
    const got = await crashingClose(dir, "seal:after-truncate");
    expect(got.signal, got.stderr).toBe("SIGKILL");
    expect(got.stdout).toBe("acked\n"); // killed in the close, after the write's acknowledgement
    await expectEveryKey(dir, 1);
    const s = await Engram.open(dir, { compaction: { auto: false } });
    expect(s.stats().segments.find((x) => x.id === 1)?.sealed).toBe(true);
    expect(s.stats().segments.filter((x) => !x.sealed).length).toBe(1);
    await s.close();
  }, 120_000);

  for (const [point, errno, times] of [
    ["io:create", "ENOSPC", 1],
    ["io:seal", "EIO", 2],
  ] as const) {
    it(`${errno} at ${point} during the seal: close rejects with the IoError; every key reads back, and the loaded segment ends sealed (by the next close, or by the open after a failed seal)`, async () => {
      const dir = await loaded(`seal-at-close-${point.slice(3)}`);
      const s = await Engram.open(dir, { durability: "sync", compaction: { auto: false }, faults: {} });
      await s.write(`k${KEYS + 1}`, valueOf(KEYS + 1, 1));
      s.faults.failAt?.(point, errno, times);
      const err = await within(DEADLINE, s.close(), "close").then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(IoError);
      expect((err as IoError).errno).toBe(errno);
      await expectEveryKey(dir, 1);
      await shortWrite(dir, 2);
      await expectEveryKey(dir, 2);
      const again = await Engram.open(dir, { compaction: { auto: false } });
      expect(again.stats().segments.filter((x) => !x.sealed).length).toBe(1);
      expect(again.stats().segments.find((x) => x.id === 1)?.sealed).toBe(true);
      await again.close();
    }, 120_000);
  }
});
