/**
 * The PostgreSQL backend: the Backend interface of rules/types.ts over three tables
 * (postgres/schema.ts). Each mutation is one SERIALIZABLE transaction (postgres/tx.ts) that reads
 * the slot and the store-wide sequence, decides exactly as the engine does (rules/gc-rule.ts),
 * and writes the retention record, the value row and the new sequence together — so a refused
 * call writes nothing, and many processes and machines may share one database: it arbitrates.
 * Reads are single statements (one snapshot). What is not durable is never visible: PostgreSQL
 * makes a commit visible only once it is flushed (synchronous_commit on, durability "sync").
 */
import type { Pool } from "pg";
import * as A from "../rules/args.js";
import { BATCH_ROW_NAMES } from "../rules/option-names.js";
import { InvalidArgumentError, NotSupportedError, StoreClosedError, TombstonedSlotError, VersionConflictError } from "../rules/errors.js";
import * as R from "../rules/gc-rule.js";
import type { SlotFacts } from "../rules/gc-rule.js";
import { VALUE_BYTES_MAX } from "../rules/limits.js";
import { scopeLineage } from "../rules/names.js";
import type * as T from "../rules/types.js";
import { ERASE_LIST_CHUNK_BYTES } from "../segments/erase-list.js";
import { matchScopeRule, type PgOptions } from "./options.js";
import { ddl, upgrade, upgradedQuery, type Tables } from "./schema.js";
import * as S from "./slots.js";
import { inTransaction, mapError, query } from "./tx.js";
import { reclaimPass, type PassReport } from "./reclaim.js";

const EMPTY: SlotFacts = { version: 0, valueGeneration: 0, generation: 0, killSeq: 0, killedGeneration: 0, clearSeq: 0, clearGeneration: 0, expiresAt: 0, physicalRecords: 0, reclaimedAt: 0, listedSeq: 0, tombSeq: 0 };

/** A write or forget decided inside a transaction: the new facts and the value to store. */
interface Decided {
  scope: string;
  key: string;
  facts: SlotFacts;
  value: string | Uint8Array | null;
  result: T.BatchResult;
}

/** Faults do not exist here: there are no fault points inside a database server. */
const NO_FAULTS: T.Faults = {
  waitFor: () => Promise.reject(new NotSupportedError("fault injection applies only to the embedded engine")),
  release: () => {
    throw new NotSupportedError("fault injection applies only to the embedded engine");
  },
};

/** An open store on a PostgreSQL database. */
export class PgBackend implements T.Backend {
  readonly dir: string;
  readonly role = "owner" as const;
  readonly faults = NO_FAULTS;
  private readonly pool: Pool;
  private readonly t: Tables;
  private readonly o: PgOptions;
  private readonly inflight = new Set<Promise<unknown>>();
  private closing: Promise<void> | null = null;
  private cached: T.StoreStats;
  private compactions = 0;
  private chain: Promise<unknown> = Promise.resolve();

  private constructor(dir: string, pool: Pool, tables: Tables, options: PgOptions) {
    this.dir = dir;
    this.pool = pool;
    this.t = tables;
    this.o = options;
    this.cached = { segments: [], liveBytes: 0, deadBytes: 0, totalBytes: 0, slots: 0, liveSlots: 0, tombstones: 0, scopes: 0, sequence: 0, pendingGcSegments: 0, compactions: 0 };
  }

  /** Creates the tables if missing (idempotent, safe to race with other openers) and returns the store. */
  static async open(dir: string, pool: Pool, tables: Tables, options: PgOptions): Promise<PgBackend> {
    const store = new PgBackend(dir, pool, tables, options);
    try {
      await createSchema(pool, tables);
      await store.refreshStats();
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw mapError(err, "open");
    }
    return store;
  }

  /**
   * Runs a mutation after every mutation issued before it on this handle has settled: one handle
   * decides its mutations in issue order, exactly as the engine does for calls queued in one
   * turn (DESIGN.md I10). Parallel transactions come from several handles or processes.
   */
  private serial<R>(run: () => Promise<R>): Promise<R> {
    return this.track(() => {
      const p = this.chain.then(run, run);
      this.chain = p.catch(() => undefined);
      return p;
    });
  }

