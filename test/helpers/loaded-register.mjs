// `node --import ./loaded-register.mjs …`: installs loaded-hooks.mjs before the program's first
// import, and at exit appends every CommonJS module the process required (the module hooks of
// this Node see only what `import` loads; share/protocol.ts requires msgpackr's CommonJS build).
import { appendFileSync } from "node:fs";
import { createRequire, register } from "node:module";
import { pathToFileURL } from "node:url";

register("./loaded-hooks.mjs", import.meta.url);

const required = createRequire(import.meta.url).cache;
process.on("exit", () => {
  const log = process.env.ENGRAM_LOADED_LOG;
  if (log === undefined) return;
  const urls = Object.keys(required).map((file) => pathToFileURL(file).href);
  if (urls.length > 0) appendFileSync(log, `${urls.join("\n")}\n`);
});
