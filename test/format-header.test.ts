/**
 * The segment header (segments/header.ts, segments/header-io.ts, segments/create.ts): two 64-byte copies, A at offset 0 and
 * B at offset 64, each with its own xxh64; the current copy is the valid one with the highest
 * (generation, headerSeq), and a header update always overwrites the copy that is not current.
 *
 * How it works: real segment files are created in a temp dir with createSegmentFile and advanced
 * with writeHeader, so that copies A and B hold different generations. Then, through the file
 * (pwrite one byte, open the file again, readHeader), every single bit of each copy is flipped:
 * 2 copies x 64 bytes x 8 bits. decodeHeader must refuse every flipped copy and chooseHeader must
 * open the segment from the other copy with that copy's generation. A header update torn at every
 * byte is simulated by writing only the first i bytes (i = 0..64) of the new copy over the
 * non-current copy: the file must still open, from the other copy with the old generation, until
 * the write is whole (i = 64), when the new generation wins. The layout is checked against a copy
 * assembled field by field from constants.ts and hashed with xxhash-wasm directly.
 *
 * Properties stressed: no single-bit error in a header copy goes unnoticed; a header rewrite is
 * never torn (one copy always survives); the A/B alternation and tie-break rule; both copies bad
 * is a CorruptionError; file names and 0600 permissions.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { CorruptionError } from "../rules/errors.js";
import { createSegmentFile } from "../segments/create.js";
import { DIR_MODE, FILE_MODE, journalFileName, parseSegmentFileName, segmentFileName, tmpFileName } from "../segments/file-names.js";
import { readHeader, writeHeader } from "../segments/header-io.js";
import { chooseHeader, decodeHeader, encodeHeader, nextHeaderOffset, type SegmentHeader } from "../segments/header.js";
import { tempDir } from "./helpers/tmp.js";

let dir: string;
let h64: (bytes: Uint8Array, seed?: bigint) => bigint;
let nextId = 1;

beforeAll(async () => {
  await initChecksum();
  h64 = (await xxhash()).h64Raw;
  dir = tempDir("format-header");
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function header(over: Partial<SegmentHeader> = {}): SegmentHeader {
  return { segmentId: 1, generation: 0, headerSeq: 0, flags: 0, createdSeq: 100, minSeq: 101, maxSeq: 250, replacesId: 0, sealedBytes: 0, ...over };
}

function pread(fd: number, at: number, n: number): Buffer {
  const b = Buffer.alloc(n);
  expect(fs.readSync(fd, b, 0, n, at)).toBe(n);
  return b;
}

/** Opens the segment file afresh (as recovery would) and picks its header. */
function reopenHeader(file: string, id: number) {
  const fd = fs.openSync(file, "r");
  try {
    return readHeader(fd, id);
  } finally {
    fs.closeSync(fd);
  }
}

/** A segment whose copy A holds generation 2 and copy B generation 4 (B current). */
function twoGenerationSegment(): { fd: number; file: string; id: number } {
  const id = nextId++;
  const fd = createSegmentFile(dir, header({ segmentId: id, generation: 2, createdSeq: 10 }), 4096);
  const first = readHeader(fd, id);
  expect(first.copy).toBe(0);
  const second = writeHeader(fd, first, { ...first.header, generation: 4, maxSeq: 999 });
  expect(second.copy).toBe(1);
  return { fd, file: path.join(dir, segmentFileName(id)), id };
}