  /** Runs a call unless closing, and lets close() wait for it. */
  private track<R>(run: () => Promise<R>): Promise<R> {
    if (this.closing !== null) return Promise.reject(new StoreClosedError());
    const p = run();
    this.inflight.add(p);
    const done = (): void => {
      this.inflight.delete(p);
    };
    p.then(done, done);
    return p;
  }

  private assertOpen(): void {
    if (this.closing !== null) throw new StoreClosedError();
  }

  private retentionMsFor(scope: string): number {
    return matchScopeRule(this.o.scopeRules, scope)?.tombstoneRetentionMs ?? this.o.tombstoneRetentionMs;
  }

  private expiryFor(scope: string, ttlMs: number | null | undefined, now: number): number {
    let ttl = ttlMs;
    if (ttl === undefined) {
      const rule = matchScopeRule(this.o.scopeRules, scope);
      ttl = rule?.ttlMs !== undefined ? rule.ttlMs : this.o.ttlMs;
    }
    return ttl === null ? 0 : now + ttl;
  }

  private checkValue(v: string | Uint8Array): void {
    const bytes = typeof v === "string" ? Buffer.byteLength(v, "utf8") : v.byteLength;
    const max = Math.min(this.o.valueBytesMax, VALUE_BYTES_MAX);
    if (bytes > max) throw new InvalidArgumentError(`value is ${bytes} bytes; at most ${max} (valueBytesMax)`);
    if (typeof v === "string" && !v.isWellFormed()) throw new InvalidArgumentError("value string must be well-formed UTF-16");
  }

  private noteSeq(seq: number): void {
    if (seq > this.cached.sequence) this.cached = { ...this.cached, sequence: seq };
  }

  /** Decides a write against `f` at sequence `seq` (the engine's decideWrite); throws on conflict. */
  private decideWrite(scope: string, key: string, f: SlotFacts, o: Record<string, unknown>, value: string | Uint8Array, seq: number, now: number): Decided {
    const expected = A.expectedVersionOf(o);
    const clear = A.boolOf(o, "clearTombstone", false);
    const ttl = A.ttlOf(o);
    const live = R.valueReadable(f, now) ? f.version : null;
    if (expected !== undefined && expected !== live) throw new VersionConflictError(expected, live, key);
    let generation = Math.max(f.generation, 1);
    if (R.slotTombstoned(f)) {
      if (this.o.tombstoneWrites === "require-clear" && !clear) throw new TombstonedSlotError(key, f.killSeq);
      generation = f.generation + 1;
    }
    // The overwritten value's record stays on the engine's disk until the next pass: counted (older_values).
    const physicalRecords = f.physicalRecords > 0 ? 2 : 1;
    const facts = { ...f, version: seq, valueGeneration: generation, generation, expiresAt: this.expiryFor(scope, ttl, now), physicalRecords, reclaimedAt: 0 };
    return { scope, key, facts, value, result: { ok: true, version: seq, generation } };
  }

  /** Decides a forget against `f`: null when nothing is live (nothing is written). */
  private decideForget(scope: string, key: string, f: SlotFacts | null, seq: number, now: number): Decided | { result: T.ForgetResult } {
    if (f === null || !R.valueReadable(f, now)) return { result: { ok: true, tombstoneSeq: null, generation: f === null ? null : f.generation } };
    const facts = { ...f, killSeq: seq, killedGeneration: f.generation, tombSeq: seq };
    return { scope, key, facts, value: null, result: { ok: true, tombstoneSeq: seq, generation: f.generation } };
  }

  /** write(): see API.md. */
  async write(key: string, value: T.Value, options?: T.WriteOptions): Promise<T.WriteResult> {
    this.assertOpen();
    const o = A.optsOf(options, "write");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const v = A.valueOf(value);
    A.expectedVersionOf(o);
    A.boolOf(o, "clearTombstone", false);
    A.ttlOf(o);
    this.checkValue(v);
    return this.serial(() =>
      inTransaction(this.pool, "write", async (c) => {
        const { seq, slot } = await S.loadSlotAndSeq(c, this.t, scope, k);
        this.noteSeq(seq);
        const d = this.decideWrite(scope, k, slot?.facts ?? EMPTY, o, v, seq + 1, this.o.clock());
        await S.commitSlot(c, this.t, seq + 1, scope, k, d.facts, v);
        return d.result as T.WriteResult;
      }).then((r) => (this.noteSeq(r.version), r)),
    );
  }

