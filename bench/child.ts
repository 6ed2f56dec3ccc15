/**
 * One benchmark child: `node --expose-gc --import tsx bench/child.ts '<ChildSpec as JSON>'`.
 * Runs one workload of one store and writes a ChildResult as JSON to spec.out.
 */
import * as fs from "node:fs";
import { errorText, type ChildResult, type ChildSpec } from "./common.js";
import { runWorkload } from "./workloads.js";

const arg = process.argv[2];
if (arg === undefined) {
  process.stderr.write("usage: node --import tsx bench/child.ts '<spec json>'\n");
  process.exit(2);
}
const spec = JSON.parse(arg) as ChildSpec;
let result: ChildResult;
let code = 0;
try {
  result = await runWorkload(spec);
} catch (err) {
  result = { metrics: {}, notes: [`${spec.workload} failed: ${errorText(err)}`] };
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  code = 1;
}
fs.writeFileSync(spec.out, JSON.stringify(result));
// Some stores keep native threads alive after close; the result is written, so leave now.
process.exit(code);
