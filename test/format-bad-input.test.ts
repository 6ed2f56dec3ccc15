/**
 * Bad input to the record codec (segments/record.ts, rules/names.ts) throws a typed error and
 * writes nothing.
 *
 * How it works: a table of bad records — keys too long (in ASCII and in multi-byte UTF-8), empty,
 * with NUL or a lone surrogate, or present where the type has none; invalid scopes ("../etc",
 * "a//b", "global/x", nine components, over-long or non-ASCII components); values over the
 * configured limit, of the wrong type, or on a type that carries none; non-integer, negative,
 * unsafe or non-number seq/generation/expiresAt; unknown types and flags; a record that is not an
 * object; an invalid limit — is fed to encodeRecord, which must throw InvalidArgumentError (code
 * "INVALID_ARGUMENT"). Each bad record is also pushed through the append path a store uses
 * (encode the whole group first, then reserve and writev) into a real segment file with no
 * preallocation: the file's size and bytes and the writer's end must be unchanged, and the
 * segment still scans clean with only the good records written before. The same values just
 * inside each limit are accepted, so the checks are not simply refusing everything.
 *
 * Properties stressed: validation happens before any byte exists (no partial record, no reserved
 * hole), and every refusal is the stable, typed INVALID_ARGUMENT error.
 */
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { EngramError, InvalidArgumentError } from "../rules/errors.js";
import { createSegmentFile } from "../segments/create.js";
import { readWholeFile } from "../segments/whole-file.js";
import { encodeRecord, type RecordInput } from "../segments/record.js";
import { scanRecords } from "../segments/scan.js";
import { SegmentWriter } from "../segments/writer.js";
import { tempDir } from "./helpers/tmp.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

const MiB = 1024 * 1024;
const LIMIT = MiB;
const GOOD: RecordInput = { type: C.RecordType.PUT, seq: 1, generation: 0, scope: "user:alice/session:42", key: "note", value: "v" };
const KEYLESS: RecordInput = { type: C.RecordType.SCOPE_ERASE, seq: 1, generation: 0, scope: "user:alice", key: "" };

let dir: string;
let fd: number;
let writer: SegmentWriter;
let goodWritten = 0;

