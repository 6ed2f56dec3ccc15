/**
 * The append path and the point read over real files: encodeRecord -> SegmentWriter (reserve,
 * writev, fdatasync) -> segment file -> readRecordAt / scanRecords.
 *
 * How it works: records of every type and at every edge (empty and 1024-byte multi-byte keys,
 * scopes at maximum depth, empty values, values at a 1 MiB limit and one of 16 MiB, expiry,
 * batches) are encoded, given offsets with reserve(), written in groups with writeAt (async
 * writev) and writeAtSync, made durable with sync(), and the file is then opened again read-only,
 * as after a restart. Every record must come back identical through a point read that checks
 * (type, scope, key, generation, seq) and through a sequential scan, at the offsets reserve()
 * returned. Point reads are then pointed at wrong places (other record, moved record, wrong
 * length, zeroed space, past the end, a damaged byte) and must name the check that failed.
 * Preallocation is checked through the file size: appends inside preallocated space do not grow
 * the file; crossing its end grows it by PREALLOCATE_STEP_BYTES; truncateToEnd cuts it at the last
 * record and the segment then scans clean as sealed.
 *
 * Properties stressed: what the writer puts on disk is exactly what the codec produced, at the
 * reserved offsets; a point read never returns a record other than the one it expects, even when
 * a different valid record (e.g. one moved there by compaction) sits at the offset.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { createSegmentFile } from "../segments/create.js";
import { segmentFileName } from "../segments/file-names.js";
import { readRecordAt, type PointReadFault, type RecordExpectation } from "../segments/point-read.js";
import { readWholeFile } from "../segments/whole-file.js";
import { decodeRecord, encodeRecord, type DecodedRecord, type RecordInput } from "../segments/record.js";
import { scanRecords } from "../segments/scan.js";
import { PREALLOCATE_STEP_BYTES, SegmentWriter, totalBytes } from "../segments/writer.js";
import { tempDir } from "./helpers/tmp.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

const MiB = 1024 * 1024;
let dir: string;
let nextId = 1;

beforeAll(async () => {
  await initChecksum();
  dir = tempDir("format-writer");
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const MAX_SCOPE = Array.from({ length: C.SCOPE_DEPTH_MAX }, (_, i) => `c${i}`.padEnd(C.SCOPE_COMPONENT_BYTES_MAX, "-")).join("/");
/** 2-, 3- and 4-byte characters: (2 + 3 + 4) * 113 + 7 = 1024 bytes of UTF-8. */
const KEY_1024 = "ü€😀".repeat(113) + "abcdefg";

