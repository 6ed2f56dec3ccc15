/**
 * The version-2 and version-3 hint layouts as docs/FORMAT.md "Hint files" documents them, computed here
 * independently of segments/hint.ts, so tests can find each section and damage it, and reseal a
 * damaged hint (recompute its block sums and trailer: the protection taken away).
 */
import { checksum64 } from "../../segments/checksum.js";
import { HINT_HEADER_BYTES, HINT_TRAILER_BYTES } from "../../segments/hint.js";

/** The sections of a version-2 hint file. */
export interface Sections {
  count: number;
  bodyBytes: number;
  keyed: number;
  cells: number;
  erases: number;
  scopesBytes: number;
  blockBytes: number;
  entryAt: number;
  hashes: number;
  table: number;
  /** Start of the summary (= the erase offsets); the indexed region is [0, summary). */
  summary: number;
  scopes: number;
  sums: number;
  blocks: number;
  total: number;
}

/** The sections a version-2 header describes. */
export function sectionsOf(b: Buffer): Sections {
  const bodyBytes = b.readUInt32LE(28);
  const keyed = b.readUInt32LE(48);
  const cells = b.readUInt32LE(52);
  const erases = b.readUInt32LE(56);
  const scopesBytes = b.readUInt32LE(60);
  const blockBytes = b.readUInt32LE(64);
  const entryAt = HINT_HEADER_BYTES + Math.ceil(bodyBytes / 4) * 4;
  const hashes = entryAt + 4 * keyed;
  const table = hashes + 4 * keyed;
  const summary = table + 4 * cells;
  const scopes = summary + 4 * erases;
  const sums = scopes + scopesBytes;
  const blocks = Math.ceil(summary / blockBytes);
  const total = sums + 8 * blocks + HINT_TRAILER_BYTES;
  return { count: b.readUInt32LE(24), bodyBytes, keyed, cells, erases, scopesBytes, blockBytes, entryAt, hashes, table, summary, scopes, sums, blocks, total };
}

/** The sections of a version-3 hint file (docs/FORMAT.md), file offsets. */
export interface SectionsV3 {
  count: number;
  bodyBytes: number;
  keyed: number;
  cells: number;
  erases: number;
  scopesBytes: number;
  blockBytes: number;
  packedBytes: number;
  entryBlocks: number;
  /** Packed entries start at 80; the index (hashes, then table) at `index`. */
  index: number;
  indexBytes: number;
  summary: number;
  scopes: number;
  rows: number;
  sums: number;
  indexBlocks: number;
  total: number;
}

/** Bytes of the version-3 header. */
export const V3_HEADER_BYTES = 80;

/** The sections a version-3 header describes. */
export function sectionsOfV3(b: Buffer): SectionsV3 {
  const keyed = b.readUInt32LE(48);
  const cells = b.readUInt32LE(52);
  const erases = b.readUInt32LE(56);
  const scopesBytes = b.readUInt32LE(60);
  const blockBytes = b.readUInt32LE(64);
  const packedBytes = b.readUInt32LE(68);
  const entryBlocks = b.readUInt32LE(72);
  const index = V3_HEADER_BYTES + packedBytes;
  const indexBytes = 4 * keyed + 4 * cells;
  const summary = index + indexBytes;
  const scopes = summary + 4 * erases;
  const rows = scopes + scopesBytes;
  const sums = rows + 20 * entryBlocks;
  const indexBlocks = Math.ceil(indexBytes / blockBytes);
  const total = sums + 8 * indexBlocks + HINT_TRAILER_BYTES;
  return { count: b.readUInt32LE(24), bodyBytes: b.readUInt32LE(28), keyed, cells, erases, scopesBytes, blockBytes, packedBytes, entryBlocks, index, indexBytes, summary, scopes, rows, sums, indexBlocks, total };
}

/** Reads the LEB128 varint at b[at]: its value and the offset after it. */
export function varintAt(b: Buffer, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (;;) {
    const x = b[at++] as number;
    value += (x & 0x7f) * scale;
    if (x < 0x80) return { value, next: at };
    scale *= 0x80;
  }
}

/**
 * Where each field of a version-3 hint's first packed entry starts (file offsets): the first
 * byte, the offset gap, the sequence delta, the value length (PUT, SCOPE_ERASE), the generation.
 */
export function firstEntryFields(b: Buffer): { first: number; gap: number; seq: number; value: number; generation: number; type: number } {
  const first = V3_HEADER_BYTES;
  const type = (b[first] as number) & 7;
  const gap = first + 1;
  const seq = varintAt(b, gap).next;
  const afterSeq = varintAt(b, seq).next;
  const valued = type === 1 || type === 4;
  const generation = valued ? varintAt(b, afterSeq).next : afterSeq;
  return { first, gap, seq, value: valued ? afterSeq : -1, generation, type };
}

/** Recomputes a hint's checksums after a change: v1 its xxh64; v2 every block sum and the trailer; v3 every entry block's and index block's sum and the trailer. */
export function resealHint(buf: Buffer): void {
  const tail = buf.length - HINT_TRAILER_BYTES;
  if (buf[4] === 3 || buf[4] === 4) {
    const x = sectionsOfV3(buf); // version 4: version 3's sections, the boot stamp after the sums (in the trailer's sum)
    for (let j = 0, from = 0; j < x.entryBlocks; j++) {
      const to = buf.readUInt32LE(x.rows + 20 * j);
      buf.writeBigUInt64LE(checksum64(buf, V3_HEADER_BYTES + from, V3_HEADER_BYTES + to), x.rows + 20 * j + 12);
      from = to;
    }
    for (let k = 0; k < x.indexBlocks; k++) {
      const from = x.index + k * x.blockBytes;
      buf.writeBigUInt64LE(checksum64(buf, from, Math.min(x.summary, from + x.blockBytes)), x.sums + 8 * k);
    }
    const both3 = Buffer.concat([buf.subarray(0, V3_HEADER_BYTES), buf.subarray(x.summary, tail)]);
    buf.writeBigUInt64LE(checksum64(both3, 0, both3.length), tail);
    return;
  }
  if (buf[4] !== 2) {
    buf.writeBigUInt64LE(checksum64(buf, 0, tail), tail);
    return;
  }
  const x = sectionsOf(buf);
  for (let k = 0; k < x.blocks; k++) {
    const from = k * x.blockBytes;
    buf.writeBigUInt64LE(checksum64(buf, from, Math.min(x.summary, from + x.blockBytes)), x.sums + 8 * k);
  }
  const both = Buffer.concat([buf.subarray(0, HINT_HEADER_BYTES), buf.subarray(x.summary, tail)]);
  buf.writeBigUInt64LE(checksum64(both, 0, both.length), tail);
}
