/**
 * The in-place compaction journal's codec (segments/journal.ts, docs/FORMAT.md "Journal of an
 * in-place compaction"). Method: a journal is encoded for known fields and data, then compared
 * byte by byte with one assembled field by field from the table in FORMAT.md and hashed with
 * xxhash-wasm directly; it must decode back to the same fields. Then every truncation (each length
 * from 0 to its full size minus one) and every single-bit flip must make decodeJournal refuse it:
 * an incomplete or damaged journal is never replayed over a segment. Twin: the same truncations
 * and flips checked without the checksum (magic and length only) let damaged journals through,
 * so it is the checksum that refuses them. Bytes after a whole journal (a reused file's older,
 * longer journal) are ignored. Property stressed: only a whole, intact journal decodes.
 */
import { beforeAll, describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import { initChecksum } from "../segments/checksum.js";
import { decodeJournal, encodeJournal, JOURNAL_CHECKSUM_BYTES, JOURNAL_HEAD_BYTES, JOURNAL_MAGIC } from "../segments/journal.js";
import { readU64, writeU64 } from "../segments/u64.js";

let h64: (bytes: Uint8Array) => bigint;
beforeAll(async () => {
  await initChecksum();
  const x = await xxhash();
  h64 = (b) => x.h64Raw(b, 0n);
});

const data = Buffer.from(Array.from({ length: 77 }, (_, i) => (i * 37 + 11) & 0xff));
const SEGMENT = 0x2a;
const GENERATION = 2 ** 40 + 4;

/** The journal assembled from FORMAT.md's table. */
function byHand(): Buffer {
  const b = Buffer.alloc(32 + data.length + 8);
  b.writeUInt32LE(0x4c4e524a, 0);
  b.writeUInt32LE(SEGMENT, 4);
  b.writeBigUInt64LE(BigInt(GENERATION), 8);
  b.writeBigUInt64LE(BigInt(data.length), 16);
  data.copy(b, 32);
  b.writeBigUInt64LE(h64(b.subarray(0, b.length - 8)), b.length - 8);
  return b;
}

/** The twin's decoder: the checks a journal would get without its checksum. */
function headOnly(bytes: Uint8Array): boolean {
  const v = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  return bytes.length >= JOURNAL_HEAD_BYTES + JOURNAL_CHECKSUM_BYTES && v.readUInt32LE(0) === JOURNAL_MAGIC;
}

describe("journal codec", () => {
  it("encodes the layout FORMAT.md gives, and decodes it back", () => {
    const j = encodeJournal(SEGMENT, GENERATION, data);
    expect(JOURNAL_HEAD_BYTES).toBe(32);
    expect(Buffer.compare(j, byHand())).toBe(0);
    const back = decodeJournal(j);
    expect(back).not.toBeNull();
    expect({ ...back, data: Buffer.from(back?.data ?? []) }).toEqual({ segmentId: SEGMENT, generation: GENERATION, dataBytes: data.length, data });
  });

  it("refuses every truncation and every single-bit flip", () => {
    const j = encodeJournal(SEGMENT, GENERATION, data);
    let refused = 0;
    let headOnlyPassed = 0;
    for (let n = 0; n < j.length; n++) {
      const cut = j.subarray(0, n);
      expect(decodeJournal(cut), `cut at ${n}`).toBeNull();
      refused += 1;
      if (headOnly(cut)) headOnlyPassed += 1;
    }
    for (let bit = 0; bit < j.length * 8; bit++) {
      const bad = Buffer.from(j);
      bad[bit >> 3] = (bad.readUInt8(bit >> 3) ^ (1 << (bit & 7))) & 0xff;
      expect(decodeJournal(bad), `bit ${bit}`).toBeNull();
      refused += 1;
      if (headOnly(bad)) headOnlyPassed += 1;
    }
    expect(refused).toBe(j.length + j.length * 8);
    // Twin: without the checksum most of these damaged journals would have been replayed.
    expect(headOnlyPassed).toBeGreaterThan(j.length * 8 - 32);
  });

  it("ignores what follows its checksum (a reused file's older tail), and refuses a length past the bytes", () => {
    const j = encodeJournal(SEGMENT, GENERATION, data);
    const longer = encodeJournal(SEGMENT + 1, GENERATION - 2, Buffer.alloc(data.length * 3, 0x5a));
    const over = Buffer.from(longer);
    j.copy(over, 0); // the shorter journal written over the start of the longer one's file
    const back = decodeJournal(over);
    expect(back).not.toBeNull();
    expect({ ...back, data: Buffer.from(back?.data ?? []) }).toEqual({ segmentId: SEGMENT, generation: GENERATION, dataBytes: data.length, data });
    // The old journal's head with the new one's bytes cut in: the head's own length decides, and its checksum fails.
    const torn = Buffer.from(longer);
    j.copy(torn, 32, 32);
    expect(decodeJournal(torn), "an older head over newer data").toBeNull();
    for (const declared of [data.length + 1, 2 ** 40, 2 ** 53]) {
      const bad = Buffer.from(j);
      bad.writeBigUInt64LE(BigInt(declared), 16);
      expect(decodeJournal(bad), `declared ${declared}`).toBeNull();
    }
  });

  it("an empty rewrite is a journal too (40 bytes)", () => {
    const j = encodeJournal(7, 2, new Uint8Array(0));
    expect(j.length).toBe(JOURNAL_HEAD_BYTES + JOURNAL_CHECKSUM_BYTES);
    expect(decodeJournal(j)).toMatchObject({ segmentId: 7, generation: 2, dataBytes: 0 });
  });
});

describe("u64 fields (segments/u64.ts, the one decoder of every codec)", () => {
  it("round-trips the safe integers at the edges and refuses 2^53 and above", () => {
    const b = Buffer.alloc(8);
    for (const v of [0, 1, 0xffffffff, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER]) {
      writeU64(b, v, 0);
      expect(b.readBigUInt64LE(0)).toBe(BigInt(v));
      expect(readU64(b, 0)).toBe(v);
    }
    for (const big of [2n ** 53n, 2n ** 64n - 1n]) {
      b.writeBigUInt64LE(big, 0);
      expect(readU64(b, 0)).toBe(-1);
    }
  });
});
