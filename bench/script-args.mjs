// What the plain-JavaScript bench scripts share (first-query.mjs, mcp-start.mjs): taking a flag
// out of the argument list, and the CLI a source tree ships.
import * as fs from "node:fs";
import * as path from "node:path";

/** Removes `name` and the value after it from `args`; returns that value, or `fallback` when absent. */
export function takeFlag(args, name, fallback) {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

/** The CLI a user of `tree` runs: its bundle (dist/bin/engram.js), or the compiled entry of a tree built before the bundle. */
export function cliOf(tree) {
  const bundle = path.join(path.resolve(tree), "dist/bin/engram.js");
  return fs.existsSync(bundle) ? bundle : path.join(path.resolve(tree), "dist/src/cli.js");
}
