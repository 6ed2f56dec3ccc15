/**
 * The boot stamp of a version-4 hint (docs/FORMAT.md "Version 4"): a store closed in `none`
 * durability writes its active segment's prefix hint without syncing the bytes it covers, and
 * stamps it with the boot it was written in. Those bytes are readable from the page cache until
 * the machine restarts, so the hint is trusted only under the same boot id (segments/boot-id.ts);
 * after a restart it is refused and the segment is scanned, which cuts whatever a power cut tore.
 * The stamp also carries what was durable when the hint was written, so that the next session's
 * group frames claim no more than that (syncedEnd, segments/group.ts) until its first sync.
 *
 * Layout, 32 bytes, between the index block sums and the trailer (so the trailer's xxh64 covers
 * it): the boot id (16 bytes), `syncedEnd` (u32: an fdatasync had made the segment durable up to
 * here), `coveredEnd` (u32: the group frames on disk prove it durable up to here), 8 bytes zero.
 */
import * as C from "./constants.js";
import { BOOT_ID_BYTES } from "./boot-id.js";
import { assert } from "../rules/assert.js";

/** Bytes of a boot stamp. */
export const HINT_STAMP_BYTES = 32;

const S_BOOT = 0;
const S_SYNCED_END = 16;
const S_COVERED_END = 20;
const S_RESERVED = 24;

/** What a version-4 hint says about the boot it was written in and the durable prefix then. */
export interface HintStamp {
  /** The boot id the hint was written under. */
  readonly boot: Buffer;
  /** The segment offset up to which an fdatasync had made the file durable. */
  readonly syncedEnd: number;
  /** The segment offset up to which the group frames on disk prove the file durable (at most syncedEnd's claims). */
  readonly coveredEnd: number;
}

/** Writes `stamp` at out[at, at + 32) for a hint covering `coversEnd` (the reserved bytes stay zero). */
export function putStamp(out: Buffer, at: number, stamp: HintStamp, coversEnd: number): void {
  assert(stampEndsValid(stamp.syncedEnd, stamp.coveredEnd, coversEnd), `a stamp's durable ends lie in the data it covers (${stamp.syncedEnd}, ${stamp.coveredEnd} <= ${coversEnd})`);
  assert(stamp.boot.length === BOOT_ID_BYTES, "a stamp carries a whole boot id");
  stamp.boot.copy(out, at + S_BOOT);
  out.writeUInt32LE(stamp.syncedEnd, at + S_SYNCED_END);
  out.writeUInt32LE(stamp.coveredEnd, at + S_COVERED_END);
  out.fill(0, at + S_RESERVED, at + HINT_STAMP_BYTES);
}

/** The stamp at buf[at, at + 32) of a hint covering `coversEnd`, or null when it is malformed. */
export function stampAt(buf: Buffer, at: number, coversEnd: number): HintStamp | null {
  if (at + HINT_STAMP_BYTES > buf.length) return null;
  for (let i = S_RESERVED; i < HINT_STAMP_BYTES; i++) if (buf[at + i] !== 0) return null;
  const syncedEnd = buf.readUInt32LE(at + S_SYNCED_END);
  const coveredEnd = buf.readUInt32LE(at + S_COVERED_END);
  if (!stampEndsValid(syncedEnd, coveredEnd, coversEnd)) return null;
  return { boot: Buffer.from(buf.subarray(at + S_BOOT, at + S_BOOT + BOOT_ID_BYTES)), syncedEnd, coveredEnd };
}

/** Both durable ends inside the segment's data and at most the end the hint covers. */
function stampEndsValid(syncedEnd: number, coveredEnd: number, coversEnd: number): boolean {
  return syncedEnd >= C.DATA_START && coveredEnd >= C.DATA_START && syncedEnd <= coversEnd && coveredEnd <= coversEnd;
}
