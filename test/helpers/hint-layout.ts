/**
 * The version-2 hint layout as docs/FORMAT.md "Hint files" documents it, computed here
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

/** Recomputes a hint's checksums after a change: v1 its xxh64; v2 every block sum and the trailer. */
export function resealHint(buf: Buffer): void {
  const tail = buf.length - HINT_TRAILER_BYTES;
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
