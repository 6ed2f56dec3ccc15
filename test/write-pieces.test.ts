/**
 * A batch's records travel as pieces, and its decisions as intents (branch writes-7); neither may
 * change a byte or an answer. Method: each shortcut is compared with the general path it stands
 * for, on seeded random inputs, and each comparison has a twin that shows it can fail.
 * (1) segments/record.ts `encodeNamedInto` (a record laid out in place in a deferring arena, only
 * its length kept) against `encodeNamedRecord`: the same bytes once the sums are written, across
 * chunk boundaries; a bad value still throws InvalidArgumentError and claims no arena byte (twin:
 * a record one sequence off differs). (2) engine/hints.ts `noteGroup` (hint entries of a
 * group whose pieces are runs of records, walked by each record's length) against one
 * `addRecord` per record: the same entries (twin: `notePiecesAsRecords`, the walk before pieces
 * could be runs, which takes each piece for one record, loses entries). (3) A plan's ops are recorded as intents as they are
 * decided and retracted when the plan is refused: after a refused batch every decision answers
 * as before it, even when a refused op had replaced another queued batch's intent (twin: a host
 * that does not take intents back leaves a refused write deciding later ones). (4) The u64 fields
 * (sequence, generation, expiry) stored without a float remainder read back exactly at the 32-bit
 * word edges up to 2^53 - 1 (twin: a high word one off reads back as another value).
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as C from "../segments/constants.js";
import { initChecksum, writeRecordSums } from "../segments/checksum.js";
import { decodeRecord, encodeNamedInto, encodeNamedRecord, encodeRecord, isRecord, RecordArena } from "../segments/record.js";
import { HintBuilder } from "../segments/hint.js";
import { noteGroup } from "../engine/hints.js";
import { BatchPlan, type BatchHost } from "../engine/batch-plan.js";
import { Intents } from "../engine/intents.js";
import { Keydir } from "../engine/keydir.js";
import { Engram } from "../src/index.js";
import { InvalidArgumentError, VersionConflictError } from "../rules/errors.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

beforeAll(async () => {
  await initChecksum();
});

interface Fields {
  type: C.RecordTypeValue;
  seq: number;
  generation: number;
  expiresAt: number;
  scope: string;
  key: string;
  value: string | Uint8Array | undefined;
}

/** `count` seeded PUTs (string and byte values, some past a 4 KiB chunk) and TOMBSTONEs. */
function seeded(seed: number, count: number): Fields[] {
  const next = rng(seed);
  const out: Fields[] = [];
  for (let i = 0; i < count; i++) {
    const put = next() < 0.8;
    const size = next() < 0.05 ? 5000 + Math.floor(next() * 20_000) : Math.floor(next() * 400);
    const value = !put ? undefined : next() < 0.5 ? "é".repeat(size >> 1) : new Uint8Array(size).fill(i & 0xff);
    const scope = next() < 0.5 ? "global" : `user:${Math.floor(next() * 9)}`;
    out.push({ type: put ? C.RecordType.PUT : C.RecordType.TOMBSTONE, seq: 1 + i, generation: Math.floor(next() * 5), expiresAt: put ? 0 : i, scope, key: `k${Math.floor(next() * 1e6)}`, value });
  }
  return out;
}

/** The records of `fields` encoded in place into one deferring arena, sums written: the runs and the lengths. */
function inPlace(fields: readonly Fields[], shift = 0): { runs: Buffer[]; lengths: number[] } {
  const arena = new RecordArena(true);
  const lengths = fields.map((f) => encodeNamedInto(arena, f.type, C.RF_IN_BATCH, f.seq + shift, f.generation, f.expiresAt, f.scope, f.key, f.value, C.VALUE_BYTES_MAX));
  const runs = arena.runs();
  for (const run of runs) writeRecordSums(run);
  return { runs, lengths };
}

/** The records of `fields`, each encoded alone (checksum included). */
function alone(fields: readonly Fields[]): Buffer[] {
  return fields.map((f) => encodeNamedRecord(f.type, C.RF_IN_BATCH, f.seq, f.generation, f.expiresAt, f.scope, f.key, f.value, C.VALUE_BYTES_MAX));
}

