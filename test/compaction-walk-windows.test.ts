/**
 * The windowed checksum walk of sealed segments (segments/scan.ts walkSealed over
 * segments/checksum.ts firstBadSum, issue 11 compact-5): compaction checks a window of records'
 * checksums with one copy into the WASM module's memory instead of one h64Raw call per record.
 * The property: the windowed walk accepts and rejects exactly what a record-by-record walk
 * (checkRecordAt per record, the walk it replaced) does — same records visited, same first fault
 * reported at the same offset — and no record with a bad checksum, nor anything after it, reaches
 * the visitor (so compaction never copies it into an output).
 *
 * Method: real sealed segments written by a real store (small records, so that a segment spans
 * several 4096-record windows; 100 KiB values, so that windows end at the 8 MiB span; one 9 MiB
 * value, hashed alone), read from disk. Each is walked whole and compared with the reference;
 * then one bit is flipped at chosen records (first, window edges, last; length field, body,
 * checksum) and both walks must throw CorruptionError at the same offset, the windowed one having
 * visited only records before it. The twin: a walk that only probes fixed fields (the checksum
 * check switched off) visits the flipped record — the check is what stops it. End to end: a
 * store whose sealed segment has one flipped value byte refuses compact() with CORRUPTION, leaves
 * no output file, and still reads its other keys.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { CorruptionError } from "../rules/errors.js";
import * as C from "../segments/constants.js";
import { initChecksum, SUM_SPAN_BYTES_MAX } from "../segments/checksum.js";
import { checkRecordAt, probeRecord } from "../segments/record.js";
import { walkSealed } from "../segments/scan.js";
import { tempDir } from "./helpers/tmp.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

beforeAll(async () => {
  await initChecksum();
});

interface Visit {
  offset: number;
  length: number;
  type: number;
}

/** The reference: one checkRecordAt per record (the walk before compact-5); visits, or the first fault's offset. */
function referenceWalk(bytes: Uint8Array): { visits: Visit[]; faultAt: number | null } {
  const visits: Visit[] = [];
  for (let at = C.DATA_START; at < bytes.length; ) {
    const length = checkRecordAt(bytes, at, bytes.length);
    if (typeof length !== "number") return { visits, faultAt: at };
    visits.push({ offset: at, length, type: bytes[at + C.R_TYPE] as number });
    at += length;
  }
  return { visits, faultAt: null };
}

/** The windowed walk; visits, or the CorruptionError's offset. */
function windowedWalk(bytes: Uint8Array): { visits: Visit[]; faultAt: number | null } {
  const visits: Visit[] = [];
  try {
    walkSealed(bytes, 1, 2, (offset, length, type) => visits.push({ offset, length, type }));
    return { visits, faultAt: null };
  } catch (err) {
    expect(err).toBeInstanceOf(CorruptionError);
    return { visits, faultAt: (err as CorruptionError).offset };
  }
}

/** The twin with the checksum check off: probes fixed fields only. */
function probeOnlyWalk(bytes: Uint8Array): Visit[] {
  const visits: Visit[] = [];
  for (let at = C.DATA_START; at < bytes.length; ) {
    const length = probeRecord(bytes, at, bytes.length);
    if (typeof length !== "number") break;
    visits.push({ offset: at, length, type: bytes[at + C.R_TYPE] as number });
    at += length;
  }
  return visits;
}

/** The bytes of every sealed segment of a store made by `fill`, read from disk after close. */
async function sealedSegments(label: string, segmentBytes: number, fill: (s: Engram) => Promise<void>): Promise<Uint8Array[]> {
  const dir = tempDir(label);
  const store = await Engram.open(dir, { durability: "none", segmentBytes, compaction: { auto: false }, valueBytesMax: 16 * 1024 * 1024 });
  await fill(store);
  const sealed = store.stats().segments.filter((s) => s.sealed).map((s) => s.id);
  await store.close();
  const segDir = path.join(dir, "segments");
  return sealed.map((id) => {
    const bytes = new Uint8Array(fs.readFileSync(path.join(segDir, `${String(id).padStart(8, "0")}.seg`)));
    // The file is exactly its records (sealedBytes): the walk ends at its end.
    return bytes;
  });
}

const small = (s: Engram): Promise<void> => batches(s, 30_000, () => "x".repeat(20));
const large = (s: Engram): Promise<void> => batches(s, 180, () => "y".repeat(100 * 1024));

async function batches(s: Engram, n: number, val: (i: number) => string): Promise<void> {
  for (let i = 0; i < n; i += 500) {
    const ops = [];
    for (let j = i; j < Math.min(n, i + 500); j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: val(j) });
    await s.batch(ops);
  }
}

/** Flips one bit of a copy of `bytes` at `at`. */
function flipped(bytes: Uint8Array, at: number): Uint8Array {
  const copy = new Uint8Array(bytes);
  copy[at] = (copy[at] as number) ^ 0x10;
  return copy;
}