  /** read(): the nearest readable value on the lineage, in one statement. */
  async read(key: string, options?: T.ReadOptions): Promise<T.ReadResult> {
    this.assertOpen();
    const o = A.optsOf(options, "read");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const lineage = A.boolOf(o, "inherit", true) ? scopeLineage(scope) : [scope];
    return this.track(async () => {
      const rows = await query(
        this.pool,
        "read",
        `SELECT ${S.SLOT_COLUMNS}, v.kind, v.bytes FROM ${S.joined(this.t)} WHERE s.key = $1 AND s.tenant = ANY($2) AND s.scope = ANY($3)`,
        [k, [...new Set(lineage.map(S.tenantOf))], lineage],
      );
      const byScope = new Map(rows.map((r) => [r["scope"] as string, S.rowOf(r)]));
      const now = this.o.clock();
      for (const s of lineage) {
        const row = byScope.get(s);
        if (row === undefined || !R.valueReadable(row.facts, now) || row.bytes === null || row.kind === null) continue;
        return { status: "OK", value: S.valueOf(row.kind, row.bytes), version: row.facts.version, generation: row.facts.valueGeneration, scope: s };
      }
      return { status: "NOT_FOUND" };
    });
  }

  /** readSync(): a database cannot answer synchronously (bad arguments are still INVALID_ARGUMENT first). */
  readSync(key: string, options?: T.ReadOptions): T.ReadResult {
    this.assertOpen();
    const o = A.optsOf(options, "readSync");
    A.scopeOf(o);
    A.keyOf(key);
    A.boolOf(o, "inherit", true);
    throw new NotSupportedError("readSync does not apply to a PostgreSQL store (every answer crosses the network); use read()");
  }

  /** forget(): tombstones the live value of (scope, key); the value row stays until gc(). */
  async forget(key: string, options?: T.ScopeOption): Promise<T.ForgetResult> {
    this.assertOpen();
    const o = A.optsOf(options, "forget");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    return this.serial(() =>
      inTransaction(this.pool, "forget", async (c) => {
        const { seq, slot } = await S.loadSlotAndSeq(c, this.t, scope, k);
        this.noteSeq(seq);
        const d = this.decideForget(scope, k, slot?.facts ?? null, seq + 1, this.o.clock());
        if (!("facts" in d)) return d.result;
        await S.commitSlot(c, this.t, seq + 1, scope, k, d.facts, null);
        this.noteSeq(seq + 1);
        return d.result as T.ForgetResult;
      }),
    );
  }

  /** undelete(): clears a tombstone by moving the slot to a higher generation; no-op otherwise. */
  async undelete(key: string, options?: T.ScopeOption): Promise<T.UndeleteResult> {
    this.assertOpen();
    const o = A.optsOf(options, "undelete");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    return this.serial(() =>
      inTransaction(this.pool, "undelete", async (c) => {
        const { seq, slot } = await S.loadSlotAndSeq(c, this.t, scope, k);
        this.noteSeq(seq);
        const f = slot?.facts ?? EMPTY;
        if (!R.slotTombstoned(f)) return { ok: true as const, generation: f.generation };
        const generation = f.generation + 1;
        await S.commitSlot(c, this.t, seq + 1, scope, k, { ...f, generation, clearSeq: seq + 1, clearGeneration: generation }, null);
        this.noteSeq(seq + 1);
        return { ok: true as const, generation };
      }),
    );
  }

