/**
 * The MCP server: serves the memory_* tools of tools.ts over stdio with the official SDK.
 * stdout carries only the protocol; every log line goes to stderr.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import { LimitedStdioServerTransport } from "./mcp-stdio.js";
import { handleToolCall, isWireError, listTools } from "./tools.js";
import { VERSION } from "./version.js";
import type { MemoryStore, ToolContext, ToolDefinition, WireResult } from "./tools.js";

/** A store the server can serve and close. */
export interface ClosableMemoryStore extends MemoryStore {
  close(): Promise<void>;
}

const INSTRUCTIONS =
  "engram is durable memory organised by scopes (\"global\" > \"user:alice\" > \"user:alice/session:42\"). " +
  "Reads inherit from parent scopes. memory_forget confirms a tombstone, not physical reclamation. " +
  "If a read is unexpectedly NOT_FOUND, or before re-writing a key you forgot, call memory_probe; re-write " +
  "a forgotten key with clear_tombstone:true or after memory_undelete. Errors come back as " +
  "{ok:false, error:CODE, message} with stable codes (INVALID_ARGUMENT, VERSION_CONFLICT, TOMBSTONED, ...).";

/** Writes one log line to stderr (never stdout: it carries the protocol). */
export function logStderr(message: string): void {
  process.stderr.write(`engram mcp: ${message}\n`);
}

/** Wraps a wire result as an MCP tool result: JSON text plus structuredContent; errors set isError. */
export function toCallToolResult(wire: WireResult): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(wire) }],
    structuredContent: Object.fromEntries(Object.entries(wire)),
    isError: isWireError(wire),
  };
}

/**
 * The zod input schema registered with the SDK: any object, advertised with the tool's exact JSON
 * Schema. Validation is left to handleToolCall so a bad call returns the documented
 * INVALID_ARGUMENT wire error instead of the SDK's generic validation text.
 */
function registeredInputSchema(def: ToolDefinition): z.ZodObject {
  return z.looseObject({}).meta(def.inputSchema);
}

/**
 * Builds an McpServer exposing the tools of `context` over `store` (not yet connected). Every
 * tools/call, whatever its name, is answered by handleToolCall, so a name that is no tool of this
 * server (unknown, or a mutating tool of a read-only server) gets engram's own error — a tool
 * result with isError and `{ ok: false, error: "INVALID_ARGUMENT", message }` naming the known
 * tools — like every other bad call, not the SDK's "MCP error -32602: Tool … not found" text.
 */
export function createMcpServer(store: MemoryStore, context: ToolContext = {}, version = VERSION): McpServer {
  const server = new McpServer({ name: "engram", version }, { instructions: INSTRUCTIONS });
  const answer = async (name: string, args: unknown): Promise<CallToolResult> => toCallToolResult(await handleToolCall(store, name, args, context));
  for (const def of listTools(context)) {
    server.registerTool(
      def.name,
      {
        description: def.description,
        inputSchema: registeredInputSchema(def),
        annotations: {
          readOnlyHint: !def.mutates,
          destructiveHint: def.name === "memory_forget" || def.name === "memory_forget_scope",
          openWorldHint: false,
        },
      },
      (args: Record<string, unknown>) => answer(def.name, args),
    );
  }
  // McpServer answers a name it has not registered itself, with a text of its own and no engram
  // code. The SDK's documented way to change an answer is to set the method's handler on the
  // underlying Server, which replaces the one McpServer set (it sets it once, at the first
  // registerTool, and never again); tools/list stays McpServer's.
  if (unsafeMcpForTests.sdkUnknownTool) return server;
  server.server.setRequestHandler(CallToolRequestSchema, (request) => answer(request.params.name, request.params.arguments));
  return server;
}

/**
 * Test switches, never set by the server or any option. `sdkUnknownTool` (test/mcp-audit.test.ts)
 * leaves tools/call to McpServer, as before the fifty-fifth session: a name that is no tool of
 * the server gets the SDK's "MCP error -32602: Tool … not found" text, without an engram code.
 * `sdkStdioTransport` (test/mcp-oversize.test.ts) serves on the SDK's StdioServerTransport, as
 * before the fifty-sixth session: a request line over 10 MiB gets no reply and closes the
 * connection (the server then exits).
 */
export const unsafeMcpForTests = { sdkUnknownTool: false, sdkStdioTransport: false };

/** The stdio transport: engram's, which answers an oversized request (src/mcp-stdio.ts), or the SDK's under the test switch. */
function stdioTransport(): Transport {
  if (unsafeMcpForTests.sdkStdioTransport) return new StdioServerTransport();
  const transport = new LimitedStdioServerTransport();
  transport.onoversized = (line) =>
    logStderr(`refused a line of ${line.bytes} bytes (${line.kind}; over the 10 MiB limit)${line.kind === "notification" || line.kind === "response" ? ", no reply" : `, answered LIMIT_EXCEEDED to id ${JSON.stringify(line.id)}`}`);
  return transport;
}

/**
 * Serves `store` on stdin/stdout until stdin ends or SIGTERM/SIGINT arrives, then closes the
 * server and the store; resolves once both are closed.
 */
export async function serveStdio(store: ClosableMemoryStore, context: ToolContext = {}, version?: string): Promise<void> {
  const server = createMcpServer(store, context, version);
  const transport = stdioTransport();
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  let closing = false;
  const shutdown = (why: string): void => {
    if (closing) return;
    closing = true;
    logStderr(`${why}; closing the store`);
    void server
      .close()
      .catch((err: unknown) => logStderr(`server close failed: ${String(err)}`))
      .then(() => store.close())
      .catch((err: unknown) => logStderr(`store close failed: ${String(err)}`))
      .finally(resolveDone);
  };
  process.stdin.once("end", () => shutdown("stdin ended"));
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
  transport.onerror = (err: Error) => logStderr(`transport error: ${err.message}`);
  await server.connect(transport);
  // A transport that closes itself stops reading stdin, so "end" never comes: without this the
  // process would linger, holding the store (and its owner role when shared) while answering
  // nothing. The SDK's stdio transport did so on a line over its 10 MiB read buffer; engram's
  // answers such a line instead, but any other close still ends the server.
  server.server.onclose = () => shutdown("the MCP connection closed");
  const names = listTools(context).map((t) => t.name);
  logStderr(`ready (scope ${context.defaultScope ?? "global"}${context.readOnly === true ? ", read-only" : ""}): ${names.join(", ")}`);
  return done;
}
