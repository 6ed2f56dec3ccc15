/**
 * The MCP server end to end: the SDK's own Client + StdioClientTransport spawn the BUILT CLI
 * (`node dist/bin/engram.js mcp --dir DIR`) as a real child process over a real directory.
 *
 * How it works: beforeAll builds dist/ with tsc when any source is newer than its output (a
 * mkdir lock keeps parallel test files from building twice). One server is driven through
 * tools/list, memory_write, memory_read, memory_forget, memory_probe, memory_list and a bad call;
 * every result must carry the wire JSON both as a text item and as structuredContent. Closing
 * the client ends the server's stdin: the child must exit and release the store lock, which the
 * test proves by opening the directory itself and finding the value written over MCP. A second
 * server with `--read-only --scope user:alice` lists only the read tools, resolves reads in the
 * bound scope and refuses writes. A third gets SIGTERM and must exit 0 after closing the store.
 *
 * Properties stressed: stdout carries only the protocol (no transport parse errors, logs on
 * stderr); bad calls are INVALID_ARGUMENT wire errors; the store is closed cleanly on stdin end
 * and on SIGTERM.
 */
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = CLI_BIN;

let root: string;

beforeAll(() => {
  assertBuilt();
  root = tempDir("mcp");
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Connected {
  client: Client;
  stderr: () => string;
  errors: Error[];
}

async function connect(args: string[]): Promise<Connected> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, "mcp", ...args], stderr: "pipe" });
  let log = "";
  transport.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString("utf8")));
  const errors: Error[] = [];
  transport.onerror = (err) => errors.push(err);
  const client = new Client({ name: "engram-test", version: "0.0.0" });
  await client.connect(transport);
  return { client, stderr: () => log, errors };
}

/** Calls a tool and checks the text item and structuredContent carry the same wire JSON. */
async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ wire: Record<string, unknown>; isError: boolean }> {
  const res = await client.callTool({ name, arguments: args });
  const content = res.content as Array<{ type: string; text: string }>;
  expect(content[0]?.type).toBe("text");
  const wire = JSON.parse(content[0]?.text ?? "null") as Record<string, unknown>;
  expect(res.structuredContent).toEqual(wire);
  return { wire, isError: res.isError === true };
}

describe("engram mcp over stdio", () => {
  it("lists tools, writes, reads, forgets, probes, refuses a bad call, and closes cleanly", async () => {
    const dir = join(root, "main");
    const { client, stderr, errors } = await connect(["--dir", dir]);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name).sort();
      expect(names).toEqual(["memory_forget", "memory_forget_scope", "memory_list", "memory_probe", "memory_read", "memory_undelete", "memory_write"]);
      const write = tools.find((t) => t.name === "memory_write");
      expect(write?.inputSchema).toMatchObject({ type: "object", required: ["key", "value"] });
      expect(tools.find((t) => t.name === "memory_forget")?.description).toMatch(/tombstone/);

      const w = await call(client, "memory_write", { key: "pref.theme", value: "dark" });
      expect(w).toEqual({ wire: { ok: true, version: expect.any(Number), generation: expect.any(Number) }, isError: false });
      const r = await call(client, "memory_read", { key: "pref.theme" });
      expect(r.wire).toMatchObject({ status: "OK", value: "dark", version: w.wire["version"], scope: "global" });

      await call(client, "memory_write", { key: "note", value: "keep me", scope: "user:alice" });
      const l = await call(client, "memory_list", { scope: "user:alice" });
      expect((l.wire["entries"] as unknown[]).length).toBe(2);

      const f = await call(client, "memory_forget", { key: "pref.theme" });
      expect(f.wire).toMatchObject({ ok: true, tombstone_seq: expect.any(Number) });
      expect((await call(client, "memory_read", { key: "pref.theme" })).wire).toEqual({ status: "NOT_FOUND" });
      const p = await call(client, "memory_probe", { key: "pref.theme" });
      expect(p.wire).toMatchObject({ value_present: false, retention_present: true, tombstone_seq: f.wire["tombstone_seq"] });

      const bad = await call(client, "memory_write", { key: "", value: 42, expectedVersion: 1 });
      expect(bad).toMatchObject({ wire: { ok: false, error: "INVALID_ARGUMENT" }, isError: true });
      const conflict = await call(client, "memory_write", { key: "note", value: "x", scope: "user:alice", expected_version: 1 });
      expect(conflict).toMatchObject({ wire: { ok: false, error: "VERSION_CONFLICT" }, isError: true });
    } finally {
      await client.close();
    }
    expect(errors).toEqual([]);
    expect(stderr()).toMatch(/engram mcp: ready/);
    expect(stderr()).toMatch(/stdin ended; closing the store/);

    const store = await Engram.open(dir);
    try {
      expect(await store.read("note", { scope: "user:alice" })).toMatchObject({ status: "OK", value: "keep me" });
      expect(await store.read("pref.theme")).toEqual({ status: "NOT_FOUND" });
    } finally {
      await store.close();
    }
  });

  it("--read-only --scope: read tools only, reads in the bound scope, writes refused", async () => {
    const dir = join(root, "ro");
    const seed = await Engram.open(dir);
    await seed.write("lang", "en", { scope: "user:alice" });
    await seed.write("lang", "fr");
    await seed.close();

    const { client } = await connect(["--dir", dir, "--read-only", "--scope", "user:alice"]);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["memory_list", "memory_probe", "memory_read"]);
      expect((await call(client, "memory_read", { key: "lang" })).wire).toMatchObject({ value: "en", scope: "user:alice" });
      expect((await call(client, "memory_read", { key: "lang", scope: "global" })).wire).toMatchObject({ value: "fr" });
      const refused = await client.callTool({ name: "memory_write", arguments: { key: "lang", value: "de" } });
      expect(refused.isError).toBe(true);
    } finally {
      await client.close();
    }
    const store = await Engram.open(dir);
    expect(await store.read("lang", { scope: "user:alice" })).toMatchObject({ value: "en" });
    await store.close();
  });

  it("SIGTERM closes the store and exits 0", async () => {
    const dir = join(root, "sigterm");
    const child = spawn(process.execPath, [CLI, "mcp", "--dir", dir], { stdio: ["pipe", "pipe", "pipe"] });
    let log = "";
    const ready = new Promise<void>((resolve) =>
      child.stderr.on("data", (c: Buffer) => {
        log += c.toString("utf8");
        if (log.includes("ready")) resolve();
      }),
    );
    await ready;
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(log).toMatch(/SIGTERM; closing the store/);
    const store = await Engram.open(dir);
    await store.close();
  });
});