describe("header copy layout", () => {
  it("matches a copy assembled field by field from constants.ts (docs/FORMAT.md)", () => {
    const h = header({ segmentId: 0xdeadbeef, generation: 2 ** 40 + 3, headerSeq: 0xfffffffe, flags: C.FLAG_SEALED | C.FLAG_COMPACTING, createdSeq: 5, minSeq: 6, maxSeq: C.SEQ_MAX, replacesId: 41, sealedBytes: 0 });
    const want = Buffer.alloc(64);
    want.writeUInt32LE(0x53474e45, 0);
    expect(want.subarray(0, 4).toString("latin1")).toBe("ENGS");
    want.writeUInt16LE(3, 4); // version (FORMAT_VERSION)
    want.writeUInt16LE(3, 6); // flags
    want.writeUInt32LE(0xdeadbeef, 8);
    want.writeUInt32LE(0xfffffffe, 12);
    want.writeBigUInt64LE(2n ** 40n + 3n, 16);
    want.writeBigUInt64LE(5n, 24);
    want.writeBigUInt64LE(6n, 32);
    want.writeBigUInt64LE(BigInt(C.SEQ_MAX), 40);
    want.writeUInt32LE(41, 48);
    want.writeUInt32LE(0, 52);
    want.writeBigUInt64LE(h64(want.subarray(0, 56), 0n), 56);
    expect(Buffer.from(encodeHeader(h)).toString("hex")).toBe(want.toString("hex"));
    expect(decodeHeader(want, 0)).toEqual(h);
    expect([C.H_MAGIC, C.H_VERSION, C.H_FLAGS, C.H_SEGMENT_ID, C.H_HEADER_SEQ, C.H_GENERATION, C.H_CREATED_SEQ, C.H_MIN_SEQ, C.H_MAX_SEQ, C.H_REPLACES_ID, C.H_SEALED_BYTES, C.H_CHECKSUM]).toEqual([
      0, 4, 6, 8, 12, 16, 24, 32, 40, 48, 52, 56,
    ]);
    expect([C.FORMAT_VERSION, C.HEADER_COPY_BYTES, C.HEADER_A_OFFSET, C.HEADER_B_OFFSET, C.DATA_START]).toEqual([3, 64, 0, 64, 128]);
    expect([C.FLAG_SEALED, C.FLAG_COMPACTING]).toEqual([1, 2]);
  });

  it("round-trips extreme field values, at any offset of a larger buffer", () => {
    for (const h of [header(), header({ segmentId: 0xffffffff, generation: C.SEQ_MAX, headerSeq: 0xffffffff, flags: 3, createdSeq: C.SEQ_MAX, minSeq: C.SEQ_MAX, maxSeq: C.SEQ_MAX, replacesId: 0xffffffff, sealedBytes: 0xffffffff })]) {
      const host = new Uint8Array(200).fill(0x5a);
      host.set(encodeHeader(h), 77);
      expect(decodeHeader(host, 77)).toEqual(h);
      expect(decodeHeader(host.subarray(77), 0)).toEqual(h);
      expect(decodeHeader(host.subarray(77, 77 + 63), 0)).toBeNull(); // short
    }
  });

  it("refuses a wrong version, unknown flag bits or non-zero reserved bytes even with a valid checksum", () => {
    const reseal = (b: Buffer): Buffer => {
      b.writeBigUInt64LE(h64(b.subarray(0, 56), 0n), 56);
      return b;
    };
    const good = Buffer.from(encodeHeader(header()));
    const v3 = Buffer.from(good);
    v3.writeUInt16LE(4, C.H_VERSION); // a newer format than this code reads (format 1 still opens: format-versions.test.ts)
    expect(decodeHeader(reseal(v3), 0)).toBeNull();
    const flags = Buffer.from(good);
    flags.writeUInt16LE(4, C.H_FLAGS);
    expect(decodeHeader(reseal(flags), 0)).toBeNull();
    const genHuge = Buffer.from(good);
    genHuge.writeBigUInt64LE(BigInt(C.SEQ_MAX) + 1n, C.H_GENERATION);
    expect(decodeHeader(reseal(genHuge), 0)).toBeNull();
  });
});

