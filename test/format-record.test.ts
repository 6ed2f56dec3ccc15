/**
 * The record codec (segments/record.ts) on its own, in memory: encodeRecord -> decodeRecord.
 *
 * How it works: every record type (PUT with a UTF-8 and with a bytes value, TOMBSTONE, CLEAR,
 * SCOPE_ERASE, BATCH_COMMIT) is encoded and decoded again, including the edges of the format:
 * empty values, keys of exactly KEY_BYTES_MAX bytes of (multi-byte) UTF-8, scopes at the maximum
 * depth and length, sequence/generation/expiry at SEQ_MAX, and values at the configured maximum
 * (1 MiB and the 16 MiB engine default). The byte layout is checked against a record assembled
 * field by field from the offsets in constants.ts and hashed with xxhash-wasm directly, and the
 * hex examples in docs/FORMAT.md are compared with the encoder's output, so neither the codec nor
 * the document can drift without a failure here. Then one whole record
 * (~200 bytes) is mutated at every single bit and decodeRecord must refuse every mutant.
 *
 * Properties stressed: lossless round trip at every edge; the checksum covers content only (a
 * record decodes identically at any offset, so compaction may copy it verbatim); no single-bit
 * error in any field, payload byte or the checksum itself is ever decoded as a record.
 * Files and the scanner are covered by format-writer/format-scan; here no file is needed.
 */
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { encodeHeader } from "../segments/header.js";
import { decodeRecord, encodeRecord, isRecord, probeRecord, type DecodedRecord, type RecordInput } from "../segments/record.js";
import { setFormatVersionWritten } from "../segments/version-written.js";

// The 48-byte record frame (format 2, still read) is pinned here; format-record-v3.test.ts covers the version-3 frame.
beforeAll(() => setFormatVersionWritten(2));
afterAll(() => setFormatVersionWritten(3));

const MiB = 1024 * 1024;
const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");

let h64: (bytes: Uint8Array, seed?: bigint) => bigint;

beforeAll(async () => {
  await initChecksum();
  h64 = (await xxhash()).h64Raw;
});

/** A scope at the maximum depth, every component at the maximum length: exactly SCOPE_BYTES_MAX. */
const MAX_SCOPE = Array.from({ length: C.SCOPE_DEPTH_MAX }, (_, i) => `${i}`.padEnd(C.SCOPE_COMPONENT_BYTES_MAX, "x")).join("/");
/** 1024-byte keys: ASCII, 3-byte (€), 4-byte (emoji, surrogate pairs) and 2-byte characters. */
const MAX_KEYS = ["k".repeat(1024), "€".repeat(341) + "a", "😀".repeat(256), "é".repeat(512), "a€😀é".repeat(102) + "abcd"];

function expectRoundTrip(input: RecordInput, valueBytesMax?: number): DecodedRecord {
  const buf = encodeRecord(input, valueBytesMax);
  const value = input.value;
  const valueLen = value === undefined ? 0 : typeof value === "string" ? utf8(value) : value.byteLength;
  expect(buf.length).toBe(C.RECORD_OVERHEAD + utf8(input.scope) + utf8(input.key) + valueLen);
  const got = decodeRecord(buf, 0, buf.length);
  if (!isRecord(got)) throw new Error(`decode failed: ${got}`);
  expect(got.type).toBe(input.type);
  expect(got.seq).toBe(input.seq);
  expect(got.generation).toBe(input.generation);
  expect(got.expiresAt).toBe(input.expiresAt ?? 0);
  expect(got.scope).toBe(input.scope);
  expect(got.key).toBe(input.key);
  expect(got.length).toBe(buf.length);
  expect(got.flags).toBe((input.flags ?? 0) | (typeof value === "string" ? C.RF_UTF8 : 0));
  if (value === undefined) {
    expect(got.value).toBeNull();
  } else if (typeof value === "string") {
    expect(typeof got.value).toBe("string");
    expect(got.value === value).toBe(true); // no deep diff of megabyte strings on failure
  } else {
    expect(got.value).toBeInstanceOf(Uint8Array);
    expect(typeof got.value).not.toBe("string");
    expect(Buffer.compare(got.value as Uint8Array, value)).toBe(0);
  }
  expect(probeRecord(buf, 0, buf.length)).toBe(buf.length);
  return got;
}