beforeAll(async () => {
  await initChecksum();
  dir = tempDir("format-bad-input");
  // No preallocation: any byte appended would change the file's size.
  fd = createSegmentFile(dir, { segmentId: 1, generation: 0, headerSeq: 0, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, C.DATA_START);
  writer = new SegmentWriter(1, fd, C.DATA_START, C.DATA_START);
});

afterAll(() => {
  fs.closeSync(fd);
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The append path: encode every record of the group first, then reserve and write them with one writev. */
function appendGroup(records: RecordInput[], valueBytesMax: number = LIMIT): void {
  const encoded = records.map((r) => encodeRecord(r, valueBytesMax));
  const at = writer.reserve(encoded.reduce((n, b) => n + b.length, 0));
  writer.writeAtSync(encoded, at);
  writer.syncSync();
}

function with_(over: Record<string, unknown>, base: RecordInput = GOOD): RecordInput {
  return { ...base, ...over } as unknown as RecordInput;
}

/** Throws unless `fn` throws an InvalidArgumentError with the stable code. */
function expectInvalid(fn: () => unknown): InvalidArgumentError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(InvalidArgumentError);
  expect(caught).toBeInstanceOf(EngramError);
  const err = caught as InvalidArgumentError;
  expect(err.code).toBe("INVALID_ARGUMENT");
  expect(err.name).toBe("InvalidArgumentError");
  expect(err.message.length).toBeGreaterThan(10);
  return err;
}

/** encodeRecord refuses it, and the append path leaves the segment file exactly as it was. */
function expectRefusedAndNothingWritten(bad: RecordInput, valueBytesMax: number = LIMIT): void {
  expectInvalid(() => encodeRecord(bad, valueBytesMax));
  const before = readWholeFile(fd);
  const end = writer.end;
  const next = { ...GOOD, seq: 100 + goodWritten };
  expectInvalid(() => appendGroup([next, bad, next], valueBytesMax));
  expect(writer.end).toBe(end);
  expect(fs.fstatSync(fd).size).toBe(before.length);
  expect(Buffer.compare(readWholeFile(fd), before)).toBe(0);
}

const cases: Array<[name: string, bad: RecordInput, valueBytesMax?: number]> = [
  // keys
  ["key of 1025 ASCII bytes", with_({ key: "k".repeat(1025) })],
  ["key of 1025 bytes of 3-byte UTF-8", with_({ key: "€".repeat(341) + "ab" })],
  ["key of 1025 bytes of emoji", with_({ key: "😀".repeat(256) + "a" })],
  ["key of 1026 bytes of 2-byte UTF-8", with_({ key: "é".repeat(513) })],
  ["empty key on PUT", with_({ key: "" })],
  ["empty key on TOMBSTONE", with_({ key: "", type: C.RecordType.TOMBSTONE, value: undefined })],
  ["empty key on CLEAR", with_({ key: "", type: C.RecordType.CLEAR, value: undefined })],
  ["key with NUL", with_({ key: "a\u0000b" })],
  ["key that is only NUL", with_({ key: "\u0000" })],
  ["key with a lone surrogate", with_({ key: "a\ud800" })],
  ["key that is a number", with_({ key: 42 })],
  ["key that is null", with_({ key: null })],
  ["key missing", with_({ key: undefined })],
  ["key on SCOPE_ERASE", with_({ key: "x" }, KEYLESS)],
  ["key on BATCH_COMMIT", with_({ key: "x", type: C.RecordType.BATCH_COMMIT }, KEYLESS)],
  ["missing key on SCOPE_ERASE", with_({ key: undefined }, KEYLESS)],
  // scopes
  ['scope "../etc"', with_({ scope: "../etc" })],
  ['scope "a//b"', with_({ scope: "a//b" })],
  ['scope "global/x"', with_({ scope: "global/x" })],
  ['scope "x/global"', with_({ scope: "x/global" })],
  ["scope of 9 components", with_({ scope: "a/b/c/d/e/f/g/h/i" })],
  ["empty scope", with_({ scope: "" })],
  ['scope "/a"', with_({ scope: "/a" })],
  ['scope "a/"', with_({ scope: "a/" })],
  ['scope ".."', with_({ scope: ".." })],
  ['scope "a/./b"', with_({ scope: "a/./b" })],
  ["scope with a space", with_({ scope: "user alice" })],
  ["scope with a backslash", with_({ scope: "a\\b" })],
  ["scope with non-ASCII", with_({ scope: "usér" })],
  ["scope with NUL", with_({ scope: "a\u0000" })],
  ["scope component of 65 bytes", with_({ scope: "a".repeat(65) })],
  ["scope that is a number", with_({ scope: 7 })],
  ["scope missing", with_({ scope: undefined })],
  ["scope invalid on SCOPE_ERASE", with_({ scope: "a//b" }, KEYLESS)],
  // values
  ["bytes value one byte over the limit", with_({ value: new Uint8Array(LIMIT + 1) })],
  ["text value one byte over the limit (multi-byte)", with_({ value: "€".repeat((LIMIT - 1) / 3) + "ab" })],
  ["16 MiB + 1 bytes at a 16 MiB limit", with_({ value: new Uint8Array(16 * MiB + 1) }), 16 * MiB],
  ["one byte at a zero limit", with_({ value: "x" }), 0],
  ["value that is a number", with_({ value: 5 })],
  ["value that is null", with_({ value: null })],
  ["value missing on PUT", with_({ value: undefined })],
  ["value that is an ArrayBuffer", with_({ value: new ArrayBuffer(4) })],
  ["value that is an array", with_({ value: [1, 2, 3] })],
  ["value that is an object", with_({ value: { text: "v" } })],
  ["value string with a lone surrogate", with_({ value: "\udc00x" })],
  ["value on TOMBSTONE", with_({ type: C.RecordType.TOMBSTONE, value: "v" })],
  ["value on CLEAR", with_({ type: C.RecordType.CLEAR, value: new Uint8Array(1) })],
  ["value on SCOPE_ERASE", with_({ value: "" }, KEYLESS)],
  // numbers
  ["seq 0", with_({ seq: 0 })],
  ["seq -1", with_({ seq: -1 })],
  ["seq 1.5", with_({ seq: 1.5 })],
  ["seq NaN", with_({ seq: Number.NaN })],
  ["seq Infinity", with_({ seq: Number.POSITIVE_INFINITY })],
  ["seq 2^53 (unsafe)", with_({ seq: 2 ** 53 })],
  ['seq "1"', with_({ seq: "1" })],
  ["seq 1n", with_({ seq: 1n })],
  ["seq missing", with_({ seq: undefined })],
  ["generation -1", with_({ generation: -1 })],
  ["generation 0.5", with_({ generation: 0.5 })],
  ["generation 2^53", with_({ generation: 2 ** 53 })],
  ['generation "0"', with_({ generation: "0" })],
  ["generation missing", with_({ generation: undefined })],
  ["expiresAt -1", with_({ expiresAt: -1 })],
  ["expiresAt 1.5", with_({ expiresAt: 1.5 })],
  ["expiresAt as a Date", with_({ expiresAt: new Date() })],
  ["type 0", with_({ type: 0 })],
  ["type 6", with_({ type: 6 })],
  ['type "PUT"', with_({ type: "PUT" })],
  ["type missing", with_({ type: undefined })],
  ["flags RF_UTF8 (derived, never given)", with_({ flags: C.RF_UTF8 })],
  ["flags 4 (unknown)", with_({ flags: 4 })],
  ["flags -1", with_({ flags: -1 })],
  ['flags "2"', with_({ flags: "2" })],
  // the record and the limit themselves
  ["record null", null as unknown as RecordInput],
  ["record undefined", undefined as unknown as RecordInput],
  ['record "PUT"', "PUT" as unknown as RecordInput],
  ["valueBytesMax NaN", GOOD, Number.NaN],
  ["valueBytesMax -1", GOOD, -1],
  ["valueBytesMax 1.5", GOOD, 1.5],
];

describe("bad input throws InvalidArgumentError and writes nothing", () => {
  it("the segment starts with good records only", () => {
    appendGroup([GOOD, KEYLESS]);
    goodWritten = 2;
    writer.truncateToEnd(); // drop the preallocation the append made: the file ends at its last record
    expect(writer.end).toBeGreaterThan(C.DATA_START);
    expect(fs.fstatSync(fd).size).toBe(writer.end);
  });

  it.each(cases)("%s", (_name: string, bad: RecordInput, limit?: number) => {
    expectRefusedAndNothingWritten(bad, limit ?? LIMIT);
  });

  it("after all refusals the segment holds exactly the good records and scans clean", () => {
    const records: number[] = [];
    const end = scanRecords(readWholeFile(fd), 1, true, (r) => records.push(r.seq), true, 1);
    expect(end).toEqual({ end: writer.end, torn: null, records: goodWritten });
    expect(fs.fstatSync(fd).size).toBe(writer.end);
  });
});

describe("just inside every limit is accepted", () => {
  it("keys, scopes, values and numbers at their maximums encode", () => {
    const ok: Array<[RecordInput, number?]> = [
      [with_({ key: "k".repeat(1024) })],
      [with_({ key: "€".repeat(341) + "a" })],
      [with_({ key: "😀".repeat(256) })],
      [with_({ key: "\u0001" })],
      [with_({ scope: "a/b/c/d/e/f/g/h" })],
      [with_({ scope: "a".repeat(64) })],
      [with_({ scope: "Global" })],
      [with_({ scope: "a..b/c.d/0:1@x-y_z" })],
      [with_({ value: new Uint8Array(LIMIT) })],
      [with_({ value: "€".repeat((LIMIT - 1) / 3) + "a" })],
      [with_({ value: "" }), 0],
      [with_({ value: new Uint8Array(0) }), 0],
      [with_({ seq: C.SEQ_MAX, generation: C.SEQ_MAX, expiresAt: C.SEQ_MAX })],
      [with_({ flags: C.RF_IN_BATCH })],
      [with_({ value: undefined, type: C.RecordType.TOMBSTONE })],
      [with_({ type: C.RecordType.BATCH_COMMIT }, KEYLESS)],
    ];
    for (const [input, limit] of ok) expect(encodeRecord(input, limit ?? LIMIT).length).toBeGreaterThanOrEqual(C.RECORD_OVERHEAD);
  });
});
