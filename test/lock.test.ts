/**
 * The directory lock: one open store per directory, across handles and processes.
 *
 * How it works: within this process, a store is opened and a second Engram.open of the same
 * directory (also through "dir/." and a symlink, and two opens racing) must fail with
 * StoreLockedError (code STORE_LOCKED) without disturbing the first handle, which keeps working
 * and keeps the lock; after close() the same process opens the directory again. Across
 * processes, test/helpers/lock-child.ts is spawned with `node --import tsx`: in "hold" mode it
 * opens the store, writes a value durably and prints READY, and the parent's open must fail;
 * after the child is SIGKILLed (no close, no cleanup) the kernel drops its flock and the parent
 * opens the store and reads the child's write. In "try" mode the child attempts an open while
 * the parent holds the store and reports STORE_LOCKED; once the parent closes, it opens.
 *
 * Property stressed: the exclusive flock of DIR/LOCK is held exactly while a store is open —
 * a failed open never steals or releases someone else's lock, and a killed holder never leaves
 * the directory locked forever.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { Engram, StoreLockedError } from "../src/index.js";
import type { OpenOptions } from "../src/types.js";
import { tempDir as freshDir } from "./helpers/tmp.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const OPTS: OpenOptions = { durability: "none", compaction: { workers: 0 } };

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = freshDir("lock");
  dirs.push(d);
  return d;
}

async function expectLocked(p: Promise<unknown>): Promise<void> {
  const err = await p.then(
    (s) => {
      // Should not happen; do not leave a second handle open if it does.
      void (s as Engram).close();
      return null;
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StoreLockedError);
  expect((err as StoreLockedError).code).toBe("STORE_LOCKED");
}

/** Spawns the helper; resolves with the child and its first stdout line. */
function runChild(dir: string, mode: "hold" | "try"): { child: ChildProcess; line: Promise<string>; exited: Promise<number | string | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/lock-child.ts", dir, mode], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.on("exit", (code, signal) => resolve(signal ?? code)));
  const line = new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    void exited.then((how) => reject(new Error(`child exited (${String(how)}) before a line; stderr: ${err}`)));
  });
  return { child, line, exited };
}

describe("directory lock", () => {
  it("a second open in the same process is StoreLockedError; the first handle keeps working", async () => {
    const dir = tempDir();
    const first = await Engram.open(dir, OPTS);
    try {
      await first.write("k", "v1");
      await expectLocked(Engram.open(dir, OPTS));
      await expectLocked(Engram.open(path.join(dir, "."), OPTS));
      const link = path.join(tempDir(), "link");
      fs.symlinkSync(dir, link);
      await expectLocked(Engram.open(link, OPTS));
      // The failed opens did not release the lock: still locked, and the first handle works.
      await expectLocked(Engram.open(dir, OPTS));
      const w = await first.write("k", "v2");
      expect(await first.read("k")).toMatchObject({ value: "v2", version: w.version });
    } finally {
      await first.close();
    }
  });

  it("two opens racing: exactly one wins", async () => {
    const dir = tempDir();
    const results = await Promise.allSettled([Engram.open(dir, OPTS), Engram.open(dir, OPTS), Engram.open(dir, OPTS)]);
    const opened = results.filter((r): r is PromiseFulfilledResult<Engram> => r.status === "fulfilled");
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(opened).toHaveLength(1);
    for (const r of refused) expect(r.reason).toBeInstanceOf(StoreLockedError);
    await opened[0]?.value.close();
  });

  it("after close() the same process can reopen, repeatedly", async () => {
    const dir = tempDir();
    for (let i = 0; i < 5; i++) {
      const s = await Engram.open(dir, OPTS);
      await s.write(`k${i}`, `v${i}`);
      await s.close();
      await s.close();
    }
    const s = await Engram.open(dir, OPTS);
    try {
      for (let i = 0; i < 5; i++) expect(await s.read(`k${i}`)).toMatchObject({ value: `v${i}` });
    } finally {
      await s.close();
    }
  });

  it("a child process holding the store locks the parent out until it is SIGKILLed", async () => {
    const dir = tempDir();
    const { child, line, exited } = runChild(dir, "hold");
    const ready = await line;
    expect(ready).toMatch(/^READY \d+$/);
    const version = Number(ready.split(" ")[1]);
    await expectLocked(Engram.open(dir, OPTS));
    await expectLocked(Engram.open(dir, OPTS));
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    const s = await Engram.open(dir, OPTS);
    try {
      // The child's write was acknowledged in sync mode: it survived the kill.
      expect(await s.read("child")).toMatchObject({ status: "OK", value: String(child.pid), version });
    } finally {
      await s.close();
    }
  }, 30_000);

  it("the parent holding the store locks a child out; after close() the child opens", async () => {
    const dir = tempDir();
    const s = await Engram.open(dir, OPTS);
    let closed = false;
    try {
      await s.write("k", "v");
      const locked = runChild(dir, "try");
      expect(await locked.line).toBe("FAILED STORE_LOCKED");
      await locked.exited;
      await s.close();
      closed = true;
      const free = runChild(dir, "try");
      expect(await free.line).toBe("OPENED");
      expect(await free.exited).toBe(0);
    } finally {
      if (!closed) await s.close();
    }
  }, 30_000);
});
