/**
 * The MCP server: the defects the fifty-fourth session's audit found by driving it with the real
 * SDK client (scripts in /tmp/p54/integ), each pinned here.
 *
 * How it works. Schemas: the server (createMcpServer over a real store) is reached by the SDK's
 * own Client over its InMemoryTransport; the tools' advertised input schemas are compiled with
 * the SDK's own validator (AjvJsonSchemaValidator, what an MCP client uses) and a seeded stream
 * of 600 calls, built from pools of good and bad values for every argument, goes to both: the
 * schema's verdict and the server's (INVALID_ARGUMENT or not) must agree on every call except the
 * one rule a schema cannot state, a key's UTF-8 byte count, for which the pools hold one
 * multi-byte key the schema lets through and the server refuses. Every refusal must come back as
 * a tool error (`isError`) carrying the engram code. (The oversized-message case of the
 * fifty-fourth session — the server exiting once the SDK's transport closed on a line over 10 MiB —
 * moved to test/mcp-oversize.test.ts as the twin of the fifty-sixth session's fix, which answers
 * such a line and keeps the connection.)
 *
 * Unknown tool names (fifty-fifth session): the real SDK client calls names that are no tool of
 * the server (a made-up one, a near miss in case, the empty string, with and without arguments,
 * and a mutating tool of a read-only server, which tools/list leaves out). Each must come back
 * as engram's errors do — a tool result with isError, structuredContent and JSON text
 * `{ ok: false, error: "INVALID_ARGUMENT", message }`, the message naming every tool the server
 * lists — with the store's commit sequence unmoved. The twin (`unsafeMcpForTests.sdkUnknownTool`,
 * McpServer answering tools/call itself, the rule before) gets the SDK's "MCP error -32602: Tool
 * … not found" text with no engram code.
 *
 * Property stressed: what tools/list advertises is what the tools accept; every refusal carries
 * an engram code.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { afterEach, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { createMcpServer, unsafeMcpForTests } from "../src/mcp.js";
import type { ToolContext } from "../src/tools.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

const CALLS = 600;
const SEED = 20261207;

/** The one key whose refusal no JSON Schema can state: 400 UTF-16 units, 1200 UTF-8 bytes. */
const BYTES_ONLY_KEY = "雪".repeat(400);
const KEYS: unknown[] = ["k", "pref.theme", "../../etc/passwd", "", 5, null, "a\u0000b", "k".repeat(1024), "k".repeat(1025), BYTES_ONLY_KEY];
const SCOPES: unknown[] = [undefined, "global", "user:alice", "user:alice/session:42", "", "a/../b", "/etc", "global/x", "a/global", "x".repeat(65), Array(8).fill("a").join("/"), Array(9).fill("a").join("/"), 7, "Ünï", "a b"];
const VALUES: unknown[] = ["v", "", { base64: "AAAA" }, { base64: "AAA=" }, { base64: "!!" }, { base64: "AAA" }, 5, null, { base64: "AAAA", x: 1 }, {}];
const VERSIONS: unknown[] = [undefined, null, 1, 0, -1, 1.5, "1", 2 ** 53 - 1, 2 ** 53, 1e300];
const TTLS: unknown[] = [undefined, null, 1, 0, 1.5, 100 * 365 * 24 * 3600 * 1000, 100 * 365 * 24 * 3600 * 1000 + 1, 1e300, "5"];
const BOOLS: unknown[] = [undefined, true, false, "false", 0];
const LIMITS: unknown[] = [undefined, 1, 1000, 0, 1001, 2.5, "10"];
const RECLAIMS: unknown[] = [undefined, "lazy", "eager", "now", 1];
const EXTRA: unknown[] = [undefined, undefined, undefined, 1];

/** Arguments for `tool`: each field drawn from its pool (undefined: left out). */
function argsFor(tool: string, pick: <T>(pool: T[]) => T): Record<string, unknown> {
  const fields: Record<string, unknown[]> = {
    memory_read: { key: KEYS, scope: SCOPES, inherit: BOOLS } as never,
    memory_write: { key: KEYS, value: VALUES, scope: SCOPES, expected_version: VERSIONS, clear_tombstone: BOOLS, ttl_ms: TTLS } as never,
    memory_forget: { key: KEYS, scope: SCOPES } as never,
    memory_forget_scope: { scope: SCOPES, reclaim: RECLAIMS } as never,
    memory_probe: { key: KEYS, scope: SCOPES } as never,
    memory_undelete: { key: KEYS, scope: SCOPES } as never,
    memory_list: { scope: SCOPES, prefix: [undefined, "p", 5], inherit: BOOLS, limit: LIMITS } as never,
  }[tool] as unknown as Record<string, unknown[]>;
  const out: Record<string, unknown> = {};
  for (const [name, pool] of Object.entries(fields)) {
    const v = pick(pool);
    if (v !== undefined) out[name] = v;
  }
  const extra = pick(EXTRA);
  if (extra !== undefined) out["expectedVersion"] = extra;
  return out;
}

