/**
 * The dead-byte estimates file, `segments/DEADBYTES` (docs/FORMAT.md "Dead-byte estimates"): for
 * each segment that held garbage when the store last closed, its id, header generation and data
 * end — which name exactly that segment's bytes — and how many of them were dead. An open from
 * hint files does not count dead bytes (that count would build every slot), so without this file
 * a store used by short processes (every CLI command, an MCP server restarted often) forgot at each
 * open what the earlier ones had killed, and no segment ever reached its garbage ratio.
 *
 * Version 2 (the thirtieth session) lists every segment of the store, garbage or not, and adds to
 * each entry an upper bound on when the store reclaimed the values of the slots whose retention
 * record lies in that segment (`reclaimedBy`) and those records' bytes (`retainedBytes`): the
 * retention window of those records is counted from it at the next open instead of from the open
 * (engine/reclaim-clock.ts), and only when the file names exactly the segments that open finds —
 * nothing was compacted, written or replayed since the close that wrote it. A version-1 file
 * gives estimates and no reclaim times.
 *
 * The file is advisory, like a hint: an estimate only chooses which segments a pass plans, and the
 * plan decides what survives; a reclaim time is only ever applied where it cannot be early. So it
 * is written without a sync (a close in `none` durability syncs nothing), renamed into place, and
 * read back only when its magic, version, length and xxh64 match; anything else is no file. An
 * entry counts only for a segment with the same id, generation and data end, and never for more
 * bytes than the segment holds. Every call goes through segments/io.ts
 * at fault point `io:hint` (the point of the store's other caches); a failed write is dropped.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { checksum64 } from "./checksum.js";
import { FILE_MODE } from "./file-names.js";
import * as io from "./io.js";
import { assert } from "../rules/assert.js";

/** File name inside the segments directory. */
export const DEAD_BYTES_FILE = "DEADBYTES";
const MAGIC = 0x44414544; // "DEAD"
/** The version written; VERSION_1 files are still read (their entries carry no reclaim time). */
const VERSION = 2;
const VERSION_1 = 1;
const HEAD = 16; // magic u32, version u32, count u32, reserved u32
/** Bytes of one entry: id u32, reserved u32, generation f64, data end f64, dead bytes f64, and in version 2 reclaimed-by f64 and retained bytes f64. */
const ENTRY_V1 = 32;
const ENTRY = 48;
/** Most entries a file holds (a manifest's most segments). */
export const DEAD_BYTES_ENTRIES_MAX = 1 << 16;

/**
 * One segment's entry: the segment (id, header generation, data end), its dead bytes, and the
 * latest time (ms, the store's clock) at which a slot whose retention record lies in it may have
 * lost its last value — 0 when no such time is known (every version-1 entry).
 */
export interface DeadBytesEntry {
  id: number;
  generation: number;
  dataEnd: number;
  deadBytes: number;
  reclaimedBy: number;
  /** Bytes of those slots' retention records in this segment (garbage once their window ends: the next open's estimate); 0 in version 1. */
  retainedBytes: number;
}

/** True when every count is a non-negative safe integer, the id a u32, the dead bytes at most the data end, and the time finite and non-negative. */
function entryValid(e: DeadBytesEntry): boolean {
  const ints = [e.generation, e.dataEnd, e.deadBytes, e.retainedBytes].every((x) => Number.isSafeInteger(x) && x >= 0);
  const time = Number.isFinite(e.reclaimedBy) && e.reclaimedBy >= 0;
  return ints && time && Number.isInteger(e.id) && e.id > 0 && e.id <= 0xffffffff && e.deadBytes <= e.dataEnd && e.retainedBytes <= e.dataEnd;
}

