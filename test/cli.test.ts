/**
 * The `engram` CLI end to end: every subcommand runs as a real `node dist/bin/engram.js` process
 * over a real temp directory.
 *
 * How it works: beforeAll builds dist/ when stale (same lock as mcp.test.ts). Then put / get
 * (argument, stdin, scopes, inheritance, --json, not found), forget, probe, undelete, ls,
 * forget-scope --eager, inspect, gc, compact (both modes), verify (clean, with --progress, and
 * after a bit flip in the middle of a record inside a .seg file), demo, usage errors, a missing
 * directory, and attaching (share: true) to a running `engram mcp` holding the directory.
 *
 * (The store-commands test seeds its twenty records through the library in-process, to keep
 * the number of spawned processes down; everything it checks runs through the CLI.)
 *
 * Properties stressed: exit codes (0 ok, 1 usage, 2 engram error with code + hint, 3 not found);
 * --json prints the same wire shapes as the agent tools; verify finds injected corruption and
 * exits non-zero; demo shows both unsafe failures and both safe outcomes and exits 0.
 */
import { spawn, spawnSync } from "node:child_process";
import type { SpawnSyncReturns } from "node:child_process";
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = CLI_BIN;

let root: string;
let n = 0;

beforeAll(() => {
  assertBuilt();
  root = tempDir("cli");
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A fresh directory path (not created). */
function freshDir(): string {
  return join(root, `s${++n}`);
}

/** Runs the built CLI; `input` is piped to stdin. */
function engram(args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", input: input ?? "", env: { ...process.env, NO_COLOR: "1" } });
}

function json<T = Record<string, unknown>>(r: SpawnSyncReturns<string>): T {
  return JSON.parse(r.stdout) as T;
}

describe("key commands", () => {
  it("put / get, --json, stdin, scopes and inheritance, not found", () => {
    const dir = freshDir();
    const put = engram(["put", "--dir", dir, "pref.theme", "dark"]);
    expect(put.status).toBe(0);
    expect(put.stdout).toMatch(/^ok version \d+ generation \d+$/m);
    expect(engram(["get", "--dir", dir, "pref.theme"])).toMatchObject({ status: 0, stdout: "dark\n" });

    const fromStdin = engram(["--dir", dir, "--json", "put", "bio", "--scope", "user:alice"], "likes tea\n");
    expect(fromStdin.status).toBe(0);
    expect(json(fromStdin)).toEqual({ ok: true, version: expect.any(Number), generation: expect.any(Number) });
    const got = engram(["get", "--dir", dir, "--json", "--scope", "user:alice/session:1", "bio"]);
    expect(json(got)).toEqual({ status: "OK", value: "likes tea\n", version: expect.any(Number), generation: expect.any(Number), scope: "user:alice" });

    const noInherit = engram(["get", "--dir", dir, "--scope", "user:alice/session:1", "--no-inherit", "bio"]);
    expect(noInherit.status).toBe(3);
    expect(noInherit.stderr).toMatch(/NOT_FOUND/);
    const missing = engram(["get", "--dir", dir, "--json", "nope"]);
    expect(missing.status).toBe(3);
    expect(json(missing)).toEqual({ status: "NOT_FOUND" });
  });

  it("forget / probe / undelete / ls", () => {
    const dir = freshDir();
    engram(["put", "--dir", dir, "a", "1"]);
    engram(["put", "--dir", dir, "b", "2"]);
    const forget = engram(["forget", "--dir", dir, "a"]);
    expect(forget.status).toBe(0);
    expect(forget.stdout).toMatch(/tombstone committed at seq \d+/);
    expect(engram(["forget", "--dir", dir, "a"]).stdout).toMatch(/nothing live to forget/);

    const probe = engram(["probe", "--dir", dir, "a"]);
    expect(probe.status).toBe(0);
    expect(probe.stdout).toMatch(/value_present\s+false/);
    expect(probe.stdout).toMatch(/retention_present\s+true/);
    const probeJson = json(engram(["probe", "--dir", dir, "--json", "a"]));
    expect(Object.keys(probeJson).sort()).toEqual(
      ["expires_at", "generation", "physical_records", "retention_present", "state", "tombstone_seq", "value_present", "version"],
    );

    const undelete = engram(["undelete", "--dir", dir, "a"]);
    expect(undelete.status).toBe(0);
    expect(undelete.stdout).toMatch(/tombstone cleared; slot generation \d+/);

    const ls = engram(["ls", "--dir", dir]);
    expect(ls.status).toBe(0);
    expect(ls.stdout).toMatch(/^KEY\s+SCOPE\s+VERSION$/m);
    expect(ls.stdout).toMatch(/^b\s+global\s+\d+$/m);
    expect(ls.stdout).not.toMatch(/^a\s/m);
    expect(json(engram(["ls", "--dir", dir, "--json", "--prefix", "b"]))).toEqual({
      ok: true,
      entries: [{ key: "b", scope: "global", version: expect.any(Number) }],
      truncated: false,
    });
  });

  it("errors: engram codes exit 2 with a hint, usage exits 1, parser-refused arguments are INVALID_ARGUMENT", () => {
    const dir = freshDir();
    engram(["put", "--dir", dir, "k", "v"]);
    const conflict = engram(["put", "--dir", dir, "--expected-version", "999999", "k", "w"]);
    expect(conflict.status).toBe(2);
    expect(conflict.stderr).toMatch(/^engram: VERSION_CONFLICT: /m);
    expect(conflict.stderr).toMatch(/^hint: /m);
    const conflictJson = engram(["put", "--dir", dir, "--json", "--expected-version", "none", "k", "w"]);
    expect(conflictJson.status).toBe(2);
    expect(json(conflictJson)).toMatchObject({ ok: false, error: "VERSION_CONFLICT", expected: null, actual: expect.any(Number) });

    const badKey = engram(["put", "--dir", dir, "", "v"]);
    expect(badKey.status).toBe(2);
    expect(badKey.stderr).toMatch(/INVALID_ARGUMENT/);

    for (const refused of [["--scope", "global/x"], ["--scope", "../../etc"], ["--ttl", "soon"]]) {
      const r = engram(["put", "--dir", dir, ...refused, "k", "v"]);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/^engram: INVALID_ARGUMENT: /m);
      expect(r.stderr).toMatch(/^hint: /m);
      const rJson = engram(["put", "--dir", dir, "--json", ...refused, "k", "v"]);
      expect(rJson.status).toBe(2);
      expect(json(rJson)).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" });
    }
    expect(existsSync(join(dir, "..", "etc"))).toBe(false);
    expect(engram(["frobnicate"]).status).toBe(1);
    expect(engram(["put", "--dir", dir]).status).toBe(1);
    expect(engram(["get", "k"]).stderr).toMatch(/--dir DIR is required/);
    const noStore = engram(["get", "--dir", join(root, "does-not-exist"), "k"]);
    expect(noStore.status).toBe(1);
    expect(noStore.stderr).toMatch(/no store at/);
    expect(existsSync(join(root, "does-not-exist"))).toBe(false);
    expect(engram(["get", "--dir", dir, "k"]).stdout).toBe("v\n");
  });

  it("while an mcp server holds the directory, CLI commands attach to it (share: true)", async () => {
    const dir = freshDir();
    engram(["put", "--dir", dir, "k", "v"]);
    const server = spawn(process.execPath, [CLI, "mcp", "--dir", dir], { stdio: ["pipe", "pipe", "pipe"] });
    let log = "";
    await new Promise<void>((resolve) =>
      server.stderr.on("data", (c: Buffer) => {
        log += c.toString("utf8");
        if (log.includes("ready")) resolve();
      }),
    );
    // Issue 10: this used to be STORE_LOCKED; every command now opens with share: true.
    const attached = engram(["get", "--dir", dir, "k"]);
    expect(attached.stderr).toBe("");
    expect(attached.status).toBe(0);
    expect(attached.stdout).toBe("v\n");
    const exited = new Promise((resolve) => server.on("exit", resolve));
    server.stdin.end();
    expect(await exited).toBe(0);
    expect(engram(["get", "--dir", dir, "k"]).stdout).toBe("v\n");
  });
});

describe("store commands", () => {
  it("forget-scope --eager, inspect, gc, compact", async () => {
    const dir = freshDir();
    const seed = await Engram.open(dir);
    for (let i = 0; i < 20; i++) await seed.write(`k${i}`, `value ${i}`, { scope: i % 2 === 0 ? "user:a/session:1" : "user:b" });
    await seed.close();
    const fs = engram(["forget-scope", "--dir", dir, "--eager", "user:a"]);
    expect(fs.status).toBe(0);
    expect(fs.stdout).toMatch(/erased user:a: 10 slots, seq \d+.*\(eager\)/);
    expect(engram(["ls", "--dir", dir, "--json", "--scope", "user:a/session:1"]).stdout).toMatch(/"entries": \[\]/);

    const inspect = engram(["inspect", "--dir", dir]);
    expect(inspect.status).toBe(0);
    expect(inspect.stdout).toMatch(/^SEGMENT\s+GEN\s+BYTES\s+LIVE\s+LIVE%\s+RECORDS\s+TOMBSTONES\s+STATE$/m);
    expect(inspect.stdout).toMatch(/^segments\s+\d+$/m);
    expect(inspect.stdout).toMatch(/^slots\s+\d+ \(10 live\)$/m);
    const stats = json<{ segments: unknown[]; liveSlots: number; sequence: number }>(engram(["inspect", "--dir", dir, "--json"]));
    expect(stats.segments.length).toBeGreaterThan(0);
    expect(stats.liveSlots).toBe(10);

    const gc = engram(["gc", "--dir", dir]);
    expect(gc.status).toBe(0);
    expect(gc.stdout).toMatch(/^gc \(/);
    for (const mode of ["in-place", "copy-on-write"]) {
      const c = engram(["compact", "--dir", dir, "--mode", mode]);
      expect(c.status).toBe(0);
      expect(c.stdout).toMatch(new RegExp(`^compact \\(${mode}\\)`));
    }
    const sideways = engram(["compact", "--dir", dir, "--mode", "sideways"]);
    expect(sideways.status).toBe(2);
    expect(sideways.stderr).toMatch(/^engram: INVALID_ARGUMENT: /m);
    expect(engram(["get", "--dir", dir, "--scope", "user:b", "k1"]).stdout).toBe("value 1\n");
  });

  it("verify: clean store exits 0; a flipped bit in a record exits 2 with CORRUPTION", () => {
    const dir = freshDir();
    const marker = `CORRUPT-ME-${"x".repeat(200)}-END`;
    engram(["put", "--dir", dir, "before", "a value before"]);
    engram(["put", "--dir", dir, "victim", marker]);
    engram(["put", "--dir", dir, "after", "a value after"]);

    const clean = engram(["verify", "--dir", dir, "--progress"]);
    expect(clean.status).toBe(0);
    expect(clean.stdout).toMatch(/^verify: OK \(\d+ segments, 3 records/m);
    expect(clean.stderr).toMatch(/verify 100\.0%/);
    expect(json(engram(["verify", "--dir", dir, "--json"]))).toMatchObject({ ok: true, problems: [] });

    const segDir = join(dir, "segments");
    const file = readdirSync(segDir)
      .filter((f) => f.endsWith(".seg"))
      .map((f) => join(segDir, f))
      .find((f) => readFileSync(f).includes(marker));
    expect(file).toBeDefined();
    const at = readFileSync(file as string).indexOf(marker) + Math.floor(marker.length / 2);
    const fd = openSync(file as string, "r+");
    writeSync(fd, Buffer.from([readFileSync(file as string)[at]! ^ 0x10]), 0, 1, at);
    closeSync(fd);

    const bad = engram(["verify", "--dir", dir]);
    expect(bad.status).toBe(2);
    expect(bad.stdout + bad.stderr).toMatch(/CORRUPTION/);
    const badJson = engram(["verify", "--dir", dir, "--json"]);
    expect(badJson.status).toBe(2);
    expect(json(badJson)).toMatchObject({ ok: false, problems: [expect.objectContaining({ segment: expect.any(Number) })] });
  });
});

describe("help and demo", () => {
  it("--help lists every subcommand", () => {
    const help = engram(["--help"]);
    expect(help.status).toBe(0);
    for (const c of ["put", "get", "forget", "forget-scope", "probe", "undelete", "ls", "inspect", "verify", "compact", "gc", "demo", "mcp"]) {
      expect(help.stdout).toMatch(new RegExp(`^  ${c}\\b`, "m"));
    }
  });

  it("demo shows both unsafe failures and both safe outcomes, and exits 0", () => {
    const started = Date.now();
    const demo = engram(["demo"]);
    expect(demo.stderr).toBe("");
    expect(demo.status).toBe(0);
    expect(demo.stdout).toMatch(/RESULT \(a\) unsafe: FAILURE: PHANTOM WRITE LOSS/);
    expect(demo.stdout).toMatch(/RESULT \(a\) defaults: SAFE: WRITE SURVIVED/);
    expect(demo.stdout).toMatch(/RESULT \(b\) unsafe: FAILURE: TORN READ/);
    expect(demo.stdout).toMatch(/RESULT \(b\) defaults: SAFE: FAILED CLOSED with ScopeErasedDuringRead/);
    expect(demo.stdout).toMatch(/version \d+, generation \d+/);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
