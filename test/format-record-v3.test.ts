/**
 * The version-3 record frame (segments/record-v3.ts, docs/FORMAT.md "Record, version 3") on its
 * own, in memory: encodeRecord (format 3 is the written one) -> decodeRecord.
 *
 * How it works: every record type is encoded and decoded again at the edges of each field — the
 * varint boundaries 127/128, 16383/16384, 2^21, 2^28 and 2^53 − 1 for seq, generation, expiry and
 * the value length, keys and scopes at their maxima, empty values — and each record's length must
 * equal recordLengthV3 of its fields (what hint version 3 derives), including totals on either side
 * of the length varint's own 1/2-byte boundary. The byte layout is checked against a record
 * assembled here with this file's own LEB128 and xxhash-wasm's h64 (the low 32 bits), and the hex
 * example in docs/FORMAT.md against the encoder. Then one record is mutated at every single bit
 * and decodeRecord must refuse every mutant.
 *
 * The twin: a record whose varints are padded (non-shortest, e.g. 0x85 0x00 for 5) with a valid
 * checksum must be refused ("structure"); with the shortest-form check switched off
 * (unsafeAcceptPaddedVarints) the same bytes decode, and their length is then not the one
 * recordLengthV3 derives from the fields — the wrong value a hint would compute. So the check is
 * what keeps "a record's length is a function of its fields" true for every record a reader accepts.
 */
import * as fs from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { decodeRecord, encodeRecord, isRecord, probeRecord, recordLengthAt, type DecodedRecord, type RecordInput } from "../segments/record.js";
import { recordLengthV3, unsafeAcceptPaddedVarints, varintBytes } from "../segments/record-v3.js";
import { formatVersionWritten } from "../segments/version-written.js";

let h64: (bytes: Uint8Array, seed?: bigint) => bigint;

beforeAll(async () => {
  await initChecksum();
  h64 = (await xxhash()).h64Raw;
});

afterEach(() => unsafeAcceptPaddedVarints(false));

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");
const MAX_SCOPE = Array.from({ length: C.SCOPE_DEPTH_MAX }, (_, i) => `${i}`.padEnd(C.SCOPE_COMPONENT_BYTES_MAX, "x")).join("/");
const BOUNDS = [0, 1, 127, 128, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 2 ** 28, 2 ** 35, 2 ** 42, 2 ** 49, C.SEQ_MAX];

/** LEB128 of a safe integer, in its shortest form: this file's own encoder. */
function leb(v: number): number[] {
  const out: number[] = [];
  let rest = v;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return out;
}

/** The record assembled field by field from docs/FORMAT.md's version-3 table. */
function assemble(type: number, flags: number, seq: number, gen: number, exp: number, scope: string, key: string, value: Buffer): Buffer {
  const body = [type | (flags << 3), ...leb(utf8(scope)), ...leb(utf8(key)), ...leb(value.length), ...leb(seq), ...leb(gen), ...leb(exp)];
  const payload = Buffer.concat([Buffer.from(body), Buffer.from(scope), Buffer.from(key), value]);
  let total = payload.length + 4 + 1;
  while (leb(total).length + payload.length + 4 !== total) total += 1;
  const head = Buffer.concat([Buffer.from(leb(total)), payload]);
  const sum = Buffer.alloc(4);
  sum.writeUInt32LE(Number(h64(head, 0n) & 0xffffffffn));
  return Buffer.concat([head, sum]);
}

function expectRoundTrip(input: RecordInput): DecodedRecord {
  const buf = encodeRecord(input);
  const value = input.value;
  const valueLen = value === undefined ? 0 : typeof value === "string" ? utf8(value) : value.byteLength;
  expect(buf.length).toBe(recordLengthV3(utf8(input.scope), utf8(input.key), valueLen, input.seq, input.generation, input.expiresAt ?? 0));
  expect(recordLengthAt(buf, 0)).toBe(buf.length);
  const got = decodeRecord(buf, 0, buf.length);
  if (!isRecord(got)) throw new Error(`decode failed: ${got}`);
  expect([got.type, got.seq, got.generation, got.expiresAt, got.scope, got.key, got.length]).toEqual([input.type, input.seq, input.generation, input.expiresAt ?? 0, input.scope, input.key, buf.length]);
  expect(got.flags).toBe((input.flags ?? 0) | (typeof value === "string" ? C.RF_UTF8 : 0));
  if (value === undefined) expect(got.value).toBeNull();
  else if (typeof value === "string") expect(got.value).toBe(value);
  else expect(Buffer.compare(got.value as Uint8Array, value)).toBe(0);
  // The checksum covers content only: the record decodes the same at any offset.
  if (buf.length < 64 * 1024) {
    const shifted = Buffer.concat([Buffer.from([9, 9, 9]), buf]);
    expect(decodeRecord(shifted, 3, shifted.length)).toEqual(got);
  }
  return got;
}