describe("encodeNamedInto", () => {
  it("lays out encodeNamedRecord's bytes, record after record, across chunks", () => {
    for (let seed = 1; seed <= 8; seed++) {
      const fields = seeded(seed, 250);
      const { runs, lengths } = inPlace(fields);
      const want = alone(fields);
      expect(runs.length).toBeGreaterThan(1); // several chunks
      expect(lengths).toEqual(want.map((r) => r.length));
      expect(Buffer.concat(runs).equals(Buffer.concat(want))).toBe(true);
    }
  });

  it("twin: records one sequence off are told apart", () => {
    const fields = seeded(3, 50);
    expect(Buffer.concat(inPlace(fields, 1).runs).equals(Buffer.concat(alone(fields)))).toBe(false);
  });

  it("refuses a value over the limit, or no value for a PUT's bytes, claiming nothing", () => {
    const arena = new RecordArena(true);
    encodeNamedInto(arena, C.RecordType.PUT, 0, 1, 1, 0, "global", "a", "x", 10);
    const before = Buffer.concat(arena.runs()).length;
    expect(() => encodeNamedInto(arena, C.RecordType.PUT, 0, 2, 1, 0, "global", "b", "x".repeat(11), 10)).toThrow(InvalidArgumentError);
    expect(() => encodeNamedInto(arena, C.RecordType.PUT, 0, 2, 1, 0, "global", "b", 42 as unknown as string, 10)).toThrow(InvalidArgumentError);
    expect(() => encodeNamedInto(arena, C.RecordType.PUT, 0, -1, 1, 0, "global", "b", "x", 10)).toThrow(InvalidArgumentError);
    expect(Buffer.concat(arena.runs()).length).toBe(before);
  });
});

describe("u64 fields", () => {
  const edges = [0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 40 + 5, 1_764_000_000_000, 2 ** 53 - 1];

  /** The (seq, generation, expiresAt) decodeRecord reads back from a record encoded in place with `v` in all three. */
  function roundTrip(v: number): number[] {
    const arena = new RecordArena(true);
    const length = encodeNamedInto(arena, C.RecordType.PUT, 0, Math.max(v, 1), v, v, "global", "k", "x", C.VALUE_BYTES_MAX);
    const [run] = arena.runs();
    writeRecordSums(run as Buffer);
    const got = decodeRecord(run as Buffer, 0, length, false);
    if (!isRecord(got)) throw new Error(`edge ${v}: ${got}`);
    return [got.seq, got.generation, got.expiresAt];
  }

  it("read back exactly at the 32-bit word edges and up to 2^53 - 1", () => {
    for (const v of edges) expect(roundTrip(v)).toEqual([Math.max(v, 1), v, v]);
  });

  it("twin: a high word one off reads back as another value", () => {
    expect(roundTrip(2 ** 32 + 1)).not.toEqual([2 ** 32, 2 ** 32, 2 ** 32]);
  });
});

describe("noteGroup over pieces", () => {
  /** A group frame (any valid record) and `fields`' records as runs: the pieces a sealed batch's group holds. */
  function pieces(seed: number): { group: Buffer[]; records: Buffer[] } {
    const fields = seeded(seed, 200);
    const frame = encodeRecord({ type: C.RecordType.GROUP, seq: 1, generation: 0, scope: C.ROOT_SCOPE, key: "", value: new Uint8Array(C.GROUP_VALUE_BYTES) });
    const lone = encodeRecord({ type: C.RecordType.PUT, seq: 900, generation: 1, scope: "global", key: "lone", value: "v" });
    return { group: [frame, ...inPlace(fields).runs, lone], records: [...alone(fields), lone] };
  }

  /** The hint entries of the records after a frame, each added alone, from segment offset `offset`. */
  function oneByOne(frame: Buffer, records: readonly Buffer[], offset: number): HintBuilder {
    const hint = new HintBuilder(C.FORMAT_VERSION);
    let at = offset + frame.length;
    for (const r of records) {
      hint.addRecord(r, 0, at);
      at += r.length;
    }
    return hint;
  }

  it("notes the same entries as one addRecord per record", () => {
    for (let seed = 1; seed <= 6; seed++) {
      const { group, records } = pieces(seed);
      const got = new HintBuilder(C.FORMAT_VERSION);
      noteGroup(got, group, 4096);
      const want = oneByOne(group[0] as Buffer, records, 4096);
      expect(got.count).toBe(records.length);
      expect(got.end).toBe(want.end);
      expect((got.entriesBody() as Buffer).equals(want.entriesBody() as Buffer)).toBe(true);
    }
  });

  it("twin: taking each piece for one record loses entries", () => {
    const { group, records } = pieces(2);
    const wrong = new HintBuilder(C.FORMAT_VERSION);
    notePiecesAsRecords(wrong, group, 4096);
    expect(wrong.count).toBeLessThan(records.length);
  });
});

