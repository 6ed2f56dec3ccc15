/**
 * The exported conformance suite (src/conformance) against the PostgreSQL backend, on the real
 * server that test/setup/postgres.ts starts for the run.
 *
 * How it works: every store is a PostgreSQL schema of its own in the throwaway cluster
 * (`?schema=` in the URL), so stores never share rows; `reopen` opens the same URL again with a
 * new pool. PostgreSQL lacks readSync, the engine's compaction modes, fault points and the
 * engine-only options: those tests register as skipped, with the reason. When the server could
 * not start, one test is registered as skipped with the reason — visible, never a silent pass.
 */
import { describe, it } from "vitest";
import { conformance } from "../src/conformance/index.js";
import { Engram } from "../src/index.js";

const url = process.env["ENGRAM_PG_URL"];
const urls = new WeakMap<object, string>();
let n = 0;

if (url === undefined || url === "") {
  it.skip(`conformance: PostgreSQL [skipped: ${process.env["ENGRAM_PG_SKIP"] ?? "no ENGRAM_PG_URL"}]`, () => undefined);
} else {
  const run = `c${process.pid}_${Date.now().toString(36)}`;
  const open = async (at: string, options?: Parameters<typeof Engram.open>[1]): Promise<Engram> => {
    const store = await Engram.open(at, options);
    urls.set(store, at);
    return store;
  };
  conformance({
    name: "conformance: PostgreSQL",
    describe,
    it,
    open: (options) => open(`${url}?schema=${run}_${++n}`, options),
    reopen: (previous, options) => open(urls.get(previous) as string, options),
    supports: { readSync: false, inPlaceCompaction: false, faults: false, unsafeGc: true, engineOptions: false },
  });
}
