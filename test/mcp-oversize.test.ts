/**
 * The MCP server and a request line over the 10 MiB stdio limit: answered, and the server stays.
 *
 * How it works. The scanner first, in process: engram's LineSplitter with a 1 KiB limit is fed
 * lines in 100-byte pieces; it must hold at most the limit at every step, deliver lines up to
 * the limit whole (exactly the limit included), and for every longer line report its length and
 * the top-level `id` wherever it stands (first, last, after a string holding `"id":` and escaped
 * quotes, after multi-byte text), telling requests from notifications and responses, and giving
 * id null for what is no object, a batch array, an id that is an object, or a nested "id" only.
 * Then real child processes. The BUILT CLI (`engram mcp`) is driven by the SDK's own Client over
 * StdioClientTransport: a memory_write with an 11 MiB value must reject with a JSON-RPC error
 * (code -32600) whose data is engram's wire error `{ ok: false, error: "LIMIT_EXCEEDED" }`, the
 * next calls on the same connection must work, nothing of the big call is written, and the store
 * is released when the client closes. The same CLI is written raw lines: an oversized request with
 * its id after 11 MiB of params (answered with that id), 11 MiB of non-JSON (answered with id
 * null), an oversized notification (no reply) and a small request — the replies, read in order,
 * must be exactly those. Memory: one 128 MiB line streamed in 1 MiB writes must raise the
 * server's peak RSS (/proc/PID/status VmHWM) by less than 64 MiB — a server holding the line
 * whole would grow by more than the line. The twin runs test/helpers/mcp-child.ts with
 * `unsafeMcpForTests.sdkStdioTransport` (the SDK's StdioServerTransport, the rule before): the
 * oversized request gets no reply and the server exits (its transport closed), after which the
 * store opens exclusively — the fifty-fourth session's protection, kept for any close. Lines
 * within the limit that are no JSON-RPC message: `malformedReply` in process (-32700 id null for
 * no JSON, -32600 with the id for JSON that is no request, nothing for a blank line, a notification
 * or a response), then raw to the built CLI, where the replies in order must be exactly
 * `[0, null, 5, 7]`, and to the twin, where they are `[0, 7]` (the SDK's transport only logs
 * them). Every wait has a deadline.
 *
 * Property stressed: every request gets an answer, an oversized one an engram code; one
 * oversized line never costs the connection, nor memory beyond the limit.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { LineSplitter, malformedReply, type OversizedLine } from "../src/mcp-stdio.js";
import { assertBuilt, CLI_BIN, ROOT } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const WAIT_MS = 30_000;
const MiB = 1024 * 1024;
const INIT = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n`;

/** Feeds `text` to a splitter with `max` in 100-byte pieces; returns what it delivered and the most it held. */
function split(text: string, max: number): { lines: string[]; oversized: OversizedLine[]; held: number } {
  const lines: string[] = [];
  const oversized: OversizedLine[] = [];
  const s = new LineSplitter(max, (l) => lines.push(l.toString("utf8")), (o) => oversized.push(o));
  const bytes = Buffer.from(text, "utf8");
  let held = 0;
  for (let i = 0; i < bytes.length; i += 100) {
    s.push(bytes.subarray(i, i + 100));
    held = Math.max(held, s.bufferedBytes);
  }
  return { lines, oversized, held };
}

