/**
 * The sequential scan (segments/scan.ts) over real segment files: torn tail versus corruption.
 *
 * How it works: segments are written into a temp dir with createSegmentFile + SegmentWriter, then
 * damaged through the file (ftruncate, pwrite) and read back whole for scanRecords. Two kinds of
 * crash are simulated at every byte: the file cut inside its last record (ftruncate), and the last
 * append only partly landed in zeroed, preallocated space (its first k bytes written, the rest
 * still zero). Both must be a torn tail (torn !== null, end = start of that record, or of its
 * batch) in an unsealed segment, never valid data and never a CorruptionError; the same for a
 * batch cut before or inside its BATCH_COMMIT. Then every single bit of every record before the
 * last is flipped (a CorruptionError naming the segment and the record's offset: valid records
 * follow), and every bit of the last record (a torn tail when unsealed, a CorruptionError when
 * sealed). Zeroed preallocation after the last record scans clean; data after a zero gap is
 * corruption. A value that itself embeds an encoded record must not turn a torn final append into
 * corruption.
 *
 * Properties stressed (DESIGN.md I2): recovery yields a prefix of the records; a torn tail is
 * reported with the truncation point; damage anywhere else is reported, never skipped or returned.
 */
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { CorruptionError } from "../rules/errors.js";
import { createSegmentFile } from "../segments/create.js";
import { readWholeFile } from "../segments/whole-file.js";
import { encodeRecord, type DecodedRecord, type RecordInput } from "../segments/record.js";
import { scanRecords, type ScanEnd } from "../segments/scan.js";
import { SegmentWriter } from "../segments/writer.js";
import { tempDir } from "./helpers/tmp.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

let dir: string;
let nextId = 1;