describe("record frame version 3", () => {
  it("is the frame this code writes", () => {
    expect(formatVersionWritten()).toBe(C.FORMAT_VERSION);
    expect(C.FORMAT_VERSION).toBe(C.FORMAT_VERSION_LEAN);
  });

  it("round-trips seq, generation and expiry at every varint boundary", () => {
    for (const n of BOUNDS) {
      expectRoundTrip({ type: C.RecordType.PUT, seq: Math.max(1, n), generation: n, expiresAt: n, scope: "default", key: "k", value: "v" });
      expectRoundTrip({ type: C.RecordType.TOMBSTONE, seq: Math.max(1, n), generation: n, expiresAt: n, scope: "global", key: "k" });
    }
  });

  it("round-trips every type, empty and boundary-length values, and names at their maxima", () => {
    for (const len of [0, 1, 127, 128, 16383, 16384, 2 ** 21]) {
      expectRoundTrip({ type: C.RecordType.PUT, seq: 3, generation: 1, scope: MAX_SCOPE, key: "€".repeat(341) + "a", value: new Uint8Array(len).fill(7) });
    }
    expectRoundTrip({ type: C.RecordType.PUT, seq: 3, generation: 1, scope: "s", key: "k".repeat(C.KEY_BYTES_MAX), value: "" });
    expectRoundTrip({ type: C.RecordType.CLEAR, seq: 4, generation: 2, expiresAt: 1_700_000_000_000, scope: "user:alice", key: "theme" });
    expectRoundTrip({ type: C.RecordType.SCOPE_ERASE, flags: C.RF_IN_BATCH, seq: 5, generation: 0, expiresAt: 1_700_000_000_000, scope: "user:alice", key: "", value: new Uint8Array(300).fill(1) });
    expectRoundTrip({ type: C.RecordType.BATCH_COMMIT, seq: 6, generation: 1000, scope: "global", key: "" });
  });

  it("derives the length across the length varint's own boundary (a total of 127/128 bytes)", () => {
    const lengths = new Set<number>();
    for (let v = 90; v < 130; v++) {
      const got = expectRoundTrip({ type: C.RecordType.PUT, seq: 1, generation: 0, scope: "global", key: "k", value: "x".repeat(v) });
      lengths.add(got.length);
    }
    expect(lengths.has(127) && lengths.has(129) && !lengths.has(128)).toBe(true); // 128 needs a 2-byte length, so 127 + 1 payload byte is 129
    expect(recordLengthV3(C.SCOPE_BYTES_MAX, C.KEY_BYTES_MAX, C.VALUE_BYTES_MAX, C.SEQ_MAX, C.SEQ_MAX, C.SEQ_MAX)).toBe(C.RECORD_V3_BYTES_MAX);
    expect(varintBytes(C.SEQ_MAX)).toBe(C.VARINT_BYTES_MAX);
  });

  it("lays out the bytes FORMAT.md's table describes, and its hex example is what the code writes", () => {
    const value = Buffer.from("dark");
    const want = assemble(C.RecordType.PUT, C.RF_UTF8 | C.RF_IN_BATCH, 0x0102030405, 77, 1_700_000_000_000, "user:alice", "theme", value);
    const got = encodeRecord({ type: C.RecordType.PUT, flags: C.RF_IN_BATCH, seq: 0x0102030405, generation: 77, expiresAt: 1_700_000_000_000, scope: "user:alice", key: "theme", value: "dark" });
    expect(got.toString("hex")).toBe(want.toString("hex"));
    const doc = fs.readFileSync(new URL("../docs/FORMAT.md", import.meta.url), "utf8");
    const m = /<!-- example: record-v3 -->\s*```\n([\s\S]*?)```/.exec(doc);
    if (m === null) throw new Error('docs/FORMAT.md has no "record-v3" example');
    const hex = (m[1] as string).split("\n").map((line) => line.replace(/^\s*\d+:/, "").replace(/\s+/g, "")).join("");
    const example = encodeRecord({ type: C.RecordType.PUT, seq: 7, generation: 3, scope: "user:alice", key: "theme", value: "dark" });
    expect(hex).toBe(example.toString("hex"));
    expect(example.length).toBe(31); // a 12-byte frame + 19 payload bytes; 67 in the version-2 frame
  });

  it("zeroed space is empty, a cut record short, an impossible length a length fault", () => {
    const rec = encodeRecord({ type: C.RecordType.PUT, seq: 300, generation: 1, scope: "default", key: "key", value: "x".repeat(200) });
    expect(probeRecord(new Uint8Array(64), 0, 64)).toBe("empty");
    expect(probeRecord(rec, 0, 0)).toBe("empty");
    for (const cut of [1, 2, 5, 20, rec.length - 1]) expect(probeRecord(rec, 0, cut)).toBe("short");
    expect(probeRecord(Buffer.from([5, 1, 1, 0, 0, 1, 0, 0, 0x67, 0, 0, 0, 0]), 0, 13)).toBe("length"); // below the smallest record
    expect(probeRecord(Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), 0, 9)).toBe("length");
  });

  it("refuses every single-bit flip of a record", () => {
    const rec = encodeRecord({ type: C.RecordType.PUT, flags: C.RF_IN_BATCH, seq: 123_456, generation: 9, expiresAt: 1_700_000_000_000, scope: "user:alice/chat", key: "preferences", value: "x".repeat(150) });
    let refused = 0;
    for (let i = 0; i < rec.length * 8; i++) {
      const bad = Buffer.from(rec);
      bad[i >> 3] = (bad[i >> 3] as number) ^ (1 << (i & 7));
      const got = decodeRecord(bad, 0, bad.length);
      if (!isRecord(got)) refused += 1;
    }
    expect(refused).toBe(rec.length * 8);
  });

  it("refuses a value on a keyed type, seq 0 and a GROUP of the wrong shape even with a valid checksum", () => {
    const reseal = (fields: [number, number, number, number, number, string, string, Buffer]): Buffer => assemble(...fields);
    const decode = (b: Buffer): ReturnType<typeof decodeRecord> => decodeRecord(b, 0, b.length);
    expect(decode(reseal([C.RecordType.TOMBSTONE, 0, 5, 1, 0, "s", "k", Buffer.from("v")]))).toBe("structure");
    expect(decode(reseal([C.RecordType.PUT, 0, 0, 1, 0, "s", "k", Buffer.from("v")]))).toBe("structure");
    expect(decode(reseal([C.RecordType.GROUP, 0, 5, 1, 0, "global", "", Buffer.alloc(15)]))).toBe("structure");
    expect(decode(reseal([7, 0, 5, 1, 0, "s", "k", Buffer.alloc(0)]))).toBe("structure");
    expect(decode(reseal([C.RecordType.PUT, 4, 5, 1, 0, "s", "k", Buffer.alloc(0)]))).toBe("structure"); // flag bit 2 is not known
  });

  it("refuses a padded varint with a valid checksum; the twin accepts it and its length is not the derived one", () => {
    const good = assemble(C.RecordType.PUT, 0, 5, 1, 0, "s", "k", Buffer.from("v"));
    // Pad the seq varint (5 -> 0x85 0x00) and fix up the length and the checksum.
    const seqAt = 1 + 1 + 3; // length, type, the three length varints (each one byte here)
    const body = Buffer.concat([good.subarray(1, seqAt), Buffer.from([0x85, 0x00]), good.subarray(seqAt + 1, good.length - 4)]);
    const head = Buffer.concat([Buffer.from([body.length + 1 + 4]), body]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32LE(Number(h64(head, 0n) & 0xffffffffn));
    const padded = Buffer.concat([head, sum]);
    expect(decodeRecord(good, 0, good.length)).toMatchObject({ seq: 5 });
    expect(decodeRecord(padded, 0, padded.length)).toBe("structure");
    unsafeAcceptPaddedVarints(true);
    const twin = decodeRecord(padded, 0, padded.length);
    if (!isRecord(twin)) throw new Error(`the twin decodes the padded record (${twin})`);
    expect(twin.seq).toBe(5);
    expect(twin.length).not.toBe(recordLengthV3(1, 1, 1, twin.seq, twin.generation, twin.expiresAt)); // what a hint would derive
  });
});