describe("record round trip", () => {
  const base = { seq: 7, generation: 3, scope: "user:alice/session:42" };
  const bytes256 = Uint8Array.from({ length: 256 }, (_, i) => i);

  it("every record type", () => {
    expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "note", value: "héllo wörld 😀" });
    expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "blob", value: bytes256 });
    expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "ttl", value: "x", expiresAt: 1_700_000_000_000 });
    expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "in-batch", value: "v", flags: C.RF_IN_BATCH });
    expectRoundTrip({ ...base, type: C.RecordType.TOMBSTONE, key: "note" });
    expectRoundTrip({ ...base, type: C.RecordType.CLEAR, key: "note" });
    expectRoundTrip({ ...base, type: C.RecordType.SCOPE_ERASE, key: "" });
    expectRoundTrip({ ...base, type: C.RecordType.BATCH_COMMIT, key: "", generation: 2 });
    expectRoundTrip({ seq: 1, generation: 0, scope: C.ROOT_SCOPE, type: C.RecordType.SCOPE_ERASE, key: "" });
    expectRoundTrip({ ...base, type: C.RecordType.TOMBSTONE, key: "gone", flags: C.RF_IN_BATCH });
  });

  it("empty values keep their kind: '' is text, an empty array is bytes", () => {
    const text = expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "e", value: "" });
    expect(text.value).toBe("");
    expect(text.flags & C.RF_UTF8).toBe(C.RF_UTF8);
    const raw = expectRoundTrip({ ...base, type: C.RecordType.PUT, key: "e", value: new Uint8Array(0) });
    expect((raw.value as Uint8Array).byteLength).toBe(0);
    expect(raw.flags & C.RF_UTF8).toBe(0);
    expect(raw.length).toBe(C.RECORD_OVERHEAD + utf8(base.scope) + 1);
  });

  it("empty keys (the keyless types) and maximum keys of multi-byte UTF-8", () => {
    for (const key of MAX_KEYS) {
      expect(utf8(key)).toBe(C.KEY_BYTES_MAX);
      expectRoundTrip({ ...base, type: C.RecordType.PUT, key, value: key });
      expectRoundTrip({ ...base, type: C.RecordType.TOMBSTONE, key });
      expectRoundTrip({ ...base, type: C.RecordType.CLEAR, key });
    }
    const erase = expectRoundTrip({ ...base, type: C.RecordType.SCOPE_ERASE, key: "" });
    expect(erase.key).toBe("");
    expect(erase.length).toBe(C.RECORD_OVERHEAD + utf8(base.scope));
  });

  it("scopes at maximum depth and length, and the root scope", () => {
    expect(MAX_SCOPE.split("/").length).toBe(C.SCOPE_DEPTH_MAX);
    expect(utf8(MAX_SCOPE)).toBe(C.SCOPE_BYTES_MAX);
    for (const type of [C.RecordType.TOMBSTONE, C.RecordType.CLEAR] as const) {
      expectRoundTrip({ ...base, scope: MAX_SCOPE, type, key: MAX_KEYS[1] as string });
    }
    expectRoundTrip({ ...base, scope: MAX_SCOPE, type: C.RecordType.SCOPE_ERASE, key: "" });
    expectRoundTrip({ ...base, scope: MAX_SCOPE, type: C.RecordType.BATCH_COMMIT, key: "" });
    expectRoundTrip({ ...base, scope: "a/b.c/d_e:f@g-h/0/1/2/3/Z", type: C.RecordType.PUT, key: "k", value: "v" });
    expectRoundTrip({ ...base, scope: C.ROOT_SCOPE, type: C.RecordType.PUT, key: "k", value: "v" });
  });

  it("sequence, generation and expiry at SEQ_MAX (2^53-1) and at their minimums", () => {
    expectRoundTrip({ type: C.RecordType.PUT, seq: C.SEQ_MAX, generation: C.SEQ_MAX, expiresAt: C.SEQ_MAX, scope: "s", key: "k", value: "v" });
    expectRoundTrip({ type: C.RecordType.PUT, seq: 1, generation: 0, expiresAt: 0, scope: "s", key: "k", value: "v" });
  });

  it("values at the configured maximum: 1 MiB (text and bytes) and 16 MiB", () => {
    const limit = MiB;
    const bytes = new Uint8Array(limit);
    for (let i = 0; i < bytes.length; i += 4093) bytes[i] = i & 0xff;
    // 349525 three-byte chars + 1 ASCII = exactly 1 MiB of UTF-8 in 349526 UTF-16 units.
    const text = "€".repeat((limit - 1) / 3) + "z";
    expect(utf8(text)).toBe(limit);
    const rec = { type: C.RecordType.PUT, seq: 1, generation: 1, scope: MAX_SCOPE, key: MAX_KEYS[2] as string } as const;
    expectRoundTrip({ ...rec, value: bytes }, limit);
    expectRoundTrip({ ...rec, value: text }, limit);
    const big = new Uint8Array(16 * MiB);
    big[0] = 1;
    big[big.length - 1] = 2;
    expectRoundTrip({ ...rec, value: big }, 16 * MiB);
  });

  it("decoded byte values are copies, not views of the read buffer", () => {
    const buf = encodeRecord({ ...base, type: C.RecordType.PUT, key: "k", value: bytes256 });
    const got = decodeRecord(buf, 0, buf.length);
    if (!isRecord(got)) throw new Error(got);
    buf.fill(0);
    expect(Buffer.compare(got.value as Uint8Array, bytes256)).toBe(0);
  });
});