describe("exhaustive single-bit flips in a header copy (through the file)", () => {
  it("every bit of copy B (current) and of copy A (older), flipped, is detected; the other copy opens", () => {
    const { fd, file, id } = twoGenerationSegment();
    const pristine = pread(fd, 0, C.DATA_START);
    const copies = [
      { at: C.HEADER_A_OFFSET, survivor: 1 as const, generation: 4 }, // A is older: B stays current
      { at: C.HEADER_B_OFFSET, survivor: 0 as const, generation: 2 }, // B is current: fall back to A
    ];
    let flips = 0;
    for (const { at, survivor, generation } of copies) {
      for (let byte = 0; byte < C.HEADER_COPY_BYTES; byte++) {
        for (let bit = 0; bit < 8; bit++) {
          const flipped = Buffer.of((pristine[at + byte] as number) ^ (1 << bit));
          fs.writeSync(fd, flipped, 0, 1, at + byte);
          const onDisk = pread(fd, 0, C.DATA_START);
          expect(decodeHeader(onDisk, at)).toBeNull();
          const chosen = chooseHeader(onDisk, id);
          expect(chosen.copy).toBe(survivor);
          expect(chosen.header.generation).toBe(generation);
          // and the next header write would go over the damaged copy
          expect(nextHeaderOffset(chosen)).toBe(at);
          flips++;
        }
        fs.writeSync(fd, pristine, at + byte, 1, at + byte);
      }
      // a fresh open sees the same thing as the in-memory decode above
      const opened = reopenHeader(file, id);
      expect(opened.copy).toBe(1);
      expect(opened.header.generation).toBe(4);
    }
    expect(flips).toBe(2 * 64 * 8);
    fs.closeSync(fd);
  });

  it("both copies invalid is a CorruptionError naming the segment", () => {
    const { fd, file, id } = twoGenerationSegment();
    fs.writeSync(fd, Buffer.of(0xff), 0, 1, C.HEADER_A_OFFSET + 20);
    fs.writeSync(fd, Buffer.of(0xff), 0, 1, C.HEADER_B_OFFSET + 20);
    fs.closeSync(fd);
    let caught: unknown;
    try {
      reopenHeader(file, id);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CorruptionError);
    expect((caught as CorruptionError).code).toBe("CORRUPTION");
    expect((caught as CorruptionError).segment).toBe(id);
    expect((caught as CorruptionError).offset).toBe(0);
    expect(() => chooseHeader(new Uint8Array(C.DATA_START), 77)).toThrow(CorruptionError);
    expect(() => chooseHeader(new Uint8Array(0), 77)).toThrow(CorruptionError);
  });
});

describe("a header write torn at every byte", () => {
  for (const currentCopy of [0, 1] as const) {
    it(`still opens from copy ${"AB"[currentCopy]} with the old generation; the whole write wins`, () => {
      const id = nextId++;
      const file = path.join(dir, segmentFileName(id));
      const fd = createSegmentFile(dir, header({ segmentId: id, generation: 2 }), 4096);
      let current = readHeader(fd, id);
      // advance until the wanted copy is current, and the other copy holds an older generation
      current = writeHeader(fd, current, { ...current.header, generation: 4 }); // B
      if (currentCopy === 0) current = writeHeader(fd, current, { ...current.header, generation: 6 }); // A
      expect(current.copy).toBe(currentCopy);
      const oldGeneration = current.header.generation;
      const target = nextHeaderOffset(current);
      const base = pread(fd, 0, C.DATA_START);
      const next = { ...current.header, generation: oldGeneration + 2, flags: C.FLAG_SEALED, headerSeq: current.header.headerSeq + 1 };
      const newCopy = encodeHeader(next);
      // the old non-current copy really differs from the new one at its end, so no prefix is whole by chance
      expect(base[target + 63]).not.toBe(newCopy[63]);
      for (let i = 0; i <= C.HEADER_COPY_BYTES; i++) {
        fs.writeSync(fd, base, 0, C.DATA_START, 0); // restore the pre-write state
        fs.writeSync(fd, newCopy, 0, i, target); // the torn write: only its first i bytes landed
        fs.fdatasyncSync(fd);
        const opened = reopenHeader(file, id);
        if (i < C.HEADER_COPY_BYTES) {
          expect(opened.copy, `torn at ${i}`).toBe(currentCopy);
          expect(opened.header).toEqual(current.header);
          expect(opened.header.generation).toBe(oldGeneration);
        } else {
          expect(opened.copy).toBe(1 - currentCopy);
          expect(opened.header).toEqual(next);
        }
      }
      fs.closeSync(fd);
    });
  }
});

