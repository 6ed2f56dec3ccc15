/**
 * The exported conformance suite (src/conformance) against the PostgreSQL backend, on the real
 * server that test/setup/postgres.ts starts for the run.
 *
 * How it works: every store is a PostgreSQL schema of its own in the throwaway cluster
 * (`?schema=` in the URL), so stores never share rows; `reopen` opens the same URL again with a
 * new pool. The fingerprint hashes every row of the store's four tables, read over a pool of the
 * test's own. PostgreSQL lacks readSync, the engine's compaction modes, fault points and the
 * engine-only options: those tests register as skipped, with the reason. When the server could
 * not start, one test is registered as skipped with the reason — visible, never a silent pass.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import fc from "fast-check";
import { afterAll, describe, it, vi } from "vitest";
import { conformance } from "../src/conformance/index.js";
import { Engram } from "../src/index.js";
import { dropSchemas, storeUrl } from "./helpers/pg.js";
import { modelTimeLimitMs, modelTimeoutMs } from "./helpers/model-timeout.js";
import { registerGcTwin } from "./helpers/model-register.js";

/** Runs of the model-based test by default; ENGRAM_MODEL_RUNS overrides, and the timeout grows with it (~0.5 s a run here). */
const MODEL_RUNS = 10;
/** The model test's timeout; fast-check is stopped ahead of it (modelTimeLimitMs) so that what it found is reported. */
const TIMEOUT_MS = modelTimeoutMs(MODEL_RUNS, 2_000);
vi.setConfig({ testTimeout: TIMEOUT_MS });

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
  const inspect = new pg.Pool({ connectionString: url, max: 2 });
  afterAll(async () => {
    await inspect.end();
    await dropSchemas(run);
  });
  /** Hash of every row of the store's tables, in primary-key order. */
  const fingerprint = async (store: object): Promise<string> => {
    const schema = new URL(urls.get(store) as string).searchParams.get("schema") as string;
    const h = createHash("sha256");
    for (const [table, order] of [["engram_meta", "id"], ["engram_slots", "tenant, scope, key"], ["engram_values", "tenant, scope, key"], ["engram_erasures", "tenant, scope"]]) {
      const res = await inspect.query(`SELECT * FROM "${schema}".${table} ORDER BY ${order}`);
      h.update(JSON.stringify(res.rows, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString("base64") : v)));
    }
    return h.digest("hex");
  };
  /** What PostgreSQL offers beyond the common contract. */
  const supports = { readSync: false, inPlaceCompaction: false, faults: false, unsafeGc: true, engineOptions: false, liveStats: false };
  /** A fresh store in a schema of its own. */
  const openFresh = (options?: Parameters<typeof Engram.open>[1]): Promise<Engram> => open(storeUrl(`${run}_${++n}`), options);
  conformance({
    name: "conformance: PostgreSQL",
    describe,
    it,
    open: openFresh,
    reopen: (previous, options) => open(urls.get(previous) as string, options),
    fingerprint,
    supports,
    fastCheck: fc,
    modelRuns: MODEL_RUNS,
    modelTimeLimitMs: modelTimeLimitMs(TIMEOUT_MS),
  });
  describe("the model against the unsafe GC on PostgreSQL", () => {
    registerGcTwin("PostgreSQL", { open: openFresh, supports, timeLimitMs: 20_000 }, 90_000);
  });
}
