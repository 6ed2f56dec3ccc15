// Module hooks (node:module register) that append every URL a process loads to the file named by
// ENGRAM_LOADED_LOG, one per line: what test/cli-start.test.ts reads to tell which packages a
// command loaded. The hooks run on the loader's own thread, so they write the file themselves.
import { appendFileSync } from "node:fs";

export async function load(url, context, nextLoad) {
  const log = process.env.ENGRAM_LOADED_LOG;
  if (log !== undefined) appendFileSync(log, `${url}\n`);
  return nextLoad(url, context);
}