describe("record byte layout", () => {
  it("matches a record assembled field by field from constants.ts (docs/FORMAT.md)", () => {
    const scope = "user:alice";
    const key = "k€y";
    const value = Uint8Array.of(9, 8, 7);
    const len = 48 + utf8(scope) + utf8(key) + value.length;
    const want = Buffer.alloc(len);
    want.writeUInt32LE(len, 0); // R_LENGTH
    want[4] = 1; // R_TYPE = PUT
    want[5] = C.RF_IN_BATCH; // R_FLAGS: bytes value, in a batch
    want.writeUInt16LE(utf8(scope), 6);
    want.writeUInt16LE(utf8(key), 8);
    want.writeUInt16LE(0, 10);
    want.writeUInt32LE(value.length, 12);
    want.writeBigUInt64LE(0x0102030405n, 16); // seq
    want.writeBigUInt64LE(77n, 24); // generation
    want.writeBigUInt64LE(1_700_000_000_000n, 32); // expiresAt
    want.write(scope, 40, "utf8");
    want.write(key, 40 + utf8(scope), "utf8");
    Buffer.from(value).copy(want, 40 + utf8(scope) + utf8(key));
    want.writeBigUInt64LE(h64(want.subarray(0, len - 8), 0n), len - 8);

    const got = encodeRecord({ type: C.RecordType.PUT, flags: C.RF_IN_BATCH, seq: 0x0102030405, generation: 77, expiresAt: 1_700_000_000_000, scope, key, value });
    expect(got.toString("hex")).toBe(want.toString("hex"));
    // The offsets the table in docs/FORMAT.md lists.
    expect([C.R_LENGTH, C.R_TYPE, C.R_FLAGS, C.R_SCOPE_LEN, C.R_KEY_LEN, C.R_RESERVED, C.R_VALUE_LEN, C.R_SEQ, C.R_GENERATION, C.R_EXPIRES_AT]).toEqual([
      0, 4, 5, 6, 8, 10, 12, 16, 24, 32,
    ]);
    expect([C.RECORD_FIXED_BYTES, C.RECORD_CHECKSUM_BYTES, C.RECORD_OVERHEAD]).toEqual([40, 8, 48]);
    expect(C.RecordType).toEqual({ PUT: 1, TOMBSTONE: 2, CLEAR: 3, SCOPE_ERASE: 4, BATCH_COMMIT: 5, GROUP: 6 });
    expect([C.RF_UTF8, C.RF_IN_BATCH]).toEqual([1, 2]);
    expect([C.KEY_BYTES_MAX, C.SCOPE_BYTES_MAX, C.SCOPE_DEPTH_MAX, C.VALUE_BYTES_MAX]).toEqual([1024, 519, 8, 256 * MiB]);
  });

  it("docs/FORMAT.md states this version and its two hex examples are what the code writes", () => {
    const doc = fs.readFileSync(new URL("../docs/FORMAT.md", import.meta.url), "utf8");
    expect(doc).toContain(`**Format version: ${C.FORMAT_VERSION}**`);
    const example = (name: string): string => {
      const m = new RegExp(`<!-- example: ${name} -->\\s*\`\`\`\\n([\\s\\S]*?)\`\`\``).exec(doc);
      if (m === null) throw new Error(`docs/FORMAT.md has no "${name}" example`);
      return (m[1] as string).split("\n").map((line) => line.replace(/^\s*\d+:/, "").replace(/\s+/g, "")).join("");
    };
    const header = encodeHeader({ segmentId: 42, generation: 2, headerSeq: 1, flags: C.FLAG_SEALED, createdSeq: 100, minSeq: 101, maxSeq: 250, replacesId: 0, sealedBytes: 0 }, C.FORMAT_VERSION);
    expect(example("header")).toBe(Buffer.from(header).toString("hex"));
    const record = encodeRecord({ type: C.RecordType.PUT, seq: 7, generation: 3, scope: "user:alice", key: "theme", value: "dark" });
    expect(record.length).toBe(67);
    expect(example("record")).toBe(record.toString("hex"));
  });

  it("is offset-independent: the same bytes decode the same anywhere (verbatim copy)", () => {
    const rec = encodeRecord({ type: C.RecordType.PUT, seq: 5, generation: 2, scope: "a/b", key: "key", value: "value" });
    const ref = decodeRecord(rec, 0, rec.length);
    for (const at of [0, 1, 3, 7, 128, 4095]) {
      const host = Buffer.alloc(at + rec.length + 17, 0xa5);
      rec.copy(host, at);
      expect(decodeRecord(host, at, at + rec.length)).toEqual(ref);
      // a view that starts at a non-zero byteOffset of a larger buffer
      expect(decodeRecord(host.subarray(at), 0, rec.length)).toEqual(ref);
    }
  });

  it("probeRecord tells zeroed space, short input and impossible lengths apart", () => {
    const rec = encodeRecord({ type: C.RecordType.TOMBSTONE, seq: 5, generation: 2, scope: "a", key: "k" });
    expect(probeRecord(new Uint8Array(64), 0, 64)).toBe("empty");
    expect(probeRecord(rec, 0, 0)).toBe("empty");
    expect(probeRecord(rec, 0, 3)).toBe("short");
    expect(probeRecord(rec, 0, C.RECORD_FIXED_BYTES - 1)).toBe("short");
    expect(probeRecord(rec, 0, rec.length - 1)).toBe("short");
    const tiny = Buffer.from(rec);
    tiny.writeUInt32LE(C.RECORD_OVERHEAD - 1, 0);
    expect(probeRecord(tiny, 0, tiny.length)).toBe("length");
    const huge = Buffer.from(rec);
    huge.writeUInt32LE(C.RECORD_BYTES_MAX + 1, 0);
    expect(probeRecord(huge, 0, huge.length)).toBe("length");
    for (const at of [C.R_TYPE, C.R_FLAGS, C.R_RESERVED]) {
      const bad = Buffer.from(rec);
      bad[at] = 0x80;
      expect(probeRecord(bad, 0, bad.length)).toBe("structure");
    }
  });

  it("decodeRecord refuses checksum-valid bytes that break the rules (seq 0, bad UTF-8, value on a tombstone)", () => {
    const reseal = (b: Buffer): Buffer => {
      b.writeBigUInt64LE(h64(b.subarray(0, b.length - 8), 0n), b.length - 8);
      return b;
    };
    const put = encodeRecord({ type: C.RecordType.PUT, seq: 5, generation: 2, scope: "a", key: "k", value: "vv" });
    const seq0 = Buffer.from(put);
    seq0.writeBigUInt64LE(0n, C.R_SEQ);
    expect(decodeRecord(reseal(seq0), 0, seq0.length)).toBe("structure");
    const genHuge = Buffer.from(put);
    genHuge.writeBigUInt64LE(BigInt(C.SEQ_MAX) + 1n, C.R_GENERATION);
    expect(decodeRecord(reseal(genHuge), 0, genHuge.length)).toBe("structure");
    const badUtf8 = Buffer.from(put);
    badUtf8[badUtf8.length - 9] = 0xff; // last value byte
    expect(decodeRecord(reseal(badUtf8), 0, badUtf8.length)).toBe("structure");
    const tombWithValue = Buffer.from(put);
    tombWithValue[C.R_TYPE] = C.RecordType.TOMBSTONE;
    expect(decodeRecord(reseal(tombWithValue), 0, tombWithValue.length)).toBe("structure");
  });
});

