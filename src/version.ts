/**
 * The package version, read once from package.json so that it is written in one place only.
 * package.json is the nearest one named "engram" above this file: one level up in the source tree
 * (src/version.ts), two in the build (dist/src/version.js).
 */
import { existsSync, readFileSync } from "node:fs";

const PACKAGE_LEVELS_MAX = 3;

function readVersion(): string {
  let url = new URL("../package.json", import.meta.url);
  for (let level = 0; level < PACKAGE_LEVELS_MAX; level++, url = new URL("../package.json", url)) {
    if (!existsSync(url)) continue;
    const pkg = JSON.parse(readFileSync(url, "utf8")) as { name?: unknown; version?: unknown };
    if (pkg.name === "engram" && typeof pkg.version === "string") return pkg.version;
  }
  throw new Error("engram's package.json was not found above src/version.ts");
}

/** The package version (package.json "version"). */
export const VERSION: string = readVersion();
