/**
 * safeRewrite (src/safe-rewrite.ts): the write-after-forget guard of seed note 000.
 *
 * How it works: first over a small in-memory memory that implements only read / probe / write
 * of the API shapes (safeRewrite is specified over any such object), recording every write, so
 * each branch of the seed's logic is pinned: absent -> CAS on null; live -> CAS on the probed
 * version; retention without value -> HalfReclaimedSlotError and no write at all; with
 * clearTombstone -> a clearing write CAS'd on "no live value" (API.md's null); the scope reaches
 * both calls; a writer racing between probe and write surfaces as VERSION_CONFLICT. Then the same
 * guard over a real Engram: a forgotten key, a key reclaimed by gc(), and the seed's
 * half-reclaimed slot as reproduced by `unsafe: { gcKeyedBy: "tombstone-seq" }`.
 *
 * Properties stressed: no plain write ever lands on a slot whose retention record survives its
 * value; every write safeRewrite makes is a compare-and-set on what the probe saw.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HalfReclaimedSlotError, VersionConflictError } from "../rules/errors.js";
import { Engram } from "../src/index.js";
import { safeRewrite } from "../src/safe-rewrite.js";
import type { SafeRewriteMemory } from "../src/safe-rewrite.js";
import type { ProbeResult, ReadResult, ScopeOption, Value, WriteOptions, WriteResult } from "../src/types.js";

interface FakeSlot {
  value: Value | null;
  version: number;
  generation: number;
  tombstoneSeq: number | null;
}

/** An in-memory memory with the three calls safeRewrite uses; slots are keyed by scope + key. */
class FakeMemory implements SafeRewriteMemory {
  readonly slots = new Map<string, FakeSlot>();
  readonly writes: Array<{ key: string; value: Value; opts: WriteOptions }> = [];
  readonly probes: Array<{ key: string; opts: ScopeOption | undefined }> = [];
  seq = 0;
  /** Runs between a probe and the next write (to simulate a concurrent writer). */
  beforeWrite: (() => void) | null = null;

  private id(key: string, scope = "global"): string {
    return `${scope}\u0000${key}`;
  }

  set(key: string, slot: FakeSlot, scope?: string): void {
    this.slots.set(this.id(key, scope), slot);
  }

  async read(key: string, opts?: ScopeOption): Promise<ReadResult> {
    const s = this.slots.get(this.id(key, opts?.scope));
    if (s?.value == null) return { status: "NOT_FOUND" };
    return { status: "OK", value: s.value, version: s.version, generation: s.generation, scope: opts?.scope ?? "global" };
  }

  async probe(key: string, opts?: ScopeOption): Promise<ProbeResult> {
    this.probes.push({ key, opts });
    const s = this.slots.get(this.id(key, opts?.scope));
    if (s === undefined) {
      return { state: "absent", valuePresent: false, retentionPresent: false, physicalRecords: 0, version: null, generation: null, tombstoneSeq: null, expiresAt: null };
    }
    const live = s.value !== null;
    return {
      state: live ? "live" : "reclaimed",
      valuePresent: live,
      retentionPresent: true,
      physicalRecords: live ? 1 : 0,
      version: s.version,
      generation: s.generation,
      tombstoneSeq: s.tombstoneSeq,
      expiresAt: null,
    };
  }

  async write(key: string, value: Value, opts: WriteOptions = {}): Promise<WriteResult> {
    this.beforeWrite?.();
    this.writes.push({ key, value, opts });
    const s = this.slots.get(this.id(key, opts.scope));
    // API.md: expectedVersion is compared with the live version; null means "no live value".
    const current = s?.value == null ? null : s.version;
    if (opts.expectedVersion !== undefined && opts.expectedVersion !== current) {
      throw new VersionConflictError(opts.expectedVersion, current, key);
    }
    const generation = (s?.generation ?? 1) + (opts.clearTombstone === true && s?.tombstoneSeq != null ? 1 : 0);
    const version = ++this.seq + 1000;
    this.slots.set(this.id(key, opts.scope), { value, version, generation, tombstoneSeq: null });
    return { ok: true, version, generation };
  }
}

