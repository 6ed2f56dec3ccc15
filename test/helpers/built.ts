/**
 * The CLI and MCP tests run the built package (dist/), as a user would. `npm test` builds first;
 * this check refuses to run against a dist/ older than the sources, with the command that fixes it.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** The project root. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The source folders whose compiled twins make up dist/. */
const SOURCE_DIRS = ["src", "engine", "segments", "rules", "share", "postgres"];

/** The CLI as package.json "bin" ships it: the bundle scripts/bundle-cli.mjs makes of dist/src/cli.js. */
export const CLI_BIN = join(ROOT, "dist", "bin", "engram.js");

/**
 * The first source file under src/, engine/, segments/, rules/, share/ and postgres/ whose
 * compiled twin in dist/ is missing or older than it (relative to the root); null when none is.
 */
export function staleSource(): string | null {
  for (const d of SOURCE_DIRS) {
    for (const f of readdirSync(join(ROOT, d), { recursive: true, encoding: "utf8" })) {
      if (!f.endsWith(".ts")) continue;
      const source = join(ROOT, d, f);
      const out = join(ROOT, "dist", d, f).replace(/\.ts$/, ".js");
      if (!existsSync(out) || statSync(out).mtimeMs < statSync(source).mtimeMs) return relative(ROOT, source);
    }
  }
  return null;
}

/**
 * Throws unless every source file under src/, engine/, segments/, rules/, share/ and postgres/ has
 * a newer compiled twin in dist/, and the CLI bundle (CLI_BIN) is newer than each of those twins.
 */
export function assertBuilt(): void {
  const stale = staleSource();
  if (stale !== null) throw new Error(`dist/ is older than ${stale}: run \`npm run build\` (npm test builds first)`);
  const compiled = SOURCE_DIRS.flatMap((d) =>
    readdirSync(join(ROOT, "dist", d), { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".js")).map((f) => join(ROOT, "dist", d, f)),
  );
  const newest = Math.max(...compiled.map((f) => statSync(f).mtimeMs));
  if (!existsSync(CLI_BIN) || statSync(CLI_BIN).mtimeMs < newest) throw new Error(`${relative(ROOT, CLI_BIN)} is missing or older than dist/: run \`npm run build\` (npm test builds first)`);
}
