/**
 * A CLI command loads only what it uses: the tool layer's argument checks without zod
 * (src/tool-args.ts), the compaction worker pool's piscina when a pass first needs a worker
 * (engine/compactor.ts getPool), the PostgreSQL backend when a URL is opened (postgres/index.ts
 * openPostgres). Every CLI command and every MCP server's start pays its module loading: on this
 * machine kind zod alone (95 files) took ~70 ms of a `get`'s ~350 (thirty-fifth session).
 *
 * How it works: the built CLI runs `put`, `get` and `ls` against a fresh store under module hooks
 * that log every URL the process loads (test/helpers/loaded-hooks.mjs); none may be zod's,
 * piscina's or the PostgreSQL backend's. The detector is checked against its twins: a `compact`
 * with a worker loads piscina, and importing the package's index (which exports the zod schemas
 * as `toolArgSchemas`) loads zod — so a command that loaded them again would be seen.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, ROOT } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = join(ROOT, "dist", "src", "cli.js");
const REGISTER = join(ROOT, "test", "helpers", "loaded-register.mjs");
const HEAVY = { zod: "/node_modules/zod/", piscina: "/node_modules/piscina/", postgres: "/dist/postgres/backend.js" };

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

/** The heavy packages among `urls`. */
function heavyIn(urls: readonly string[]): string[] {
  return Object.entries(HEAVY)
    .filter(([, part]) => urls.some((u) => u.includes(part)))
    .map(([name]) => name);
}

describe("a CLI command loads only what it uses", () => {
  it("put, get and ls load no zod, no piscina and no PostgreSQL backend; compact with a worker loads piscina; the package index loads zod", async () => {
    const dir = join(root, "store");
    const put = loadedBy([CLI, "--dir", dir, "put", "note", "hello", "--scope", "user:a"]);
    expect(put.some((u) => u.endsWith("/dist/engine/store.js"))).toBe(true); // the detector sees the engine load
    expect(heavyIn(put)).toEqual([]);
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "get", "note", "--scope", "user:a"]))).toEqual([]);
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "ls", "--scope", "user:a"]))).toEqual([]);
    // The twins: what loads them does show. Overwrites in 4 KiB segments leave garbage in sealed
    // ones, which the CLI's compact hands to a worker.
    const s = await Engram.open(dir, { segmentBytes: 4096, durability: "none", compaction: { auto: false } });
    for (let i = 0; i < 200; i++) await s.write(`k${i % 4}`, `v${i}`.repeat(20));
    await s.close();
    expect(heavyIn(loadedBy([CLI, "--dir", dir, "compact"]))).toContain("piscina");
    expect(heavyIn(loadedBy(["--input-type=module", "-e", `await import(${JSON.stringify(pathToFileURL(join(ROOT, "dist", "src", "index.js")).href)})`]))).toContain("zod");
  }, 120_000);
});