function newSegment(preallocate: number): { id: number; fd: number; writer: SegmentWriter; file: string } {
  const id = nextId++;
  const size = C.DATA_START + preallocate;
  const fd = createSegmentFile(dir, { segmentId: id, generation: 0, headerSeq: 0, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, size);
  return { id, fd, writer: new SegmentWriter(id, fd, C.DATA_START, size), file: path.join(dir, segmentFileName(id)) };
}

function expectationOf(r: RecordInput): RecordExpectation {
  return { type: r.type, scope: r.scope, key: r.key, generation: r.generation, seq: r.seq };
}

function expectSame(got: DecodedRecord | PointReadFault, input: RecordInput, length: number): void {
  if (typeof got === "string") throw new Error(`expected a record, got fault ${got}`);
  expect(got.length).toBe(length);
  expect([got.type, got.seq, got.generation, got.expiresAt, got.scope, got.key]).toEqual([input.type, input.seq, input.generation, input.expiresAt ?? 0, input.scope, input.key]);
  expect(got.flags).toBe((input.flags ?? 0) | (typeof input.value === "string" ? C.RF_UTF8 : 0));
  const v = input.value;
  if (v === undefined) expect(got.value).toBeNull();
  else if (typeof v === "string") expect(got.value === v).toBe(true);
  else expect(Buffer.compare(got.value as Uint8Array, v)).toBe(0);
}

/** Reserves, then writes the encoded records in groups (alternating async writev and sync writev). */
async function append(writer: SegmentWriter, encoded: Buffer[], groupSize: number): Promise<number[]> {
  const offsets = encoded.map((b) => writer.reserve(b.length));
  for (let g = 0, n = 0; g < encoded.length; g += groupSize, n++) {
    const group = encoded.slice(g, g + groupSize);
    if (n % 2 === 0) await writer.writeAt(group, offsets[g] as number);
    else writer.writeAtSync(group, offsets[g] as number);
  }
  await writer.sync();
  return offsets;
}

/** Opens the file again read-only (as after a restart) and checks every record both ways. */
function verifyOnDisk(file: string, id: number, inputs: RecordInput[], encoded: Buffer[], offsets: number[], sealed: boolean): void {
  const fd = fs.openSync(file, "r");
  try {
    for (let i = 0; i < inputs.length; i++) {
      const input = inputs[i] as RecordInput;
      expectSame(readRecordAt(fd, offsets[i] as number, (encoded[i] as Buffer).length, expectationOf(input)), input, (encoded[i] as Buffer).length);
    }
    const visited: Array<{ r: DecodedRecord; at: number }> = [];
    const end = scanRecords(readWholeFile(fd), id, sealed, (r, at) => visited.push({ r, at }), true, 1);
    expect(end.torn).toBeNull();
    expect(end.records).toBe(inputs.length);
    expect(visited.map((v) => v.at)).toEqual(offsets);
    visited.forEach((v, i) => expectSame(v.r, inputs[i] as RecordInput, (encoded[i] as Buffer).length));
  } finally {
    fs.closeSync(fd);
  }
}

describe("round trip through SegmentWriter, the file, readRecordAt and scanRecords", () => {
  it("every record type, empty and maximum keys, maximum-depth scopes, empty values", async () => {
    expect(Buffer.byteLength(KEY_1024)).toBe(C.KEY_BYTES_MAX);
    expect(Buffer.byteLength(MAX_SCOPE)).toBe(C.SCOPE_BYTES_MAX);
    const P = C.RecordType;
    const inputs: RecordInput[] = [
      { type: P.PUT, seq: 1, generation: 1, scope: "user:alice", key: "name", value: "Alice ✓" },
      { type: P.PUT, seq: 2, generation: 1, scope: "user:alice", key: "avatar", value: Uint8Array.from({ length: 777 }, (_, i) => (i * 13) & 0xff) },
      { type: P.PUT, seq: 3, generation: 2, scope: MAX_SCOPE, key: KEY_1024, value: "" },
      { type: P.PUT, seq: 4, generation: 2, scope: MAX_SCOPE, key: KEY_1024, value: new Uint8Array(0), expiresAt: Date.UTC(2030, 0, 1) },
      { type: P.TOMBSTONE, seq: 5, generation: 2, scope: MAX_SCOPE, key: KEY_1024 },
      { type: P.CLEAR, seq: 6, generation: 3, scope: "user:alice", key: "name" },
      { type: P.SCOPE_ERASE, seq: 7, generation: 0, scope: MAX_SCOPE, key: "" },
      { type: P.SCOPE_ERASE, seq: 8, generation: 0, scope: C.ROOT_SCOPE, key: "" },
      { type: P.PUT, seq: 9, generation: 4, scope: "user:bob", key: "a", value: "in a batch", flags: C.RF_IN_BATCH },
      { type: P.TOMBSTONE, seq: 10, generation: 4, scope: "user:bob", key: "b", flags: C.RF_IN_BATCH },
      { type: P.BATCH_COMMIT, seq: 11, generation: 2, scope: "user:bob", key: "" },
      { type: P.PUT, seq: C.SEQ_MAX, generation: C.SEQ_MAX, scope: "x", key: "😀", value: "😀", expiresAt: C.SEQ_MAX },
    ];
    const encoded = inputs.map((r) => encodeRecord(r));
    const { id, fd, writer, file } = newSegment(64 * 1024);
    const offsets = await append(writer, encoded, 3);
    expect(offsets[0]).toBe(C.DATA_START);
    expect(writer.end).toBe(C.DATA_START + totalBytes(encoded));
    // the bytes on disk are exactly the codec's, back to back from DATA_START
    expect(Buffer.compare(readWholeFile(fd).subarray(C.DATA_START, writer.end), Buffer.concat(encoded))).toBe(0);
    fs.closeSync(fd);
    verifyOnDisk(file, id, inputs, encoded, offsets, false);
  });

  it("values at the configured maximum: 1 MiB text and bytes, and 16 MiB; the file grows past its preallocation", async () => {
    const text = "ü".repeat(MiB / 2); // exactly 1 MiB of UTF-8
    const bytes = new Uint8Array(MiB);
    for (let i = 0; i < bytes.length; i += 997) bytes[i] = (i >> 3) & 0xff;
    const big = new Uint8Array(16 * MiB);
    big.fill(0x42, 0, 1000);
    big.fill(0x24, big.length - 1000);
    const inputs: RecordInput[] = [
      { type: C.RecordType.PUT, seq: 1, generation: 1, scope: MAX_SCOPE, key: KEY_1024, value: text },
      { type: C.RecordType.PUT, seq: 2, generation: 1, scope: MAX_SCOPE, key: KEY_1024, value: bytes },
      { type: C.RecordType.PUT, seq: 3, generation: 5, scope: "big", key: "sixteen", value: big },
    ];
    const encoded = [encodeRecord(inputs[0] as RecordInput, MiB), encodeRecord(inputs[1] as RecordInput, MiB), encodeRecord(inputs[2] as RecordInput, 16 * MiB)];
    const { id, fd, writer, file } = newSegment(4096);
    const offsets = await append(writer, encoded, 1);
    expect(fs.fstatSync(fd).size).toBeGreaterThanOrEqual(writer.end);
    verifyOnDisk(file, id, inputs, encoded, offsets, false);
    writer.truncateToEnd();
    expect(fs.fstatSync(fd).size).toBe(writer.end);
    fs.closeSync(fd);
    verifyOnDisk(file, id, inputs, encoded, offsets, true);
  });
});

describe("preallocation", () => {
  it("appends inside preallocated space keep the file size; crossing its end grows it by a step", () => {
    const { fd, writer } = newSegment(1000);
    const size = (): number => fs.fstatSync(fd).size;
    expect(size()).toBe(C.DATA_START + 1000);
    const small = encodeRecord({ type: C.RecordType.PUT, seq: 1, generation: 1, scope: "s", key: "k", value: "x".repeat(400) });
    for (let i = 0; i < 2; i++) writer.writeAtSync([small], writer.reserve(small.length));
    writer.syncSync();
    expect(size()).toBe(C.DATA_START + 1000);
    const at = writer.reserve(small.length); // crosses the end
    expect(size()).toBe(C.DATA_START + 1000 + PREALLOCATE_STEP_BYTES);
    writer.writeAtSync([small], at);
    const huge = writer.reserve(2 * PREALLOCATE_STEP_BYTES + 10); // more than a step: the file grows to fit it
    expect(size()).toBe(huge + 2 * PREALLOCATE_STEP_BYTES + 10);
    fs.ftruncateSync(fd, huge); // (forget that reservation; nothing was written there)
    const got = scanRecords(readWholeFile(fd), 1, false, () => {}, true, 1);
    expect(got).toEqual({ end: at + small.length, torn: null, records: 3 });
    fs.closeSync(fd);
  });

  it("refuses bounds that would write over the headers or past its allocation", () => {
    expect(() => new SegmentWriter(1, -1, C.DATA_START - 1, 4096)).toThrow();
    expect(() => new SegmentWriter(1, -1, 4096, 4095)).toThrow();
  });

  it("writes a group of buffers (including views into larger buffers) contiguously", async () => {
    const { fd, writer } = newSegment(4096);
    const recs = [1, 2, 3].map((seq) => encodeRecord({ type: C.RecordType.TOMBSTONE, seq, generation: seq, scope: "s", key: `k${seq}` }));
    const host = Buffer.concat([Buffer.alloc(5, 9), recs[1] as Buffer, Buffer.alloc(5, 9)]);
    const group = [recs[0] as Buffer, host.subarray(5, 5 + (recs[1] as Buffer).length), new Uint8Array(recs[2] as Buffer)];
    const at = writer.reserve(totalBytes(group));
    await writer.writeAt(group, at);
    writer.syncSync();
    expect(Buffer.compare(readWholeFile(fd).subarray(at, at + totalBytes(group)), Buffer.concat(recs))).toBe(0);
    fs.closeSync(fd);
  });
});

describe("readRecordAt names the check that failed", () => {
  it("wrong type, scope, key, generation, seq; wrong length; zeroed or missing bytes; a damaged byte", async () => {
    const a: RecordInput = { type: C.RecordType.PUT, seq: 10, generation: 3, scope: "user:alice", key: "k", value: "value-a" };
    const b: RecordInput = { type: C.RecordType.PUT, seq: 11, generation: 3, scope: "user:alice", key: "k", value: "value-b" };
    const encA = encodeRecord(a);
    const encB = encodeRecord(b);
    const { fd, writer } = newSegment(4096);
    const [atA, atB] = await append(writer, [encA, encB], 2);
    const okA = readRecordAt(fd, atA as number, encA.length, expectationOf(a));
    expectSame(okA, a, encA.length);
    expect(readRecordAt(fd, atA as number, encA.length, {})).toEqual(okA); // nothing compared
    const exp = expectationOf(a);
    expect(readRecordAt(fd, atA as number, encA.length, { ...exp, type: C.RecordType.TOMBSTONE })).toBe("type");
    expect(readRecordAt(fd, atA as number, encA.length, { ...exp, scope: "user:bob" })).toBe("scope");
    expect(readRecordAt(fd, atA as number, encA.length, { ...exp, key: "K" })).toBe("key");
    expect(readRecordAt(fd, atA as number, encA.length, { ...exp, generation: 4 })).toBe("generation");
    expect(readRecordAt(fd, atA as number, encA.length, { ...exp, seq: 11 })).toBe("seq");
    // Same slot, same generation, a different valid record at the offset: only seq tells them apart.
    expect(readRecordAt(fd, atB as number, encB.length, exp)).toBe("seq");
    expect(readRecordAt(fd, atA as number, encA.length + 1, exp)).toBe("length");
    expect(readRecordAt(fd, atA as number, encA.length - 1, exp)).toBe("short");
    expect(typeof readRecordAt(fd, (atA as number) + 1, encA.length, exp)).toBe("string"); // off by one
    expect(readRecordAt(fd, writer.end, encA.length, exp)).toBe("empty"); // zeroed preallocation
    expect(readRecordAt(fd, fs.fstatSync(fd).size - 2, encA.length, exp)).toBe("short"); // past the end of the file
    expect(readRecordAt(fd, fs.fstatSync(fd).size, encA.length, exp)).toBe("empty");
    fs.writeSync(fd, Buffer.of(0x21), 0, 1, (atA as number) + encA.length - 12); // inside the value
    expect(readRecordAt(fd, atA as number, encA.length, exp)).toBe("checksum");
    fs.closeSync(fd);
  });

  it("a record copied verbatim to another offset reads the same there; the old offset now fails the expectation", async () => {
    const mine: RecordInput = { type: C.RecordType.PUT, seq: 20, generation: 7, scope: "user:alice/session:1", key: "secret", value: "alice's" };
    const other: RecordInput = { type: C.RecordType.PUT, seq: 21, generation: 2, scope: "user:bob", key: "secret", value: "bob's" };
    const encMine = encodeRecord(mine);
    const encOther = encodeRecord(other);
    const { fd, writer } = newSegment(4096);
    const [at] = await append(writer, [encMine], 1);
    // compaction moves `mine` and writes `other` where it was: both checksums are valid
    const moved = writer.reserve(encMine.length);
    writer.writeAtSync([readWholeFile(fd).subarray(at as number, (at as number) + encMine.length)], moved);
    writer.writeAtSync([encOther], at as number);
    expectSame(readRecordAt(fd, moved, encMine.length, expectationOf(mine)), mine, encMine.length);
    const stale = readRecordAt(fd, at as number, encMine.length, expectationOf(mine));
    expect(typeof stale).toBe("string"); // never alice's token returning bob's bytes
    expect(decodeRecord(readWholeFile(fd), at as number, (at as number) + encOther.length)).toMatchObject({ scope: "user:bob" });
    expect(readRecordAt(fd, at as number, encOther.length, { scope: mine.scope, key: mine.key, generation: mine.generation })).toBe("scope");
    expect(readRecordAt(fd, at as number, encOther.length, { key: mine.key, generation: mine.generation })).toBe("generation");
    fs.closeSync(fd);
  });
});