describe("the line splitter", () => {
  const pad = "x".repeat(3000);
  const CASES: Array<[label: string, line: string, id: string | number | null, kind: OversizedLine["kind"]]> = [
    ["id first", `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"v":"${pad}"}}`, 41, "request"],
    ["id last", `{"jsonrpc":"2.0","method":"tools/call","params":{"v":"${pad}"},"id":"last"}`, "last", "request"],
    ["id after a string holding \"id\": and escaped quotes", `{"method":"m","params":{"v":"\\"id\\":1 ${pad} \\\\","w":["\\"id\\":2"]},"id" : "x\\"y" }`, 'x"y', "request"],
    ["id after multi-byte text", `{"method":"m","params":{"v":"${"é€😀".repeat(900)}"},"id":7}`, 7, "request"],
    ["a nested id only: a notification", `{"jsonrpc":"2.0","method":"m","params":{"id":5,"v":"${pad}"}}`, null, "notification"],
    ["a response", `{"jsonrpc":"2.0","id":3,"result":{"v":"${pad}"}}`, 3, "response"],
    ["an id that is an object", `{"method":"m","id":{"a":1},"params":"${pad}"}`, null, "request"],
    ["no JSON", pad, null, "unknown"],
    ["a batch array", `[{"jsonrpc":"2.0","id":1,"method":"m","params":"${pad}"}]`, null, "unknown"],
    ["an object cut short: its id still answered", `{"jsonrpc":"2.0","id":9,"method":"m","params":"${pad}`, 9, "unknown"],
  ];

  it("holds at most the limit, finds the top-level id of a longer line wherever it stands, and delivers the next line whole", () => {
    for (const [label, line, id, kind] of CASES) {
      const { lines, oversized, held } = split(`${line}\n{"ok":1}\n`, 1024);
      expect(held, label).toBeLessThanOrEqual(1024);
      expect(oversized, label).toEqual([{ bytes: Buffer.byteLength(line), id, kind }]);
      expect(lines, label).toEqual(['{"ok":1}']);
    }
  });

  it("delivers a line of exactly the limit whole; one byte more is oversized", () => {
    const at = `{"v":"${"x".repeat(1024 - 8)}"}`;
    expect(Buffer.byteLength(at)).toBe(1024);
    expect(split(`${at}\n`, 1024)).toMatchObject({ lines: [at], oversized: [] });
    expect(split(`${at} \n`, 1024)).toMatchObject({ lines: [], oversized: [{ bytes: 1025 }] });
  });
});

describe("a line within the limit that is no JSON-RPC message", () => {
  it("is answered as JSON-RPC 2.0 asks: -32700 with id null, -32600 with its id; nothing for a blank line, a notification or a response", () => {
    const reply = (text: string): Record<string, unknown> | null => {
      const line = malformedReply(text);
      return line === null ? null : (JSON.parse(line) as Record<string, unknown>);
    };
    expect(reply("not json")).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700, data: { ok: false, error: "INVALID_ARGUMENT" } } });
    expect(reply('{"id":4,"method":')).toMatchObject({ id: null, error: { code: -32700 } });
    expect(reply('{"jsonrpc":"1.0","id":5,"method":"x"}')).toMatchObject({ id: 5, error: { code: -32600, data: { error: "INVALID_ARGUMENT" } } });
    expect(reply('{"jsonrpc":"2.0","id":"s","method":7}')).toMatchObject({ id: "s", error: { code: -32600 } });
    expect(reply('{"jsonrpc":"2.0","id":{"a":1},"method":"m"}')).toMatchObject({ id: null, error: { code: -32600 } });
    expect(reply("[1,2]")).toMatchObject({ id: null, error: { code: -32600 } });
    expect(reply("42")).toMatchObject({ id: null, error: { code: -32600 } });
    expect(reply("   ")).toBeNull();
    expect(reply('{"jsonrpc":"1.0","method":"notifications/x"}')).toBeNull();
    expect(reply('{"id":3,"result":"no jsonrpc field"}')).toBeNull();
  });
});

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      const gone = new Promise((resolve) => c.once("exit", resolve));
      c.kill("SIGKILL");
      await gone;
    }
  }
});

/** A server child with its stdout split into JSON lines and its stderr collected. */
interface Server {
  child: ChildProcess;
  replies: Array<Record<string, unknown>>;
  log: () => string;
  exited: Promise<number | null>;
  /** Resolves once `ok()` holds (checked on every stdout or stderr chunk); rejects after WAIT_MS. */
  until: (ok: () => boolean, what: string) => Promise<void>;
}

function start(args: string[]): Server {
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
  children.push(child);
  const replies: Array<Record<string, unknown>> = [];
  let out = "";
  let log = "";
  const waiters = new Set<() => void>();
  const poke = (): void => waiters.forEach((w) => w());
  child.stdout?.on("data", (c: Buffer) => {
    out += c.toString("utf8");
    for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
      replies.push(JSON.parse(out.slice(0, nl)) as Record<string, unknown>);
      out = out.slice(nl + 1);
    }
    poke();
  });
  child.stderr?.on("data", (c: Buffer) => {
    log += c.toString("utf8");
    poke();
  });
  // A server that stops reading (the twin) fails the rest of a write with EPIPE: expected.
  child.stdin?.on("error", () => {});
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => (poke(), resolve(code))));
  const until = (ok: () => boolean, what: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const done = (): void => {
        if (!ok()) return;
        clearTimeout(timer);
        waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(done);
        reject(new Error(`${what}: not within ${WAIT_MS} ms; replies ${JSON.stringify(replies).slice(0, 500)}; stderr:\n${log}`));
      }, WAIT_MS);
      waiters.add(done);
      done();
    });
  return { child, replies, log: () => log, exited, until };
}

