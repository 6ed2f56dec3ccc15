/**
 * The public API, operation by operation, against API.md (moved here from test/api.test.ts).
 *
 * How it works: each test opens a fresh store through the caller's factory, drives it exactly as
 * a user would, and checks results field by field. First the sequence of seed note 000 exactly as
 * issue 3 states it — write k=v1, forget (-> {ok, tombstoneSeq}), read NOT_FOUND, write k=v2
 * (-> higher generation), reopen, read v2 — with a probe at every step, then the same sequence
 * with a GC pass in the seed's dangerous window, and the same under `unsafe.gcKeyedBy:
 * "tombstone-seq"` to show the test tells the two GC designs apart. Then the shape of every
 * operation's result, the error classes and their fields, inherited reads and the scope they
 * report, list order/prefix/limit/inherit, TTLs against an injected clock, batch atomicity when a
 * compare-and-set fails half-way, string vs Uint8Array round trips, close() idempotence, the
 * three durability modes across a reopen, and what reclamation (gc(), compact(), forgetScope)
 * may and may not change in what probe and read report.
 *
 * Properties stressed: the contract's shapes and codes are exact; a forget confirms only the
 * tombstone; a write after forget lands on a new generation and survives GC and restarts;
 * refused operations write nothing; reclamation never changes a live value and never loses the
 * retention record (version, generation, tombstone) before tombstoneRetentionMs.
 */
import {
  CorruptionError,
  EngramError,
  InvalidArgumentError,
  ScopeErasedDuringRead,
  StoreClosedError,
  StoreLockedError,
  TombstonedSlotError,
  VersionConflictError,
} from "../../../rules/errors.js";
import type { OpenOptions, ProbeResult } from "../../../rules/types.js";
import { expect } from "../expect.js";
import type { ConformanceStore, Harness } from "../harness.js";
import { collect, syncRead } from "./util.js";

const FAST: OpenOptions = { durability: "none" };

/** The probe of a slot that has never been written. */
const ABSENT: ProbeResult = {
  state: "absent",
  valuePresent: false,
  retentionPresent: false,
  physicalRecords: 0,
  version: null,
  generation: null,
  tombstoneSeq: null,
  expiresAt: null,
};

