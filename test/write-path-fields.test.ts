/**
 * The write path's shortcuts (branch writes-5) must change no byte and no answer. Method: each
 * shortcut is compared with the general path it stands for, on seeded random inputs, and each
 * comparison has a twin that shows it can fail. (1) segments/record.ts `encodeNamedRecord` (a
 * plan's PUT or TOMBSTONE from its fields, names not checked a second time) against
 * `encodeRecord`: the same bytes for 600 random records; a record one sequence off differs; a bad
 * value or integer still throws InvalidArgumentError and yields nothing. (2) engine/keydir.ts
 * `ensureSlot` (one lookup fewer for a new slot) against `ensure`: the same slot for held, new and
 * deferred names; the deferred source is asked before a slot is made (twin: `ensureApplied`,
 * which skips the source, gives an empty slot where the source had one). (3) A planned op is its
 * own logical state: a batch whose later ops depend on its earlier ones (same key written,
 * forgotten, compare-and-set) answers exactly as the same ops committed one by one (twin: a
 * compare-and-set against the version before the batch conflicts). (4) segments/io.ts catches each
 * system call's error inline: a real failed call still becomes an IoError naming errno, operation
 * and file; a programming error passes through unchanged. (5) engine/batch-plan.ts `applyRun` (a
 * committed plan's locations found from its records' lengths, one scratch Location) applies the
 * same (op, location) pairs as `applyAll` with one Location per record (twin: a run one byte off).
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as path from "node:path";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { encodeNamedInto, encodeNamedRecord, encodeRecord, RecordArena, type RecordInput } from "../segments/record.js";
import { Keydir, type DeferredSlots, type Location } from "../engine/keydir.js";
import { BatchPlan, type BatchHost } from "../engine/batch-plan.js";
import { Intents } from "../engine/intents.js";
import { Engram } from "../src/index.js";
import { IoError, InvalidArgumentError } from "../rules/errors.js";
import { closeFile, openFile, rename, writeAllSync } from "../segments/io.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

beforeAll(async () => {
  await initChecksum();
});

/** A random name of 1–40 characters: mostly ASCII, sometimes multi-byte UTF-8 (other code paths). */
function nameOf(next: () => number, wide: boolean): string {
  const n = 1 + Math.floor(next() * 40);
  let s = "";
  for (let i = 0; i < n; i++) s += wide && next() < 0.2 ? "é漢"[Math.floor(next() * 2)] : String.fromCharCode(0x61 + Math.floor(next() * 26));
  return s;
}

/** A random PUT or TOMBSTONE input with the fields a plan gives. */
function inputOf(next: () => number): RecordInput {
  const put = next() < 0.7;
  const valueLen = Math.floor(next() * 600);
  const value = next() < 0.5 ? Uint8Array.from({ length: valueLen }, () => Math.floor(next() * 256)) : "v".repeat(valueLen) + (next() < 0.3 ? "ü" : "");
  return {
    type: put ? C.RecordType.PUT : C.RecordType.TOMBSTONE,
    flags: next() < 0.5 ? C.RF_IN_BATCH : 0,
    seq: 1 + Math.floor(next() * 2 ** 40),
    generation: Math.floor(next() * 2 ** 33),
    expiresAt: next() < 0.5 ? 0 : Math.floor(next() * 2 ** 52),
    scope: next() < 0.5 ? "global" : `user:${nameOf(next, false)}/s${Math.floor(next() * 9)}`,
    key: nameOf(next, true),
    ...(put ? { value } : {}),
  };
}

/** encodeNamedRecord of `r`'s fields (into `arena` when given). */
function named(r: RecordInput, arena?: RecordArena, valueBytesMax: number = C.VALUE_BYTES_MAX): Buffer {
  return encodeNamedRecord(r.type, r.flags ?? 0, r.seq, r.generation, r.expiresAt ?? 0, r.scope, r.key, r.value, valueBytesMax, arena);
}