describe("exhaustive single-bit flips in one whole record", () => {
  const cases: Array<[string, RecordInput]> = [
    ["PUT utf8", { type: C.RecordType.PUT, seq: 123_456, generation: 9, expiresAt: 1_700_000_000_000, scope: "user:alice/session:42/tool:search", key: "preferences/theme€", value: "dark mode, large font, and a note that is long enough to fill the record: ".repeat(2) }],
    ["PUT bytes in batch", { type: C.RecordType.PUT, flags: C.RF_IN_BATCH, seq: 99, generation: 1, scope: "a/b/c", key: "blob", value: Uint8Array.from({ length: 150 }, (_, i) => (i * 37) & 0xff) }],
    ["TOMBSTONE", { type: C.RecordType.TOMBSTONE, seq: 1_000_000, generation: 12, scope: "org:acme/team:infra/user:bob", key: "k".repeat(120) }],
  ];
  for (const [name, input] of cases) {
    it(`${name}: every one of the record's bits, flipped, is refused by decodeRecord`, () => {
      const rec = encodeRecord(input);
      expect(rec.length).toBeGreaterThanOrEqual(100);
      expect(rec.length).toBeLessThanOrEqual(300);
      const ref = decodeRecord(rec, 0, rec.length);
      expect(isRecord(ref)).toBe(true);
      const faults = new Map<string, number>();
      const work = Buffer.from(rec);
      let flips = 0;
      for (let byte = 0; byte < rec.length; byte++) {
        for (let bit = 0; bit < 8; bit++) {
          work[byte] = (rec[byte] as number) ^ (1 << bit);
          const got = decodeRecord(work, 0, work.length);
          if (isRecord(got)) throw new Error(`flip of byte ${byte} bit ${bit} decoded as a record: ${JSON.stringify({ ...got, value: null })}`);
          expect(probeRecord(work, 0, work.length) === rec.length && got !== "checksum").toBe(false);
          faults.set(got, (faults.get(got) ?? 0) + 1);
          flips++;
        }
        work[byte] = rec[byte] as number;
      }
      expect(flips).toBe(rec.length * 8);
      expect(Buffer.compare(work, rec)).toBe(0);
      // Both kinds of detection take part: structure checks on the fixed fields, the checksum on the rest.
      expect(faults.get("checksum")).toBeGreaterThan(0);
      expect((faults.get("structure") ?? 0) + (faults.get("length") ?? 0)).toBeGreaterThan(0);
    });
  }
});