/** Writes `data` to the server's stdin, waiting for "drain" when the pipe is full: rejects if the server exits first or after WAIT_MS. */
async function write(s: Server, data: string | Buffer): Promise<void> {
  const stdin = s.child.stdin;
  if (stdin === null) throw new Error("no stdin");
  if (stdin.write(data)) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    new Promise((resolve) => stdin.once("drain", resolve)),
    s.exited.then((code) => Promise.reject(new Error(`the server exited (${code}) while a write waited for the pipe; stderr:\n${s.log()}`))),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`a write waited ${WAIT_MS} ms for the pipe; stderr:\n${s.log()}`)), WAIT_MS))),
  ]).finally(() => clearTimeout(timer));
}

/** A tools/call line. */
function toolCall(id: number | string, name: string, args: Record<string, unknown>): string {
  return `${JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } })}\n`;
}

/** The peak resident set of `pid`, in KiB. */
function peakKiB(pid: number): number {
  return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
}

describe("a request over 10 MiB, to the built `engram mcp`", () => {
  it("through the SDK client: a JSON-RPC error with engram's LIMIT_EXCEEDED, and the connection goes on", async () => {
    assertBuilt();
    const dir = tempDir("mcp-over-sdk");
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI_BIN, "mcp", "--dir", dir], stderr: "pipe" });
    let log = "";
    transport.stderr?.on("data", (c: Buffer) => (log += c.toString("utf8")));
    const client = new Client({ name: "engram-test", version: "0.0.0" });
    await client.connect(transport);
    try {
      const refused = await client.callTool({ name: "memory_write", arguments: { key: "big", value: "x".repeat(11 * MiB) } }).catch((e: unknown) => e);
      expect(refused, `stderr:\n${log}`).toBeInstanceOf(McpError);
      expect((refused as McpError).code).toBe(-32600);
      expect((refused as McpError).data).toMatchObject({ ok: false, error: "LIMIT_EXCEEDED" });
      expect((refused as McpError).message).toMatch(/over the 10485760-byte \(10 MiB\) limit .*engram put/);
      expect((await client.callTool({ name: "memory_write", arguments: { key: "k", value: "v" } })).structuredContent).toMatchObject({ ok: true });
      expect((await client.callTool({ name: "memory_read", arguments: { key: "k" } })).structuredContent).toMatchObject({ status: "OK", value: "v" });
      expect((await client.callTool({ name: "memory_read", arguments: { key: "big" } })).structuredContent, "nothing of the big call written").toMatchObject({ status: "NOT_FOUND" });
      expect(log).toMatch(/refused a line of \d+ bytes \(request; over the 10 MiB limit\), answered LIMIT_EXCEEDED/);
    } finally {
      await client.close();
    }
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      expect((await store.read("k")).status, "the server closed the store").toBe("OK");
    } finally {
      await store.close();
    }
  }, 120_000);

  it("raw lines: the id found after the params, id null for no JSON, no reply to a notification, then the next request", async () => {
    assertBuilt();
    const s = start([CLI_BIN, "mcp", "--dir", tempDir("mcp-over-raw")]);
    await write(s, INIT);
    await s.until(() => s.replies.length === 1, "initialize answered");
    const big = "x".repeat(11 * MiB);
    await write(s, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"memory_write","arguments":{"key":"big","value":"${big}"}},"id":"late"}\n`);
    await write(s, `${big}\n`);
    await write(s, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"v":"${big}"}}\n`);
    await write(s, toolCall(7, "memory_write", { key: "k", value: "v" }));
    await s.until(() => s.replies.some((r) => r["id"] === 7), "the small request answered");
    expect(s.replies.map((r) => r["id"]), "replies in order, none to the notification").toEqual([0, "late", null, 7]);
    for (const r of s.replies.slice(1, 3)) expect(r["error"]).toMatchObject({ code: -32600, data: { ok: false, error: "LIMIT_EXCEEDED" } });
    expect(s.replies[3]?.["result"]).toMatchObject({ structuredContent: { ok: true } });
    s.child.stdin?.end();
    expect(await s.exited).toBe(0);
  }, 120_000);

  it("a 128 MiB line is discarded as it streams: the server's peak RSS grows by less than 64 MiB", async () => {
    assertBuilt();
    const s = start([CLI_BIN, "mcp", "--dir", tempDir("mcp-over-mem")]);
    await write(s, INIT);
    await write(s, toolCall(1, "memory_write", { key: "k", value: "v" }));
    await s.until(() => s.replies.length === 2, "warm-up answered");
    const before = peakKiB(s.child.pid as number);
    await write(s, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write","arguments":{"key":"big","value":"`);
    const piece = Buffer.alloc(MiB, 0x78);
    for (let i = 0; i < 128; i += 1) await write(s, piece);
    await write(s, `"}}}\n`);
    await s.until(() => s.replies.length === 3, "the 128 MiB request answered");
    const grown = (peakKiB(s.child.pid as number) - before) / 1024;
    expect(s.replies[2]).toMatchObject({ id: 2, error: { data: { error: "LIMIT_EXCEEDED" } } });
    expect(grown, `peak RSS grew by ${grown.toFixed(1)} MiB`).toBeLessThan(64);
    s.child.stdin?.end();
    expect(await s.exited).toBe(0);
  }, 120_000);

  it("twin: on the SDK's stdio transport the request gets no reply and the server exits, releasing the store", async () => {
    const dir = tempDir("mcp-over-twin");
    const s = start(["--import", "tsx", "test/helpers/mcp-child.ts", dir, "sdk-transport"]);
    await write(s, INIT);
    await s.until(() => s.replies.length === 1, "initialize answered");
    s.child.stdin?.write(toolCall(1, "memory_write", { key: "big", value: "x".repeat(11 * MiB) }));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), WAIT_MS)));
    const outcome = await Promise.race([s.exited, late]).finally(() => clearTimeout(timer));
    expect(outcome, `the server still runs ${WAIT_MS} ms after its transport closed; stderr:\n${s.log()}`).toBe(0);
    expect(s.replies.map((r) => r["id"]), "no reply to the oversized request").toEqual([0]);
    expect(s.log()).toContain("ReadBuffer exceeded maximum size");
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    await store.close();
  }, 120_000);
  /** Writes a line that is not JSON, a JSON object that is no request, a blank line, a malformed notification, then a request: returns the reply ids in order. */
  async function malformedLines(s: Server): Promise<Array<unknown>> {
    await write(s, INIT);
    await s.until(() => s.replies.length === 1, "initialize answered");
    await write(s, 'not json at all\n{"jsonrpc":"1.0","id":5,"method":"tools/list"}\n\n{"jsonrpc":"2.0","method":7}\n');
    await write(s, toolCall(7, "memory_write", { key: "k", value: "v" }));
    await s.until(() => s.replies.some((r) => r["id"] === 7), "the good request answered");
    return s.replies.map((r) => r["id"]);
  }

  it("raw lines within the limit: no JSON gets -32700 (id null), no request gets -32600 (its id), and the next request is answered", async () => {
    assertBuilt();
    const s = start([CLI_BIN, "mcp", "--dir", tempDir("mcp-malformed")]);
    expect(await malformedLines(s), "replies in order; none to the blank line or the notification").toEqual([0, null, 5, 7]);
    expect(s.replies[1]?.["error"]).toMatchObject({ code: -32700, data: { ok: false, error: "INVALID_ARGUMENT" } });
    expect(s.replies[2]?.["error"]).toMatchObject({ code: -32600, data: { ok: false, error: "INVALID_ARGUMENT" } });
    s.child.stdin?.end();
    expect(await s.exited).toBe(0);
  }, 120_000);

  it("twin: on the SDK's stdio transport the same malformed lines get no reply at all", async () => {
    const s = start(["--import", "tsx", "test/helpers/mcp-child.ts", tempDir("mcp-malformed-twin"), "sdk-transport"]);
    expect(await malformedLines(s), "the SDK's transport only logs them: their senders wait for ever").toEqual([0, 7]);
    s.child.stdin?.end();
    expect(await s.exited).toBe(0);
  }, 120_000);
});
