/**
 * safeRewrite (src/safe-rewrite.ts): the write-after-forget guard of seed note 000.
 *
 * How it works: first over a small in-memory memory that implements only read / probe / write
 * of the API shapes (safeRewrite is specified over any such object), recording every write, so
 * each branch of the seed's logic is pinned: absent -> CAS on null; live -> CAS on the probed
 * version; retention without value -> HalfReclaimedSlotError and no write at all; with
 * clearTombstone -> a clearing write CAS'd on "no live value" (API.md's null); the scope reaches
 * both calls; a writer racing between probe and write surfaces as VERSION_CONFLICT. The same
 * guard over a real store (a forgotten key, a key reclaimed by gc(), the seed's half-reclaimed
 * slot under the unsafe GC) moved into the conformance suite (src/conformance/cases/safe-rewrite.ts).
 *
 * Properties stressed: no plain write ever lands on a slot whose retention record survives its
 * value; every write safeRewrite makes is a compare-and-set on what the probe saw.
 */
import { describe, expect, it } from "vitest";
import { HalfReclaimedSlotError, VersionConflictError } from "../rules/errors.js";
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
