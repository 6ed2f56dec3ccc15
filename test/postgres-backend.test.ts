/**
 * What only the PostgreSQL backend has: its SQL schema, its transaction rules, and the options
 * and calls that do not apply to it.
 *
 * How it works: against the real server of test/setup/postgres.ts, with a separate inspection
 * pool that reads the catalog and the tables directly. It checks that (1) every engine-only
 * option and `unsafe.skipReadValidation` is INVALID_ARGUMENT before anything is created (the
 * schema does not appear), (2) readSync and the fault controls are NOT_SUPPORTED, (3) an
 * unreachable server is an IoError and never a directory named "postgresql:", (4) the tenant is
 * the leading primary-key column of the slot and value tables and the schema uses no SERIAL,
 * sequence object, trigger or extension, (5) eager forgetScope leaves no value row holding the
 * erased bytes when it resolves while the lazy twin still has them (I8 on PostgreSQL), (6) many
 * concurrent writers on one hot row all commit through SERIALIZABLE retries with distinct,
 * growing versions, and (7) a transaction that keeps failing with 40001 gives up after the
 * bounded number of attempts with a clear IoError, having committed nothing; and (8) eight
 * concurrent first opens of one new store all succeed; and (9) a connection dropped under a
 * transaction (its server backend terminated while it waits for a lock) rejects that call with an
 * IoError instead of killing the process, and the store goes on; (10) a connection that goes silent
 * (a proxy stops forwarding) rejects the call after the URL's queryTimeoutMs, and the store goes on
 * once the network is back; out-of-bounds queryTimeoutMs values are refused; (11) a store made
 * before the slot columns listed_seq, older_values and tomb_seq opens: they are added, a kill its
 * rows hold counts as the slot's own forget (tomb_seq = kill_seq), and probe answers as before;
 * (12) a store made before clear_gen opens: it is added, an undeleted slot's set to its generation;
 * (13) the twins of two backend-parity conformance cases: with `unsafeReclaimForTests`'s
 * `dropOverlapping` an erasure goes while an older erasure of an ancestor stays (probe of a slot
 * it named reports the older one), with `keepGeneration` a slot left with only its undelete keeps
 * a later write's generation (3, not the undelete's 2) — each the answer the engine gave before
 * its fifty-fourth session, and the case's check fails; with `keepClear` (fifty-fifth session) an
 * undelete's record a later forget made unneeded is kept while that forget holds the slot, and
 * the slot, emptied later, outlives the engine's by a pass at the undelete's generation; (14) the
 * upgrade leaves no column default (a fresh store's catalog), and a store upgraded before that
 * (defaults of -1 left, rows written without the columns holding -1) is repaired at its next open.
 * Skipped, visibly, when no server could start.
 */