describe("A/B update rule", () => {
  it("writeHeader alternates copies, bumps headerSeq, and the newest (generation, headerSeq) opens", () => {
    const id = nextId++;
    const file = path.join(dir, segmentFileName(id));
    const fd = createSegmentFile(dir, header({ segmentId: id }), 4096);
    // a fresh segment has two identical copies; A is chosen on a tie
    expect(Buffer.compare(pread(fd, 0, 64), pread(fd, 64, 64))).toBe(0);
    let current = readHeader(fd, id);
    expect(current.copy).toBe(0);
    expect(current.header.headerSeq).toBe(0);
    for (let n = 1; n <= 6; n++) {
      const before = pread(fd, current.copy * 64, 64);
      // odd n: same generation, new flags (sealing) -> the tie breaks on headerSeq
      const generation = n % 2 === 1 ? current.header.generation : current.header.generation + 1;
      const written = writeHeader(fd, current, { ...current.header, generation, flags: n % 2 === 1 ? C.FLAG_SEALED : 0, headerSeq: 12345 });
      expect(written.copy).toBe(1 - current.copy);
      expect(written.header.headerSeq).toBe(n); // the caller's headerSeq is ignored
      // the previously current copy is untouched
      expect(Buffer.compare(pread(fd, current.copy * 64, 64), before)).toBe(0);
      const opened = reopenHeader(file, id);
      expect(opened).toEqual(written);
      current = written;
    }
    fs.closeSync(fd);
  });

  it("chooseHeader: higher generation wins over higher headerSeq; equal generation breaks on headerSeq", () => {
    const both = (a: SegmentHeader, b: SegmentHeader): Uint8Array => {
      const bytes = new Uint8Array(C.DATA_START);
      bytes.set(encodeHeader(a), C.HEADER_A_OFFSET);
      bytes.set(encodeHeader(b), C.HEADER_B_OFFSET);
      return bytes;
    };
    expect(chooseHeader(both(header({ generation: 5, headerSeq: 1 }), header({ generation: 4, headerSeq: 9 })), 1).copy).toBe(0);
    expect(chooseHeader(both(header({ generation: 4, headerSeq: 9 }), header({ generation: 5, headerSeq: 1 })), 1).copy).toBe(1);
    expect(chooseHeader(both(header({ generation: 5, headerSeq: 2 }), header({ generation: 5, headerSeq: 3 })), 1).copy).toBe(1);
    expect(chooseHeader(both(header({ generation: 5, headerSeq: 3 }), header({ generation: 5, headerSeq: 2 })), 1).copy).toBe(0);
    // only copy A present (a file cut inside copy B)
    const onlyA = both(header({ generation: 7 }), header()).subarray(0, 100);
    expect(chooseHeader(onlyA, 1)).toEqual({ header: header({ generation: 7 }), copy: 0 });
  });
});

describe("segment files", () => {
  it("are named NNNNNNNN.seg / .journal / .seg.tmp, and names parse back canonically", () => {
    expect(segmentFileName(42)).toBe("00000042.seg");
    expect(journalFileName(42)).toBe("00000042.journal");
    expect(tmpFileName(42)).toBe("00000042.seg.tmp");
    for (const id of [0, 1, 42, 99_999_999, 100_000_000, 0xffffffff]) {
      expect(parseSegmentFileName(segmentFileName(id))).toBe(id);
    }
    for (const name of ["42.seg", "000000042.seg", "00000042.seg.tmp", "00000042.journal", "0000004a.seg", "4294967296.seg", "LOCK", "00000042.SEG"]) {
      expect(parseSegmentFileName(name), name).toBeNull();
    }
  });

  it("are created 0600 with both header copies and zeroed, preallocated space; never over an existing file", () => {
    const id = nextId++;
    const file = path.join(dir, segmentFileName(id));
    const fd = createSegmentFile(dir, header({ segmentId: id }), 64 * 1024);
    const st = fs.fstatSync(fd);
    expect(st.mode & 0o777).toBe(FILE_MODE);
    expect(FILE_MODE).toBe(0o600);
    expect(DIR_MODE).toBe(0o700);
    expect(st.size).toBe(64 * 1024);
    const all = fs.readFileSync(file);
    expect(decodeHeader(all, 0)).toEqual(header({ segmentId: id }));
    expect(decodeHeader(all, 64)).toEqual(header({ segmentId: id }));
    expect(all.subarray(C.DATA_START).every((b) => b === 0)).toBe(true);
    fs.closeSync(fd);
    expect(() => createSegmentFile(dir, header({ segmentId: id }), 4096)).toThrow(/EEXIST/);
    // a size below the headers still holds both copies
    const small = nextId++;
    const fd2 = createSegmentFile(dir, header({ segmentId: small }), 0);
    expect(fs.fstatSync(fd2).size).toBe(C.DATA_START);
    fs.closeSync(fd2);
  });
});