/** Registers the API cases. */
export function apiCases(h: Harness): void {
  h.describe("seed 000: write, forget, write again, reopen", () => {
    h.itWith(["reopen"], "runs the seed's sequence with a probe at every step (durability sync)", async () => {
      let store = await h.open({});
      const dir = store;
      try {
        expect(await store.probe("pref.theme")).toEqual(ABSENT);
  
        const w1 = await store.write("pref.theme", "v1");
        expect(w1).toEqual({ ok: true, version: expect.any(Number), generation: expect.any(Number) });
        expect(await store.probe("pref.theme")).toEqual({
          state: "live", valuePresent: true, retentionPresent: true, physicalRecords: 1,
          version: w1.version, generation: w1.generation, tombstoneSeq: null, expiresAt: null,
        });
  
        const f = await store.forget("pref.theme");
        expect(f.ok).toBe(true);
        expect(f.tombstoneSeq).toBeGreaterThan(w1.version);
        expect(f.generation).toBe(w1.generation);
        const tombstoneSeq = f.tombstoneSeq as number;
        expect(await store.probe("pref.theme")).toEqual({
          state: "tombstoned", valuePresent: false, retentionPresent: true, physicalRecords: 1,
          version: w1.version, generation: w1.generation, tombstoneSeq, expiresAt: null,
        });
  
        expect(await store.read("pref.theme")).toEqual({ status: "NOT_FOUND" });
        expect(await store.probe("pref.theme")).toMatchObject({ state: "tombstoned", valuePresent: false, retentionPresent: true });
  
        const w2 = await store.write("pref.theme", "v2");
        expect(w2.ok).toBe(true);
        expect(w2.version).toBeGreaterThan(tombstoneSeq);
        expect(w2.generation).toBeGreaterThan(w1.generation);
        expect(w2.generation).toBe(w1.generation + 1);
        const liveProbe = await store.probe("pref.theme");
        expect(liveProbe).toMatchObject({ state: "live", valuePresent: true, retentionPresent: true, version: w2.version, generation: w2.generation, expiresAt: null });
        expect(liveProbe.physicalRecords).toBeGreaterThanOrEqual(1);
  
        await store.close();
        store = await h.reopen(dir, {});
        expect(await store.read("pref.theme")).toEqual({ status: "OK", value: "v2", version: w2.version, generation: w2.generation, scope: "global" });
        expect(await store.probe("pref.theme")).toMatchObject({ state: "live", valuePresent: true, retentionPresent: true, version: w2.version, generation: w2.generation });
      } finally {
        await store.close();
      }
    });
  
    h.itWith(["reopen"], "a GC pass after the re-write reclaims the old value only: no phantom write loss", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const w1 = await s.write("pref.theme", "light");
        const f = await s.forget("pref.theme");
        const w2 = await s.write("pref.theme", "dark");
        await s.gc();
        await s.compact();
        expect(await s.read("pref.theme")).toEqual({ status: "OK", value: "dark", version: w2.version, generation: w2.generation, scope: "global" });
        // The seed's tell: a CAS on the old version must see the new one, not a value-less slot.
        const err = await s.write("pref.theme", "x", { expectedVersion: w1.version }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(VersionConflictError);
        expect(err).toMatchObject({ code: "VERSION_CONFLICT", expected: w1.version, actual: w2.version });
        await s.close();
        s = await h.reopen(dir, options);
        await s.gc();
        expect(await s.read("pref.theme")).toMatchObject({ status: "OK", value: "dark", version: w2.version });
        const p = await s.probe("pref.theme");
        expect(p).toMatchObject({ state: "live", version: w2.version, generation: w2.generation });
        expect(f.tombstoneSeq).toBeLessThan(w2.version);
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["unsafeGc"], "the same sequence under unsafe.gcKeyedBy 'tombstone-seq' loses the write (the test can tell)", async () => {
      const { store } = await h.fresh({ ...FAST, unsafe: { gcKeyedBy: "tombstone-seq" } });
      try {
        await store.write("pref.theme", "light");
        await store.forget("pref.theme");
        const w2 = await store.write("pref.theme", "dark");
        await store.gc();
        expect(await store.read("pref.theme")).toEqual({ status: "NOT_FOUND" });
        // The half-reclaimed slot: the version survived, the value did not.
        expect(await store.probe("pref.theme")).toMatchObject({ valuePresent: false, retentionPresent: true, version: w2.version });
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("result shapes (API.md)", () => {
    h.it("every operation returns the documented shape", async () => {
      const { store } = await h.fresh();
      try {
        const w = await store.write("k", "v", { scope: "user:a" });
        expect(Object.keys(w).sort()).toEqual(["generation", "ok", "version"]);
        expect(w).toEqual({ ok: true, version: expect.any(Number), generation: expect.any(Number) });
        expect(Number.isSafeInteger(w.version) && w.version >= 1).toBe(true);
        expect(Number.isSafeInteger(w.generation) && w.generation >= 1).toBe(true);
  
        const r = await store.read("k", { scope: "user:a" });
        expect(r).toEqual({ status: "OK", value: "v", version: w.version, generation: w.generation, scope: "user:a" });
        expect(await syncRead(h, store, "k", { scope: "user:a" })).toEqual(r);
        expect(await store.read("nope")).toEqual({ status: "NOT_FOUND" });
        expect(await syncRead(h, store, "nope")).toEqual({ status: "NOT_FOUND" });
  
        const p = await store.probe("k", { scope: "user:a" });
        expect(Object.keys(p).sort()).toEqual(["expiresAt", "generation", "physicalRecords", "retentionPresent", "state", "tombstoneSeq", "valuePresent", "version"]);
  
        const f0 = await store.forget("nope");
        expect(f0).toEqual({ ok: true, tombstoneSeq: null, generation: null });
        const f = await store.forget("k", { scope: "user:a" });
        expect(f).toEqual({ ok: true, tombstoneSeq: expect.any(Number), generation: w.generation });
        const again = await store.forget("k", { scope: "user:a" });
        expect(again).toEqual({ ok: true, tombstoneSeq: null, generation: w.generation });
  
        const u = await store.undelete("k", { scope: "user:a" });
        expect(u).toEqual({ ok: true, generation: w.generation + 1 });
        expect(await store.probe("k", { scope: "user:a" })).toMatchObject({ state: "absent", valuePresent: false, retentionPresent: true, generation: w.generation + 1 });
        expect(await store.read("k", { scope: "user:a" })).toEqual({ status: "NOT_FOUND" });
        const afterUndelete = await store.write("k", "v2", { scope: "user:a" });
        expect(afterUndelete.generation).toBe(w.generation + 1);
  
        const b = await store.batch([
          { op: "write", key: "b1", value: "1" },
          { op: "forget", key: "b1" },
          { op: "forget", key: "never" },
        ]);
        expect(b).toEqual([
          { ok: true, version: expect.any(Number), generation: 1 },
          { ok: true, tombstoneSeq: expect.any(Number), generation: 1 },
          { ok: true, tombstoneSeq: null, generation: null },
        ]);
        const b0 = b[0] as { version: number };
        const b1 = b[1] as { tombstoneSeq: number };
        expect(b1.tombstoneSeq).toBeGreaterThan(b0.version);
  
        await store.write("s", "1", { scope: "user:b/session:1" });
        const fs1 = await store.forgetScope("user:b");
        expect(fs1).toEqual({ ok: true, tombstoneSeq: expect.any(Number), slots: 1 });
        await store.write("s", "1", { scope: "user:c" });
        const fs2 = await store.forgetScope("user:c", { reclaim: "eager" });
        expect(fs2).toEqual({ ok: true, tombstoneSeq: expect.any(Number), slots: 1, reclaimedBytes: expect.any(Number) });
        expect(fs2.tombstoneSeq).toBeGreaterThan(fs1.tombstoneSeq);
  
        const listed = await collect(store.list({ scope: "user:a" }));
        expect(listed).toEqual([{ key: "k", scope: "user:a", version: afterUndelete.version }]);
  
        const st = store.stats();
        for (const k of ["liveBytes", "deadBytes", "totalBytes", "slots", "liveSlots", "tombstones", "scopes", "sequence", "pendingGcSegments", "compactions"] as const) {
          expect(typeof st[k], k).toBe("number");
        }
        expect(Array.isArray(st.segments)).toBe(true);
        expect(st.sequence).toBeGreaterThanOrEqual(fs2.tombstoneSeq);
  
        const c = await store.compact();
        expect(c).toMatchObject({ segments: expect.any(Array), mode: "copy-on-write", bytesBefore: expect.any(Number), bytesAfter: expect.any(Number), recordsKept: expect.any(Number), recordsDropped: expect.any(Number), durationMs: expect.any(Number) });
        const g = await store.gc();
        expect(g).toMatchObject({ segments: expect.any(Array), retentionRecordsDropped: expect.any(Number) });
  
        const v = await store.verify();
        expect(v).toEqual({ ok: true, segments: expect.any(Number), records: expect.any(Number), bytes: expect.any(Number), problems: [] });
      } finally {
        await store.close();
      }
    });
  
    h.it("errors extend EngramError and carry their code", async () => {
      expect(new InvalidArgumentError("x")).toBeInstanceOf(EngramError);
      expect(new InvalidArgumentError("x").code).toBe("INVALID_ARGUMENT");
      expect(new StoreClosedError().code).toBe("CLOSED");
      expect(new StoreLockedError("/d").code).toBe("STORE_LOCKED");
      expect(new CorruptionError(3, 128, "x")).toMatchObject({ code: "CORRUPTION", segment: 3, offset: 128 });
      expect(new ScopeErasedDuringRead("global", 1, 3, "x")).toMatchObject({ code: "SCOPE_ERASED_DURING_READ", scope: "global", authorizedGeneration: 1, liveGeneration: 3 });
    });

    h.it("an option name far from every known one is ignored (a caller's own fields pass); a near miss is refused", async () => {
      const { store } = await h.fresh();
      try {
        const own = { scope: "user:a", traceId: "t-1", requestedBy: "agent" } as const;
        const w = await store.write("k", "v", own);
        expect(await store.read("k", own)).toEqual({ status: "OK", value: "v", version: w.version, generation: w.generation, scope: "user:a" });
        expect((await store.batch([{ op: "write", key: "b", value: "1", scope: "user:a", ...{ traceId: "t-2" } }]))[0]).toMatchObject({ ok: true });
        const refused = await store.write("k2", "v", { scop: "user:a" } as never).then(() => null, (err: unknown) => err);
        expect(refused).toBeInstanceOf(InvalidArgumentError);
        expect((refused as Error).message).toContain('did you mean "scope"');
        expect(await store.read("k2")).toEqual({ status: "NOT_FOUND" });
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("tombstones and compare-and-set", () => {
    h.it("require-clear: a plain write to a tombstoned slot is TombstonedSlotError with the tombstone seq, nothing written", async () => {
      const { store } = await h.fresh({ ...FAST, tombstoneWrites: "require-clear" });
      try {
        const w1 = await store.write("k", "v1");
        const f = await store.forget("k");
        const seq = store.stats().sequence;
        const err = await store.write("k", "v2").catch((e: unknown) => e);
        expect(err).toBeInstanceOf(TombstonedSlotError);
        expect(err).toMatchObject({ code: "TOMBSTONED", tombstoneSeq: f.tombstoneSeq });
        expect(store.stats().sequence).toBe(seq);
        expect(await store.read("k")).toEqual({ status: "NOT_FOUND" });
        // Also inside a batch: the whole batch is refused.
        await expect(store.batch([{ op: "write", key: "other", value: "x" }, { op: "write", key: "k", value: "v2" }])).rejects.toBeInstanceOf(TombstonedSlotError);
        expect(store.stats().sequence).toBe(seq);
        expect(await store.read("other")).toEqual({ status: "NOT_FOUND" });
  
        const w2 = await store.write("k", "v2", { clearTombstone: true });
        expect(w2).toEqual({ ok: true, version: expect.any(Number), generation: w1.generation + 1 });
        expect(w2.version).toBeGreaterThan(seq);
        expect(await store.read("k")).toMatchObject({ status: "OK", value: "v2", generation: w1.generation + 1 });
  
        // undelete, then a plain write is allowed and keeps the undeleted generation.
        await store.forget("k");
        await expect(store.write("k", "v3")).rejects.toMatchObject({ code: "TOMBSTONED" });
        const u = await store.undelete("k");
        expect(u.generation).toBe(w2.generation + 1);
        const w3 = await store.write("k", "v3");
        expect(w3.generation).toBe(u.generation);
      } finally {
        await store.close();
      }
    });
  
    h.it("forgetScope tombstones the slots below it: require-clear refuses, auto-clear bumps the generation", async () => {
      const { store } = await h.fresh({ ...FAST, tombstoneWrites: "require-clear" });
      try {
        const w = await store.write("k", "v", { scope: "user:a/session:1" });
        const e = await store.forgetScope("user:a");
        await expect(store.write("k", "v2", { scope: "user:a/session:1" })).rejects.toMatchObject({ code: "TOMBSTONED", tombstoneSeq: e.tombstoneSeq });
        const w2 = await store.write("k", "v2", { scope: "user:a/session:1", clearTombstone: true });
        expect(w2.generation).toBe(w.generation + 1);
      } finally {
        await store.close();
      }
    });
  
    // An undeleted slot is empty and writable, but it still has a history (a retention record and,
    // until reclaimed, the killed version's bytes). A later erasure of its scope is a new forget
    // that covers it like every other slot the scope holds: eager reclaims the old bytes, probe says
    // "reclaimed" with the erasure's sequence, and under require-clear a plain write is refused.
    // (Issue 9's kill campaign first flagged this as a violation; the model was wrong, not the store.)
    h.it("forgetScope after undelete kills the slot again: probe reclaimed with the erasure's seq, require-clear refuses", async () => {
      const { store } = await h.fresh({ ...FAST, tombstoneWrites: "require-clear" });
      try {
        await store.write("k", "v1", { scope: "user:a" });
        await store.forgetScope("user:a", { reclaim: "lazy" });
        await store.undelete("k", { scope: "user:a" });
        const undeleted = await store.probe("k", { scope: "user:a" });
        expect(undeleted).toMatchObject({ state: "absent", valuePresent: false });
        const e = await store.forgetScope("user:a", { reclaim: "eager" });
        const p = await store.probe("k", { scope: "user:a" });
        expect(p).toMatchObject({ state: "reclaimed", valuePresent: false, retentionPresent: true, physicalRecords: 0, tombstoneSeq: e.tombstoneSeq });
        await expect(store.write("k", "v2", { scope: "user:a" })).rejects.toMatchObject({ code: "TOMBSTONED", tombstoneSeq: e.tombstoneSeq });
        const w = await store.write("k", "v2", { scope: "user:a", clearTombstone: true });
        expect(await store.read("k", { scope: "user:a" })).toMatchObject({ value: "v2", version: w.version });
      } finally {
        await store.close();
      }
    });

    h.it("expectedVersion mismatches are VersionConflictError {expected, actual}; matches write", async () => {
      const { store } = await h.fresh();
      try {
        const conflict = async (p: Promise<unknown>, expected: number | null, actual: number | null): Promise<void> => {
          const seq = store.stats().sequence;
          const err = await p.catch((e: unknown) => e);
          expect(err).toBeInstanceOf(VersionConflictError);
          expect(err).toMatchObject({ code: "VERSION_CONFLICT", expected, actual });
          expect(store.stats().sequence).toBe(seq);
        };
        await conflict(store.write("k", "x", { expectedVersion: 7 }), 7, null);
        const w1 = await store.write("k", "a", { expectedVersion: null });
        await conflict(store.write("k", "x", { expectedVersion: null }), null, w1.version);
        await conflict(store.write("k", "x", { expectedVersion: w1.version + 50 }), w1.version + 50, w1.version);
        const w2 = await store.write("k", "b", { expectedVersion: w1.version });
        expect(w2.version).toBeGreaterThan(w1.version);
        await conflict(store.write("k", "x", { expectedVersion: w1.version }), w1.version, w2.version);
        // A forgotten slot has no live version: only null matches.
        await store.forget("k");
        await conflict(store.write("k", "x", { expectedVersion: w2.version }), w2.version, null);
        const w3 = await store.write("k", "c", { expectedVersion: null });
        expect(w3.generation).toBe(w2.generation + 1);
        expect(await store.read("k")).toMatchObject({ value: "c", version: w3.version });
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("queued operations decide like sequential ones", () => {
    // In every durability mode versions, generations and compare-and-set are decided when an
    // operation is queued (DESIGN.md I10), so operations issued in one turn without awaiting must
    // get exactly what they get when each is awaited before the next is issued.
    async function both(setup: (s: ConformanceStore) => Promise<void>, ops: Array<(s: ConformanceStore) => Promise<unknown>>, options: OpenOptions): Promise<[unknown[], unknown[]]> {
      const outcome = (r: PromiseSettledResult<unknown>): unknown => (r.status === "fulfilled" ? r.value : { error: (r.reason as { code?: string }).code ?? String(r.reason) });
      const sequential: unknown[] = [];
      {
        const { store } = await h.fresh(options);
        try {
          await setup(store);
          for (const op of ops) sequential.push(outcome((await Promise.allSettled([op(store)]))[0] as PromiseSettledResult<unknown>));
        } finally {
          await store.close();
        }
      }
      const { store } = await h.fresh(options);
      try {
        await setup(store);
        const queued = (await Promise.allSettled(ops.map((op) => op(store)))).map(outcome);
        return [sequential, queued];
      } finally {
        await store.close();
      }
    }
  
    for (const durability of ["none", "sync"] as const) {
      h.it(`a write queued behind forgetScope sees the erasure of an undeleted slot (durability ${durability})`, async () => {
        for (const tombstoneWrites of ["require-clear", "auto-clear"] as const) {
          const [sequential, queued] = await both(
            async (s) => {
              await s.write("k", "v1", { scope: "user:a" });
              await s.forget("k", { scope: "user:a" });
              await s.undelete("k", { scope: "user:a" });
            },
            [(s) => s.forgetScope("user:a"), (s) => s.write("k", "v2", { scope: "user:a" })],
            { ...FAST, durability, tombstoneWrites },
          );
          expect(queued, tombstoneWrites).toEqual(sequential);
        }
      });
    }
  
    h.it("a write queued behind forgetScope sees the erasure of an expired slot", async () => {
      let now = 1_000_000;
      const [sequential, queued] = await both(
        async (s) => {
          await s.write("k", "v1", { scope: "user:a/session:1", ttlMs: 10 });
          now += 100;
        },
        [(s) => s.forgetScope("user:a"), (s) => s.write("k", "v2", { scope: "user:a/session:1" })],
        { ...FAST, clock: () => now },
      );
      expect(queued).toEqual(sequential);
    });
  
    h.it("writes, forgets, undeletes and CAS queued in one turn", async () => {
      const [sequential, queued] = await both(
        async (s) => {
          await s.write("a", "0");
        },
        [
          (s) => s.write("a", "1", { expectedVersion: 1 }),
          (s) => s.write("a", "2", { expectedVersion: 1 }),
          (s) => s.forget("a"),
          (s) => s.write("a", "3", { expectedVersion: null }),
          (s) => s.forget("a"),
          (s) => s.undelete("a"),
          (s) => s.write("a", "4"),
          (s) => s.batch([{ op: "forget", key: "a" }, { op: "write", key: "a", value: "5" }]),
          (s) => s.read("a"),
        ],
        FAST,
      );
      expect(queued.slice(0, -1)).toEqual(sequential.slice(0, -1));
    });
  });
  
  h.describe("scopes, inheritance and list", () => {
    h.it("inherited reads report the scope the value was found in", async () => {
      const { store } = await h.fresh();
      try {
        const g = await store.write("theme", "global-dark");
        const a = await store.write("theme", "alice-light", { scope: "user:alice" });
        const deep = "user:alice/session:42";
        expect(await store.read("theme", { scope: deep })).toEqual({ status: "OK", value: "alice-light", version: a.version, generation: a.generation, scope: "user:alice" });
        expect(await syncRead(h, store, "theme", { scope: deep })).toMatchObject({ scope: "user:alice" });
        expect(await store.read("theme", { scope: deep, inherit: false })).toEqual({ status: "NOT_FOUND" });
        expect(await store.read("theme", { scope: "user:bob" })).toMatchObject({ value: "global-dark", scope: "global", version: g.version });
        // forget affects only the exact scope
        await store.forget("theme", { scope: deep });
        expect(await store.read("theme", { scope: "user:alice" })).toMatchObject({ value: "alice-light" });
        await store.forget("theme", { scope: "user:alice" });
        expect(await store.read("theme", { scope: deep })).toMatchObject({ value: "global-dark", scope: "global" });
        expect(await store.read("theme")).toMatchObject({ value: "global-dark" });
        // forgetScope erases the scope and descendants, never ancestors or siblings
        await store.write("k", "s", { scope: deep });
        await store.write("k", "a", { scope: "user:alice" });
        await store.write("k", "b", { scope: "user:bob" });
        await store.write("k", "g");
        await store.forgetScope("user:alice");
        expect(await store.read("k", { scope: deep })).toMatchObject({ value: "g", scope: "global" });
        expect(await store.read("k", { scope: "user:bob" })).toMatchObject({ value: "b" });
        // a new write in an erased scope is visible again
        await store.write("k", "s2", { scope: deep });
        expect(await store.read("k", { scope: deep })).toMatchObject({ value: "s2", scope: deep });
      } finally {
        await store.close();
      }
    });
  
    h.it("list: live keys in key order, nearest scope wins, prefix, limit, inherit", async () => {
      const { store } = await h.fresh();
      try {
        const v: Record<string, number> = {};
        for (const [scope, key] of [
          ["global", "b"], ["global", "a"], ["global", "pref.z"], ["user:x", "b"], ["user:x", "pref.a"], ["user:x/session:1", "c"], ["user:y", "a"],
        ] as const) {
          v[`${scope}|${key}`] = (await store.write(key, `${scope}:${key}`, { scope })).version;
        }
        await store.write("gone", "1", { scope: "user:x" });
        await store.forget("gone", { scope: "user:x" });
        const deep = "user:x/session:1";
        expect(await collect(store.list({ scope: deep }))).toEqual([
          { key: "a", scope: "global", version: v["global|a"] },
          { key: "b", scope: "user:x", version: v["user:x|b"] },
          { key: "c", scope: deep, version: v[`${deep}|c`] },
          { key: "pref.a", scope: "user:x", version: v["user:x|pref.a"] },
          { key: "pref.z", scope: "global", version: v["global|pref.z"] },
        ]);
        expect(await collect(store.list({ scope: deep, inherit: false }))).toEqual([{ key: "c", scope: deep, version: v[`${deep}|c`] }]);
        expect((await collect(store.list({ scope: deep, prefix: "pref." }))).map((e) => e.key)).toEqual(["pref.a", "pref.z"]);
        expect((await collect(store.list({ scope: deep, limit: 2 }))).map((e) => e.key)).toEqual(["a", "b"]);
        expect((await collect(store.list({ scope: "user:x", prefix: "pref.", limit: 1 }))).map((e) => e.key)).toEqual(["pref.a"]);
        expect((await collect(store.list())).map((e) => `${e.scope}|${e.key}`)).toEqual(["global|a", "global|b", "global|pref.z"]);
        expect(await collect(store.list({ prefix: "zzz" }))).toEqual([]);
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("TTL against an injected clock", () => {
    h.itWith(["reopen"], "per-write ttlMs, scope patterns and the store default; expired reads NOT_FOUND and probes expired", async () => {
      let now = 1_000_000;
      const options: OpenOptions = {
        ...FAST,
        clock: () => now,
        retention: { ttlMs: 10_000, scopes: { "user:*/session:*": { ttlMs: 1_000 }, "user:keep": { ttlMs: null } } },
      };
      let store = await h.open(options);
      const dir = store;
      try {
        await store.write("d", "default");
        await store.write("s", "session", { scope: "user:a/session:1" });
        await store.write("w", "per-write", { ttlMs: 5_000, scope: "user:a/session:1" });
        await store.write("n", "never", { ttlMs: null });
        await store.write("keep", "kept", { scope: "user:keep" });
        await store.write("s", "user-level", { scope: "user:a" });
        expect(await store.probe("s", { scope: "user:a/session:1" })).toMatchObject({ state: "live", expiresAt: 1_000_000 + 1_000 });
        expect(await store.probe("d")).toMatchObject({ expiresAt: 1_000_000 + 10_000 });
        expect(await store.probe("n")).toMatchObject({ expiresAt: null });
        expect(await store.probe("keep", { scope: "user:keep" })).toMatchObject({ expiresAt: null });
  
        now += 999;
        expect(await store.read("s", { scope: "user:a/session:1" })).toMatchObject({ value: "session" });
        now += 1;
        // expired in the session: the read falls through to the parent scope
        expect(await store.read("s", { scope: "user:a/session:1" })).toMatchObject({ value: "user-level", scope: "user:a" });
        expect(await store.read("s", { scope: "user:a/session:1", inherit: false })).toEqual({ status: "NOT_FOUND" });
        expect(await store.probe("s", { scope: "user:a/session:1" })).toMatchObject({ state: "expired", valuePresent: false, retentionPresent: true, expiresAt: 1_001_000 });
        expect((await collect(store.list({ scope: "user:a/session:1", inherit: false }))).map((e) => e.key)).toEqual(["w"]);
  
        await store.close();
        store = await h.reopen(dir, options);
        now += 4_000;
        expect(await store.read("w", { scope: "user:a/session:1" })).toEqual({ status: "NOT_FOUND" });
        expect(await store.read("d")).toMatchObject({ value: "default" });
        now += 5_000;
        expect(await store.read("d")).toEqual({ status: "NOT_FOUND" });
        expect(await store.probe("d")).toMatchObject({ state: "expired" });
        expect(await store.read("n")).toMatchObject({ value: "never" });
        expect(await store.read("keep", { scope: "user:keep" })).toMatchObject({ value: "kept" });
        // forget of an expired value: nothing live, nothing written
        const seq = store.stats().sequence;
        expect(await store.forget("d")).toMatchObject({ ok: true, tombstoneSeq: null });
        expect(store.stats().sequence).toBe(seq);
        // expired values are reclaimable; live ones are not touched
        await store.gc();
        expect(await store.read("n")).toMatchObject({ value: "never" });
        expect(await store.read("d")).toEqual({ status: "NOT_FOUND" });
        const w = await store.write("d", "again");
        expect(w.version).toBeGreaterThan(seq);
        expect(await store.read("d")).toMatchObject({ value: "again" });
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("batch", () => {
    h.itWith(["reopen"], "is atomic when a compare-and-set fails half-way: nothing is written, before or after a reopen", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const base = await s.write("a", "a0");
        await s.write("gone", "g0");
        const seq = s.stats().sequence;
        const err = await s
          .batch([
            { op: "write", key: "a", value: "a1", expectedVersion: base.version },
            { op: "write", key: "new", value: "n1", scope: "user:z" },
            { op: "forget", key: "gone" },
            { op: "write", key: "a", value: "a2", expectedVersion: base.version }, // stale: a1 got a new version
            { op: "write", key: "late", value: "l" },
          ])
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(VersionConflictError);
        expect(err).toMatchObject({ code: "VERSION_CONFLICT", expected: base.version });
        expect((err as VersionConflictError).actual).toBeGreaterThan(seq);
        const check = async (st: ConformanceStore): Promise<void> => {
          expect(st.stats().sequence).toBe(seq);
          expect(await st.read("a")).toMatchObject({ value: "a0", version: base.version });
          expect(await st.read("new", { scope: "user:z" })).toEqual({ status: "NOT_FOUND" });
          expect(await st.probe("new", { scope: "user:z" })).toEqual(ABSENT);
          expect(await st.read("gone")).toMatchObject({ value: "g0" });
          expect(await st.read("late")).toEqual({ status: "NOT_FOUND" });
        };
        await check(s);
        await s.close();
        s = await h.reopen(dir, options);
        await check(s);
        // A good batch after it: rows see each other in order.
        const r = await s.batch([
          { op: "write", key: "a", value: "a1", expectedVersion: base.version },
          { op: "forget", key: "a" },
          { op: "write", key: "a", value: "a2", expectedVersion: null },
        ]);
        expect(r).toEqual([
          { ok: true, version: expect.any(Number), generation: base.generation },
          { ok: true, tombstoneSeq: expect.any(Number), generation: base.generation },
          { ok: true, version: expect.any(Number), generation: base.generation + 1 },
        ]);
        const [r0, r1, r2] = r as unknown as [{ version: number }, { tombstoneSeq: number }, { version: number }];
        expect(r0.version).toBeGreaterThan(seq);
        expect(r1.tombstoneSeq).toBeGreaterThan(r0.version);
        expect(r2.version).toBeGreaterThan(r1.tombstoneSeq);
        expect(await s.read("a")).toMatchObject({ value: "a2", version: r2.version, generation: base.generation + 1 });
        expect(await s.batch([])).toEqual([]);
      } finally {
        await s.close();
      }
    });
  });
  
  h.describe("values", () => {
    h.itWith(["reopen"], "round-trip as the kind written: string stays string, Uint8Array stays bytes, across a reopen", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
      const cases: Array<[string, string | Uint8Array]> = [
        ["empty-string", ""],
        ["text", "hello"],
        ["unicode", "é€😀 — ünïcödé"],
        ["nul-in-string", "a\u0000b"],
        ["looks-like-bytes", "\u0001\u0002\u0003"],
        ["empty-bytes", new Uint8Array(0)],
        ["bytes", new Uint8Array([0, 1, 2, 254, 255])],
        ["view", backing.subarray(2, 5)],
        ["buffer", Buffer.from("buffer text")],
        ["big", "x".repeat(200_000)],
      ];
      try {
        for (const [k, v] of cases) await s.write(k, v);
        const check = async (st: ConformanceStore): Promise<void> => {
          for (const [k, v] of cases) {
            for (const r of [await st.read(k), await syncRead(h, st, k)]) {
              if (r.status !== "OK") throw new Error(`${k} not found`);
              if (typeof v === "string") {
                expect(typeof r.value, k).toBe("string");
                expect(r.value, k).toBe(v);
              } else {
                expect(r.value, k).toBeInstanceOf(Uint8Array);
                expect(Array.from(r.value as Uint8Array), k).toEqual(Array.from(v));
              }
            }
          }
        };
        await check(s);
        await s.close();
        s = await h.reopen(dir, options);
        await check(s);
        await s.compact();
        await check(s);
      } finally {
        await s.close();
      }
    });
  
    h.it("a returned Uint8Array is the caller's own copy", async () => {
      const { store } = await h.fresh();
      try {
        const input = new Uint8Array([1, 2, 3]);
        await store.write("k", input);
        input[0] = 99;
        const r = await store.read("k");
        expect(Array.from((r as { value: Uint8Array }).value)).toEqual([1, 2, 3]);
        (r as { value: Uint8Array }).value[1] = 77;
        expect(Array.from(((await store.read("k")) as { value: Uint8Array }).value)).toEqual([1, 2, 3]);
      } finally {
        await store.close();
      }
    });
  });
  
  h.describe("close", () => {
    h.it("every call after close() is StoreClosedError (code CLOSED); close is idempotent", async () => {
      const { store } = await h.fresh();
      await store.write("k", "v");
      await store.close();
      await store.close();
      await Promise.all([store.close(), store.close()]);
      const calls: Array<[string, () => unknown]> = [
        ["write", () => store.write("k", "v")],
        ["read", () => store.read("k")],
        ["readSync", () => store.readSync("k")],
        ["forget", () => store.forget("k")],
        ["forgetScope", () => store.forgetScope("user:a")],
        ["undelete", () => store.undelete("k")],
        ["probe", () => store.probe("k")],
        ["list", async () => collect(store.list())],
        ["batch", () => store.batch([{ op: "write", key: "k", value: "v" }])],
        ["compact", () => store.compact()],
        ["gc", () => store.gc()],
        ["stats", () => store.stats()],
        ["verify", () => store.verify()],
      ];
      for (const [name, call] of calls) {
        const err = await (async () => call())().then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, name).toBeInstanceOf(StoreClosedError);
        expect((err as StoreClosedError).code, name).toBe("CLOSED");
      }
    });
  
    h.itWith(["reopen"], "close() waits for writes in flight, and a reopen sees them", async () => {
      const { store, dir } = await h.fresh({});
      const pending = Array.from({ length: 50 }, (_, i) => store.write(`k${i}`, `v${i}`));
      const closing = store.close();
      const results = await Promise.all(pending);
      await closing;
      const s = await h.reopen(dir, {});
      try {
        for (let i = 0; i < 50; i++) expect(await s.read(`k${i}`)).toMatchObject({ value: `v${i}`, version: results[i]?.version });
      } finally {
        await s.close();
      }
    });
  });
  
  h.describe("versions", () => {
    h.itWith(["reopen"], "are never reused, even after the slots are fully reclaimed and the store restarts", async () => {
      let now = 1_000_000;
      const options: OpenOptions = { ...FAST, clock: () => now, retention: { tombstoneRetentionMs: 0 } };
      let s = await h.open(options);
      const dir = s;
      let max = 0;
      const seen = new Set<number>();
      const note = (v: number | null): void => {
        expect(v).not.toBeNull();
        expect(v as number).toBeGreaterThan(max);
        expect(seen.has(v as number)).toBe(false);
        seen.add(v as number);
        max = v as number;
      };
      try {
        for (let round = 0; round < 4; round++) {
          note((await s.write("k", `v${round}`)).version);
          note((await s.forget("k")).tombstoneSeq);
          note((await s.write("t", "x", { ttlMs: 10 })).version);
          now += 1_000;
          await s.gc();
          now += 1_000;
          await s.gc();
          expect(await s.probe("k")).toMatchObject({ valuePresent: false });
          expect(s.stats().sequence).toBeGreaterThanOrEqual(max);
          await s.close();
          s = await h.reopen(dir, options);
          expect(s.stats().sequence).toBeGreaterThanOrEqual(max);
          const w = await s.write("k", "again");
          note(w.version);
          expect(await s.read("k")).toMatchObject({ value: "again", version: w.version });
          note((await s.forget("k")).tombstoneSeq);
        }
      } finally {
        await s.close();
      }
    });
  });
  
  h.describe("durability modes", () => {
    for (const durability of ["sync", "batch", "none"] as const) {
      h.itWith(["reopen"], `"${durability}" writes, and a reopen reads everything back`, async () => {
        const options: OpenOptions = { durability, syncIntervalMs: 5 };
        let s = await h.open(options);
        const dir = s;
        try {
          const ws = await Promise.all(Array.from({ length: 40 }, (_, i) => s.write(`k${i}`, `v${i}`, { scope: i % 2 === 0 ? "global" : "user:a" })));
          const versions = ws.map((w) => w.version);
          expect(new Set(versions).size).toBe(40);
          await s.forget("k0");
          await s.batch([{ op: "write", key: "b", value: "1" }, { op: "write", key: "c", value: new Uint8Array([2]) }]);
          if (durability === "batch") await new Promise((r) => setTimeout(r, 30));
          await s.close();
          s = await h.reopen(dir, options);
          expect(await s.read("k0")).toEqual({ status: "NOT_FOUND" });
          for (let i = 1; i < 40; i++) {
            expect(await s.read(`k${i}`, { scope: i % 2 === 0 ? "global" : "user:a" })).toMatchObject({ status: "OK", value: `v${i}`, version: versions[i] });
          }
          expect(await s.read("b")).toMatchObject({ value: "1" });
          expect(await s.read("c")).toMatchObject({ value: new Uint8Array([2]) });
          const next = await s.write("after", "x");
          expect(next.version).toBeGreaterThan(Math.max(...versions));
        } finally {
          await s.close();
        }
      });
    }
  });
  
  h.describe("reclamation changes no live value and keeps retention records", () => {
    for (const mode of ["copy-on-write", "in-place"] as const) {
      h.itWith(["reopen", "inPlaceCompaction"], `compact({mode: "${mode}"}) keeps the live value of an overwritten key`, async () => {
        const { store, dir, options } = await h.fresh({ ...FAST, compaction: { workers: 0, auto: false, mode } });
        let s = store;
        try {
          await s.write("k", "v1");
          const w2 = await s.write("k", "v2");
          await s.write("other", "o");
          await s.compact({ mode });
          expect(await s.read("k")).toEqual({ status: "OK", value: "v2", version: w2.version, generation: w2.generation, scope: "global" });
          expect(await s.probe("k")).toMatchObject({ state: "live", valuePresent: true, physicalRecords: 1 });
          expect(await s.read("other")).toMatchObject({ value: "o" });
          await s.gc();
          expect(await s.read("k")).toMatchObject({ value: "v2" });
          await s.close();
          s = await h.reopen(dir, options);
          expect(await s.read("k")).toMatchObject({ value: "v2", version: w2.version });
        } finally {
          await s.close();
        }
      });
    }
  
    h.itWith(["reopen", "inPlaceCompaction"], "two in-place compactions and a restart keep an overwritten key's live value (acknowledged write never lost)", async () => {
      const options: OpenOptions = { ...FAST, compaction: { workers: 0, auto: false, mode: "in-place" } };
      const { store, dir } = await h.fresh(options);
      let s = store;
      try {
        await s.write("k", "v1");
        const w2 = await s.write("k", "v2");
        await s.compact({ mode: "in-place" });
        await s.compact({ mode: "in-place" });
        await s.gc();
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.read("k")).toEqual({ status: "OK", value: "v2", version: w2.version, generation: w2.generation, scope: "global" });
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["reopen"], "forget then gc: the slot is reclaimed with its retention record (version, generation, tombstone), also after a reopen", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const w = await s.write("k", "v");
        const f = await s.forget("k");
        await s.gc();
        const want = { state: "reclaimed", valuePresent: false, retentionPresent: true, physicalRecords: 0, version: w.version, generation: w.generation, tombstoneSeq: f.tombstoneSeq };
        expect(await s.probe("k")).toMatchObject(want);
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.probe("k")).toMatchObject(want);
        const w2 = await s.write("k", "v2");
        expect(w2.generation).toBe(w.generation + 1);
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["reopen"], "a restart does not change a reclaimed slot: an expired re-write after forget keeps its version, generation and writability", async () => {
      let now = 1_000_000;
      const options: OpenOptions = { ...FAST, clock: () => now, tombstoneWrites: "require-clear" };
      const { store, dir } = await h.fresh(options);
      let s = store;
      try {
        await s.write("k", "v1");
        await s.forget("k");
        const w2 = await s.write("k", "v2", { ttlMs: 1_000, clearTombstone: true });
        now += 2_000;
        await s.gc();
        await s.gc();
        const before = await s.probe("k");
        expect(before).toMatchObject({ valuePresent: false, retentionPresent: true, version: w2.version, generation: w2.generation });
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.probe("k")).toEqual(before);
        // Not tombstoned (the value expired; nothing forgot it since): a plain write is allowed, as before the restart.
        const w3 = await s.write("k", "v3");
        expect(w3.generation).toBe(w2.generation);
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["reopen"], "an expired re-write after forget, reclaimed past its window: a restart changes neither probe nor writability", async () => {
      // Found by an audit (fifty-third session): the value that cleared the tombstone went first,
      // the tombstone stayed for the slot's window, and a restart found the slot tombstoned again
      // at its old version and generation (require-clear then refused the write it allowed before).
      let now = 1_000_000;
      const retentionMs = 1_000;
      const options: OpenOptions = { ...FAST, clock: () => now, tombstoneWrites: "require-clear", retention: { tombstoneRetentionMs: retentionMs } };
      const { store, dir } = await h.fresh(options);
      let s = store;
      try {
        await s.write("k", "v1");
        await s.forget("k");
        await s.gc();
        await s.write("k", "v2", { ttlMs: 100, clearTombstone: true });
        await s.write("other", "o");
        now += 100 + retentionMs + 1;
        await s.gc();
        await s.gc();
        const before = await s.probe("k");
        expect(before.valuePresent).toBe(false);
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.probe("k")).toEqual(before);
        // Nothing forgot it since the clear: a plain write is allowed, as before the restart.
        expect((await s.write("k", "v3")).ok).toBe(true);
      } finally {
        await s.close();
      }
    });

    h.itWith(["reopen"], "two forgetScopes queued in one turn keep the erased slot's version across compact and reopen", async () => {
      // The second erasure is decided while the first is still queued: its erase list must still name
      // the version the first one killed (found by the model test: the version came back null).
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const [w] = await Promise.all([s.write("k", "v", { scope: "user:a" }), s.forgetScope("user:a"), s.forgetScope("user:a")]);
        await s.compact();
        const before = await s.probe("k", { scope: "user:a" });
        expect(before).toMatchObject({ state: "reclaimed", retentionPresent: true, version: w.version, generation: w.generation });
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.probe("k", { scope: "user:a" })).toEqual(before);
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["reopen"], "forgetScope then gc: the erased slots keep their retention record like forgotten ones, also after a reopen", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const w = await s.write("k", "v", { scope: "user:a/session:1" });
        const e = await s.forgetScope("user:a");
        expect(await s.probe("k", { scope: "user:a/session:1" })).toMatchObject({ state: "tombstoned", retentionPresent: true, tombstoneSeq: e.tombstoneSeq, generation: w.generation });
        await s.gc();
        // tombstoneRetentionMs (default 24 h) has not passed: the retention record must survive.
        const want = { state: "reclaimed", valuePresent: false, retentionPresent: true, physicalRecords: 0, version: w.version, generation: w.generation, tombstoneSeq: e.tombstoneSeq };
        expect(await s.probe("k", { scope: "user:a/session:1" })).toMatchObject(want);
        await s.close();
        s = await h.reopen(dir, options);
        expect(await s.probe("k", { scope: "user:a/session:1" })).toMatchObject(want);
        // and a write lands on a new generation, as after forget()
        const w2 = await s.write("k", "v2", { scope: "user:a/session:1" });
        expect(w2.generation).toBe(w.generation + 1);
      } finally {
        await s.close();
      }
    });
  
    h.itWith(["reopen"], "write, forget, write, forgetScope, gc, reopen: the retention record keeps the last version and generation", async () => {
      const { store, dir, options } = await h.fresh();
      let s = store;
      try {
        const scope = "user:b/session:2";
        await s.write("k", "v1", { scope });
        await s.forget("k", { scope });
        const w2 = await s.write("k", "v2", { scope });
        const e = await s.forgetScope("user:b");
        await s.gc();
        const want = { state: "reclaimed", valuePresent: false, retentionPresent: true, version: w2.version, generation: w2.generation, tombstoneSeq: e.tombstoneSeq };
        expect(await s.probe("k", { scope })).toMatchObject(want);
        await s.close();
        s = await h.reopen(dir, options);
        // Never an older version or generation after a restart.
        expect(await s.probe("k", { scope })).toMatchObject(want);
        const w3 = await s.write("k", "v3", { scope });
        expect(w3.generation).toBe(w2.generation + 1);
      } finally {
        await s.close();
      }
    });
  
    h.it("undelete then gc: the slot stays empty and writable ('absent' with its retention record)", async () => {
      const { store } = await h.fresh();
      try {
        const w = await store.write("k", "v");
        await store.forget("k");
        const u = await store.undelete("k");
        const before = await store.probe("k");
        expect(before).toMatchObject({ state: "absent", valuePresent: false, retentionPresent: true, generation: u.generation });
        await store.gc();
        expect(await store.probe("k")).toMatchObject({ state: "absent", valuePresent: false, retentionPresent: true, generation: u.generation });
        const w2 = await store.write("k", "v2");
        expect(w2.generation).toBe(w.generation + 1);
      } finally {
        await store.close();
      }
    });
  });
}