describe("encodeNamedRecord", () => {
  it("makes encodeRecord's bytes for 600 random PUTs and TOMBSTONEs, alone and from an arena", () => {
    const next = rng(20261201);
    const arena = new RecordArena();
    for (let i = 0; i < 600; i++) {
      const r = inputOf(next);
      const want = encodeRecord(r);
      expect(named(r).equals(want)).toBe(true);
      expect(named(r, arena).equals(want)).toBe(true);
    }
  });

  it("twin: a record one sequence off, or of the other kind, does not compare equal", () => {
    const next = rng(7);
    for (let i = 0; i < 50; i++) {
      const r = inputOf(next);
      expect(named({ ...r, seq: r.seq + 1 }).equals(encodeRecord(r))).toBe(false);
      expect(named({ ...r, generation: r.generation + 2 ** 32 }).equals(encodeRecord(r))).toBe(false); // the high word is written
    }
  });

  it("still refuses a bad value or integer with InvalidArgumentError, taking nothing from the arena", () => {
    const base: RecordInput = { type: C.RecordType.PUT, flags: 0, seq: 5, generation: 1, expiresAt: 0, scope: "global", key: "k", value: "x" };
    const bad: Array<[Partial<RecordInput>, number]> = [
      [{ value: "x".repeat(101) }, 100],
      [{ value: "\ud800" }, 100],
      [{ value: 42 as unknown as string }, 100],
      [{ seq: 0 }, 100],
      [{ seq: 1.5 }, 100],
      [{ generation: -1 }, 100],
      [{ expiresAt: 2 ** 53 }, 100],
      [{ expiresAt: 10.25 }, 100],
    ];
    for (const [change, limit] of bad) {
      const arena = new RecordArena();
      expect(() => named({ ...base, ...change }, arena, limit)).toThrow(InvalidArgumentError);
      expect(() => encodeRecord({ ...base, ...change }, limit)).toThrow(InvalidArgumentError); // the general path agrees
      expect(arena.take(1).byteOffset).toBe(0); // nothing was carved before the refusal
    }
    expect(named(base, undefined, 100).equals(encodeRecord(base, 100))).toBe(true);
  });
});

/** A deferred source holding one entry for ("s", "held-later"): it builds that slot through ensureApplied, as hint-index does. */
function sourceWith(asked: string[]): DeferredSlots {
  return {
    load(keydir, scope, key) {
      asked.push(`${scope}/${key}`);
      if (key === "deferred") keydir.ensureApplied(scope, key).putSeq = 77;
    },
    loadAll() {},
    loadWithin() {},
    loadStep() {
      return true;
    },
  };
}

describe("keydir.ensureSlot", () => {
  it("answers as ensure() for held, new and deferred names, asking the source first", () => {
    for (const method of ["ensure", "ensureSlot"] as const) {
      const asked: string[] = [];
      const k = new Keydir();
      const held = k.ensure("s", "held");
      k.defer(sourceWith(asked));
      expect(k[method]("s", "held")).toBe(held); // held: the source is not asked
      const fresh = k[method]("s", "new");
      expect(fresh.putSeq).toBe(0);
      expect(k.get("s", "new")).toBe(fresh);
      expect(k[method]("s", "deferred").putSeq).toBe(77); // the source's entry applied before answering
      expect(k[method]("other", "new").scope).toBe("other");
      expect(asked).toEqual(["s/new", "s/deferred", "other/new"]);
      expect(k.size).toBe(4);
    }
  });

  it("twin: skipping the source (ensureApplied) gives an empty slot where the source had one", () => {
    const k = new Keydir();
    k.defer(sourceWith([]));
    expect(k.ensureApplied("s", "deferred").putSeq).toBe(0);
  });
});

