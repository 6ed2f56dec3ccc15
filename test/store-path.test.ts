/**
 * A store path that cannot hold a directory is bad input: open (exclusive or shared) rejects with
 * INVALID_ARGUMENT and a message that says what to do, within a deadline, and makes nothing.
 *
 * Method: paths with a file on the way (ENOTDIR), a path that is a file, and paths under /proc,
 * whose directories exist but refuse children with ENOENT. The /proc cases run in a child process
 * with a 20 s timeout and SIGKILL: node 20's `mkdirSync(p, { recursive: true })`, which open used
 * until the twentieth session, loops there for ever at full CPU — synchronous code no in-process
 * deadline can stop. The others ran into node's bare ENOTDIR error before. A writable nested path
 * is made, parents included, and opens. A shared open whose socket directory (XDG_RUNTIME_DIR, for a
 * store path too long for a socket name) lies under /proc rejects instead of spinning. `Engram.verify` of a path with no store in it reported a
 * clean store of 0 segments until the twentieth session (a mistyped backup path "verified").
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const ROOT = path.resolve(import.meta.dirname, "..");

/** The error `Engram.open(dir, options)` rejects with (or null when it opens, then closed). */
async function openError(dir: string, options: object): Promise<unknown> {
  try {
    const s = await Engram.open(dir, options);
    await s.close();
    return null;
  } catch (err) {
    return err;
  }
}

/** Opens `dir` in a child process (killed after 20 s, `env` added to its environment); returns its error code, "opened", or "timeout". */
function openInChild(dir: string, share: boolean, env: Record<string, string> = {}): string {
  const script = `import { Engram } from ${JSON.stringify(path.join(ROOT, "src/index.ts"))};
try { const s = await Engram.open(${JSON.stringify(dir)}, { share: ${share}, shareTimeoutMs: 2000 }); await s.close(); console.log("opened"); }
catch (e) { console.log(e.code ?? String(e)); }`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL", env: { ...process.env, ...env } });
  if (r.error !== undefined || r.signal !== null) return "timeout";
  return r.stdout.trim();
}

describe("store paths that cannot hold a directory", () => {
  for (const share of [false, true]) {
    const how = share ? "shared" : "exclusive";
    it(`a file on the way, or the path itself a file: INVALID_ARGUMENT, nothing made (${how})`, async () => {
      const base = tempDir("store-path");
      const file = path.join(base, "a-file");
      fs.writeFileSync(file, "not a directory");
      for (const dir of [path.join(file, "store"), path.join(file, "deeper", "store"), file]) {
        const err = await openError(dir, { share, shareTimeoutMs: 2000 });
        expect(err, dir).toBeInstanceOf(InvalidArgumentError);
        expect((err as InvalidArgumentError).message, dir).toMatch(/choose a/);
      }
      expect(fs.readdirSync(base)).toEqual(["a-file"]);
      expect(fs.readFileSync(file, "utf8")).toBe("not a directory");
    });

    it.skipIf(!fs.existsSync("/proc/self"))(`a path under /proc: INVALID_ARGUMENT, no hang (${how})`, () => {
      expect(openInChild("/proc/engram-store-path-test", share)).toBe("INVALID_ARGUMENT");
      expect(openInChild("/proc/engram-store-path-test/deeper", share)).toBe("INVALID_ARGUMENT");
    }, 60_000);
  }

  it.skipIf(!fs.existsSync("/proc/self"))("a shared open whose socket needs a runtime directory under /proc (XDG_RUNTIME_DIR): an IoError, no hang", () => {
    const dir = path.join(tempDir("store-path"), "d".repeat(120)); // too long for a socket name beside the store
    expect(openInChild(dir, true, { XDG_RUNTIME_DIR: "/proc/engram-store-path-xdg" })).toBe("IO_ERROR");
  }, 60_000);

  it("Engram.verify of a path that holds no store is INVALID_ARGUMENT, not a clean report", async () => {
    const base = tempDir("store-path");
    const file = path.join(base, "a-file");
    fs.writeFileSync(file, "x");
    for (const dir of [path.join(base, "missing"), base, file, path.join(file, "sub")]) {
      await expect(Engram.verify(dir), dir).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    expect(fs.readdirSync(base)).toEqual(["a-file"]);
  });

  it("a nested path that does not exist yet is made, parents included", async () => {
    const dir = path.join(tempDir("store-path"), "a", "b", "store");
    const s = await Engram.open(dir);
    try {
      await s.write("k", "v");
      expect(await s.read("k")).toMatchObject({ value: "v" });
    } finally {
      await s.close();
    }
    expect(fs.statSync(path.join(dir, "segments")).isDirectory()).toBe(true);
  });
});
