/**
 * The redo journal of an in-place compaction (NNNNNNNN.journal, docs/FORMAT.md "Journal"): the
 * codec only. Writing it durably, replaying it and removing it are the compaction's and
 * recovery's (engine/compaction-core.ts); its bytes are a file format, so they are defined here.
 *
 * Layout (little-endian): magic u32 "JRNL", segment id u32, generation u64 (the one the rewrite
 * publishes), data bytes u64, zero u64 (unused), then the data — the segment's bytes from
 * DATA_START on as the rewrite leaves them — then xxh64 of everything before it. A file may hold
 * more bytes after that (an earlier, longer journal's tail): they are not part of the journal.
 */
import { checksum64 } from "./checksum.js";
import { readU64, writeU64 } from "./u64.js";

/** "JRNL" read as a little-endian u32. */
export const JOURNAL_MAGIC = 0x4c4e524a;
/** Bytes before the data: magic, segment id, generation, data bytes, one unused u64. */
export const JOURNAL_HEAD_BYTES = 32;
/** The trailing xxh64. */
export const JOURNAL_CHECKSUM_BYTES = 8;

/** A decoded journal. `data` is a view into the bytes it was decoded from. */
export interface Journal {
  segmentId: number;
  generation: number;
  /** The data length the head declares: `data`'s (the checksum follows the data it declares). */
  dataBytes: number;
  data: Uint8Array;
}

/** The size of the journal of `dataBytes` bytes of data. */
export function journalBytes(dataBytes: number): number {
  return JOURNAL_HEAD_BYTES + dataBytes + JOURNAL_CHECKSUM_BYTES;
}

/**
 * Encodes the journal of a rewrite of `segmentId` to `data`, publishing `generation`: into
 * `into` when given (exactly journalBytes(data.length) long, contents undefined: every byte is
 * written), else into a new buffer.
 */
export function encodeJournal(segmentId: number, generation: number, data: Uint8Array, into?: Buffer): Buffer {
  const body = into ?? Buffer.allocUnsafe(journalBytes(data.length));
  if (body.length !== journalBytes(data.length)) throw new RangeError(`a journal of ${data.length} data bytes is ${journalBytes(data.length)} bytes, not ${body.length}`);
  body.writeUInt32LE(JOURNAL_MAGIC, 0);
  body.writeUInt32LE(segmentId, 4);
  writeU64(body, generation, 8);
  writeU64(body, data.length, 16);
  body.fill(0, 24, JOURNAL_HEAD_BYTES); // the unused u64
  body.set(data, JOURNAL_HEAD_BYTES);
  const sumAt = body.length - JOURNAL_CHECKSUM_BYTES;
  body.writeBigUInt64LE(checksum64(body, 0, sumAt), sumAt);
  return body;
}

/**
 * Decodes the journal at the start of `bytes`; null when it is incomplete (shorter than its head,
 * the data its head declares and the checksum; wrong magic; or a checksum that does not match: a
 * crash cut it, and the segment was not touched yet). Bytes after its checksum are ignored: a
 * journal file is reused by the next rewrite (engine/compaction-core.ts writeJournal) and written
 * over from its start, so a shorter journal leaves the longer one's tail behind it.
 */
export function decodeJournal(bytes: Uint8Array): Journal | null {
  if (bytes.length < JOURNAL_HEAD_BYTES + JOURNAL_CHECKSUM_BYTES) return null;
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const declared = readU64(view, 16);
  if (declared < 0 || declared > bytes.length - JOURNAL_HEAD_BYTES - JOURNAL_CHECKSUM_BYTES) return null;
  const sumAt = JOURNAL_HEAD_BYTES + declared;
  if (view.readUInt32LE(0) !== JOURNAL_MAGIC || checksum64(bytes, 0, sumAt) !== view.readBigUInt64LE(sumAt)) return null;
  return {
    segmentId: view.readUInt32LE(4),
    generation: readU64(view, 8),
    dataBytes: declared,
    data: view.subarray(JOURNAL_HEAD_BYTES, sumAt),
  };
}
