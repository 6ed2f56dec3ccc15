// Bundles the built CLI (dist/src/cli.js) into dist/bin/: the entry `engram.js` (package.json
// "bin"), the compaction worker `compaction-worker.js` beside it (engine/compactor.ts starts the
// worker file next to its own module), and the chunks both share, split at every dynamic import so
// that what a command does not use (the PostgreSQL backend, the MCP server, the inspector, the
// tool schemas) still loads only when used. The pure-JavaScript packages go into the bundle too:
// the MCP SDK with zod and ajv (~350 files of node_modules for `engram mcp`), and commander. The
// others stay in node_modules (EXTERNAL). Node's ESM loader pays ~0.5 ms a file here:
// `engram get` on a 200k-key store 290 -> 227 ms, `engram --help` 246 -> 194, and an MCP server's
// connect 429 -> 365 ms with engram's own modules bundled, 458 -> 275 with the SDK's as well
// (thirty-sixth session, docs/PERFORMANCE.md). The inspector's static files are copied next to
// the chunks, where src/ui/server.ts looks for them. Runs after tsc (npm run build, npm test,
// prepare); Node and esbuild only.
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("../", import.meta.url));
/**
 * Packages left in node_modules: native code (fs-ext; msgpackr's optional extension, which
 * msgpackr finds at run time), a worker pool that starts files by path (piscina), the optional
 * PostgreSQL driver (pg), and the checksum's WebAssembly (xxhash-wasm).
 */
const EXTERNAL = ["fs-ext", "msgpackr", "piscina", "pg", "xxhash-wasm"];
/**
 * Bundled CommonJS (ajv, commander) calls `require` for Node's built-in modules; an ES module has
 * none, so every output file defines one first.
 */
const BANNER = 'import { createRequire as engramCreateRequire } from "node:module"; const require = engramCreateRequire(import.meta.url);';
const out = `${root}dist/bin`;
rmSync(out, { recursive: true, force: true }); // no chunk of an older build is left to load
await build({
  entryPoints: { engram: `${root}dist/src/cli.js`, "compaction-worker": `${root}dist/engine/compaction-worker.js` },
  outdir: out,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: EXTERNAL,
  banner: { js: BANNER },
  sourcemap: true,
  logLevel: "warning",
});
mkdirSync(`${out}/static`, { recursive: true });
cpSync(`${root}dist/src/ui/static/`, `${out}/static/`, { recursive: true });