import { existsSync, rmSync } from "node:fs";
import * as net from "node:net";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { unsafeReclaimForTests } from "../postgres/reclaim.js";
import { TX_ATTEMPTS_MAX, inTransaction } from "../postgres/tx.js";
import { Engram, type OpenOptions } from "../src/index.js";
import { dropSchemas, storeUrl } from "./helpers/pg.js";
import { within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const url = process.env["ENGRAM_PG_URL"];
const skip = url === undefined || url === "" ? (process.env["ENGRAM_PG_SKIP"] ?? "no ENGRAM_PG_URL") : null;
const tag = `b${process.pid}`;
const inspect = skip === null ? new pg.Pool({ connectionString: url, max: 2 }) : null;
afterAll(async () => {
  await inspect?.end();
  await dropSchemas(`${tag}_`);
});

async function schemaExists(schema: string): Promise<boolean> {
  const r = await (inspect as pg.Pool).query("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", [schema]);
  return r.rowCount === 1;
}

describe.skipIf(skip !== null)(`the PostgreSQL backend${skip === null ? "" : ` [skipped: ${skip}]`}`, () => {
  it("refuses engine-only options with INVALID_ARGUMENT before creating anything", async () => {
    const rows: Array<[string, OpenOptions]> = [
      ["segmentBytes", { segmentBytes: 65536 }],
      ["compaction", { compaction: { workers: 0 } }],
      ["cacheBytes", { cacheBytes: 0 }],
      ["faults", { faults: { pauseAt: ["read:after-authorize"] } }],
      ["unsafe.skipReadValidation", { unsafe: { skipReadValidation: true } }],
    ];
    for (const [name, options] of rows) {
      const schema = `${tag}_refused_${name.replace(/\W/g, "_").toLowerCase()}`;
      const err = await Engram.open(storeUrl(schema), options).catch((e: unknown) => e);
      expect(err, name).toMatchObject({ code: "INVALID_ARGUMENT" });
      expect((err as Error).message, name).toMatch(/embedded engine/);
      expect(await schemaExists(schema), `${name}: schema created`).toBe(false);
    }
    // Bad URLs of our own parameters too.
    await expect(Engram.open(storeUrl("Bad-Name"))).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(Engram.open(`${storeUrl(`${tag}_pool`)}&poolMax=0`)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });

  it("readSync and the fault controls are NOT_SUPPORTED; dir never shows the password", async () => {
    const s = await Engram.open(storeUrl(`${tag}_ns`));
    try {
      await s.write("k", "v");
      expect(() => s.readSync("k")).toThrow(expect.objectContaining({ code: "NOT_SUPPORTED" }) as unknown as Error);
      await expect(s.faults.waitFor("read:after-authorize")).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
      expect(() => s.faults.release("read:after-authorize")).toThrow(/embedded engine/);
      expect(s.dir.startsWith("postgresql://")).toBe(true);
      const pw = new URL(storeUrl(`${tag}_ns`));
      pw.password = "hunter2";
      const withPw = await Engram.open(pw.href);
      expect(withPw.dir).not.toContain("hunter2");
      await withPw.close();
    } finally {
      await s.close();
    }
  });

  it("stats() counts on the server at open and after gc, compact and verify; sequence after every mutation", async () => {
    let now = 1_000_000;
    const at = storeUrl(`${tag}_stats`);
    const s = await Engram.open(at, { clock: () => now });
    await s.write("a", "12345");
    await s.write("b", "x", { scope: "user:u" });
    const t = await s.write("t", "ttl", { ttlMs: 10 });
    await s.forget("a");
    expect(s.stats().sequence).toBe(t.version + 1);
    now += 100;
    await s.verify();
    expect(s.stats()).toMatchObject({ slots: 3, liveSlots: 1, tombstones: 1, scopes: 2, liveBytes: 1, deadBytes: 8, totalBytes: 9, sequence: t.version + 1, segments: [] });
    await s.gc();
    // a's value is reclaimed (its retention record stays); t expired but stays its own retention
    // record for the window (tombstoneRetentionMs, 24 h); b is live.
    expect(s.stats()).toMatchObject({ slots: 3, liveSlots: 1, tombstones: 1, liveBytes: 1, deadBytes: 3 });
    await s.close();
    const again = await Engram.open(at, { clock: () => now });
    expect(again.stats()).toMatchObject({ slots: 3, liveSlots: 1, tombstones: 1, sequence: t.version + 1 });
    now += 25 * 3600 * 1000;
    await again.compact();
    // Past the window both go whole: t's value and record, a's retention record.
    expect(again.stats()).toMatchObject({ slots: 1, liveSlots: 1, tombstones: 0, liveBytes: 1, deadBytes: 0, compactions: 1 });
    await again.close();
  });

  it("an unreachable server is an IoError, and no directory named postgresql: appears", async () => {
    const cwd = tempDir("pgdown");
    const before = process.cwd();
    process.chdir(cwd);
    try {
      const err = await Engram.open("postgresql://engram@127.0.0.1:1/none").catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "IO_ERROR", errno: "ECONNREFUSED" });
      expect(existsSync(join(cwd, "postgresql:"))).toBe(false);
    } finally {
      process.chdir(before);
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("the tenant leads every primary key; no SERIAL, sequence, trigger or extension", async () => {
    const schema = `${tag}_ddl`;
    const s = await Engram.open(storeUrl(schema));
    await s.close();
    const db = inspect as pg.Pool;
    const pk = await db.query(
      `SELECT t.relname AS table, a.attname AS col, k.ord FROM pg_index i
         JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
         CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
       WHERE i.indisprimary AND n.nspname = $1 ORDER BY t.relname, k.ord`,
      [schema],
    );
    const cols = (table: string): string[] => pk.rows.filter((r: { table: string }) => r.table === table).map((r: { col: string }) => r.col);
    expect(cols("engram_slots")).toEqual(["tenant", "scope", "key"]);
    expect(cols("engram_values")).toEqual(["tenant", "scope", "key"]);
    expect((await db.query("SELECT 1 FROM information_schema.sequences WHERE sequence_schema = $1", [schema])).rowCount).toBe(0);
    expect((await db.query("SELECT 1 FROM information_schema.triggers WHERE trigger_schema = $1", [schema])).rowCount).toBe(0);
    expect((await db.query("SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND column_default IS NOT NULL", [schema])).rowCount).toBe(0);
    expect((await db.query("SELECT extname FROM pg_extension WHERE extname <> 'plpgsql'")).rowCount).toBe(0);
  });

  it("eager forgetScope leaves no value row with the erased bytes; the lazy twin still has them", async () => {
    const secret = `SECRET-${tag}-4f1c9a`;
    for (const reclaim of ["eager", "lazy"] as const) {
      const schema = `${tag}_i8_${reclaim}`;
      const s = await Engram.open(storeUrl(schema));
      try {
        await s.write("keep", "kept-value");
        await s.write("s", secret, { scope: "user:a/session:1" });
        await s.write("t", secret, { scope: "user:a" });
        const r = await s.forgetScope("user:a", { reclaim });
        const rows = await (inspect as pg.Pool).query(`SELECT count(*)::int AS n FROM "${schema}".engram_values WHERE position($1::bytea IN bytes) > 0`, [Buffer.from(secret)]);
        if (reclaim === "eager") {
          expect(r.reclaimedBytes).toBe(2 * secret.length);
          expect(rows.rows[0].n).toBe(0);
        } else {
          expect(rows.rows[0].n).toBe(2);
        }
        expect(await s.read("keep")).toMatchObject({ value: "kept-value" });
        expect(await s.probe("s", { scope: "user:a/session:1" })).toMatchObject({ state: reclaim === "eager" ? "reclaimed" : "tombstoned", retentionPresent: true });
      } finally {
        await s.close();
      }
    }
  });

  it("eight concurrent first opens of one new store all succeed (the CREATE IF NOT EXISTS race)", async () => {
    // Found by the hot-key test: concurrent CREATE TABLE IF NOT EXISTS fails with 42710 in the loser.
    for (let round = 0; round < 10; round++) {
      const results = await Promise.allSettled(Array.from({ length: 8 }, () => Engram.open(storeUrl(`${tag}_race${round}`))));
      const failed = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
      for (const r of results) if (r.status === "fulfilled") await r.value.close();
      expect(failed, `round ${round}`).toEqual([]);
    }
  });

  it("eight handles writing one hot key all commit through serializable retries", async () => {
    const at = storeUrl(`${tag}_hot`);
    const handles = await Promise.all(Array.from({ length: 8 }, () => Engram.open(at)));
    try {
      const per = await Promise.all(handles.map(async (s, i) => {
        const vs: number[] = [];
        for (let j = 0; j < 15; j++) vs.push((await s.write("hot", `h${i}-${j}`)).version);
        return vs;
      }));
      const all = per.flat();
      expect(new Set(all).size).toBe(8 * 15);
      for (const vs of per) expect(vs.every((v, i) => i === 0 || v > (vs[i - 1] as number))).toBe(true);
      const r = await handles[0]!.read("hot");
      expect(r).toMatchObject({ status: "OK", version: Math.max(...all) });
    } finally {
      await Promise.all(handles.map((s) => s.close()));
    }
  });

  it("a transaction that keeps failing with 40001 gives up after the bound, committing nothing", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const schema = `${tag}_retry`;
    await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".t (n INT)`);
    let attempts = 0;
    try {
      const err = await inTransaction(pool, "test", async (c) => {
        attempts += 1;
        await c.query(`INSERT INTO "${schema}".t VALUES (1)`);
        throw Object.assign(new Error("could not serialize access"), { code: "40001" });
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "IO_ERROR", errno: "40001" });
      expect((err as Error).message).toContain(`after ${TX_ATTEMPTS_MAX} serializable attempts`);
      expect(attempts).toBe(TX_ATTEMPTS_MAX);
      expect((await pool.query(`SELECT count(*)::int AS n FROM "${schema}".t`)).rows[0].n).toBe(0);
      // A body that fails once and then succeeds commits exactly once.
      let tries = 0;
      await inTransaction(pool, "test", async (c) => {
        tries += 1;
        await c.query(`INSERT INTO "${schema}".t VALUES (2)`);
        if (tries === 1) throw Object.assign(new Error("serialization failure"), { code: "40001" });
      });
      expect((await pool.query(`SELECT n FROM "${schema}".t`)).rows).toEqual([{ n: 2 }]);
    } finally {
      await pool.end();
    }
  });

  it("a connection dropped under a transaction rejects that call with an IoError; the process lives and the store goes on", async () => {
    // Without a listener on the checked-out connection, its 'error' event killed the host process
    // (postgres/tx.ts, the fifty-third session's audit): here the test worker, reported as an
    // unhandled error. A write waits for a row lock another session holds; its server backend is
    // terminated, as a restart or an administrator would.
    const schema = `${tag}_dropped`;
    const store = await Engram.open(storeUrl(schema));
    const holder = new pg.Client({ connectionString: url });
    holder.on("error", () => undefined); // this test's own connection; the server may drop it too
    await holder.connect();
    try {
      await store.write("k", "v0");
      await holder.query("BEGIN");
      await holder.query(`SELECT * FROM "${schema}".engram_meta FOR UPDATE`);
      const blocked = store.write("k", "v1").then(
        () => null,
        (e: unknown) => e,
      );
      const waiting = async (): Promise<number[]> => {
        const r = await (inspect as pg.Pool).query("SELECT pid FROM pg_stat_activity WHERE application_name = 'engram' AND wait_event_type = 'Lock'");
        return r.rows.map((row: { pid: number }) => row.pid);
      };
      let pids: number[] = [];
      for (const started = Date.now(); pids.length === 0; ) {
        expect(Date.now() - started, "the write waits for the lock within 10 s").toBeLessThan(10_000);
        pids = await waiting();
      }
      await (inspect as pg.Pool).query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [pids]);
      const err = await blocked;
      expect(err, "the dropped call rejects").toMatchObject({ code: "IO_ERROR" });
      await holder.query("ROLLBACK");
      await store.write("k", "v2");
      expect(await store.read("k")).toMatchObject({ status: "OK", value: "v2" });
    } finally {
      await holder.end().catch(() => undefined);
      await store.close();
    }
  });

  it("a connection that goes silent rejects the call after queryTimeoutMs with an IoError, and the store goes on once the network does", async () => {
    // Without a query timeout the write waited for ever, and every write queued behind it on the
    // handle, and close() (the fifty-third session's audit). A proxy between the store and the
    // server stops forwarding the bytes of the connections it holds, as a network partition would.
    const target = new URL(url as string);
    const held: net.Socket[] = [];
    let silent = false;
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      client.on("error", () => undefined);
      upstream.on("error", () => undefined);
      client.on("data", (d) => (silent ? undefined : upstream.write(d)));
      upstream.on("data", (d) => (silent ? undefined : client.write(d)));
      held.push(client, upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const proxied = new URL(storeUrl(`${tag}_silent`));
    proxied.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    proxied.searchParams.set("queryTimeoutMs", "500");
    const store = await Engram.open(proxied.href);
    try {
      await store.write("k", "v0");
      silent = true;
      const started = Date.now();
      const err = await within(10_000, store.write("k", "v1"), "the write on a silent connection").catch((e: unknown) => e);
      expect(err, "the write rejects").toMatchObject({ code: "IO_ERROR" });
      expect(Date.now() - started, "after about queryTimeoutMs").toBeLessThan(5_000);
      for (const sock of held.splice(0)) sock.destroy(); // the partition's connections are gone
      silent = false;
      await within(10_000, store.write("k", "v2"), "a write once the network is back");
      expect(await store.read("k")).toMatchObject({ status: "OK", value: "v2" });
    } finally {
      silent = false;
      await store.close();
      for (const sock of held) sock.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });

  it("refuses a queryTimeoutMs outside its bounds with INVALID_ARGUMENT", async () => {
    for (const v of ["0", "99", "abc", "3600001"]) {
      await expect(Engram.open(`${storeUrl(`${tag}_qt`)}&queryTimeoutMs=${v}`), v).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    }
  });
  it("a store made before listed_seq, older_values and tomb_seq gets them at its next open, its kills kept as the slots' own forgets", async () => {
    const schema = `${tag}_upgrade`;
    const s = await Engram.open(storeUrl(schema), { durability: "none" });
    await s.write("k", "v1");
    await s.forget("k");
    await s.close();
    const db = inspect as pg.Pool;
    for (const col of ["listed_seq", "older_values", "tomb_seq"]) await db.query(`ALTER TABLE "${schema}".engram_slots DROP COLUMN ${col}`);
    const again = await Engram.open(storeUrl(schema), { durability: "none" });
    try {
      const row = await db.query(`SELECT kill_seq, tomb_seq, listed_seq, older_values FROM "${schema}".engram_slots`);
      expect(row.rows).toEqual([{ kill_seq: "2", tomb_seq: "2", listed_seq: "0", older_values: 0 }]);
      expect(await again.probe("k")).toMatchObject({ state: "tombstoned", version: 1, tombstoneSeq: 2 });
    } finally {
      await again.close();
    }
  });

  it("a store made before clear_gen gets it at its next open: an undeleted slot's is its generation", async () => {
    const schema = `${tag}_upgrade_cg`;
    const s = await Engram.open(storeUrl(schema), { durability: "none" });
    await s.write("k", "v1");
    await s.forget("k");
    await s.undelete("k");
    await s.write("j", "v1");
    await s.close();
    const db = inspect as pg.Pool;
    await db.query(`ALTER TABLE "${schema}".engram_slots DROP COLUMN clear_gen`);
    const again = await Engram.open(storeUrl(schema), { durability: "none" });
    try {
      const rows = await db.query(`SELECT key, generation, clear_gen FROM "${schema}".engram_slots ORDER BY key`);
      expect(rows.rows).toEqual([{ key: "j", generation: "1", clear_gen: "0" }, { key: "k", generation: "2", clear_gen: "2" }]);
    } finally {
      await again.close();
    }
  });

  /** The defaults of the slot columns added after format 1's first stores (null: none, as a fresh store's). */
  async function addedDefaults(schema: string): Promise<Record<string, string | null>> {
    const r = await (inspect as pg.Pool).query(
      `SELECT column_name, column_default FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'engram_slots'
       AND column_name IN ('listed_seq', 'older_values', 'tomb_seq', 'clear_gen') ORDER BY column_name`,
      [schema],
    );
    return Object.fromEntries((r.rows as Array<{ column_name: string; column_default: string | null }>).map((x) => [x.column_name, x.column_default]));
  }

  it("the upgrade leaves no default on the columns it adds: a row inserted without them is refused, never given -1", async () => {
    const schema = `${tag}_upgrade_nodef`;
    const s = await Engram.open(storeUrl(schema), { durability: "none" });
    await s.write("k", "v1");
    await s.close();
    const db = inspect as pg.Pool;
    for (const col of ["listed_seq", "older_values", "tomb_seq", "clear_gen"]) await db.query(`ALTER TABLE "${schema}".engram_slots DROP COLUMN ${col}`);
    const again = await Engram.open(storeUrl(schema), { durability: "none" });
    try {
      expect(await addedDefaults(schema)).toEqual({ clear_gen: null, listed_seq: null, older_values: null, tomb_seq: null });
      const insert = db.query(
        `INSERT INTO "${schema}".engram_slots (tenant, scope, key, version, value_gen, generation, kill_seq, killed_gen, clear_seq, expires_at, reclaimed_at)
         VALUES ('global', 'global', 'old', 1, 1, 1, 0, 0, 0, 0, 0)`,
      );
      await expect(insert, "a writer of an older version, which does not know the columns").rejects.toMatchObject({ code: "23502" });
      expect(await again.probe("k")).toMatchObject({ state: "live", version: 1 });
    } finally {
      await again.close();
    }
  });

  it("a store upgraded with the defaults left (rows holding -1) is repaired at its next open", async () => {
    const schema = `${tag}_upgrade_repair`;
    const s = await Engram.open(storeUrl(schema), { durability: "none" });
    await s.write("k", "v1");
    await s.forget("k");
    await s.undelete("k");
    await s.write("j", "v1");
    await s.forget("j");
    await s.close();
    const db = inspect as pg.Pool;
    // What the upgrade before the fifty-fifth session left, and rows a writer of an older version then inserted.
    for (const [col, d] of [["listed_seq", 0], ["older_values", 0], ["tomb_seq", -1], ["clear_gen", -1]] as const) {
      await db.query(`ALTER TABLE "${schema}".engram_slots ALTER COLUMN ${col} SET DEFAULT ${d}`);
    }
    await db.query(`UPDATE "${schema}".engram_slots SET tomb_seq = -1, clear_gen = -1`);
    const again = await Engram.open(storeUrl(schema), { durability: "none" });
    try {
      expect(await addedDefaults(schema)).toEqual({ clear_gen: null, listed_seq: null, older_values: null, tomb_seq: null });
      const rows = await db.query(`SELECT key, kill_seq, tomb_seq, generation, clear_gen FROM "${schema}".engram_slots ORDER BY key`);
      expect(rows.rows).toEqual([
        { key: "j", kill_seq: "5", tomb_seq: "5", generation: "1", clear_gen: "0" },
        { key: "k", kill_seq: "2", tomb_seq: "2", generation: "2", clear_gen: "2" },
      ]);
      expect(await again.probe("k")).toMatchObject({ state: "absent", generation: 2 });
      expect(await again.probe("j")).toMatchObject({ state: "tombstoned", tombstoneSeq: 5 });
    } finally {
      await again.close();
    }
  });

  /** A store under a clock that `pass` moves past the 10 s retention window. */
  async function clocked(name: string): Promise<{ s: Engram; pass: () => void }> {
    const clock = { now: 1_700_000_000_000 };
    const s = await Engram.open(storeUrl(`${tag}_${name}`), { durability: "none", clock: () => clock.now, retention: { tombstoneRetentionMs: 10_000 } });
    return { s, pass: () => void (clock.now += 10_001) };
  }

  it("twin (dropOverlapping): an erasure dropped while an older one of an ancestor stays leaves the older one as the slot's tombstoneSeq", async () => {
    unsafeReclaimForTests.dropOverlapping = true;
    const { s, pass } = await clocked("overlap_twin");
    try {
      await s.forgetScope("a", { reclaim: "eager" });
      await s.write("k", "v1", { scope: "a/c" });
      await s.forgetScope("a/c", { reclaim: "eager" });
      await s.write("j", "x", { scope: "a/b" });
      await s.write("j", "y", { scope: "a/b" });
      pass();
      await s.gc();
      // The parity case expects tombstoneSeq 3 (a/c's erasure, kept): here a/c's went first.
      expect(await s.probe("k", { scope: "a/c" })).toMatchObject({ state: "reclaimed", version: 2, tombstoneSeq: 1 });
    } finally {
      unsafeReclaimForTests.dropOverlapping = false;
      await s.close();
    }
  });

  it("twin (keepGeneration): a slot left with only its undelete keeps a later write's generation", async () => {
    unsafeReclaimForTests.keepGeneration = true;
    unsafeReclaimForTests.keepSupersededClear = true; // since the fifty-sixth session the later write supersedes the undelete, which goes
    const { s, pass } = await clocked("cleargen_twin");
    try {
      await s.write("k", "v1", { scope: "a" });
      await s.forget("k", { scope: "a" });
      await s.undelete("k", { scope: "a" });
      await s.forgetScope("a", { reclaim: "eager" });
      await s.write("k", "v2", { scope: "a" });
      await s.forgetScope("a");
      pass();
      await s.gc();
      await s.gc();
      // The parity case expects generation 2, the undelete's.
      expect(await s.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: true, generation: 3 });
    } finally {
      unsafeReclaimForTests.keepGeneration = false;
      unsafeReclaimForTests.keepSupersededClear = false;
      await s.close();
    }
  });

  it("twin (keepClear): an undelete's record kept while a later forget holds its slot outlives the engine's slot by a pass", async () => {
    unsafeReclaimForTests.keepClear = true;
    unsafeReclaimForTests.keepSupersededClear = true; // since the fifty-sixth session v2 supersedes the undelete, which goes
    const { s, pass } = await clocked("keepclear_twin");
    try {
      const o = { scope: "t" };
      await s.write("k", "v1", o);
      await s.forget("k", o);
      await s.undelete("k", o);
      await s.write("k", "v2", o);
      await s.forget("k", o);
      await s.gc();
      await s.write("k", "v3", o);
      await s.gc();
      await s.gc();
      await s.forgetScope("t");
      pass();
      await s.gc();
      await s.gc();
      // The parity case expects no retention record (the engine dropped the undelete's at the first gc).
      expect(await s.probe("k", o)).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
      expect((await s.write("k", "v4", o)).generation).toBe(2);
    } finally {
      unsafeReclaimForTests.keepClear = false;
      unsafeReclaimForTests.keepSupersededClear = false;
      await s.close();
    }
  });

  it("twin (keepSupersededClear): an undelete whose window ended, held by a value written before any pass, outlives it (backend-diff --reopen seed 32)", async () => {
    unsafeReclaimForTests.keepSupersededClear = true;
    const { s, pass } = await clocked("supersededclear_twin");
    try {
      const o = { scope: "a/b" };
      await s.write("k", "v1", o);
      await s.forget("k", o);
      await s.undelete("k", o);
      pass();
      await s.gc();
      await s.gc();
      pass(); // the undelete's window ends; no pass runs before the write
      await s.write("k", "v2", { ...o, ttlMs: 1000 });
      pass();
      pass();
      await s.gc();
      await s.gc();
      // The parity case expects the slot gone with the value.
      expect(await s.probe("k", o)).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
    } finally {
      unsafeReclaimForTests.keepSupersededClear = false;
      await s.close();
    }
  });
});

if (skip !== null) it.skip(`PostgreSQL backend tests [skipped: ${skip}]`, () => undefined);
