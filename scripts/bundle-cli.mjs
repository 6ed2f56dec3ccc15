// Bundles the built CLI (dist/src/cli.js) into dist/bin/: the entry `engram.js` (package.json
// "bin"), the compaction worker `compaction-worker.js` beside it (engine/compactor.ts starts the
// worker file next to its own module), and the chunks both share, split at every dynamic import so
// that what a command does not use (the PostgreSQL backend, the MCP server, the inspector, the
// tool schemas) still loads only when used. Packages stay external (node_modules). One file to
// read and compile for most of the engine instead of ~100: `engram get` on a 200k-key store
// 290 -> 227 ms, `engram --help` 246 -> 194 (thirty-sixth session, docs/PERFORMANCE.md). The
// inspector's static files are copied next to the chunks, where src/ui/server.ts looks for them.
// Runs after tsc (npm run build, npm test, prepare); Node and esbuild only.
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("../", import.meta.url));
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
  packages: "external",
  sourcemap: true,
  logLevel: "warning",
});
mkdirSync(`${out}/static`, { recursive: true });
cpSync(`${root}dist/src/ui/static/`, `${out}/static/`, { recursive: true });