beforeAll(async () => {
  await initChecksum();
  dir = tempDir("format-scan");
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const ZERO_TAIL = 1024;

interface Segment {
  id: number;
  fd: number;
  /** Offset of each record, in file order. */
  offsets: number[];
  records: Buffer[];
  /** Offset just past the last record. */
  end: number;
}

function rec(input: Partial<RecordInput> & { seq: number }): Buffer {
  return encodeRecord({ type: C.RecordType.PUT, generation: 1, scope: "user:alice/session:7", key: `key-${input.seq}`, value: `value ${input.seq}`, ...input } as RecordInput);
}

/** Writes records (one writev) into a new segment with `zeroTail` bytes of preallocation after them. */
function writeSegment(records: Buffer[], zeroTail: number): Segment {
  const id = nextId++;
  const fd = createSegmentFile(dir, { segmentId: id, generation: 0, headerSeq: 0, flags: 0, createdSeq: 1, minSeq: 1, maxSeq: 1, replacesId: 0, sealedBytes: 0 }, C.DATA_START);
  const writer = new SegmentWriter(id, fd, C.DATA_START, C.DATA_START);
  const offsets: number[] = [];
  let at = -1;
  for (const r of records) {
    const o = writer.reserve(r.length);
    if (at < 0) at = o;
    offsets.push(o);
  }
  if (records.length > 0) writer.writeAtSync(records, at);
  writer.truncateToEnd();
  if (zeroTail > 0) fs.ftruncateSync(fd, writer.end + zeroTail);
  return { id, fd, offsets, records, end: writer.end };
}

interface Scanned {
  result: ScanEnd;
  visited: Array<{ offset: number; record: DecodedRecord }>;
}

/** Scans the segment's file as it is on disk now (or `bytes` already read from it). */
function scanFile(seg: Segment, sealed: boolean, bytes: Uint8Array = readWholeFile(seg.fd)): Scanned {
  const visited: Scanned["visited"] = [];
  const result = scanRecords(bytes, seg.id, sealed, (record, offset) => visited.push({ offset, record }), true, 1);
  if (result.records !== visited.length) throw new Error(`scan counted ${result.records} records, delivered ${visited.length}`);
  return { result, visited };
}

/** The scan must throw a CorruptionError naming this segment and offset. (Plain checks: hot loop.) */
function expectCorruption(seg: Segment, sealed: boolean, offset: number, what: string, bytes?: Uint8Array): void {
  let caught: unknown;
  try {
    const got = scanFile(seg, sealed, bytes);
    caught = new Error(`${what}: expected CorruptionError, scan returned ${JSON.stringify(got.result)}`);
  } catch (err) {
    caught = err;
  }
  if (!(caught instanceof CorruptionError)) throw caught;
  if (caught.code !== "CORRUPTION" || caught.segment !== seg.id || caught.offset !== offset) {
    throw new Error(`${what}: expected corruption in segment ${seg.id} at ${offset}, got ${caught.message}`);
  }
}

/** The first `count` records, delivered in order at their offsets. */
function expectPrefix(seg: Segment, got: Scanned, count: number, what: string): void {
  expect(got.visited.map((v) => v.offset), what).toEqual(seg.offsets.slice(0, count));
  for (let i = 0; i < count; i++) expect(got.visited[i]?.record.length).toBe(seg.records[i]?.length);
}

function writeBytes(fd: number, bytes: Uint8Array, at: number): void {
  if (bytes.length > 0) expect(fs.writeSync(fd, bytes, 0, bytes.length, at)).toBe(bytes.length);
}

function close(seg: Segment): void {
  fs.closeSync(seg.fd);
}

describe("clean endings", () => {
  it("records followed by zeroed preallocation scan clean; so does the file cut at the last record", () => {
    const seg = writeSegment([rec({ seq: 1 }), rec({ seq: 2, type: C.RecordType.TOMBSTONE, value: undefined }), rec({ seq: 3, value: new Uint8Array(300) })], 64 * 1024);
    const got = scanFile(seg, false);
    expect(got.result).toEqual({ end: seg.end, torn: null, records: 3 });
    expectPrefix(seg, got, 3, "zero tail");
    expect(got.visited.map((v) => v.record.seq)).toEqual([1, 2, 3]);
    fs.ftruncateSync(seg.fd, seg.end);
    expect(scanFile(seg, false).result).toEqual({ end: seg.end, torn: null, records: 3 });
    expect(scanFile(seg, true).result).toEqual({ end: seg.end, torn: null, records: 3 });
    close(seg);
  });

  it("an empty segment scans clean; a sealed segment with zeroed space after its records is corruption", () => {
    const empty = writeSegment([], 4096);
    expect(scanFile(empty, false).result).toEqual({ end: C.DATA_START, torn: null, records: 0 });
    expectCorruption(empty, true, C.DATA_START, "sealed zeros");
    fs.ftruncateSync(empty.fd, C.DATA_START);
    expect(scanFile(empty, true).result).toEqual({ end: C.DATA_START, torn: null, records: 0 });
    close(empty);
    const seg = writeSegment([rec({ seq: 1 })], 100);
    expectCorruption(seg, true, seg.end, "sealed zero tail");
    close(seg);
  });
});

describe("the last record cut at every byte is a torn tail", () => {
  const records = () => [
    rec({ seq: 1 }),
    rec({ seq: 2, type: C.RecordType.CLEAR, value: undefined }),
    rec({ seq: 3, key: "the-last-record", value: "a value long enough that the last record is a few hundred bytes: ".repeat(3) }),
  ];

  it("file truncated at every offset inside the last record (unsealed: torn; sealed: corruption)", () => {
    const seg = writeSegment(records(), 0);
    const start = seg.offsets[2] as number;
    const len = (seg.records[2] as Buffer).length;
    expect(len).toBeGreaterThan(200);
    for (let k = 0; k <= len; k++) {
      writeBytes(seg.fd, seg.records[2] as Buffer, start); // (re)write it whole, then cut
      fs.ftruncateSync(seg.fd, start + k);
      const got = scanFile(seg, false);
      if (k === 0) {
        expect(got.result).toEqual({ end: start, torn: null, records: 2 });
      } else if (k === len) {
        expect(got.result).toEqual({ end: start + len, torn: null, records: 3 });
      } else {
        expect(got.result.torn, `cut at ${k}`).not.toBeNull();
        expect(got.result.torn?.offset).toBe(start);
        expect(got.result.end).toBe(start);
        expect(got.result.records).toBe(2);
        expectCorruption(seg, true, start, `sealed cut at ${k}`);
      }
      expectPrefix(seg, got, k === len ? 3 : 2, `cut at ${k}`);
    }
    close(seg);
  });

  it("only the first k bytes of the last append landed in zeroed preallocation, for every k", () => {
    const seg = writeSegment(records(), ZERO_TAIL);
    const start = seg.offsets[2] as number;
    const last = seg.records[2] as Buffer;
    const zeros = Buffer.alloc(last.length);
    const reasons = new Set<string>();
    for (let k = 0; k <= last.length; k++) {
      writeBytes(seg.fd, zeros, start);
      writeBytes(seg.fd, last.subarray(0, k), start);
      const got = scanFile(seg, false);
      if (k === 0) {
        expect(got.result).toEqual({ end: start, torn: null, records: 2 });
      } else if (k === last.length) {
        expect(got.result).toEqual({ end: start + k, torn: null, records: 3 });
      } else {
        expect(got.result.torn, `prefix ${k}`).not.toBeNull();
        expect(got.result.torn?.offset).toBe(start);
        expect(got.result.end).toBe(start);
        expect(got.result.records).toBe(2);
        reasons.add(got.result.torn?.reason as string);
      }
      expectPrefix(seg, got, k === last.length ? 3 : 2, `prefix ${k}`);
    }
    // a partial length field reads as an impossible length or a bad structure (zero type, zero
    // scope length), a whole fixed part with a missing payload fails on its checksum
    expect([...reasons].sort()).toEqual(["checksum", "length", "structure"]);
    close(seg);
  });

  it("an uncommitted batch cut at every byte is a torn tail ending before the batch", () => {
    const batch = [
      rec({ seq: 2, flags: C.RF_IN_BATCH, value: Uint8Array.from({ length: 90 }, (_, i) => i) }),
      rec({ seq: 3, flags: C.RF_IN_BATCH, type: C.RecordType.TOMBSTONE, value: undefined, generation: 4 }),
      rec({ seq: 4, type: C.RecordType.BATCH_COMMIT, key: "", value: undefined, generation: 2 }),
    ];
    const groupBytes = batch.reduce((n, b) => n + b.length, 0);
    for (const zeroTail of [0, ZERO_TAIL]) {
      const seg = writeSegment([rec({ seq: 1 }), ...batch], zeroTail);
      const batchStart = seg.offsets[1] as number;
      const commitAt = seg.offsets[3] as number;
      const whole = readWholeFile(seg.fd).slice(batchStart, batchStart + groupBytes);
      const zeros = Buffer.alloc(groupBytes);
      for (let k = 0; k <= groupBytes; k++) {
        if (zeroTail === 0) {
          writeBytes(seg.fd, whole, batchStart);
          fs.ftruncateSync(seg.fd, batchStart + k);
        } else {
          writeBytes(seg.fd, zeros, batchStart);
          writeBytes(seg.fd, whole.subarray(0, k), batchStart);
        }
        const what = `${zeroTail === 0 ? "cut" : "prefix"} ${k} of the batch`;
        const got = scanFile(seg, false);
        if (k === 0) {
          expect(got.result, what).toEqual({ end: batchStart, torn: null, records: 1 });
          expectPrefix(seg, got, 1, what);
        } else if (k === groupBytes) {
          expect(got.result, what).toEqual({ end: batchStart + groupBytes, torn: null, records: 4 });
          expectPrefix(seg, got, 4, what);
          expect(got.visited.map((v) => v.record.type)).toEqual([C.RecordType.PUT, C.RecordType.PUT, C.RecordType.TOMBSTONE, C.RecordType.BATCH_COMMIT]);
        } else {
          expect(got.result.torn, what).not.toBeNull();
          expect(got.result.end, what).toBe(batchStart);
          expect(got.result.records, what).toBe(1);
          expectPrefix(seg, got, 1, what);
          const tornAt = got.result.torn?.offset as number;
          expect(tornAt).toBeGreaterThanOrEqual(batchStart);
          expect(tornAt).toBeLessThanOrEqual(commitAt);
          if (k === commitAt - batchStart && zeroTail === 0) expect(got.result.torn?.reason).toBe("uncommitted-batch");
        }
      }
      close(seg);
    }
  });
});

describe("single-bit flips: corruption in the middle, torn at the end", () => {
  const records = () => [
    rec({ seq: 1, key: "first", value: "the first record of the segment, some text to flip: ".repeat(2) }),
    rec({ seq: 2, flags: C.RF_IN_BATCH, key: "in-a-batch", value: Uint8Array.from({ length: 100 }, (_, i) => (i * 31) & 0xff) }),
    rec({ seq: 3, type: C.RecordType.BATCH_COMMIT, key: "", value: undefined, generation: 1 }),
    rec({ seq: 4, type: C.RecordType.SCOPE_ERASE, key: "", value: undefined, scope: "user:alice/session:6" }),
    rec({ seq: 5, key: "the-last-one", value: "and the last record, which a crash may tear: ".repeat(3) }),
  ];

  /** Flips every bit of record `index` through the file; check gets the file's bytes after each flip. */
  function everyBit(seg: Segment, index: number, check: (what: string, bytes: Uint8Array) => void): number {
    const start = seg.offsets[index] as number;
    const original = seg.records[index] as Buffer;
    let flips = 0;
    for (let byte = 0; byte < original.length; byte++) {
      for (let bit = 0; bit < 8; bit++) {
        writeBytes(seg.fd, Buffer.of((original[byte] as number) ^ (1 << bit)), start + byte);
        check(`record ${index} byte ${byte} bit ${bit}`, readWholeFile(seg.fd));
        flips++;
      }
      writeBytes(seg.fd, original.subarray(byte, byte + 1), start + byte);
    }
    return flips;
  }

  it("every bit of every record before the last: CorruptionError at that record (unsealed and sealed)", () => {
    for (const zeroTail of [0, ZERO_TAIL]) {
      const seg = writeSegment(records(), zeroTail);
      expect(scanFile(seg, false).result.records).toBe(5);
      let flips = 0;
      for (let i = 0; i < seg.records.length - 1; i++) {
        const at = seg.offsets[i] as number;
        flips += everyBit(seg, i, (what, bytes) => {
          expectCorruption(seg, false, at, what, bytes);
          expectCorruption(seg, true, at, what, bytes);
        });
      }
      expect(flips).toBe(8 * seg.records.slice(0, -1).reduce((n, r) => n + r.length, 0));
      expect(scanFile(seg, false).result).toEqual({ end: seg.end, torn: null, records: 5 });
      close(seg);
    }
  });

  it("every bit of the last record: a torn tail when unsealed, CorruptionError when sealed", () => {
    for (const zeroTail of [0, ZERO_TAIL]) {
      const seg = writeSegment(records(), zeroTail);
      const last = seg.records.length - 1;
      const at = seg.offsets[last] as number;
      expect((seg.records[last] as Buffer).length).toBeGreaterThan(100);
      everyBit(seg, last, (what, bytes) => {
        const got = scanFile(seg, false, bytes);
        const offsets = got.visited.map((v) => v.offset).join();
        if (got.result.torn?.offset !== at || got.result.end !== at || got.result.records !== 4 || offsets !== seg.offsets.slice(0, 4).join()) {
          throw new Error(`${what}: expected a torn tail at ${at} after 4 records, got ${JSON.stringify(got.result)} (${offsets})`);
        }
        expectCorruption(seg, true, at, what, bytes);
      });
      close(seg);
    }
  });
});

describe("data after a gap or after the last record", () => {
  it("a valid record after a zero gap is corruption at the gap; so is any other data after one", () => {
    const seg = writeSegment([rec({ seq: 1 }), rec({ seq: 2 })], 4096);
    writeBytes(seg.fd, rec({ seq: 3 }), seg.end + 100);
    expectCorruption(seg, false, seg.end, "valid record after a zero gap");
    writeBytes(seg.fd, Buffer.alloc(300), seg.end + 100);
    expect(scanFile(seg, false).result).toEqual({ end: seg.end, torn: null, records: 2 });
    // garbage that holds no valid record, after a zero gap: a final append whose later page
    // landed before its earlier one — a torn tail at the gap, not corruption
    writeBytes(seg.fd, Buffer.from("not a record, just bytes"), seg.end + 1000);
    expect(scanFile(seg, false).result).toEqual({ end: seg.end, torn: { offset: seg.end, reason: "empty" }, records: 2 });
    close(seg);
  });

  it("garbage straight after the last record is a torn tail, unless a valid record follows it", () => {
    const seg = writeSegment([rec({ seq: 1 }), rec({ seq: 2 })], 4096);
    writeBytes(seg.fd, Buffer.alloc(64, 0xff), seg.end);
    const got = scanFile(seg, false);
    expect(got.result.torn).toEqual({ offset: seg.end, reason: "length" });
    expect(got.result.end).toBe(seg.end);
    writeBytes(seg.fd, rec({ seq: 3 }), seg.end + 64);
    expectCorruption(seg, false, seg.end, "garbage then a valid record");
    close(seg);
  });

  it("a torn append whose value embeds an encoded record is still a torn tail, at every prefix", () => {
    const inner = rec({ seq: 77, key: "inner", value: "a whole, valid record stored as a value" });
    const value = Buffer.concat([Buffer.alloc(16, 7), inner, Buffer.alloc(16, 7)]);
    const outer = rec({ seq: 2, key: "outer", value });
    const seg = writeSegment([rec({ seq: 1 }), outer], ZERO_TAIL);
    const start = seg.offsets[1] as number;
    let got = scanFile(seg, false);
    expect(got.result).toEqual({ end: seg.end, torn: null, records: 2 });
    expect(Buffer.compare(got.visited[1]?.record.value as Uint8Array, value)).toBe(0);
    const zeros = Buffer.alloc(outer.length);
    for (let k = 1; k < outer.length; k++) {
      writeBytes(seg.fd, zeros, start);
      writeBytes(seg.fd, outer.subarray(0, k), start);
      got = scanFile(seg, false);
      expect(got.result.torn?.offset, `prefix ${k}`).toBe(start);
      expect(got.result.end).toBe(start);
      expect(got.result.records).toBe(1);
    }
    // a middle record like it with a bad checksum, followed by a valid record, is still corruption
    writeBytes(seg.fd, outer, start);
    writeBytes(seg.fd, rec({ seq: 3 }), seg.end);
    writeBytes(seg.fd, Buffer.of((outer[outer.length - 1] as number) ^ 1), seg.end - 1);
    expectCorruption(seg, false, start, "middle record with an embedded record");
    close(seg);
  });
});

describe("batch framing", () => {
  it("a BATCH_COMMIT whose count does not match, or a plain record inside a batch, is corruption", () => {
    const b1 = rec({ seq: 2, flags: C.RF_IN_BATCH });
    const b2 = rec({ seq: 3, flags: C.RF_IN_BATCH });
    const wrongCount = writeSegment([rec({ seq: 1 }), b1, b2, rec({ seq: 4, type: C.RecordType.BATCH_COMMIT, key: "", value: undefined, generation: 3 })], 0);
    expectCorruption(wrongCount, false, wrongCount.offsets[3] as number, "commit counts 3 of 2");
    close(wrongCount);
    const interleaved = writeSegment([b1, rec({ seq: 5 }), b2, rec({ seq: 6, type: C.RecordType.BATCH_COMMIT, key: "", value: undefined, generation: 2 })], 0);
    expectCorruption(interleaved, false, interleaved.offsets[1] as number, "plain record inside a batch");
    close(interleaved);
  });

  it("batches are delivered only once committed; an empty batch commits nothing; sealed segments deliver in file order", () => {
    const commit = (seq: number, n: number) => rec({ seq, type: C.RecordType.BATCH_COMMIT, key: "", value: undefined, generation: n });
    const seg = writeSegment(
      [commit(1, 0), rec({ seq: 2, flags: C.RF_IN_BATCH }), rec({ seq: 3, flags: C.RF_IN_BATCH }), commit(4, 2), rec({ seq: 5 }), rec({ seq: 6, flags: C.RF_IN_BATCH })],
      ZERO_TAIL,
    );
    const unsealed = scanFile(seg, false);
    expect(unsealed.visited.map((v) => v.record.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(unsealed.result).toEqual({ end: seg.offsets[5], torn: { offset: seg.offsets[5], reason: "uncommitted-batch" }, records: 5 });
    // In a sealed segment every record is committed: RF_IN_BATCH holds nothing back.
    fs.ftruncateSync(seg.fd, seg.end);
    const sealed = scanFile(seg, true);
    expect(sealed.visited.map((v) => v.record.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(sealed.result).toEqual({ end: seg.end, torn: null, records: 6 });
    close(seg);
  });
});
