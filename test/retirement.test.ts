/**
 * Retirement is durable and complete before anything relies on it (issue 9 defect 1; I6, I8).
 *
 * Method: the exact script on a real store — k and k2 in segment 1, a rotation, a read of
 * k2 paused at read:after-authorize (so it holds segment 1), forget(k), forget(k2), gc() twice
 * with tombstoneRetentionMs 0 — then either close() with the read still paused or a real SIGKILL
 * of a child process, and a reopen: read("k") must be NOT_FOUND. On the old code the emptied
 * segment stayed on disk until its reader left while its records were already counted gone, so
 * the second gc dropped the tombstones and the reopen resurrected k. Its copy-on-write twin holds
 * a read on a segment that a gc replaces, then erases a scope eagerly: every file under the
 * directory is byte-scanned for the erased values; and the in-place twin checks that an eager
 * forgetScope does not wait for an unrelated held read. Each held read, once released, must
 * return the bytes valid at its authorization or fail closed with a typed EngramError.
 * Every wait has a deadline.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { Engram, EngramError, type OpenOptions } from "../src/index.js";
import { ROOT } from "./helpers/crash-proc.js";
import { K2_VALUE, runToSecondGc, type RetireMode } from "./helpers/retire-script.js";
import { tempDir } from "./helpers/tmp.js";

const MODES: RetireMode[] = ["copy-on-write", "in-place"];

/** A clock that moves one second per call, so a 0 ms retention window has always passed (no sleeps). */
function steppingClock(): () => number {
  let t = Date.now();
  return () => (t += 1000);
}

function opts(mode: RetireMode, extra: OpenOptions = {}): OpenOptions {
  return { clock: steppingClock(), retention: { tombstoneRetentionMs: 0 }, segmentBytes: 4096, compaction: { mode, workers: 0, auto: false }, faults: { pauseAt: ["read:after-authorize"] }, ...extra };
}

/** Rejects after `ms` unless `p` settles first: a deadline on every wait. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`deadline: ${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

function onDisk(dir: string, needles: string[]): string[] {
  const bytes = filesUnder(dir).map((f) => fs.readFileSync(f));
  return needles.filter((s) => bytes.some((b) => b.includes(Buffer.from(s))));
}

/** A released held read: the value valid at its authorization, or a typed fail-closed error. */
async function expectValidOrFailedClosed(reading: Promise<unknown>, valid: unknown): Promise<void> {
  const outcome = await within(reading.then((r) => ({ r }), (e: unknown) => ({ e })), 5000, "the released read");
  if ("e" in outcome) expect(outcome.e).toBeInstanceOf(EngramError);
  else expect(outcome.r).toMatchObject({ status: "OK", value: valid });
}

describe.each(MODES)("the issue's reproduction (%s)", (mode) => {
  it("close() while the read is paused, reopen: the forgotten k stays forgotten", async () => {
    const dir = tempDir("retire");
    const store = await Engram.open(dir, opts(mode));
    const { reading } = await within(runToSecondGc(store), 10_000, "the script");
    await within(store.close(), 5000, "close() with a read held");
    const reopened = await Engram.open(dir, opts(mode, { faults: {} })); // the read is still paused
    expect(await reopened.read("k")).toEqual({ status: "NOT_FOUND" });
    expect(await reopened.read("k2")).toEqual({ status: "NOT_FOUND" });
    expect(await reopened.read("filler")).toMatchObject({ status: "OK" });
    await reopened.close();
    store.faults.release("read:after-authorize");
    await expectValidOrFailedClosed(reading, K2_VALUE);
  });

  it("SIGKILL of a real child process while the read is paused, reopen: k stays forgotten", async () => {
    const dir = tempDir("retire-kill");
    const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/retire-child.ts", dir, mode], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
    const ready = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout }).on("line", (l) => l === "ready" && resolve());
      child.on("exit", () => reject(new Error(`child exited before ready: ${stderr}`)));
    });
    await within(ready, 30_000, "the child's script");
    child.kill("SIGKILL");
    expect(await within(exited, 10_000, "the child's death")).toBe("SIGKILL");
    const reopened = await Engram.open(dir, opts(mode, { faults: {} }));
    expect(await reopened.read("k")).toEqual({ status: "NOT_FOUND" });
    expect(await reopened.read("k2")).toEqual({ status: "NOT_FOUND" });
    expect((await reopened.verify()).ok).toBe(true);
    await reopened.close();
  });
});

describe("a retired segment held by a read", () => {
  it("copy-on-write: an eager forgetScope leaves no erased byte in any file, though a read still holds the replaced copy", async () => {
    const dir = tempDir("retire-cow");
    const store = await Engram.open(dir, opts("copy-on-write"));
    const secrets = [0, 1, 2].map((i) => `SECRET-cow-${i}-${Math.random().toString(36).slice(2)}`);
    for (const [i, s] of secrets.entries()) await store.write(`s${i}`, s, { scope: "user:carol" });
    await store.write("u", "unrelated-value", { scope: "user:dave" });
    await store.write("dead", "x".repeat(1500)); // garbage once overwritten, so gc rewrites segment 1
    await store.write("filler", "f".repeat(2000)); // rotates
    await store.write("dead", "overwritten");
    const reading = store.read("u", { scope: "user:dave" });
    await within(store.faults.waitFor("read:after-authorize"), 5000, "the read's pause");
    await store.gc(); // segment 1 -> a copy without "dead"; the read holds the old copy
    await within(store.forgetScope("user:carol", { reclaim: "eager" }), 10_000, "the eager forgetScope");
    expect(onDisk(dir, secrets)).toEqual([]);
    store.faults.release("read:after-authorize");
    await expectValidOrFailedClosed(reading, "unrelated-value");
    expect(store.readSync("s0", { scope: "user:carol" })).toEqual({ status: "NOT_FOUND" });
    await store.close();
    expect(onDisk(dir, secrets)).toEqual([]);
  });

  it("in-place: an eager forgetScope does not wait for an unrelated held read, and leaves no erased byte", async () => {
    const dir = tempDir("retire-inplace");
    const store = await Engram.open(dir, opts("in-place"));
    const secret = `SECRET-inplace-${Math.random().toString(36).slice(2)}`;
    await store.write("s", `${secret}${"s".repeat(1500)}`, { scope: "user:carol" });
    await store.write("u", `unrelated-${"u".repeat(1500)}`, { scope: "user:dave" });
    await store.write("filler", "f".repeat(2000)); // rotates: segment 1 holds s and u
    expect(store.stats().segments.length).toBe(2);
    const reading = store.read("u", { scope: "user:dave" });
    await within(store.faults.waitFor("read:after-authorize"), 5000, "the read's pause");
    await store.write("u", "u-rewritten", { scope: "user:dave" }); // segment 1 now holds only dead or erased values
    await within(store.forgetScope("user:carol", { reclaim: "eager" }), 5000, "the eager forgetScope while an unrelated read is held");
    expect(onDisk(dir, [secret])).toEqual([]);
    store.faults.release("read:after-authorize");
    await expectValidOrFailedClosed(reading, `unrelated-${"u".repeat(1500)}`);
    // readSync: an async read would pause again at the still-armed fault point.
    expect(store.readSync("u", { scope: "user:dave" })).toMatchObject({ status: "OK", value: "u-rewritten" });
    await store.close();
  });
});
