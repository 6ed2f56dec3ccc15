/**
 * The protection-off twin of pg-counter-child.ts: increments the counter with a plain read and a
 * blind write (no expectedVersion), so that two of these lose updates.
 */
import { Engram } from "../../src/index.js";

const [url, timesRaw] = process.argv.slice(2);
const times = Number(timesRaw);
const store = await Engram.open(url as string);
const versions: number[] = [];
for (let i = 0; i < times; i++) {
  const r = await store.read("counter", { scope: "app:shared" });
  const n = r.status === "OK" ? Number(r.value) : 0;
  versions.push((await store.write("counter", String(n + 1), { scope: "app:shared" })).version);
}
await store.close();
process.stdout.write(`${JSON.stringify({ done: times, conflicts: 0, versions })}\n`);