describe("a planned op is its own logical state", () => {
  /** Ops on keys a and b whose outcomes depend on the ops before them. */
  const ops = (v0: number) =>
    [
      { op: "write", key: "a", value: "1" },
      { op: "write", key: "a", value: "2", expectedVersion: v0 + 1 },
      { op: "forget", key: "a" },
      { op: "forget", key: "a" },
      { op: "write", key: "a", value: "3", expectedVersion: null },
      { op: "write", key: "b", value: "x", expectedVersion: null },
      { op: "forget", key: "b" },
    ] as const;

  it("a batch answers as the same ops committed one by one, and reads back the same", async () => {
    const dirA = tempDir("wpf-batch");
    const dirB = tempDir("wpf-lone");
    const a = await Engram.open(dirA, { durability: "none" });
    const b = await Engram.open(dirB, { durability: "none" });
    try {
      await a.write("seed", "s");
      await b.write("seed", "s");
      const batched = await a.batch(ops(1).map((o) => ({ ...o })));
      const lone: unknown[] = [];
      for (const o of ops(1)) {
        const { op, key, ...rest } = o as { op: string; key: string; value?: string; expectedVersion?: number | null };
        if (op === "forget") lone.push(await b.forget(key));
        else lone.push(await b.write(key, rest.value as string, rest.expectedVersion === undefined ? {} : { expectedVersion: rest.expectedVersion }));
      }
      // The batch's own BATCH_COMMIT takes one sequence after its ops, so versions match op for op.
      expect(batched).toEqual(lone);
      for (const key of ["a", "b", "seed"]) expect(a.readSync(key)).toEqual(b.readSync(key));
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("twin: a compare-and-set against the version before the batch's own write conflicts", async () => {
    const dir = tempDir("wpf-twin");
    const s = await Engram.open(dir, { durability: "none" });
    try {
      await s.write("seed", "s");
      await expect(s.batch([{ op: "write", key: "a", value: "1" }, { op: "write", key: "a", value: "2", expectedVersion: null }])).rejects.toMatchObject({ code: "VERSION_CONFLICT" });
      expect(s.readSync("a").status).toBe("NOT_FOUND"); // nothing of the refused batch was written
    } finally {
      await s.close();
    }
  });
});

describe("io errors caught inline", () => {
  it("a real failed call is an IoError naming errno, operation and file; nothing else is wrapped", () => {
    const dir = tempDir("wpf-io");
    const missing = path.join(dir, "no", "such");
    expect(() => openFile("io:create", missing, "w")).toThrow(IoError);
    try {
      openFile("io:create", missing, "w");
    } catch (err) {
      expect(err).toMatchObject({ code: "IO_ERROR" });
      expect(String((err as Error).message)).toContain("ENOENT");
      expect(String((err as Error).message)).toContain(missing);
    }
    expect(() => rename("io:rename", missing, path.join(dir, "x"))).toThrow(/ENOENT/);
    const file = path.join(dir, "f");
    const fd = openFile("io:create", file, "w");
    writeAllSync("io:append", fd, [Buffer.from("abc"), Buffer.from("def")], 0);
    closeFile(fd);
    expect(fs.readFileSync(file, "utf8")).toBe("abcdef");
    expect(() => writeAllSync("io:append", fd, [Buffer.from("x")], 0)).toThrow(/EBADF/); // the fd is closed now
    // Twin: a programming error (not an errno) passes through as itself, not as an IoError.
    const fd2 = openFile("io:create", file, "r+");
    try {
      let thrown: unknown = null;
      try {
        writeAllSync("io:append", fd2, [42 as unknown as Uint8Array], 0);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).not.toBeNull();
      expect(thrown).not.toBeInstanceOf(IoError);
    } finally {
      closeFile(fd2);
    }
  });
});

/** A plan host over an empty store: every name absent but for the plan's own intents, the store's real encoders. */
function hostOf(): BatchHost {
  const intents = new Intents();
  const keydir = new Keydir();
  return {
    options: { tombstoneWrites: "auto-clear", scopeRules: [], ttlMs: null },
    logical: (scope, key, now) => intents.logical(keydir, scope, key, now),
    intend: (scope, key, state) => intents.replace(scope, key, state),
    intendNew: (scope, key, state) => intents.add(scope, key, state),
    unintend: (scope, key, replaced, state) => intents.restore(scope, key, replaced, state),
    foundSlot: () => intents.lastSlot,
    unreserve: (slot, scope, key) => keydir.unreserve(slot, scope, key),
    keydirChanges: () => 0,
    encode: (r, arena) => encodeRecord(r, C.VALUE_BYTES_MAX, arena),
    encodeNamed: (type, flags, seq, generation, expiresAt, scope, key, value, arena) => encodeNamedRecord(type, flags, seq, generation, expiresAt, scope, key, value, C.VALUE_BYTES_MAX, arena),
    encodeNamedInto: (arena, type, flags, seq, generation, expiresAt, scope, key, value) => encodeNamedInto(arena, type, flags, seq, generation, expiresAt, scope, key, value, C.VALUE_BYTES_MAX),
  };
}

describe("BatchPlan.applyRun", () => {
  /** A sealed batch of 300 random writes and forgets over 40 keys. */
  function planOf(seed: number): BatchPlan {
    const next = rng(seed);
    const plan = new BatchPlan(hostOf(), 10, 1_000, true);
    for (let i = 0; i < 300; i++) {
      const key = `k${Math.floor(next() * 40)}`;
      if (next() < 0.7) plan.write({ scope: "global", key, value: "v".repeat(Math.floor(next() * 300)), expected: undefined, clearTombstone: false, ttlMs: undefined });
      else plan.forget("global", key);
    }
    plan.seal();
    return plan;
  }

  /** The (op index, seg, off, len) of every apply, copied at the call (applyRun reuses its Location). */
  function applied(run: (apply: (op: unknown, loc: Location) => void) => void, ops: readonly unknown[]): string[] {
    const out: string[] = [];
    run((op, loc) => out.push(`${ops.indexOf(op)}:${loc.seg}:${loc.off}:${loc.len}`));
    return out;
  }

  /** applyAll's input: one Location per record, laid back to back from `offset`. */
  function locsOf(plan: BatchPlan, offset: number): Location[] {
    let off = offset;
    return plan.lengths.map((len) => {
      const loc = { seg: 3, off, len };
      off += len;
      return loc;
    });
  }

  it("applies the same ops at the same locations as applyAll", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const plan = planOf(seed);
      const want = applied((f) => plan.applyAll(locsOf(plan, 4096), f), plan.ops);
      expect(applied((f) => plan.applyRun(3, 4096, f), plan.ops)).toEqual(want);
      expect(want.length).toBe(plan.ops.length);
    }
  });

  it("twin: a run that starts one byte later is told apart", () => {
    const plan = planOf(99);
    const want = applied((f) => plan.applyAll(locsOf(plan, 4096), f), plan.ops);
    expect(applied((f) => plan.applyRun(3, 4097, f), plan.ops)).not.toEqual(want);
  });
});
