/**
 * An IoError's advice fits its errno (fifty-seventh session): a store on a read-only mount
 * answered every open with "EROFS ...: free space or fix the device", which sends a user to the
 * wrong fix; a process without write permission got the same words.
 *
 * How it works: first the advice of each errno the file system gives for a place that cannot be
 * written (EROFS, EACCES, EPERM), for too many open files (EMFILE, ENFILE) and for a failing device
 * (EIO, ENOSPC, and an errno it does not know), from the IoError constructor itself. Then the real
 * case, as root: a store is made on a 4 MiB tmpfs, the tmpfs is remounted read-only, and an
 * embedded open, a shared open (which waits shareTimeoutMs for an owner that may write, then
 * gives up) and the CLI's `get` (real child process, deadline) must each fail with IO_ERROR EROFS
 * and the read-only advice, with no stack trace (the CLI says first that it waits, unless -q);
 * the tmpfs is unmounted in `finally`. Not root,
 * or mount refused: that part is skipped with a message. The twin is the old advice: the
 * constructor's cases fail on it, and the CLI case's message check does.
 */
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import { ioAdvice } from "../rules/errors.js";
import { assertBuilt } from "./helpers/built.js";
import { expectNoStack, run } from "./helpers/cli-run.js";
import { tempDir } from "./helpers/tmp.js";

const root = typeof process.getuid === "function" && process.getuid() === 0;
if (!root) console.warn("io-advice: the read-only mount case SKIPPED — mounting a tmpfs needs root");

const DEVICE = /free space or fix the device/;

describe("IoError's advice by errno", () => {
  it("a read-only file system, a missing permission and too many open files each get their own advice, not the device's", () => {
    const cases: Array<[string, RegExp]> = [
      ["EROFS", /the file system is mounted read-only: remount it read-write, or copy the store to a writable place, then retry$/],
      ["EACCES", /this process may not write there: give it write permission on the store's directory, or run it as the user that owns the store, then retry$/],
      ["EPERM", /this process may not write there/],
      ["EMFILE", /too many open files: close other stores or raise the limit \(ulimit -n\), then retry$/],
      ["ENFILE", /too many open files/],
    ];
    for (const [errno, advice] of cases) {
      const err = new IoError(errno, "open LOCK", "d/LOCK");
      expect(err.message, errno).toMatch(new RegExp(`^open LOCK failed with ${errno} \\(d/LOCK\\); nothing of this call was acknowledged: `));
      expect(err.message, errno).toMatch(advice);
      expect(err.message, errno).not.toMatch(DEVICE);
      expect(err.errno, errno).toBe(errno);
      expect(err.code, errno).toBe("IO_ERROR");
    }
  });

  it("a failing device, a full one and an errno it does not know keep the device's advice", () => {
    for (const errno of ["EIO", "ENOSPC", "EDQUOT", "EXDEV"]) {
      expect(new IoError(errno, "fdatasync").message, errno).toBe(`fdatasync failed with ${errno}; nothing of this call was acknowledged: free space or fix the device, then retry`);
      expect(ioAdvice(errno), errno).toBe("free space or fix the device");
    }
  });
});

describe("a store on a read-only mount", () => {
  it.skipIf(!root)("embedded, shared and CLI opens fail with IO_ERROR EROFS and the read-only advice", { timeout: 90_000 }, async () => {
    assertBuilt();
    const mnt = tempDir("io-advice-ro");
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", mnt], { stdio: "pipe" });
    } catch (err) {
      console.warn(`io-advice: SKIPPED — mount -t tmpfs failed: ${String(err)}`);
      return;
    }
    try {
      const dir = path.join(mnt, "store");
      const s = await Engram.open(dir, { compaction: { workers: 0 } });
      await s.write("k", "v");
      await s.close();
      execFileSync("mount", ["-o", "remount,ro", mnt], { stdio: "pipe" });
      for (const options of [{ compaction: { workers: 0 } }, { share: true, shareTimeoutMs: 300, compaction: { workers: 0 } }]) {
        const err: unknown = await Engram.open(dir, options).then(
          async (opened) => {
            await opened.close();
            return null;
          },
          (e: unknown) => e,
        );
        const label = options.share === true ? "shared open" : "embedded open";
        expect(err, label).toBeInstanceOf(IoError);
        expect((err as IoError).errno, label).toBe("EROFS");
        expect((err as IoError).message, label).toMatch(/mounted read-only: remount it read-write/);
        expect((err as IoError).message, label).not.toMatch(DEVICE);
      }
      const r = await run(["get", "--dir", dir, "k"]); // shared: waits its 10 s shareTimeoutMs for an owner that could write
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^engram: IO_ERROR: .*EROFS.*the file system is mounted read-only: remount it read-write, or copy the store to a writable place, then retry$/m);
      expect(r.stderr).not.toMatch(DEVICE);
      // The wait said first, so the 10 s are not silent; -q keeps stderr to the error.
      expect(r.stderr.split("\n")[0]).toMatch(/^engram: this process cannot write \S+ \(EROFS\); waiting up to 10 s for a process that can to serve it$/);
      expectNoStack(r);
      const quiet = await run(["get", "--dir", dir, "k", "-q"]);
      expect(quiet.status, quiet.stderr).toBe(2);
      expect(quiet.stderr).toMatch(/^engram: IO_ERROR: /);
    } finally {
      execFileSync("umount", [mnt], { stdio: "pipe" });
    }
  });
});
