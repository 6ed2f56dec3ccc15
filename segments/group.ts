/**
 * Group framing (format 2). Every commit group written into an unsealed segment opens with one
 * GROUP record that carries the length and xxh64 of the group's body (the records after it) and
 * the offset up to which the segment was durable when the group was written. So recovery treats
 * a group as a unit: a group whose frame or body fails is cut as a torn tail unless a later valid
 * group proves it was durable — whatever order the kernel wrote the group's pages in (the issue's
 * "zero only the first page of a 100-write group" case, DESIGN.md "Group framing").
 */
import { checksum64, checksum64Of } from "./checksum.js";
import * as C from "./constants.js";
import { decodeRecord, encodeRecord, isRecord, writeChecksum, type RecordFault } from "./record.js";
import { fillV3 } from "./record-v3.js";
import { formatVersionWritten, isLeanFrame } from "./version-written.js";
import { writeU64 } from "./u64.js";
import { assert } from "../rules/assert.js";

/** A group frame read back from bytes whose body checksum passed. */
export interface GroupFrame {
  /** Offset of the first record of the body (just past the frame). */
  bodyStart: number;
  /** Offset just past the group's last record. */
  bodyEnd: number;
  /** Where the segment was durable when this group was written (always <= the frame's offset). */
  syncedEnd: number;
}

/** Why bytes at an offset are not a whole group: a record fault of the frame, or "unframed". */
export type GroupFault = RecordFault | "unframed";

/**
 * `buffers` with every run of neighbours that lie back to back in one ArrayBuffer merged into one
 * view (a batch's records carved from one RecordArena chunk, segments/record.ts): the same bytes
 * in the same order, as few pieces as memory allows. Returns `buffers` itself when nothing merges.
 */
export function contiguousRuns(buffers: readonly Uint8Array[]): Uint8Array[] {
  const runs: Uint8Array[] = [];
  let first = buffers[0];
  let runBytes = first?.byteLength ?? 0;
  let runLength = 1;
  for (let i = 1; i <= buffers.length; i++) {
    const b = buffers[i];
    if (first !== undefined && b !== undefined && b.buffer === first.buffer && first.byteOffset + runBytes === b.byteOffset) {
      runBytes += b.byteLength;
      runLength += 1;
      continue;
    }
    if (first !== undefined) runs.push(runLength === 1 ? first : new Uint8Array(first.buffer, first.byteOffset, runBytes));
    first = b;
    runBytes = b?.byteLength ?? 0;
    runLength = 1;
  }
  assert(runs.length <= buffers.length, "merging never adds a piece");
  return runs.length === buffers.length ? (buffers as Uint8Array[]) : runs;
}

/** xxh64 of the concatenated `body` buffers, hashed run by run (no concatenated copy). */
function bodyChecksum(body: readonly Uint8Array[]): bigint {
  if (body.length === 0) return checksum64(new Uint8Array(0), 0, 0);
  if (body.length === 1) return checksum64Of(body); // a lone record: nothing to merge, and no list made per put
  return checksum64Of(contiguousRuns(body));
}

/** Offset of a frame's value (body length u64, then body checksum u64): after the fixed fields and the scope "global". */
const FRAME_VALUE_AT = C.RECORD_FIXED_BYTES + Buffer.byteLength(C.ROOT_SCOPE, "utf8");
/** The bytes every frame shares (length, type, flags, name lengths, scope, empty key), made once by the general encoder. */
let frameTemplate: Buffer | null = null;
/** The template's fixed part up to the value, as a view made once (encodeGroupFrame copies it with set()). */
let frameHead: Uint8Array | null = null;

/**
 * Encodes the frame of a group whose body is `body` (the group's records in order), whose first
 * record has sequence `firstSeq`, written while the segment was durable up to `syncedEnd`.
 * Byte for byte what encodeRecord makes of the GROUP record (test/group-frame-fast.test.ts): the
 * fixed part is copied from a template and only seq, syncedEnd, the value and the checksum are
 * written, since one frame per commit group was ~10 µs of a lone put through the general encoder.
 */