describe("safeRewrite over a fake memory (the seed's logic, branch by branch)", () => {
  it("absent slot: a fresh write that requires no live value", async () => {
    const m = new FakeMemory();
    await safeRewrite(m, "k", "v");
    expect(m.writes).toEqual([{ key: "k", value: "v", opts: { clearTombstone: false, expectedVersion: null } }]);
  });

  it("live slot: an overwrite CAS'd on the probed version", async () => {
    const m = new FakeMemory();
    m.set("k", { value: "old", version: 8, generation: 1, tombstoneSeq: null });
    const r = await safeRewrite(m, "k", "new");
    expect(m.writes[0]?.opts).toEqual({ clearTombstone: false, expectedVersion: 8 });
    expect(await m.read("k")).toMatchObject({ value: "new", version: r.version });
  });

  it("half-reclaimed slot: throws HalfReclaimedSlotError and writes nothing", async () => {
    const m = new FakeMemory();
    m.set("pref.theme", { value: null, version: 8, generation: 1, tombstoneSeq: 4417 });
    const err = await safeRewrite(m, "pref.theme", "dark").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HalfReclaimedSlotError);
    expect(err).toMatchObject({ code: "HALF_RECLAIMED", version: 8, tombstoneSeq: 4417 });
    expect((err as Error).message).toMatch(/clearTombstone/);
    expect(m.writes).toEqual([]);
  });

  it("half-reclaimed slot with clearTombstone: a clearing write CAS'd on \"still no live value\"", async () => {
    const m = new FakeMemory();
    m.set("pref.theme", { value: null, version: 8, generation: 1, tombstoneSeq: 4417 });
    const r = await safeRewrite(m, "pref.theme", "dark", { clearTombstone: true });
    expect(m.writes[0]?.opts).toEqual({ clearTombstone: true, expectedVersion: null });
    expect(r.generation).toBe(2);
  });

  it("a value written between the probe and a clearing write is not clobbered", async () => {
    const m = new FakeMemory();
    m.set("k", { value: null, version: 8, generation: 1, tombstoneSeq: 9 });
    m.beforeWrite = () => {
      m.beforeWrite = null;
      m.set("k", { value: "theirs", version: 10, generation: 2, tombstoneSeq: null });
    };
    await expect(safeRewrite(m, "k", "mine", { clearTombstone: true })).rejects.toBeInstanceOf(VersionConflictError);
    expect(await m.read("k")).toMatchObject({ value: "theirs" });
  });

  it("clearTombstone on a live or absent slot does not clear anything", async () => {
    const m = new FakeMemory();
    m.set("live", { value: "x", version: 3, generation: 1, tombstoneSeq: null });
    await safeRewrite(m, "live", "y", { clearTombstone: true });
    await safeRewrite(m, "absent", "y", { clearTombstone: true });
    expect(m.writes.map((w) => w.opts.clearTombstone)).toEqual([false, false]);
  });

  it("passes the scope to probe and write", async () => {
    const m = new FakeMemory();
    await safeRewrite(m, "k", "v", { scope: "user:alice" });
    expect(m.probes[0]).toEqual({ key: "k", opts: { scope: "user:alice" } });
    expect(m.writes[0]?.opts.scope).toBe("user:alice");
    expect(await m.read("k", { scope: "user:alice" })).toMatchObject({ value: "v" });
  });

  it("a writer racing between probe and write surfaces as VERSION_CONFLICT", async () => {
    const m = new FakeMemory();
    m.set("k", { value: "a", version: 5, generation: 1, tombstoneSeq: null });
    m.beforeWrite = () => {
      m.beforeWrite = null;
      m.set("k", { value: "b", version: 6, generation: 1, tombstoneSeq: null });
    };
    await expect(safeRewrite(m, "k", "c")).rejects.toBeInstanceOf(VersionConflictError);
    expect(await m.read("k")).toMatchObject({ value: "b" });
  });
});

describe("safeRewrite over a real Engram", () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "engram-safe-"));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  async function withStore(name: string, fn: (s: Engram) => Promise<void>, opts = {}): Promise<void> {
    const s = await Engram.open(join(root, name), opts);
    try {
      await fn(s);
    } finally {
      await s.close();
    }
  }

  it("fresh and live keys are written", async () => {
    await withStore("plain", async (s) => {
      const w1 = await safeRewrite(s, "k", "v1");
      const w2 = await safeRewrite(s, "k", "v2");
      expect(w2.version).toBeGreaterThan(w1.version);
      expect(await s.read("k")).toMatchObject({ status: "OK", value: "v2", version: w2.version });
    });
  });

  it("a forgotten key needs clearTombstone, which bumps the generation", async () => {
    await withStore("forgotten", async (s) => {
      const w1 = await s.write("k", "v1", { scope: "user:a" });
      await s.forget("k", { scope: "user:a" });
      await expect(safeRewrite(s, "k", "v2", { scope: "user:a" })).rejects.toBeInstanceOf(HalfReclaimedSlotError);
      expect(await s.read("k", { scope: "user:a" })).toEqual({ status: "NOT_FOUND" });
      const w2 = await safeRewrite(s, "k", "v2", { scope: "user:a", clearTombstone: true });
      expect(w2.generation).toBeGreaterThan(w1.generation);
      expect(await s.read("k", { scope: "user:a" })).toMatchObject({ value: "v2" });
    });
  });

  it("a key reclaimed by gc needs clearTombstone, and the re-write survives the next gc", async () => {
    await withStore("reclaimed", async (s) => {
      await s.write("k", "v1");
      await s.forget("k");
      await s.gc();
      const p = await s.probe("k");
      expect(p).toMatchObject({ valuePresent: false, retentionPresent: true });
      await expect(safeRewrite(s, "k", "v2")).rejects.toMatchObject({ code: "HALF_RECLAIMED" });
      await safeRewrite(s, "k", "v2", { clearTombstone: true });
      await s.gc();
      expect(await s.read("k")).toMatchObject({ value: "v2" });
    });
  });

  it("the seed's half-reclaimed slot (unsafe tombstone-seq GC) is refused", async () => {
    await withStore(
      "unsafe",
      async (s) => {
        await s.write("pref.theme", "light");
        await s.forget("pref.theme");
        await s.write("pref.theme", "dark");
        await s.gc();
        const p = await s.probe("pref.theme");
        expect(p).toMatchObject({ state: "reclaimed", valuePresent: false, retentionPresent: true });
        await expect(safeRewrite(s, "pref.theme", "dark")).rejects.toBeInstanceOf(HalfReclaimedSlotError);
      },
      { unsafe: { gcKeyedBy: "tombstone-seq" } },
    );
  });
});
