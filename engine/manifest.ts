/**
 * The segment manifest: which segment files must exist (issue 9 defect 12). `segments/MANIFEST`
 * lists the live segment ids and the store's next segment id, with an xxh64; it is replaced with
 * the durability order (write MANIFEST.tmp, fdatasync, rename, fsync the directory) whenever the
 * set of segments changes: a segment is created (after its file is durable), a copy-on-write output
 * is published together with the retirement of its source, or an emptied segment is retired — in
 * both retirements BEFORE the file is unlinked. So at open:
 *  - a listed segment whose file is missing was deleted behind the store's back: CorruptionError
 *    (a forgotten value must never come back because a file with its tombstone vanished);
 *  - a file not listed with an id at or above `nextId` was created after the last manifest write
 *    (a crash between creating it and listing it): it is adopted;
 *  - a file not listed below `nextId` was retired, or is a copy-on-write output never published
 *    (its source is still listed and intact): it is deleted.
 * A directory without a MANIFEST (a new store, or one written before the manifest existed) is
 * opened as it is and gets one. Pure file I/O; no policy beyond the rules above.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { checksum64 } from "../segments/checksum.js";
import { FILE_MODE } from "../segments/file-names.js";
import * as io from "../segments/io.js";
import { CorruptionError } from "../rules/errors.js";
import { assert } from "../rules/assert.js";

/** File name of the manifest inside the segments directory. */
export const MANIFEST_FILE = "MANIFEST";
const MAGIC = 0x464e414d; // "MANF"
const VERSION = 1;
const HEAD = 16; // magic u32, version u32, nextId u32, count u32
/** Most segment ids a manifest lists (the open-segment limit, with room for retiring ones). */
export const MANIFEST_IDS_MAX = 1 << 16;

/** What a manifest says. */
export interface Manifest {
  ids: number[];
  nextId: number;
}

/** Encodes a manifest: header, ids (u32 each), xxh64 of everything before it. */
function encode(m: Manifest): Buffer {
  assert(m.ids.length <= MANIFEST_IDS_MAX, `a manifest lists at most ${MANIFEST_IDS_MAX} segments`);
  const buf = Buffer.alloc(HEAD + 4 * m.ids.length + 8);
  buf.writeUInt32LE(MAGIC, 0);
  buf.writeUInt32LE(VERSION, 4);
  buf.writeUInt32LE(m.nextId, 8);
  buf.writeUInt32LE(m.ids.length, 12);
  m.ids.forEach((id, i) => buf.writeUInt32LE(id, HEAD + 4 * i));
  buf.writeBigUInt64LE(checksum64(buf, 0, buf.length - 8), buf.length - 8);
  return buf;
}

/** Reads the manifest of `dir`; null when there is none. A damaged one is CorruptionError. */
export function readManifest(dir: string): Manifest | null {
  let buf: Buffer;
  try {
    buf = fs.readFileSync(path.join(dir, MANIFEST_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  return decode(buf);
}

/** Decodes manifest bytes; CorruptionError unless magic, version, length and xxh64 all match. */
function decode(buf: Buffer): Manifest {
  const count = buf.length >= HEAD ? buf.readUInt32LE(12) : -1;
  const whole = count >= 0 && count <= MANIFEST_IDS_MAX && buf.length === HEAD + 4 * count + 8;
  if (!whole || buf.readUInt32LE(0) !== MAGIC || buf.readUInt32LE(4) !== VERSION || checksum64(buf, 0, buf.length - 8) !== buf.readBigUInt64LE(buf.length - 8)) {
    throw new CorruptionError(0, 0, `segments/${MANIFEST_FILE} is damaged; run \`engram verify\` and restore from a copy`);
  }
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push(buf.readUInt32LE(HEAD + 4 * i));
  return { ids, nextId: buf.readUInt32LE(8) };
}

/**
 * Replaces the manifest of `dir` durably: write tmp, fdatasync, rename, fsync the directory —
 * every call through segments/io.ts at fault point `io:manifest` (so `failAt` and the power-loss
 * harness see them). Throws IoError when any step fails; the caller then treats the set of
 * segments on disk as unknown between the old and the new list (both are safe: see the callers).
 */
export function writeManifest(dir: string, m: Manifest): void {
  const bytes = encode({ ids: [...m.ids].sort((a, b) => a - b), nextId: m.nextId });
  const back = decode(bytes); // paired check: the bytes about to be written say what we mean
  assert(back.nextId === m.nextId && back.ids.length === m.ids.length, "a manifest decodes to what was encoded");
  io.replaceFileDurably("io:manifest", path.join(dir, MANIFEST_FILE), bytes, FILE_MODE);
}

/**
 * Reconciles the segment files present with the manifest (rules above): returns the ids to open.
 * Deletes unlisted files below nextId (retired, or never published).
 */
export function reconcile(dir: string, manifest: Manifest | null, present: number[], fileName: (id: number) => string): number[] {
  if (manifest === null) return present;
  const listed = new Set(manifest.ids);
  const keep: number[] = [];
  let removed = false;
  for (const id of present) {
    if (listed.has(id) || id >= manifest.nextId) keep.push(id);
    else {
      io.unlink("io:unlink", path.join(dir, fileName(id)));
      removed = true;
    }
  }
  if (removed) io.fsyncDir(dir);
  return keep;
}

/**
 * Throws CorruptionError for a listed segment whose file is missing, unless a present segment
 * replaces it (a copy-on-write source dropped at open, before the manifest was rewritten).
 */
export function assertListedPresent(manifest: Manifest | null, present: ReadonlySet<number>, replaced: ReadonlySet<number>): void {
  for (const id of manifest?.ids ?? []) {
    if (!present.has(id) && !replaced.has(id)) {
      throw new CorruptionError(id, 0, `segment ${id} is listed in segments/${MANIFEST_FILE} but its file is missing (deleted?); restore it from a copy — opening without it could bring forgotten values back`);
    }
  }
}
