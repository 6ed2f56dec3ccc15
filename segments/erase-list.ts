/**
 * The value of a SCOPE_ERASE record: the retention records of the slots the erasure kills —
 * scope, key, last version and generation of each — so that a restart after their value records
 * were reclaimed still knows them (probe "reclaimed", and the next write's generation).
 *
 * Layout, repeated: u16 scope bytes, scope, u16 key bytes, key, u64 version, u64 generation (LE).
 */
import { InvalidArgumentError } from "../rules/errors.js";
import { readU64, writeU64 } from "./u64.js";
import { elementAt } from "../rules/assert.js";

/** One killed slot. */
export interface ErasedSlot {
  scope: string;
  key: string;
  version: number;
  generation: number;
}

/**
 * Bytes of erase list one SCOPE_ERASE record carries at most. A larger erasure is written as
 * several SCOPE_ERASE records of the same sequence in one batch (RF_IN_BATCH + BATCH_COMMIT, one
 * commit group), so it stays atomic across crashes and no record nears the 256 MiB value limit.
 */
export const ERASE_LIST_CHUNK_BYTES = 4 * 1024 * 1024;

/** Bytes one slot takes in an erase list. */
function entryBytes(s: ErasedSlot): number {
  return 4 + Buffer.byteLength(s.scope, "utf8") + Buffer.byteLength(s.key, "utf8") + 16;
}

/** Splits `slots` into runs whose encoded lists hold at most `bytesMax` each (always one run at least). */
export function chunkEraseList(slots: readonly ErasedSlot[], bytesMax: number = ERASE_LIST_CHUNK_BYTES): ErasedSlot[][] {
  const chunks: ErasedSlot[][] = [[]];
  let bytes = 0;
  for (const s of slots) {
    const n = entryBytes(s);
    if (bytes + n > bytesMax && bytes > 0) {
      chunks.push([]);
      bytes = 0;
    }
    elementAt(chunks, chunks.length - 1, "the chunk being filled").push(s);
    bytes += n;
  }
  return chunks;
}

/** Encodes the list; the codec checks the scopes and keys of the record, the engine these. */
export function encodeEraseList(slots: readonly ErasedSlot[]): Uint8Array {
  const parts = slots.map((s) => ({ scope: Buffer.from(s.scope, "utf8"), key: Buffer.from(s.key, "utf8"), s }));
  const size = parts.reduce((n, p) => n + 4 + p.scope.length + p.key.length + 16, 0);
  const out = Buffer.alloc(size);
  let at = 0;
  for (const p of parts) {
    at = out.writeUInt16LE(p.scope.length, at);
    at += p.scope.copy(out, at);
    at = out.writeUInt16LE(p.key.length, at);
    at += p.key.copy(out, at);
    writeU64(out, p.s.version, at);
    writeU64(out, p.s.generation, at + 8);
    at += 16;
  }
  if (at !== size) throw new Error(`erase list encoded ${at} of ${size} bytes`);
  return out;
}

/** A u64 of the list, refused when beyond 2^53 - 1. */
function u64(buf: Buffer, at: number): number {
  const v = readU64(buf, at);
  if (v < 0) throw new InvalidArgumentError("erase list: number beyond 2^53");
  return v;
}

/** Decodes the list; throws InvalidArgumentError on bytes that are not one (the checksum passed, so that is a bug). */
export function decodeEraseList(bytes: Uint8Array | null): ErasedSlot[] {
  if (bytes === null || bytes.length === 0) return [];
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: ErasedSlot[] = [];
  let at = 0;
  while (at < buf.length) {
    if (at + 2 > buf.length) throw new InvalidArgumentError("erase list truncated");
    const scopeLen = buf.readUInt16LE(at);
    const scope = buf.toString("utf8", at + 2, at + 2 + scopeLen);
    at += 2 + scopeLen;
    const keyLen = buf.readUInt16LE(at);
    const key = buf.toString("utf8", at + 2, at + 2 + keyLen);
    at += 2 + keyLen;
    if (at + 16 > buf.length) throw new InvalidArgumentError("erase list truncated");
    out.push({ scope, key, version: u64(buf, at), generation: u64(buf, at + 8) });
    at += 16;
  }
  return out;
}