/** The twin: engine/hints.ts noteGroup as it was before a piece could be a run (each piece taken for one record). */
function notePiecesAsRecords(hint: HintBuilder, pieces: readonly Buffer[], offset: number): void {
  let at = offset + (pieces[0] as Buffer).length;
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i] as Buffer;
    hint.addRecord(piece, 0, at);
    at += piece.length;
  }
}

/** A plan host over an empty keydir with real intents; `retracts` false turns the retraction off (the twin). */
function hostOf(retracts: boolean): { host: BatchHost; intents: Intents; keydir: Keydir } {
  const intents = new Intents();
  const keydir = new Keydir();
  const host: BatchHost = {
    options: { tombstoneWrites: "auto-clear", scopeRules: [], ttlMs: null },
    logical: (scope, key, now) => intents.logical(keydir, scope, key, now),
    intend: (scope, key, state) => intents.replace(scope, key, state),
    intendNew: (scope, key, state) => intents.add(scope, key, state),
    unintend: (scope, key, replaced, state) => {
      if (retracts) intents.restore(scope, key, replaced, state);
    },
    foundSlot: () => intents.lastSlot,
    unreserve: (slot, scope, key) => keydir.unreserve(slot, scope, key),
    keydirChanges: () => keydir.changes,
    encode: (r, arena) => encodeRecord(r, C.VALUE_BYTES_MAX, arena),
    encodeNamed: (type, flags, seq, generation, expiresAt, scope, key, value, arena) => encodeNamedRecord(type, flags, seq, generation, expiresAt, scope, key, value, C.VALUE_BYTES_MAX, arena),
    encodeNamedInto: (arena, type, flags, seq, generation, expiresAt, scope, key, value) => encodeNamedInto(arena, type, flags, seq, generation, expiresAt, scope, key, value, C.VALUE_BYTES_MAX),
  };
  return { host, intents, keydir };
}

/** A write op of `key` with compare-and-set `expected`. */
function w(key: string, expected?: number | null): { scope: string; key: string; value: string; expected: number | null | undefined; clearTombstone: boolean; ttlMs: undefined } {
  return { scope: "global", key, value: "v", expected, clearTombstone: false, ttlMs: undefined };
}

describe("a plan's intents", () => {
  /** Two plans: one queued (a written), then one refused at its third op after writing a and b; what a and b decide against afterwards. */
  function afterRefusal(retracts: boolean): { a: boolean; b: boolean } {
    const { host } = hostOf(retracts);
    const queued = new BatchPlan(host, 1, 1000, true);
    queued.write(w("a"));
    queued.seal(); // queued: its intent stays
    const refused = new BatchPlan(host, 3, 1000, true);
    refused.write(w("a", 1)); // replaces the queued plan's intent of a
    refused.write(w("b"));
    expect(() => refused.write(w("c", 7))).toThrow(VersionConflictError);
    refused.retract();
    return { a: host.logical("global", "a", 1000).version === 1, b: host.logical("global", "b", 1000).exists };
  }

  it("are taken back when the plan is refused, the intent each replaced restored", () => {
    expect(afterRefusal(true)).toEqual({ a: true, b: false });
  });

  it("twin: without the retraction, the refused writes decide what follows", () => {
    expect(afterRefusal(false)).toEqual({ a: false, b: true });
  });

  it("a refused batch leaves the store deciding as before it, with another batch in flight", async () => {
    const db = await Engram.open(tempDir("write-pieces"), { durability: "sync" });
    try {
      const first = db.batch([{ op: "write", key: "a", value: "1" }]); // queued, not awaited: its intent holds a
      const refused = db.batch([
        { op: "write", key: "a", value: "2" },
        { op: "write", key: "b", value: "2" },
        { op: "write", key: "c", value: "2", expectedVersion: 99 },
      ]);
      await expect(refused).rejects.toBeInstanceOf(VersionConflictError);
      // a is live in the queue (the first batch's intent, restored): a write expecting no value conflicts
      await expect(db.write("a", "3", { expectedVersion: null })).rejects.toBeInstanceOf(VersionConflictError);
      // b never was: a write expecting no value goes through, and forgetting c finds nothing
      const [one] = await first;
      expect(await db.write("b", "3", { expectedVersion: null })).toMatchObject({ ok: true });
      expect(await db.forget("c")).toMatchObject({ tombstoneSeq: null });
      const read = db.readSync("a");
      expect(read.status === "OK" && read.value === "1" && read.version === (one as { version: number }).version).toBe(true);
    } finally {
      await db.close();
    }
  });
});
