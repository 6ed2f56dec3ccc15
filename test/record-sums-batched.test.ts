/**
 * A batch's record checksums written in one pass (branch bulk-6) must be exactly the sums the
 * one-by-one encoder writes. Method: seeded random records (PUTs with string and byte values of
 * random sizes, TOMBSTONEs, odd names, sizes that straddle arena chunks) are encoded twice: once
 * the old way (each record hashed as it is encoded) and once into a RecordArena that defers its
 * sums, then the arena's runs (one per chunk) summed by segments/checksum.ts `writeRecordSums`
 * (each run copied into the hash module once). The two encodings must be equal byte for byte, and
 * every batched record must decode. Twins that show the comparison can fail: a record whose sum
 * was deferred and never written does not decode ("checksum"); one byte changed after the sums
 * were written makes decodeRecord refuse exactly that record and a segment scan stop there with
 * CorruptionError. End to end: batches through a real store reopen with every value.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { initChecksum, initRecordSums, writeRecordSums } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { decodeRecord, encodeNamedRecord, isRecord, RecordArena } from "../segments/record.js";
import { scanRecords } from "../segments/scan.js";
import { Engram } from "../src/index.js";
import { CorruptionError } from "../rules/errors.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

const VALUE_BYTES_MAX = 1 << 20;

/** One seeded record's fields. */
interface Fields {
  type: C.RecordTypeValue;
  seq: number;
  generation: number;
  expiresAt: number;
  scope: string;
  key: string;
  value: string | Uint8Array | undefined;
}

/** `count` seeded records: mostly PUTs of 0–3000 bytes (some up to 200 KiB, past a chunk), some TOMBSTONEs. */
function seededFields(seed: number, count: number): Fields[] {
  const r = rng(seed);
  const out: Fields[] = [];
  for (let i = 0; i < count; i++) {
    const tomb = r() < 0.15;
    const size = r() < 0.01 ? Math.floor(r() * 200_000) : Math.floor(r() * 3000);
    const bytes = new Uint8Array(size);
    for (let j = 0; j < size; j++) bytes[j] = Math.floor(r() * 256);
    const value = tomb ? undefined : r() < 0.3 ? `v${i}-é-${"x".repeat(size % 500)}` : bytes;
    const scope = r() < 0.2 ? `scope/ü-${i % 7}` : "default";
    out.push({ type: tomb ? C.RecordType.TOMBSTONE : C.RecordType.PUT, seq: i + 1, generation: 1 + (i % 5), expiresAt: tomb ? i + 1 : Math.floor(r() * 1e12), scope, key: `k-${i}-${Math.floor(r() * 1e9)}`, value });
  }
  return out;
}

/** Encodes `f` with each sum written as it is encoded (the one-by-one path). */
function oneByOne(f: Fields): Buffer {
  return encodeNamedRecord(f.type, C.RF_IN_BATCH, f.seq, f.generation, f.expiresAt, f.scope, f.key, f.value, VALUE_BYTES_MAX);
}

/** Encodes all of `fields` into one deferring arena, sums unwritten: the records, and the arena's runs. */
function deferred(fields: Fields[]): { records: Buffer[]; runs: Buffer[] } {
  const arena = new RecordArena(true);
  const records = fields.map((f) => encodeNamedRecord(f.type, C.RF_IN_BATCH, f.seq, f.generation, f.expiresAt, f.scope, f.key, f.value, VALUE_BYTES_MAX, arena));
  return { records, runs: arena.runs() };
}

/** Writes the sums of every run (what BatchPlan.seal does). */
function sumAll(runs: Buffer[]): void {
  for (const run of runs) writeRecordSums(run);
}

beforeAll(async () => {
  await initChecksum();
  await initRecordSums();
});

describe("writeRecordSums", () => {
  it("writes exactly the one-by-one sums, for seeded records in runs and across chunks", () => {
    for (const seed of [1, 2, 3, 4]) {
      const fields = seededFields(seed, 600);
      const { records: batched, runs } = deferred(fields);
      expect(runs.length).toBeGreaterThan(1); // the records span several chunks
      expect(runs.reduce((n, r) => n + r.length, 0)).toBe(batched.reduce((n, r) => n + r.length, 0));
      sumAll(runs);
      fields.forEach((f, i) => {
        const want = oneByOne(f);
        const got = batched[i] as Buffer;
        expect(got.equals(want), `seed ${seed} record ${i}`).toBe(true);
        expect(isRecord(decodeRecord(got, 0, got.length))).toBe(true);
      });
    }
  });

  it("sums a run given as a separate buffer per record, or all in one, the same way", () => {
    const fields = seededFields(9, 50);
    const apart = fields.map((f) => {
      const b = oneByOne(f);
      b.fill(0, b.length - C.RECORD_V3_CHECKSUM_BYTES); // forget the sum, keep the content
      return b;
    });
    const whole = Buffer.concat(apart);
    sumAll(apart);
    fields.forEach((f, i) => expect((apart[i] as Buffer).equals(oneByOne(f))).toBe(true));
    writeRecordSums(whole);
    expect(whole.equals(Buffer.concat(fields.map(oneByOne)))).toBe(true);
  });

  it("twin: a deferred sum never written does not decode", () => {
    const { records: batched } = deferred(seededFields(5, 20));
    const faults = batched.map((b) => decodeRecord(b, 0, b.length));
    expect(faults.every((x) => x === "checksum")).toBe(true);
  });

  it("twin: one byte changed after the sums were written is refused by decode and by a scan", () => {
    const fields = seededFields(6, 40);
    const { records: batched, runs } = deferred(fields);
    sumAll(runs);
    const victim = 17;
    const rec = batched[victim] as Buffer;
    rec[C.RECORD_FIXED_BYTES] = (rec[C.RECORD_FIXED_BYTES] as number) ^ 0x01; // a byte of the scope
    batched.forEach((b, i) => expect(decodeRecord(b, 0, b.length)).toEqual(i === victim ? "checksum" : expect.objectContaining({ seq: fields[i]?.seq })));
    // A sealed segment of these records: the scan refuses the changed record (damage before the end is corruption).
    const seg = Buffer.concat([Buffer.alloc(C.DATA_START), ...batched]); // the scan starts at DATA_START
    const seen: number[] = [];
    expect(() => scanRecords(seg, 1, true, (r) => void seen.push(r.seq), false, C.FORMAT_VERSION)).toThrow(CorruptionError);
    expect(seen).toEqual(fields.slice(0, victim).map((f) => f.seq));
  });
});

describe("batches through a store", () => {
  it("a run whose lengths do not tile it is refused, nothing guessed", () => {
    const { runs } = deferred(seededFields(8, 5));
    const run = runs[0] as Buffer;
    expect(() => writeRecordSums(run.subarray(0, run.length - 1))).toThrow(/does not fit a run/);
  });

  it("commit and reopen with every value (sums written at seal, checked under tests)", async () => {
    const dir = tempDir("record-sums-batched");
    const fields = seededFields(7, 300).filter((f) => f.type === C.RecordType.PUT && f.scope === "default");
    const db = await Engram.open(dir, { durability: "none" });
    for (let b = 0; b < fields.length; b += 100) {
      await db.batch(fields.slice(b, b + 100).map((f) => ({ op: "write" as const, key: f.key, value: f.value as string | Uint8Array })));
    }
    await db.close();
    const again = await Engram.open(dir);
    for (const f of fields) {
      const got = await again.read(f.key);
      expect(got.status === "NOT_FOUND" ? null : got.value).toEqual(f.value);
    }
    await again.close();
  });
});
