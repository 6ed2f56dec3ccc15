/**
 * w5-11: checksumLow32, the version-3 record sum hashed where the module's memory lies (one
 * Buffer.copy in, no subarray, no masked BigInt per call), is exactly the low half of
 * checksum64's xxh64 for every length and offset, for a plain Uint8Array, for a range longer than
 * the module's memory (the checksum64 fallback, which grows it), and after firstBadSum grew the
 * memory under it (its view renewed). Twin: with the renewal off the first sum after a grow is
 * wrong.
 */
import { describe, expect, it, beforeAll, afterEach } from "vitest";
import { rng } from "./helpers/rng.js";
import { checksum64, checksumLow32, firstBadSum, initChecksum, SUM_SPAN_BYTES_MAX, unsafeChecksumForTests } from "../segments/checksum.js";

/** The reference: the low 32 bits of xxh64 by BigInt arithmetic. */
const lowOf = (b: Uint8Array, from: number, to: number): number => Number(BigInt.asUintN(32, checksum64(b, from, to)));

/** Seeded bytes (the tests' one PRNG). */
function bytesOf(n: number, seed: number): Buffer {
  const r = rng(seed);
  return Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256)));
}

/** `n` bytes of one value (the large ranges: what they hold does not matter, only their size). */
const filled = (n: number, byte: number): Buffer => Buffer.alloc(n, byte);

/** Grows the module's memory to hold `bytes` (more than any earlier test: each call names a larger size) by hashing that many. */
function growTo(bytes: number): void {
  const span = filled(bytes, 7);
  checksum64(span, 0, span.length);
}

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeChecksumForTests.keepStaleView = false;
});

describe("checksumLow32", () => {
  it("equals checksum64's low half for every length 0..700 at several offsets, Buffer and plain Uint8Array", () => {
    const buf = bytesOf(4096, 11);
    const plain = new Uint8Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    for (let len = 0; len <= 700; len++) {
      for (const at of [0, 1, 7, 333]) {
        expect(checksumLow32(buf, at, at + len)).toBe(lowOf(buf, at, at + len));
        expect(checksumLow32(plain, at, at + len)).toBe(lowOf(plain, at, at + len));
      }
    }
  });

  it("hashes a range longer than the module's memory (the fallback grows it), then smaller ones after the grow", () => {
    const big = filled(SUM_SPAN_BYTES_MAX + 3 * 65536, 13);
    expect(checksumLow32(big, 5, big.length)).toBe(lowOf(big, 5, big.length));
    const small = bytesOf(300, 17);
    expect(checksumLow32(small, 0, 300)).toBe(lowOf(small, 0, 300));
  });

  it("is right after another caller grew the memory under its view (firstBadSum, checksum64)", () => {
    const rec = bytesOf(262, 19);
    expect(checksumLow32(rec, 0, rec.length)).toBe(lowOf(rec, 0, rec.length)); // the view is made
    const span = filled(SUM_SPAN_BYTES_MAX, 31);
    firstBadSum(span, 0, span.length, Int32Array.of(0), Int32Array.of(span.length), 1, 4);
    growTo(12 * 1024 * 1024); // detaches the view
    expect(checksumLow32(rec, 0, rec.length)).toBe(lowOf(rec, 0, rec.length));
  });

  it("sums an empty range right after a grow detached its view (a copy of no bytes into a detached view throws)", () => {
    const rec = bytesOf(262, 37);
    expect(checksumLow32(rec, 0, rec.length)).toBe(lowOf(rec, 0, rec.length)); // the view is made
    growTo(14 * 1024 * 1024); // detaches the view (below the twin's 16 MiB, which must grow it again)
    expect(checksumLow32(rec, 7, 7)).toBe(lowOf(rec, 7, 7));
    expect(checksumLow32(rec, 0, rec.length)).toBe(lowOf(rec, 0, rec.length));
  });

  it("twin: keeping the detached view after a grow gives no right sum (a copy into a detached view fails)", () => {
    const rec = bytesOf(262, 23);
    checksumLow32(rec, 0, rec.length);
    unsafeChecksumForTests.keepStaleView = true;
    growTo(16 * 1024 * 1024);
    const other = bytesOf(262, 29); // not what the grow left at the module's offset 0
    let got: number | null;
    try {
      got = checksumLow32(other, 0, other.length);
    } catch {
      got = null;
    }
    expect(got).not.toBe(lowOf(other, 0, other.length));
  });
});
