/**
 * Three `engram mcp` servers on one directory — the setting of issue 10 (two agent hosts, or two
 * sessions of one host, each starting its own stdio server) — plus CLI calls at the same time.
 *
 * How it works: the BUILT package (dist/, as a user runs it) is started three times as
 * `node dist/bin/engram.js mcp --dir DIR` by the MCP SDK's own Client + StdioClientTransport, all
 * at once; they race for the directory, one owns it and the others attach over its socket. Each
 * server writes a key through memory_write and reads the other two servers' keys through
 * memory_read. Meanwhile `engram put` and `engram get` run as separate processes against the same
 * directory and must succeed. Then the owning server (found by the pid in DIR/LOCK) is closed:
 * the two others must keep serving — a write and a read through each, and reads of everything
 * written before — and a CLI `get` still works. Finally an exclusive open finds every write.
 *
 * Property stressed: N MCP servers and CLI calls on one directory never fail with STORE_LOCKED
 * and never lose a write, including across the owner's exit.
 */
import { execFile } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = CLI_BIN;
const run = promisify(execFile);
let root: string;
const servers: Server[] = [];

beforeAll(() => {
  assertBuilt();
  root = tempDir("share-mcp");
});

afterAll(async () => {
  for (const s of servers) await s.client.close().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});

interface Server {
  client: Client;
  transport: StdioClientTransport;
  log: () => string;
}

async function startServer(dir: string): Promise<Server> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, "mcp", "--dir", dir], stderr: "pipe" });
  let log = "";
  transport.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString("utf8")));
  const client = new Client({ name: "engram-share-test", version: "0.0.0" });
  await client.connect(transport);
  const s = { client, transport, log: () => log };
  servers.push(s);
  return s;
}

/** One tool call; returns the wire JSON. */
async function call(s: Server, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await s.client.callTool({ name, arguments: args });
  const content = res.content as Array<{ type: string; text: string }>;
  return JSON.parse(content[0]?.text ?? "null") as Record<string, unknown>;
}

async function cli(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [CLI, ...args], { timeout: 30_000 });
}

describe("three engram mcp servers on one directory", () => {
  it("each writes and reads the others' writes, CLI calls run beside them, the owner exits and the others keep serving", async () => {
    const dir = join(root, "store");
    const three = await Promise.all([0, 1, 2].map(() => startServer(dir)));

    const [writes, cliPut] = await Promise.all([
      Promise.all(three.map((s, n) => call(s, "memory_write", { key: `from-${n}`, value: `hello from server ${n}` }))),
      cli(["put", "--dir", dir, "from-cli", "hello from the cli"]),
    ]);
    for (const w of writes) expect(w).toMatchObject({ ok: true });
    expect(cliPut.stderr).toBe("");

    const reads = await Promise.all([
      ...three.flatMap((s, n) => [0, 1, 2].filter((o) => o !== n).map((o) => call(s, "memory_read", { key: `from-${o}` }).then((r) => [o, r] as const))),
      cli(["get", "--dir", dir, "from-0"]).then((r) => [0, { status: "OK", value: r.stdout.trimEnd() }] as const),
    ]);
    for (const [o, r] of reads) expect(r).toMatchObject({ status: "OK", value: `hello from server ${o}` });
    for (const s of three) expect(await call(s, "memory_read", { key: "from-cli" })).toMatchObject({ status: "OK", value: "hello from the cli" });

    const ownerPid = (JSON.parse(readFileSync(join(dir, "LOCK"), "utf8")) as { mode: string; pid: number }).pid;
    const owner = three.find((s) => s.transport.pid === ownerPid);
    expect(owner, `the LOCK note names pid ${ownerPid}, one of the servers`).toBeDefined();
    await (owner as Server).client.close();
    const rest = three.filter((s) => s !== owner);

    for (const [n, s] of rest.entries()) {
      expect(await call(s, "memory_write", { key: `after-${n}`, value: `after the owner left ${n}` }), s.log()).toMatchObject({ ok: true });
    }
    for (const s of rest) {
      for (const n of [0, 1]) expect(await call(s, "memory_read", { key: `after-${n}` })).toMatchObject({ status: "OK", value: `after the owner left ${n}` });
      for (const o of [0, 1, 2]) expect(await call(s, "memory_read", { key: `from-${o}` })).toMatchObject({ status: "OK", value: `hello from server ${o}` });
    }
    expect((await cli(["get", "--dir", dir, "after-1"])).stdout).toBe("after the owner left 1\n");

    for (const s of rest) await s.client.close();
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      for (const o of [0, 1, 2]) expect(await store.read(`from-${o}`)).toMatchObject({ status: "OK", value: `hello from server ${o}` });
      for (const n of [0, 1]) expect(await store.read(`after-${n}`)).toMatchObject({ status: "OK" });
      expect(await store.read("from-cli")).toMatchObject({ status: "OK", value: "hello from the cli" });
    } finally {
      await store.close();
    }
  });
});