/** Encodes `entries`: header, entries, xxh64 of everything before it. */
export function encodeDeadBytes(entries: readonly DeadBytesEntry[]): Buffer {
  assert(entries.length <= DEAD_BYTES_ENTRIES_MAX, `a dead-bytes file holds at most ${DEAD_BYTES_ENTRIES_MAX} entries`);
  const buf = Buffer.alloc(HEAD + ENTRY * entries.length + 8);
  buf.writeUInt32LE(MAGIC, 0);
  buf.writeUInt32LE(VERSION, 4);
  buf.writeUInt32LE(entries.length, 8);
  entries.forEach((e, i) => {
    assert(entryValid(e), `dead-bytes entry of segment ${e.id} holds integers within its data end`);
    const at = HEAD + ENTRY * i;
    buf.writeUInt32LE(e.id, at);
    buf.writeDoubleLE(e.generation, at + 8);
    buf.writeDoubleLE(e.dataEnd, at + 16);
    buf.writeDoubleLE(e.deadBytes, at + 24);
    buf.writeDoubleLE(e.reclaimedBy, at + 32);
    buf.writeDoubleLE(e.retainedBytes, at + 40);
  });
  buf.writeBigUInt64LE(checksum64(buf, 0, buf.length - 8), buf.length - 8);
  return buf;
}

/** A decoded file: its entries, and whether it lists every segment of the store (version 2). */
export interface DeadBytesFile {
  entries: DeadBytesEntry[];
  complete: boolean;
}

/** Decodes file bytes (version 2 or 1); null unless magic, version, length, xxh64 and every entry are valid. */
export function decodeDeadBytes(buf: Uint8Array): DeadBytesFile | null {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const version = b.length >= HEAD ? b.readUInt32LE(4) : -1;
  const entryBytes = version === VERSION ? ENTRY : ENTRY_V1;
  const count = b.length >= HEAD ? b.readUInt32LE(8) : -1;
  if (count < 0 || count > DEAD_BYTES_ENTRIES_MAX || b.length !== HEAD + entryBytes * count + 8) return null;
  if (b.readUInt32LE(0) !== MAGIC || (version !== VERSION && version !== VERSION_1)) return null;
  if (checksum64(b, 0, b.length - 8) !== b.readBigUInt64LE(b.length - 8)) return null;
  const entries: DeadBytesEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = HEAD + entryBytes * i;
    const v2 = version === VERSION;
    const e = { id: b.readUInt32LE(at), generation: b.readDoubleLE(at + 8), dataEnd: b.readDoubleLE(at + 16), deadBytes: b.readDoubleLE(at + 24), reclaimedBy: v2 ? b.readDoubleLE(at + 32) : 0, retainedBytes: v2 ? b.readDoubleLE(at + 40) : 0 };
    if (!entryValid(e)) return null;
    entries.push(e);
  }
  return { entries, complete: version === VERSION };
}

/** The file in `dir`; no entries when it is missing, unreadable or damaged (never throws). */
export function readDeadBytes(dir: string): DeadBytesFile {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(path.join(dir, DEAD_BYTES_FILE));
  } catch {
    return { entries: [], complete: false };
  }
  return decodeDeadBytes(bytes) ?? { entries: [], complete: false };
}

/**
 * Replaces the estimates in `dir` with `entries`: written as DEADBYTES.tmp and renamed over the
 * file, without a sync (advisory: see above). Best effort: returns false, leaving no .tmp, when a
 * step fails.
 */
export function writeDeadBytes(dir: string, entries: readonly DeadBytesEntry[]): boolean {
  const bytes = encodeDeadBytes(entries);
  const back = decodeDeadBytes(bytes); // paired check: the bytes about to be written say what we mean
  assert(back !== null && back.complete && back.entries.length === entries.length, "dead-bytes entries decode to what was encoded");
  const file = path.join(dir, DEAD_BYTES_FILE);
  const tmp = `${file}.tmp`;
  try {
    const fd = io.openFile("io:hint", tmp, "w", FILE_MODE);
    try {
      io.writeAllSync("io:hint", fd, [bytes], 0);
    } finally {
      io.closeFile(fd);
    }
    io.rename("io:hint", tmp, file);
    return true;
  } catch {
    io.unlinkQuietly(tmp);
    return false;
  }
}
