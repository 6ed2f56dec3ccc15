/**
 * The CLI and the MCP server accept a PostgreSQL URL wherever they accept `--dir`.
 *
 * How it works: the built CLI (dist/bin/engram.js, the bundle package.json "bin" names, as a user runs it) is spawned with
 * `--dir postgresql://...` for put, get, forget, probe, ls, gc, compact and verify, checking the
 * --json wire shapes; a read command on a URL never asks for an existing directory, and no
 * directory named "postgresql:" appears in the working directory. Then `engram mcp --dir URL`
 * is driven through the MCP SDK's own client: memory_write then memory_read round-trip, and the
 * value is visible to a library handle on the same database. Skipped (visibly) without a server.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { dropSchemas, storeUrl } from "./helpers/pg.js";
import { tempDir } from "./helpers/tmp.js";

const url = process.env["ENGRAM_PG_URL"];
const skip = url === undefined || url === "" ? (process.env["ENGRAM_PG_SKIP"] ?? "no ENGRAM_PG_URL") : null;
const CLI = CLI_BIN;
const cwd = tempDir("pgcli");
const tag = `m${process.pid}_`;
afterAll(async () => {
  rmSync(cwd, { recursive: true, force: true });
  await dropSchemas(tag);
});

function cli(at: string, args: string[]): { status: number | null; json: Record<string, unknown>; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, "--dir", at, "--json", ...args], { cwd, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: 60_000 });
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    json = { unparsed: r.stdout };
  }
  return { status: r.status, json, stderr: r.stderr };
}

describe.skipIf(skip !== null)(`CLI and MCP on a PostgreSQL URL${skip === null ? "" : ` [skipped: ${skip}]`}`, () => {
  it("every store command takes the URL as --dir", () => {
    assertBuilt();
    const at = storeUrl(`${tag}cli`);
    const got0 = cli(at, ["get", "pref.theme", "--scope", "user:alice"]);
    expect(got0.json, got0.stderr).toEqual({ status: "NOT_FOUND" });
    const put = cli(at, ["put", "pref.theme", "dark", "--scope", "user:alice"]);
    expect(put.json, put.stderr).toMatchObject({ ok: true, version: expect.any(Number), generation: 1 });
    expect(cli(at, ["get", "pref.theme", "--scope", "user:alice/session:7"]).json).toMatchObject({ status: "OK", value: "dark", scope: "user:alice" });
    expect(cli(at, ["ls", "--scope", "user:alice"]).json).toMatchObject({ ok: true, entries: [{ key: "pref.theme", scope: "user:alice" }] });
    expect(cli(at, ["forget", "pref.theme", "--scope", "user:alice"]).json).toMatchObject({ ok: true, tombstone_seq: expect.any(Number) });
    expect(cli(at, ["probe", "pref.theme", "--scope", "user:alice"]).json).toMatchObject({ state: "tombstoned", value_present: false, retention_present: true });
    expect(cli(at, ["gc"]).status).toBe(0);
    expect(cli(at, ["probe", "pref.theme", "--scope", "user:alice"]).json).toMatchObject({ state: "reclaimed", retention_present: true });
    expect(cli(at, ["compact"]).status).toBe(0);
    const v = cli(at, ["verify"]);
    expect(v.json, v.stderr).toMatchObject({ ok: true, problems: [] });
    expect(existsSync(join(cwd, "postgresql:")), "a directory named postgresql: was created").toBe(false);
  });

  it("engram mcp --dir URL serves the tools on the database", async () => {
    assertBuilt();
    const at = storeUrl(`${tag}mcp`);
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, "mcp", "--dir", at, "--scope", "user:me"], stderr: "pipe", cwd });
    const client = new Client({ name: "engram-test", version: "0.0.0" });
    await client.connect(transport);
    try {
      const w = await client.callTool({ name: "memory_write", arguments: { key: "k", value: "over mcp" } });
      expect(w.structuredContent).toMatchObject({ ok: true, version: expect.any(Number) });
      const r = await client.callTool({ name: "memory_read", arguments: { key: "k" } });
      expect(r.structuredContent).toMatchObject({ status: "OK", value: "over mcp", scope: "user:me" });
    } finally {
      await client.close();
    }
    const store = await Engram.open(at);
    try {
      expect(await store.read("k", { scope: "user:me" })).toMatchObject({ status: "OK", value: "over mcp" });
    } finally {
      await store.close();
    }
  });
});

if (skip !== null) it.skip(`CLI and MCP on PostgreSQL [skipped: ${skip}]`, () => undefined);
