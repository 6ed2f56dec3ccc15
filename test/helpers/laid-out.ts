/**
 * Seeded runs of encoded records as a compaction's output lays them out, for the tests of hints
 * packed straight from records (test/hint-of-records.test.ts, test/compaction-stream.test.ts):
 * PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records over several scopes, keys short, long and not
 * ASCII, sequences that fall back now and then, expiries, gaps between records.
 */
import * as C from "../../segments/constants.js";
import { encodeRecord, type RecordInput } from "../../segments/record.js";
import type { HeaderChoice } from "../../segments/header.js";
import { rng } from "./rng.js";

export const SCOPES = ["global", "user:alice", "user:alice/notes", "team:x"];
/** The sealed header of segment 9 ending at `end` (what a hint for it is keyed by and checked against). */
export function headerAt(end: number, version: 2 | 3 = C.FORMAT_VERSION as 3): HeaderChoice {
  return { header: { segmentId: 9, generation: 0, headerSeq: 0, flags: C.FLAG_SEALED, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 3, sealedBytes: end }, copy: 0, version };
}

/** `n` seeded records from sequence `seq0` on, laid out in one buffer from DATA_START (a gap now and then); their offsets and end. */
export function laidOut(seed: number, n: number, seq0: number): { rec: Buffer; offsets: Uint32Array; end: number } {
  const pick = rng(seed);
  const parts: Buffer[] = [];
  const offsets = new Uint32Array(n);
  let at: number = C.DATA_START;
  for (let i = 0; i < n; i++) {
    if (pick() < 0.05) {
      const gap = Math.floor(pick() * 400);
      parts.push(Buffer.alloc(gap));
      at += gap;
    }
    const scope = SCOPES[Math.floor(pick() * SCOPES.length)] as string;
    const key = pick() < 0.1 ? `long-${"x".repeat(40 + Math.floor(pick() * 200))}-${i}` : `k${Math.floor(pick() * 300)}${pick() < 0.1 ? "é" : ""}`;
    const seq = seq0 + i + (pick() < 0.05 ? -Math.floor(pick() * Math.min(i, 5)) : 0);
    const r = pick();
    let input: RecordInput;
    if (r < 0.65) input = { type: C.RecordType.PUT, seq, generation: 1 + Math.floor(pick() * 300), expiresAt: pick() < 0.2 ? 1_800_000_000_000 + i : 0, scope, key, value: Buffer.alloc(Math.floor(pick() * 300), i & 0xff) };
    else if (r < 0.85) input = { type: C.RecordType.TOMBSTONE, seq, generation: 1, expiresAt: Math.max(1, seq - 3), scope, key };
    else if (r < 0.95) input = { type: C.RecordType.CLEAR, seq, generation: 2, expiresAt: 1_800_000_000_000, scope, key };
    else input = { type: C.RecordType.SCOPE_ERASE, seq, generation: 0, expiresAt: 1_800_000_000_000, scope, key: "", value: Buffer.alloc(1 + Math.floor(pick() * 90), 3) };
    const bytes = encodeRecord(input);
    offsets[i] = at;
    parts.push(bytes);
    at += bytes.length;
  }
  return { rec: Buffer.concat(parts), offsets, end: at };
}