  /**
   * forgetScope(): kills every slot of the scope and its descendants in one transaction (each
   * slot's retention record takes the erasure's sequence as its kill); "eager" deletes their
   * value rows in the same transaction, so they are gone when the call resolves.
   */
  async forgetScope(scope: string, options?: T.ForgetScopeOptions): Promise<T.ForgetScopeResult> {
    this.assertOpen();
    const o = A.optsOf(options, "forgetScope");
    const s = A.erasedScopeOf(scope);
    const reclaim = A.reclaimOf(o);
    return this.serial(() =>
      inTransaction(this.pool, "forgetScope", async (c) => {
        const now = this.o.clock();
        const seq = (await S.lockSeq(c, this.t)) + 1;
        const where = S.subtreeWhere("s", s, 2);
        const counted = await c.query(
          `SELECT count(*) FILTER (WHERE ${LIVE}) AS n, COALESCE(sum(${ERASE_ENTRY_BYTES}), 0) AS list_bytes FROM ${S.joined(this.t)} WHERE ${where.sql}`,
          [now, ...where.params],
        );
        const slots = Number((counted.rows[0] as { n: unknown }).n);
        // The engine writes an erase list over ERASE_LIST_CHUNK_BYTES as several records and a
        // BATCH_COMMIT at the next sequence: the same calls give the same versions only if this
        // store spends that sequence too.
        const last = Number((counted.rows[0] as { list_bytes: unknown }).list_bytes) > ERASE_LIST_CHUNK_BYTES ? seq + 1 : seq;
        // Every slot is named by the erasure (listed_seq): its engram_erasures row holds the
        // slot while it stays (gc: heldByListingErasure), as the engine's SCOPE_ERASE record does.
        const w1 = S.subtreeWhere("s", s, 2);
        await c.query(`UPDATE ${this.t.slots} s SET kill_seq = $1, killed_gen = s.generation, listed_seq = $1 WHERE ${w1.sql}`, [seq, ...w1.params]);
        await S.putErasure(c, this.t, s, seq, now);
        await S.setSeq(c, this.t, last);
        if (reclaim === "lazy") return { ok: true as const, tombstoneSeq: seq, slots };
        const w2 = S.subtreeWhere("s", s, 2);
        await c.query(
          `UPDATE ${this.t.slots} s SET reclaimed_at = $1, older_values = 0 WHERE ${w2.sql} AND EXISTS
             (SELECT 1 FROM ${this.t.values} v WHERE v.tenant = s.tenant AND v.scope = s.scope AND v.key = s.key)`,
          [now, ...w2.params],
        );
        const w3 = S.subtreeWhere("v", s, 1);
        const gone = await c.query(`DELETE FROM ${this.t.values} v WHERE ${w3.sql} RETURNING octet_length(v.bytes) AS n`, w3.params);
        const reclaimedBytes = gone.rows.reduce((sum: number, r: Record<string, unknown>) => sum + Number(r["n"]), 0);
        return { ok: true as const, tombstoneSeq: seq, slots, reclaimedBytes };
      }).then((r) => (this.noteSeq(r.tombstoneSeq), r)),
    );
  }

  /** probe(): the retention record and the value row of (scope, key), separately. */
  async probe(key: string, options?: T.ScopeOption): Promise<T.ProbeResult> {
    this.assertOpen();
    const o = A.optsOf(options, "probe");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    return this.track(async () => {
      let row: S.SlotRow | null;
      let erasedAt: number;
      try {
        ({ row, erasedAt } = await S.loadSlotAndErasure(this.pool, this.t, scope, k));
      } catch (err) {
        throw mapError(err, "probe");
      }
      if (row === null) {
        return { state: "absent", valuePresent: false, retentionPresent: false, physicalRecords: 0, version: null, generation: null, tombstoneSeq: null, expiresAt: null };
      }
      const f = row.facts;
      const now = this.o.clock();
      return {
        state: R.slotState(f, now),
        valuePresent: R.valueReadable(f, now),
        retentionPresent: true,
        physicalRecords: Math.min(1, f.physicalRecords), // the value row: a slot holds at most one
        version: f.version > 0 ? f.version : null,
        generation: f.generation,
        // The slot's own latest forget (while kept), or the latest retained erasure over its
        // scope, as the engine answers: a key first written after an erasure reports it too.
        tombstoneSeq: Math.max(f.tombSeq, erasedAt) || null,
        expiresAt: f.expiresAt === 0 || f.physicalRecords === 0 ? null : f.expiresAt,
      };
    });
  }

