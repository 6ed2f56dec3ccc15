/**
 * A child process for test/postgres-processes.test.ts: opens the PostgreSQL store at argv[2] and
 * increments the counter key `argv[3]` times with compare-and-set (read, then write with
 * expectedVersion; on VERSION_CONFLICT read again and retry), then prints one JSON line
 * {"done": n, "conflicts": c, "versions": [...]} with the version of every increment it made.
 */
import { Engram, VersionConflictError } from "../../src/index.js";

const [url, timesRaw] = process.argv.slice(2);
const times = Number(timesRaw);
const store = await Engram.open(url as string, { durability: "sync" });
let conflicts = 0;
const versions: number[] = [];
for (let i = 0; i < times; i++) {
  for (let attempt = 0; ; attempt++) {
    if (attempt > 10_000) throw new Error("no progress after 10000 conflicts");
    const r = await store.read("counter", { scope: "app:shared" });
    const n = r.status === "OK" ? Number(r.value) : 0;
    try {
      const w = await store.write("counter", String(n + 1), { scope: "app:shared", expectedVersion: r.status === "OK" ? r.version : null });
      versions.push(w.version);
      break;
    } catch (err) {
      if (!(err instanceof VersionConflictError)) throw err;
      conflicts += 1;
    }
  }
}
await store.close();
process.stdout.write(`${JSON.stringify({ done: times, conflicts, versions })}\n`);