describe("advertised schemas", () => {
  it(`agree with the server's verdict on ${CALLS} calls (seed ${SEED})`, async () => {
    const store = await Engram.open(tempDir("mcp-schemas"), { compaction: { workers: 0 } });
    const server = createMcpServer(store);
    const client = new Client({ name: "engram-audit", version: "0.0.0" });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    try {
      const { tools } = await client.listTools();
      const ajv = new AjvJsonSchemaValidator();
      const validators = new Map(tools.map((t) => [t.name, ajv.getValidator(t.inputSchema)]));
      const r = rng(SEED);
      const pick = <T>(pool: T[]): T => pool[Math.floor(r() * pool.length)] as T;
      const disagreements: string[] = [];
      let refused = 0;
      for (let i = 0; i < CALLS; i += 1) {
        const tool = pick(tools).name;
        const args = argsFor(tool, pick);
        const schemaOk = (validators.get(tool) as (v: unknown) => { valid: boolean })(args).valid;
        const res = await client.callTool({ name: tool, arguments: args });
        const wire = JSON.parse((res.content as Array<{ text: string }>)[0]?.text ?? "null") as { ok?: boolean; error?: string };
        if (wire.ok === false) expect(res.isError, JSON.stringify(wire)).toBe(true);
        const serverRefused = wire.ok === false && wire.error === "INVALID_ARGUMENT";
        if (serverRefused) refused += 1;
        const bytesOnly = args["key"] === BYTES_ONLY_KEY && schemaOk && serverRefused;
        if (schemaOk === serverRefused && !bytesOnly) disagreements.push(`${tool} ${JSON.stringify(args).slice(0, 160)}: schema ${schemaOk ? "accepts" : "refuses"}, server ${JSON.stringify(wire).slice(0, 160)}`);
      }
      expect(disagreements).toEqual([]);
      expect(refused).toBeGreaterThan(CALLS / 4); // the pools reach the refusals
      expect(refused).toBeLessThan(CALLS); // and some calls get through
    } finally {
      await client.close();
      await store.close();
    }
  });
});

afterEach(() => {
  unsafeMcpForTests.sdkUnknownTool = false;
});

/** The answers of a server over a fresh store (with `context`) to `calls`, through the SDK's client; also the tools it lists and whether the store's sequence moved. */
async function answersTo(calls: Array<{ name: string; arguments?: Record<string, unknown> }>, context: ToolContext = {}): Promise<{ answers: Array<Awaited<ReturnType<Client["callTool"]>>>; listed: string[]; moved: boolean }> {
  const store = await Engram.open(tempDir("mcp-unknown"), { compaction: { workers: 0 } });
  const client = new Client({ name: "engram-audit", version: "0.0.0" });
  try {
    const server = createMcpServer(store, context);
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    const before = store.stats().sequence;
    const answers = [];
    for (const call of calls) answers.push(await client.callTool(call));
    const listed = (await client.listTools()).tools.map((t) => t.name);
    return { answers, listed, moved: store.stats().sequence !== before };
  } finally {
    await client.close();
    await store.close();
  }
}

/** Expects `answer` to be engram's INVALID_ARGUMENT as a tool error, its message containing each of `mentions`. */
function expectEngramRefusal(answer: Awaited<ReturnType<Client["callTool"]>>, mentions: string[], label: string): void {
  expect(answer.isError, label).toBe(true);
  const text = (answer.content as Array<{ type: string; text: string }>)[0]?.text ?? "";
  expect(text, `${label}: JSON text, not the SDK's`).not.toMatch(/-32602|not found/);
  const wire = JSON.parse(text) as { ok: boolean; error: string; message: string };
  expect(wire, label).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" });
  expect(answer.structuredContent, `${label}: structuredContent as for every engram error`).toEqual(wire);
  for (const m of mentions) expect(wire.message, `${label}: names ${m}`).toContain(m);
}

describe("a tool name the server does not have", () => {
  const UNKNOWN = [{ name: "memory_nope", arguments: { key: "k" } }, { name: "Memory_Read", arguments: { key: "k" } }, { name: "" }, { name: "memory_delete" }];

  it("is engram's INVALID_ARGUMENT naming the known tools, as a tool error, with nothing written", async () => {
    const { answers, listed, moved } = await answersTo(UNKNOWN);
    expect(listed.length).toBeGreaterThan(5);
    for (const [i, a] of answers.entries()) expectEngramRefusal(a, ["unknown tool", ...listed], `call ${JSON.stringify(UNKNOWN[i])}`);
    expect(moved, "nothing written").toBe(false);
  });

  it("a mutating tool of a read-only server (not listed there) is engram's INVALID_ARGUMENT saying the server is read-only", async () => {
    const { answers, listed, moved } = await answersTo([{ name: "memory_write", arguments: { key: "k", value: "v" } }, { name: "memory_forget", arguments: { key: "k" } }], { readOnly: true });
    expect(listed).not.toContain("memory_write");
    for (const a of answers) expectEngramRefusal(a, ["read-only"], "read-only");
    expect(moved, "nothing written").toBe(false);
  });

  it("twin: answered by McpServer itself, it is the SDK's -32602 text with no engram code", async () => {
    unsafeMcpForTests.sdkUnknownTool = true;
    const { answers } = await answersTo(UNKNOWN.slice(0, 1));
    const a = answers[0] as Awaited<ReturnType<Client["callTool"]>>;
    expect(a.isError).toBe(true);
    expect((a.content as Array<{ text: string }>)[0]?.text).toMatch(/MCP error -32602: Tool memory_nope not found/);
    expect(a.structuredContent).toBeUndefined();
  });
});
