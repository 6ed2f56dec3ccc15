/**
 * A point read compares the record's scope and key with the ones its token expects; decoding now
 * reuses the expected strings when the bytes are exactly their ASCII encoding (segments/record.ts
 * `utf8Known`) instead of building two new strings per read. Method: that shortcut must be
 * invisible. For records with ASCII, non-ASCII, near-miss (one byte off, same length, a prefix)
 * and over-long names, decodeRecord with the expectation must return exactly what it returns
 * without one, and checkRecordBytes must name the same failed check ("scope", "key") as a plain
 * decode followed by a comparison would. Twin: an expectation that differs from the bytes in one
 * byte must never come back as the expected string (the test would see the token's key returned
 * for another key's record: the torn read the comparison exists to catch).
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { decodeRecord, encodeRecord, isRecord } from "../segments/record.js";
import { checkRecordBytes, mismatch } from "../segments/point-read.js";

beforeAll(async () => {
  await initChecksum();
});

const names: Array<[string, string]> = [
  ["global", "k000000042"],
  ["user:alice/session:42", "notes"],
  ["user:alice", "clé-ü"], // non-ASCII key: decoded as before
  ["a", "x".repeat(64)],
  ["a", "y".repeat(65)], // longer than the shortcut's bound: decoded as before
];

/** Expectations near `key`: itself, one byte off, a prefix, one longer, non-ASCII of the same length. */
function nearKeys(key: string): string[] {
  const flip = key.slice(0, -1) + String.fromCharCode(key.charCodeAt(key.length - 1) ^ 1);
  return [key, flip, key.slice(0, -1) || "z", key + "0", "é".repeat(Math.max(1, key.length))];
}

describe("point reads reuse the expected scope and key only when the bytes are exactly theirs", () => {
  it("decodeRecord with an expectation returns what it returns without one (5 names × 5 keys × 3 scopes)", () => {
    for (const [scope, key] of names) {
      const rec = encodeRecord({ type: C.RecordType.PUT, seq: 7, generation: 3, scope, key, value: "v" });
      const plain = decodeRecord(rec, 0, rec.length, "view");
      expect(isRecord(plain)).toBe(true);
      for (const k of nearKeys(key)) {
        for (const s of [scope, scope + "x", "global"]) {
          const got = decodeRecord(rec, 0, rec.length, "view", { scope: s, key: k });
          expect(got).toEqual(plain);
          if (isRecord(got)) {
            expect(got.key).toBe(key); // twin: never the expectation when the bytes differ
            expect(got.scope).toBe(scope);
          }
        }
      }
    }
  });

  it("checkRecordBytes names the first failed check exactly as a decode and a comparison do", () => {
    for (const [scope, key] of names) {
      const rec = encodeRecord({ type: C.RecordType.PUT, seq: 9, generation: 2, scope, key, value: new Uint8Array([1, 2, 3]) });
      const plain = decodeRecord(rec, 0, rec.length, "view");
      if (!isRecord(plain)) throw new Error("encoded record decodes");
      for (const k of nearKeys(key)) {
        for (const s of [scope, scope + "x"]) {
          const expectation = { type: C.RecordType.PUT, scope: s, key: k, generation: 2, seq: 9 };
          const want = mismatch(plain, expectation) ?? plain;
          expect(checkRecordBytes(rec, rec.length, expectation)).toEqual(want);
        }
      }
    }
  });
});