  /** list(): live keys in key order (JS string order, as the engine), nearest scope first. */
  list(options?: T.ListOptions): AsyncIterable<T.ListEntry> {
    this.assertOpen();
    const o = A.optsOf(options, "list");
    const scope = A.scopeOf(o);
    const prefix = A.prefixOf(o);
    const limit = A.limitOf(o);
    const lineage = A.boolOf(o, "inherit", true) ? scopeLineage(scope) : [scope];
    const entries = this.track(async () => {
      // A well-formed prefix is a prefix in code points exactly when it is one in UTF-16 units,
      // so the server may filter by it; the exact startsWith below decides either way.
      const byPrefix = prefix !== "" && prefix.isWellFormed();
      const rows = await query(
        this.pool,
        "list",
        `SELECT ${S.SLOT_COLUMNS} FROM ${S.joined(this.t)} WHERE v.key IS NOT NULL AND s.tenant = ANY($1) AND s.scope = ANY($2)` +
          (byPrefix ? " AND left(s.key, $4::int) = $3::text" : ""),
        byPrefix ? [[...new Set(lineage.map(S.tenantOf))], lineage, prefix, [...prefix].length] : [[...new Set(lineage.map(S.tenantOf))], lineage],
      );
      const now = this.o.clock();
      const rank = new Map(lineage.map((s, i) => [s, i]));
      const found = new Map<string, { entry: T.ListEntry; rank: number }>();
      for (const r of rows) {
        const row = S.rowOf(r);
        if (!row.key.startsWith(prefix) || !R.valueReadable(row.facts, now)) continue;
        const at = rank.get(row.scope) ?? lineage.length;
        const had = found.get(row.key);
        if (had === undefined || at < had.rank) found.set(row.key, { entry: { key: row.key, scope: row.scope, version: row.facts.version }, rank: at });
      }
      return [...found.values()].map((x) => x.entry).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).slice(0, limit);
    });
    return (async function* () {
      yield* await entries;
    })();
  }

  /** batch(): every op decided in order against the state the earlier ones leave, in one transaction. */
  async batch(ops: T.BatchOp[]): Promise<T.BatchResult[]> {
    this.assertOpen();
    if (!Array.isArray(ops)) throw new InvalidArgumentError("batch takes an array of operations");
    if (ops.length > A.BATCH_OPS_MAX) throw new InvalidArgumentError(`batch has ${ops.length} operations; at most ${A.BATCH_OPS_MAX}`);
    const parsed = ops.map((raw, i) => this.parseOp(raw, i));
    let bytes = 0;
    for (const p of parsed) bytes += p.value === null ? 0 : typeof p.value === "string" ? Buffer.byteLength(p.value) : p.value.byteLength;
    if (bytes > A.BATCH_BYTES_MAX) throw new InvalidArgumentError(`batch exceeds ${A.BATCH_BYTES_MAX} bytes; split it`);
    return this.serial(() =>
      inTransaction(this.pool, "batch", async (c) => {
        const base = await S.lockSeq(c, this.t);
        this.noteSeq(base);
        const now = this.o.clock();
        const loaded = await S.loadSlots(c, this.t, parsed);
        const overlay = new Map<string, SlotFacts | null>();
        const decided: Decided[] = [];
        const results: T.BatchResult[] = [];
        let seq = base;
        for (const p of parsed) {
          const id = `${p.scope}\u0000${p.key}`;
          const f = overlay.has(id) ? (overlay.get(id) ?? null) : (loaded.get(id)?.facts ?? null);
          const d = p.value !== null ? this.decideWrite(p.scope, p.key, f ?? EMPTY, p.o, p.value, seq + 1, now) : this.decideForget(p.scope, p.key, f, seq + 1, now);
          results.push(d.result);
          if (!("facts" in d)) continue;
          seq += 1;
          overlay.set(id, d.facts);
          decided.push(d);
        }
        const last = lastPerSlot(decided);
        await S.putSlots(c, this.t, last);
        await S.putValues(c, this.t, last.flatMap((d) => (d.value === null ? [] : [{ scope: d.scope, key: d.key, version: d.facts.version, generation: d.facts.valueGeneration, value: d.value }])));
        // The engine spends one more sequence on a batch's commit record (its BATCH_COMMIT, which
        // makes the batch count at recovery): versions after a batch match only if this does too.
        if (seq > base) seq += 1;
        if (seq > base) await S.setSeq(c, this.t, seq);
        return { results, seq };
      }).then((r) => (this.noteSeq(r.seq), r.results)),
    );
  }

  /** Checks one batch op before the transaction starts. */
  private parseOp(raw: unknown, i: number): { scope: string; key: string; value: string | Uint8Array | null; o: Record<string, unknown> } {
    const o = A.optsOf(raw, `batch[${i}]`, BATCH_ROW_NAMES);
    const scope = A.scopeOf(o);
    const key = A.keyOf(o["key"]);
    if (o["op"] === "write") {
      const value = A.valueOf(o["value"]);
      A.expectedVersionOf(o);
      A.boolOf(o, "clearTombstone", false);
      A.ttlOf(o);
      this.checkValue(value);
      return { scope, key, value, o };
    }
    if (o["op"] === "forget") return { scope, key, value: null, o };
    throw new InvalidArgumentError(`batch[${i}].op must be "write" or "forget", got ${String(o["op"])}`);
  }

  /** One reclamation pass under the rules (safe or, with the unsafe option, by tombstone sequence). */
  private pass(): Promise<PassReport> {
    return reclaimPass(this.pool, this.t, {
      now: this.o.clock(),
      retentionMsFor: (scope) => this.retentionMsFor(scope),
      unsafeGcBySeq: this.o.unsafeGcBySeq,
    });
  }

  /** compact(): there are no segments to rewrite; it runs the reclamation pass that compaction implies. */
  async compact(options?: T.CompactOptions): Promise<T.CompactionReport> {
    this.assertOpen();
    const o = A.optsOf(options, "compact");
    const mode = o["mode"] ?? "copy-on-write";
    if (mode !== "copy-on-write" && mode !== "in-place") throw new InvalidArgumentError(`mode must be "copy-on-write" or "in-place", got ${String(mode)}`);
    const segs = o["segments"];
    if (segs !== undefined && (!Array.isArray(segs) || !segs.every((x) => Number.isSafeInteger(x) && (x as number) > 0))) {
      throw new InvalidArgumentError("segments must be an array of positive segment ids");
    }
    return this.serial(async () => {
      const r = await this.pass();
      this.compactions += 1;
      await this.refreshStats();
      return { segments: [], mode, bytesBefore: r.bytesBefore, bytesAfter: r.bytesAfter, recordsKept: r.kept, recordsDropped: r.dropped, durationMs: r.durationMs };
    });
  }

  /** gc(): reclaims value rows by generation now, and retention rows past their window. */
  async gc(): Promise<T.GcReport> {
    this.assertOpen();
    return this.serial(async () => {
      const r = await this.pass();
      this.compactions += 1;
      await this.refreshStats();
      return {
        segments: [], mode: "copy-on-write", bytesBefore: r.bytesBefore, bytesAfter: r.bytesAfter, recordsKept: r.kept,
        recordsDropped: r.dropped, durationMs: r.durationMs, retentionRecordsDropped: r.retentionDropped,
      };
    });
  }

  /**
   * stats(): synchronous, so it answers from a snapshot: counts as of open or the last gc(),
   * compact() or verify(); `sequence` is the highest this handle has seen (every mutation
   * refreshes it, refused ones included).
   */
  stats(): T.StoreStats {
    this.assertOpen();
    return { ...this.cached, compactions: this.compactions };
  }

  /**
   * Recounts the snapshot stats() answers from, on the server (one aggregate statement, no rows
   * transferred). The two predicates are rules/gc-rule.ts valueReadable and slotTombstoned in SQL.
   */
  private async refreshStats(): Promise<void> {
    const rows = await query(
      this.pool,
      "stats",
      `SELECT (SELECT seq FROM ${this.t.meta} WHERE id = 1) AS seq, count(*) AS slots, count(DISTINCT s.scope) AS scopes,
         count(*) FILTER (WHERE ${LIVE}) AS live, count(*) FILTER (WHERE ${TOMBSTONED}) AS tombstones,
         COALESCE(sum(octet_length(v.bytes)) FILTER (WHERE ${LIVE}), 0) AS live_bytes,
         COALESCE(sum(octet_length(v.bytes)) FILTER (WHERE NOT (${LIVE})), 0) AS dead_bytes
       FROM ${S.joined(this.t)}`,
      [this.o.clock()],
    );
    const r = rows[0] as Record<string, unknown>;
    const n = (k: string): number => Number(r[k] ?? 0);
    const liveBytes = n("live_bytes");
    const deadBytes = n("dead_bytes");
    this.cached = {
      segments: [], liveBytes, deadBytes, totalBytes: liveBytes + deadBytes, slots: n("slots"), liveSlots: n("live"), tombstones: n("tombstones"),
      scopes: n("scopes"), sequence: Math.max(this.cached.sequence, n("seq")), pendingGcSegments: 0, compactions: this.compactions,
    };
  }

  /** verify(): checks every row against the rules (value rows agree with their retention records, I5). */
  async verify(onProgress?: T.ProgressFn): Promise<T.VerifyReport> {
    this.assertOpen();
    return this.track(async () => {
      const rows = await query(
        this.pool,
        "verify",
        `SELECT ${S.SLOT_COLUMNS}, v.version AS v_version, v.generation AS v_generation, v.kind FROM ${S.joined(this.t)}`,
        [],
      );
      const orphans = await query(
        this.pool,
        "verify",
        `SELECT v.scope, v.key FROM ${this.t.values} v LEFT JOIN ${this.t.slots} s ON s.tenant = v.tenant AND s.scope = v.scope AND s.key = v.key WHERE s.key IS NULL`,
        [],
      );
      const problems: T.VerifyProblem[] = orphans.map((r) => ({ segment: 0, offset: 0, detail: `value row ${String(r["scope"])}/${String(r["key"])} has no retention record` }));
      let bytes = 0;
      for (const r of rows) {
        const row = S.rowOf(r);
        bytes += row.valueBytes;
        if (row.facts.physicalRecords === 0) continue;
        const what = `${row.scope}/${row.key}`;
        if (Number(r["v_version"]) !== row.facts.version || Number(r["v_generation"]) !== row.facts.valueGeneration) {
          problems.push({ segment: 0, offset: 0, detail: `${what}: value row v${String(r["v_version"])} does not match its retention record v${row.facts.version}` });
        }
        if (row.kind !== 0 && row.kind !== 1) problems.push({ segment: 0, offset: 0, detail: `${what}: unknown value kind ${String(row.kind)}` });
        if (row.facts.valueGeneration > row.facts.generation) problems.push({ segment: 0, offset: 0, detail: `${what}: value generation above the slot's` });
      }
      onProgress?.(bytes, bytes);
      await this.refreshStats();
      return { ok: problems.length === 0, segments: 0, records: rows.length, bytes, problems };
    });
  }

  /** flush(): every acknowledged call is already committed; waits for the calls in flight. */
  async flush(): Promise<void> {
    this.assertOpen();
    await Promise.allSettled([...this.inflight]);
  }

  /** close(): waits for calls in flight, then drains the pool; idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
      await this.pool.end();
    })();
    return this.closing;
  }
}

/** The last decided mutation of each slot, in first-appearance order (a batch writes each slot once). */
function lastPerSlot(decided: Decided[]): Decided[] {
  const last = new Map<string, Decided>();
  for (const d of decided) {
    const id = `${d.scope}\u0000${d.key}`;
    const prev = last.get(id);
    // A forget after a write in the same batch keeps the written value row (it is the killed value).
    if (prev !== undefined && d.value === null && prev.value !== null) d.value = prev.value;
    last.set(id, d);
  }
  return [...last.values()];
}

