/**
 * segments/group.ts `encodeGroupFrame` builds a group's frame from a template (fixed part copied,
 * only the first sequence, the synced end, the body's length and checksum and the frame's own
 * checksum written) instead of running the general record encoder once per commit group. Method:
 * for seeded random groups (empty bodies, one record, many records, records carved back to back
 * from one buffer, sequences and synced ends up to SEQ_MAX), the frame must equal byte for byte
 * the GROUP record the general encoder makes of the same fields, and must read back through
 * readGroupFrame with the same body bounds and synced end. Its twin: the reference built with any
 * one field off by one differs from the frame, so the comparison is able to fail.
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as C from "../segments/constants.js";
import { checksum64, initChecksum } from "../segments/checksum.js";
import { encodeGroupFrame, readGroupFrame } from "../segments/group.js";
import { encodeRecord } from "../segments/record.js";
import { rng } from "./helpers/rng.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

beforeAll(async () => {
  await initChecksum();
});


/** The GROUP record the general encoder makes: the frame as it was built before the template. */
function reference(firstSeq: number, syncedEnd: number, bodyBytes: number, bodySum: bigint): Buffer {
  const value = Buffer.alloc(C.GROUP_VALUE_BYTES);
  value.writeBigUInt64LE(BigInt(bodyBytes), 0);
  value.writeBigUInt64LE(bodySum, 8);
  return encodeRecord({ type: C.RecordType.GROUP, seq: firstSeq, generation: syncedEnd, scope: C.ROOT_SCOPE, key: "", value });
}

/** A random body: 0–40 pieces, some carved back to back from one buffer (as a batch's arena does). */
function body(next: () => number): Buffer[] {
  const pieces: Buffer[] = [];
  const shared = Buffer.alloc(8192);
  for (let i = 0; i < shared.length; i++) shared[i] = Math.floor(next() * 256);
  let at = 0;
  const count = Math.floor(next() * 41);
  for (let i = 0; i < count; i++) {
    const len = 1 + Math.floor(next() * 150);
    if (next() < 0.5 && at + len <= shared.length) {
      pieces.push(shared.subarray(at, at + len));
      at += len;
    } else {
      const own = Buffer.alloc(len);
      for (let j = 0; j < len; j++) own[j] = Math.floor(next() * 256);
      pieces.push(own);
    }
  }
  return pieces;
}

describe("a group frame from the template", () => {
  it("equals the general encoder's GROUP record and reads back, for seeded random groups", () => {
    const next = rng(20261201);
    for (let round = 0; round < 400; round++) {
      const parts = body(next);
      const joined = Buffer.concat(parts);
      const firstSeq = round % 50 === 0 ? C.SEQ_MAX : 1 + Math.floor(next() * 2 ** 40);
      const syncedEnd = round % 70 === 0 ? C.SEQ_MAX : Math.floor(next() * 2 ** 32);
      const frame = encodeGroupFrame(firstSeq, syncedEnd, parts);
      const sum = checksum64(joined, 0, joined.length);
      expect(frame.equals(reference(firstSeq, syncedEnd, joined.length, sum))).toBe(true);
      expect(frame.length).toBe(C.GROUP_FRAME_BYTES);
      if (syncedEnd === 0) {
        // readGroupFrame refuses a frame durable past its own offset, so read it at offset 0 only when that holds.
        const bytes = Buffer.concat([frame, joined]);
        expect(readGroupFrame(bytes, 0, bytes.length)).toEqual({ bodyStart: C.GROUP_FRAME_BYTES, bodyEnd: bytes.length, syncedEnd: 0 });
      }
    }
  });

  it("reads back at a segment offset past its synced end", () => {
    const parts = [Buffer.from("first record"), Buffer.from("second")];
    const at = 4096;
    const frame = encodeGroupFrame(7, 1000, parts);
    const bytes = Buffer.concat([Buffer.alloc(at), frame, ...parts]);
    expect(readGroupFrame(bytes, at, bytes.length)).toEqual({ bodyStart: at + C.GROUP_FRAME_BYTES, bodyEnd: bytes.length, syncedEnd: 1000 });
  });

  it("twin: a reference with any one field off by one differs", () => {
    const parts = [Buffer.from("a record's bytes")];
    const sum = checksum64(parts[0] as Buffer, 0, (parts[0] as Buffer).length);
    const frame = encodeGroupFrame(42, 512, parts);
    expect(frame.equals(reference(42, 512, parts[0]?.length ?? 0, sum))).toBe(true);
    expect(frame.equals(reference(43, 512, parts[0]?.length ?? 0, sum))).toBe(false);
    expect(frame.equals(reference(42, 513, parts[0]?.length ?? 0, sum))).toBe(false);
    expect(frame.equals(reference(42, 512, (parts[0]?.length ?? 0) + 1, sum))).toBe(false);
    expect(frame.equals(reference(42, 512, parts[0]?.length ?? 0, sum + 1n))).toBe(false);
  });
});