describe("walkSealed in checksum windows agrees with a record-by-record walk", () => {
  it("visits exactly the same records in segments spanning several windows, span-limited windows and a record over the span", async () => {
    const segs = [
      ...(await sealedSegments("walk-small", 512 * 1024, small)),
      ...(await sealedSegments("walk-large", 16 * 1024 * 1024, large)),
      ...(await sealedSegments("walk-huge", 16 * 1024 * 1024, async (s) => {
        await s.write("before", "b".repeat(1000), { scope: "s" });
        await s.write("huge", "h".repeat(9 * 1024 * 1024), { scope: "s" });
        await s.write("after", "a".repeat(1000), { scope: "s" });
        await s.write("fill", "f".repeat(8 * 1024 * 1024), { scope: "s" }); // does not fit: the first segment seals
      })),
    ];
    expect(segs.length).toBeGreaterThan(2);
    let windowsCrossed = false;
    let overSpan = false;
    for (const bytes of segs) {
      const ref = referenceWalk(bytes);
      const got = windowedWalk(bytes);
      expect(ref.faultAt).toBeNull();
      expect(got.faultAt).toBeNull();
      expect(got.visits).toEqual(ref.visits);
      if (ref.visits.length > 4096) windowsCrossed = true;
      if (ref.visits.some((v) => v.length > SUM_SPAN_BYTES_MAX)) overSpan = true;
    }
    expect(windowsCrossed, "some segment holds more records than one window").toBe(true);
    expect(overSpan, "some record is larger than one window's span").toBe(true);
  });

  it("a flipped bit anywhere in a record: the same first fault at the same offset, nothing from it on visited; the probe-only twin visits it", async () => {
    const [bytes] = await sealedSegments("walk-flip", 512 * 1024, small);
    if (bytes === undefined) throw new Error("no sealed segment");
    const records = referenceWalk(bytes).visits;
    expect(records.length).toBeGreaterThan(4097);
    const picks = [0, 1, 4094, 4095, 4096, 4097, Math.floor(records.length / 2), records.length - 1];
    let twinVisitedBad = 0;
    for (const i of picks) {
      const rec = records[i] as Visit;
      // A byte of the length field, of the names/value, and of the stored checksum.
      for (const at of [rec.offset + C.R_LENGTH, rec.offset + C.RECORD_FIXED_BYTES + 2, rec.offset + rec.length - 3]) {
        const bad = flipped(bytes, at);
        const ref = referenceWalk(bad);
        const got = windowedWalk(bad);
        expect(ref.faultAt, `record ${i} byte ${at}: the reference walk faults`).not.toBeNull();
        expect(got.faultAt, `record ${i} byte ${at}: same fault offset`).toBe(ref.faultAt);
        expect(got.visits.every((v) => v.offset < (ref.faultAt as number)), `record ${i} byte ${at}: nothing at or after the fault visited`).toBe(true);
        expect(got.visits.length).toBeLessThanOrEqual(ref.visits.length);
        if (at !== rec.offset + C.R_LENGTH && probeOnlyWalk(bad).some((v) => v.offset === rec.offset)) twinVisitedBad += 1;
      }
    }
    // Body and checksum flips leave the fixed fields valid: without the checksum check each is visited.
    expect(twinVisitedBad).toBe(picks.length * 2);
  });

  it("compact() of a store whose sealed segment has one flipped value byte: CORRUPTION, no output left, other keys still read", async () => {
    const dir = tempDir("walk-compact");
    const opts = { durability: "none" as const, segmentBytes: 64 * 1024, compaction: { auto: false, workers: 0 } };
    let store = await Engram.open(dir, opts);
    for (let i = 0; i < 600; i++) await store.write(`k${i}`, `v${i}`.padEnd(200, "z"), { scope: "s" });
    for (let i = 0; i < 600; i += 2) await store.forget(`k${i}`, { scope: "s" });
    const sealed = store.stats().segments.filter((s) => s.sealed).map((s) => s.id);
    await store.close();
    const victim = sealed[0] as number;
    const file = path.join(dir, "segments", `${String(victim).padStart(8, "0")}.seg`);
    const bytes = fs.readFileSync(file);
    const live = referenceWalk(bytes).visits[5] as Visit; // k5's record in the first segment (odd: survives)
    const at = live.offset + live.length - 20; // a value byte: fixed fields stay valid
    bytes[at] = (bytes[at] as number) ^ 0x01;
    fs.writeFileSync(file, bytes);
    store = await Engram.open(dir, opts);
    try {
      const before = fs.readdirSync(path.join(dir, "segments")).sort();
      await expect(store.compact({ mode: "copy-on-write", segments: [victim] })).rejects.toMatchObject({ code: "CORRUPTION" });
      expect(fs.readdirSync(path.join(dir, "segments")).sort(), "no output file or .tmp left").toEqual(before);
      expect(fs.readFileSync(file).equals(bytes), "the source is untouched").toBe(true);
      for (let i = 1; i < 600; i += 2) {
        if (i === 5) continue;
        const r = await store.read(`k${i}`, { scope: "s" });
        expect(r, `k${i}`).toMatchObject({ value: `v${i}`.padEnd(200, "z") });
      }
    } finally {
      await store.close();
    }
  });
});
