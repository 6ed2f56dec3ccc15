/**
 * An MCP server on stdio for test/mcp-oversize.test.ts's twin. Usage:
 *   node --import tsx test/helpers/mcp-child.ts DIR [sdk-transport]
 * It opens DIR (no compaction workers) and serves it with serveStdio, as `engram mcp --dir DIR`
 * does; `sdk-transport` first sets unsafeMcpForTests.sdkStdioTransport (the SDK's own
 * StdioServerTransport, the rule before the fifty-sixth session). It exits once serveStdio
 * resolves (stdin ended, the connection closed, or a signal), the store closed.
 */
import { Engram } from "../../src/index.js";
import { serveStdio, unsafeMcpForTests } from "../../src/mcp.js";

const [dir, mode] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write("usage: mcp-child.ts DIR [sdk-transport]\n");
  process.exit(2);
}
unsafeMcpForTests.sdkStdioTransport = mode === "sdk-transport";
await serveStdio(await Engram.open(dir, { compaction: { workers: 0 } }));
