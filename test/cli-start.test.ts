/**
 * A CLI command loads only what it uses, from one bundle: package.json "bin" is dist/bin/engram.js,
 * which scripts/bundle-cli.mjs makes of the compiled tree (a dozen files instead of ~100 modules).
 * It checks the tool arguments without zod (src/tool-args.ts), loads the compaction worker pool's
 * piscina when a pass first needs a worker (engine/compactor.ts getPool), the PostgreSQL backend
 * when a URL is opened (postgres/index.ts openPostgres), and msgpackr when a frame first crosses a
 * shared store's socket (share/protocol.ts codec: a command that owns its store alone sends none).
 * Every CLI command and every MCP server's start pays its module loading: on this machine kind zod
 * alone (95 files) took ~70 ms of a `get`'s ~350 (thirty-fifth session), the ~96 modules' loading
 * ~60 ms of a `get`'s ~290 (thirty-sixth).
 *
 * How it works: the built CLI runs `put`, `get` and `ls` against a fresh store under module hooks
 * that log every URL the process loads (test/helpers/loaded-hooks.mjs, and the CommonJS modules
 * it required at exit); none may be zod's, piscina's, msgpackr's or the PostgreSQL backend's (a
 * package in node_modules by its path, one the bundle carries by a name its chunk holds: BUNDLED),
 * and a `get` may load at most BUNDLE_FILES_MAX of engram's files, all of the bundle. The detector
 * is checked against its twins: a `compact` with a worker loads piscina, `engram mcp` loads the
 * bundled MCP SDK and zod, importing the package's index (which exports the zod schemas as
 * `toolArgSchemas`) loads zod from node_modules, a `get` that attaches to an owner (this test's
 * process holds the store, shared) loads msgpackr and reads the value through it, and the
 * unbundled dist/src/cli.js loads a file per module — so a command that loaded them again would
 * be seen.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN, ROOT } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = CLI_BIN;
const REGISTER = join(ROOT, "test", "helpers", "loaded-register.mjs");
const HEAVY = { zod: "/node_modules/zod/", piscina: "/node_modules/piscina/", msgpackr: "/node_modules/msgpackr/", postgres: "/node_modules/pg/", postgresBackend: "/dist/bin/backend-" };
/**
 * The packages the bundle carries inside its chunks (scripts/bundle-cli.mjs), known by a name only
 * their code holds: a chunk loaded with one of these in its text loaded that package.
 */
const BUNDLED = { zod: "$ZodType", mcpSdk: "McpServer" };
/** Engram's own files a get may load from the bundle: the entry and its chunks (scripts/bundle-cli.mjs). */
const BUNDLE_FILES_MAX = 24;

let root: string;
let n = 0;

beforeAll(() => {
  assertBuilt();
  root = tempDir("cli-start");
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs `node --import REGISTER …args`; returns the URLs it loaded (it must exit 0). */
function loadedBy(args: string[]): string[] {
  const log = join(root, `loaded-${++n}.log`);
  const r = spawnSync(process.execPath, ["--import", pathToFileURL(REGISTER).href, ...args], { encoding: "utf8", env: { ...process.env, ENGRAM_LOADED_LOG: log }, timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return readFileSync(log, "utf8").split("\n").filter((l) => l !== "");
}

/**
 * loadedBy without blocking this process's event loop (a store this process owns must answer the
 * command): its stdout too. Killed past the deadline.
 */
async function loadedByAsync(args: string[]): Promise<{ urls: string[]; stdout: string }> {
  const log = join(root, `loaded-${++n}.log`);
  const child = spawn(process.execPath, ["--import", pathToFileURL(REGISTER).href, ...args], { env: { ...process.env, ENGRAM_LOADED_LOG: log } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString("utf8")));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearTimeout(deadline);
  expect(code, stderr).toBe(0);
  return { urls: readFileSync(log, "utf8").split("\n").filter((l) => l !== ""), stdout };
}

/** The heavy packages among `urls`. */
function heavyIn(urls: readonly string[]): string[] {
  const chunks = [...new Set(urls.filter((u) => u.includes("/dist/bin/") && u.endsWith(".js")))].map((u) => readFileSync(fileURLToPath(u), "utf8"));
  const byUrl = Object.entries(HEAVY).filter(([, part]) => urls.some((u) => u.includes(part)));
  const inBundle = Object.entries(BUNDLED).filter(([, marker]) => chunks.some((text) => text.includes(marker)));
  return [...new Set([...byUrl, ...inBundle].map(([name]) => name))];
}

describe("a CLI command loads only what it uses", () => {
  it("put, get and ls load no zod, no piscina, no msgpackr and no PostgreSQL backend; compact with a worker loads piscina; the package index loads zod", async () => {
    const dir = join(root, "store");
    const put = loadedBy([CLI, "--dir", dir, "put", "note", "hello", "--scope", "user:a"]);
    expect(put.some((u) => u.endsWith("/dist/bin/engram.js"))).toBe(true); // the detector sees the bundle load
    expect(heavyIn(put)).toEqual([]);
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "get", "note", "--scope", "user:a"]))).toEqual([]);
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "ls", "--scope", "user:a"]))).toEqual([]);
    // The twins: what loads them does show. Overwrites in 4 KiB segments leave garbage in sealed
    // ones, which the CLI's compact hands to a worker.
    const s = await Engram.open(dir, { segmentBytes: 4096, durability: "none", compaction: { auto: false } });
    for (let i = 0; i < 200; i++) await s.write(`k${i % 4}`, `v${i}`.repeat(20));
    await s.close();
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "compact"]))).toContain("piscina");
    // `engram mcp` (stdin at its end: it starts, then closes) loads the SDK and zod from the bundle's chunks.
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "mcp"]))).toEqual(expect.arrayContaining(["zod", "mcpSdk"]));
    expect(heavyIn(loadedBy(["--input-type=module", "-e", `await import(${JSON.stringify(pathToFileURL(join(ROOT, "dist", "src", "index.js")).href)})`]))).toContain("zod");
  }, 120_000);

  it("a get reads the bundle: a few files of dist/bin, none of the compiled tree; the unbundled CLI reads ~100", async () => {
    const dir = join(root, "bundle");
    loadedBy([CLI, "--dir", dir, "put", "note", "hello", "--scope", "user:a"]);
    const own = (urls: readonly string[]): string[] => urls.filter((u) => u.includes("/dist/"));
    const bundled = own(loadedBy([CLI, "--dir", dir, "get", "note", "--scope", "user:a"]));
    expect(bundled.every((u) => u.includes("/dist/bin/")), bundled.join("\n")).toBe(true);
    expect(bundled.length).toBeLessThanOrEqual(BUNDLE_FILES_MAX);
    // The twin: the compiled tree the bundle is made from, run directly, loads a file per module.
    const unbundled = own(loadedBy([join(ROOT, "dist", "src", "cli.js"), "--dir", dir, "get", "note", "--scope", "user:a"]));
    expect(unbundled.length).toBeGreaterThan(3 * BUNDLE_FILES_MAX);
  }, 120_000);

  it("a get that attaches to the store's owner loads msgpackr and reads through it", async () => {
    const dir = join(root, "owned");
    const owner = await Engram.open(dir, { share: true });
    try {
      await owner.write("note", "through the owner", { scope: "user:a" });
      const got = await loadedByAsync([CLI, "--dir", dir, "get", "note", "--scope", "user:a"]);
      expect(got.stdout).toBe("through the owner\n");
      expect(heavyIn(got.urls)).toEqual(["msgpackr"]);
    } finally {
      await owner.close();
    }
  }, 120_000);
});