export function encodeGroupFrame(firstSeq: number, syncedEnd: number, body: readonly Uint8Array[]): Buffer {
  assert(Number.isSafeInteger(firstSeq) && firstSeq > 0 && firstSeq <= C.SEQ_MAX, "a group's first sequence is a positive sequence");
  assert(Number.isSafeInteger(syncedEnd) && syncedEnd >= 0 && syncedEnd <= C.SEQ_MAX, "a group's synced end is a non-negative safe integer");
  let bytes = 0;
  for (let i = 0; i < body.length; i++) bytes += (body[i] as Uint8Array).byteLength; // indexed: a cold for-of costs an iterator per put
  if (isLeanFrame(formatVersionWritten())) return encodeLeanFrame(firstSeq, syncedEnd, bytes, body);
  frameTemplate ??= encodeRecord({ type: C.RecordType.GROUP, seq: 1, generation: 0, scope: C.ROOT_SCOPE, key: "", value: new Uint8Array(C.GROUP_VALUE_BYTES) });
  assert(frameTemplate.length === C.GROUP_FRAME_BYTES && FRAME_VALUE_AT + C.GROUP_VALUE_BYTES + C.RECORD_CHECKSUM_BYTES === C.GROUP_FRAME_BYTES, "a frame is its fixed part, the scope, its value and its checksum");
  const frame = Buffer.allocUnsafe(C.GROUP_FRAME_BYTES);
  // TypedArray#set of a view made once: Buffer#copy makes a view per call and runs node's JS checks (~15 µs of a cold put).
  frame.set((frameHead ??= frameTemplate.subarray(0, FRAME_VALUE_AT)), 0);
  writeU64(frame, firstSeq, C.R_SEQ);
  writeU64(frame, syncedEnd, C.R_GENERATION);
  writeU64(frame, bytes, FRAME_VALUE_AT);
  writeChecksum(frame, bodyChecksum(body), FRAME_VALUE_AT + 8);
  const sumAt = C.GROUP_FRAME_BYTES - C.RECORD_CHECKSUM_BYTES;
  writeChecksum(frame, checksum64(frame, 0, sumAt), sumAt);
  return frame;
}

/** The value of a version-3 frame being encoded (body length, body xxh64): reused, the encoder copies it. */
const LEAN_VALUE = Buffer.alloc(C.GROUP_VALUE_BYTES);

/** encodeGroupFrame in the version-3 frame: GROUP_FRAME_BYTES_V3 whatever the numbers (seq and syncedEnd take 8 varint bytes each). */
function encodeLeanFrame(firstSeq: number, syncedEnd: number, bodyBytes: number, body: readonly Uint8Array[]): Buffer {
  writeU64(LEAN_VALUE, bodyBytes, 0);
  writeChecksum(LEAN_VALUE, bodyChecksum(body), 8);
  const frame = Buffer.allocUnsafe(C.GROUP_FRAME_BYTES_V3);
  fillV3(frame, 0, C.GROUP_FRAME_BYTES_V3, C.RecordType.GROUP, 0, firstSeq, syncedEnd, 0, C.ROOT_SCOPE, C.ROOT_SCOPE.length, "", 0, LEAN_VALUE, C.GROUP_VALUE_BYTES, true);
  return frame;
}

/**
 * Reads the group at `at` (bytes up to `end` available): its frame must be a valid GROUP record
 * and its body must fit and pass its checksum. Returns the frame, or why not; never throws.
 */
export function readGroupFrame(bytes: Uint8Array, at: number, end: number, version: number = formatVersionWritten()): GroupFrame | GroupFault {
  const got = decodeRecord(bytes, at, end, false, undefined, version);
  if (!isRecord(got)) return got;
  if (got.type !== C.RecordType.GROUP) return "unframed";
  const value = Buffer.from((got.value as Uint8Array).buffer, (got.value as Uint8Array).byteOffset, C.GROUP_VALUE_BYTES);
  const bodyBytes = value.readBigUInt64LE(0);
  const bodyStart = at + got.length;
  if (bodyBytes > BigInt(end - bodyStart)) return "short";
  const bodyEnd = bodyStart + Number(bodyBytes);
  if (got.generation > at) return "structure"; // a group cannot have been durable past its own start
  if (checksum64(bytes, bodyStart, bodyEnd) !== value.readBigUInt64LE(8)) return "checksum";
  return { bodyStart, bodyEnd, syncedEnd: got.generation };
}

/**
 * A sync mark is a group with an empty body whose frame says the segment was durable up to the
 * mark itself: written after a final fdatasync (close), it proves every group before it durable,
 * so damage there is corruption rather than a torn tail.
 */
export function isSyncMark(frame: GroupFrame, at: number): boolean {
  return frame.bodyStart === frame.bodyEnd && frame.syncedEnd === at;
}