/** rules/gc-rule.ts valueReadable over `s` LEFT JOIN `v`, with $1 = now. */
const LIVE = "v.key IS NOT NULL AND s.version > s.kill_seq AND (s.expires_at = 0 OR s.expires_at > $1)";
/** Bytes a slot of `s` takes in the engine's erase list (segments/erase-list.ts entryBytes). */
const ERASE_ENTRY_BYTES = "20 + octet_length(s.scope) + octet_length(s.key)";
/** rules/gc-rule.ts slotTombstoned over `s`. */
const TOMBSTONED = "s.kill_seq > 0 AND s.kill_seq >= s.version AND s.kill_seq > s.clear_seq";

const DDL_RACES = new Set(["23505", "42P07", "42710", "42P06", "40001"]);

/** Creates the tables; concurrent openers may race on CREATE ... IF NOT EXISTS, so it retries. */
async function createSchema(pool: Pool, t: Tables): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      for (const stmt of ddl(t)) await pool.query(stmt);
      const q = upgradedQuery(t);
      if ((await pool.query(q.sql, q.params)).rows.length === 0) for (const stmt of upgrade(t)) await pool.query(stmt);
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      // The races of concurrent CREATE ... IF NOT EXISTS: unique_violation on the catalog,
      // duplicate_table / _object / _schema, serialization failure. The loser's retry is a no-op.
      if (attempt >= 10 || !DDL_RACES.has(code ?? "")) throw err;
    }
  }
}
