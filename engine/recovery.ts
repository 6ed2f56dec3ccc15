/**
 * Opening a directory: finish or undo interrupted compactions, then rebuild the keydir by scanning
 * every segment. Recovery yields a prefix of the commit sequence (I2): a torn tail of an unsealed
 * segment is cut off; corruption anywhere else throws CorruptionError and opens nothing.
 *
 * Order: delete *.tmp (unpublished copy-on-write output); replay or drop each *.journal (in-place
 * compaction, I9); drop segments that a published copy-on-write output replaces; scan the rest.
 * Replay order does not matter (keydir.apply* are sequence-guarded).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { CorruptionError, LimitExceededError } from "../rules/errors.js";
import { parseSegmentFileName, segmentFileName } from "../segments/file-names.js";
import { readHeader } from "../segments/header-io.js";
import { fsyncDir } from "../segments/io.js";
import { readWholeFile } from "../segments/whole-file.js";
import type { DecodedRecord } from "../segments/record.js";
import { decodeEraseList } from "../segments/erase-list.js";
import { isFramed } from "../segments/header.js";
import { assertSealedEnd, scanRecords } from "../segments/scan.js";
import { committedAtOf, killedVersionOf } from "../segments/record-kinds.js";
import { SegmentWriter } from "../segments/writer.js";
import * as io from "../segments/io.js";
import { replayJournal } from "./compaction-core.js";
import { assertListedPresent, readManifest, reconcile } from "./manifest.js";
import type { GenerationTable } from "./generations.js";
import { applyClear, applyErase, applyPut, applyTombstone, Keydir } from "./keydir.js";
import { Segment } from "./segment.js";
import { elementAt } from "../rules/assert.js";

/** What recovery rebuilt. */
export interface Recovered {
  keydir: Keydir;
  segments: Map<number, Segment>;
  /** The unsealed segment to keep appending to, or null when every segment is sealed. */
  active: Segment | null;
  /** Highest sequence number ever committed (records or headers). */
  seq: number;
  /** Highest segment id seen or handed out (the manifest's next id minus one). */
  maxId: number;
}

/** Deletes leftovers of interrupted compactions; returns the number of journals replayed. */
function settleCompactions(dir: string, names: string[]): number {
  let replayed = 0;
  for (const name of names) {
    if (name.endsWith(".tmp")) io.unlink("io:unlink", path.join(dir, name));
    const m = /^(\d{8,10})\.journal$/.exec(name);
    if (m !== null && replayJournal(dir, Number(m[1]))) replayed += 1;
  }
  fsyncDir(dir);
  return replayed;
}

interface Opened {
  id: number;
  fd: number;
  header: ReturnType<typeof readHeader>;
}

/**
 * Opens every segment of `ids` read/write and reads its header, which must name the segment; on
 * any failure closes every descriptor it opened and rethrows (a refused open leaks nothing).
 */
function openAll(dir: string, ids: number[]): Opened[] {
  const opened: Opened[] = [];
  try {
    for (const id of ids) {
      const fd = io.openFile("io:seal", path.join(dir, segmentFileName(id)), "r+");
      opened.push({ id, fd, header: null as unknown as Opened["header"] });
      const header = readHeader(fd, id);
      if (header.header.segmentId !== id) throw new CorruptionError(id, 0, `header names segment ${header.header.segmentId}`);
      elementAt(opened, opened.length - 1, "the segment just opened").header = header;
    }
  } catch (err) {
    for (const o of opened) io.closeQuietly(o.fd);
    throw err;
  }
  // A published copy-on-write output replaces its source: the source is a leftover of a crash
  // between rename and unlink, and replaying both would count its records twice.
  const present = new Set(ids);
  const replaced = new Set(opened.map((o) => o.header.header.replacesId).filter((r) => r !== 0 && present.has(r)));
  for (const o of opened.filter((x) => replaced.has(x.id))) {
    io.closeQuietly(o.fd);
    io.unlink("io:unlink", path.join(dir, segmentFileName(o.id)));
  }
  if (replaced.size > 0) fsyncDir(dir);
  return opened.filter((o) => !replaced.has(o.id));
}

/** Replays one scanned record of `seg` at `off` into the keydir (the same apply* the commit path uses). */
function applyRecord(keydir: Keydir, seg: Segment, r: DecodedRecord, off: number): void {
  const at = { seg: seg.id, off, len: r.length };
  seg.noteSeq(r.seq);
  switch (r.type) {
    case C.RecordType.PUT:
      applyPut(keydir.ensure(r.scope, r.key), r.seq, r.generation, r.expiresAt, at);
      seg.scopes.add(r.scope);
      break;
    case C.RecordType.TOMBSTONE:
      applyTombstone(keydir.ensure(r.scope, r.key), r.seq, r.generation, killedVersionOf(r), at);
      break;
    case C.RecordType.CLEAR:
      applyClear(keydir.ensure(r.scope, r.key), r.seq, r.generation, at);
      break;
    case C.RecordType.SCOPE_ERASE:
      applyErase(keydir, r.scope, r.seq, committedAtOf(r), at, decodeEraseList(r.value as Uint8Array | null));
      break;
    case C.RecordType.BATCH_COMMIT:
      break;
  }
}

/** Seals a segment that recovery found unsealed but not last (a crash during rotation). */
function sealOnOpen(seg: Segment): void {
  io.truncate("io:seal", seg.fd, seg.dataEnd);
  io.datasyncSync("io:seal", seg.fd);
  seg.writeSealHeader();
}

/** Rebuilds the store's state from `dir` (the segments directory, created if missing). */
export function recover(dir: string, gens: GenerationTable, now: number): Recovered {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const names = fs.readdirSync(dir).sort();
  settleCompactions(dir, names);
  const present = fs.readdirSync(dir).map(parseSegmentFileName).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const manifest = readManifest(dir);
  const ids = reconcile(dir, manifest, present, segmentFileName); // a listed file that is missing is corruption
  const opened = openAll(dir, ids);
  try {
    assertListedPresent(manifest, new Set(ids), new Set(opened.map((o) => o.header.header.replacesId)));
    return rebuild(dir, gens, now, ids, opened, manifest?.nextId ?? 1);
  } catch (err) {
    // A store that refuses to open keeps no descriptor open (issue 9, defect 9).
    for (const o of opened) io.closeQuietly(o.fd);
    throw err;
  }
}

/** Scans the opened segments into a keydir (recover's second half); `nextId` is the manifest's. */
function rebuild(dir: string, gens: GenerationTable, now: number, ids: number[], opened: Opened[], nextId: number): Recovered {
  const keydir = new Keydir();
  const segments = new Map<number, Segment>();
  // A format-1 unsealed segment is read record by record and then sealed: appends go only to
  // group-framed (format 2) segments, so one file never mixes the two torn-tail rules.
  const unsealed = opened.filter((o) => (o.header.header.flags & C.FLAG_SEALED) === 0 && isFramed(o.header)).map((o) => o.id);
  const activeId = unsealed.length > 0 ? Math.max(...unsealed) : -1;
  let seq = 0;
  for (const o of opened) {
    const cell = gens.allocate(o.header.header.generation);
    if (cell === null) throw new LimitExceededError(`more than the open-segment limit of segments in ${dir}; compact with a build that merges segments`);
    const sealed = (o.header.header.flags & C.FLAG_SEALED) !== 0;
    const bytes = readWholeFile(o.fd);
    const seg = new Segment(o.id, o.fd, cell, o.header, C.DATA_START, null);
    const end = scanRecords(bytes, o.id, sealed, (r, off) => applyRecord(keydir, seg, r, off), false, isFramed(o.header));
    if (sealed) assertSealedEnd(o.id, o.header.header.sealedBytes, end, bytes.length);
    seg.dataEnd = end.end;
    seq = Math.max(seq, o.header.header.createdSeq, o.header.header.maxSeq, seg.maxSeq);
    if (end.torn !== null) {
      // Cut the torn tail and re-zero the preallocated space after it.
      io.truncate("io:seal", o.fd, end.end);
      io.truncate("io:seal", o.fd, Math.max(bytes.length, end.end));
      io.datasyncSync("io:seal", o.fd);
    }
    if (!sealed && o.id === activeId) {
      // What recovery read may sit only in the page cache (a SIGKILL, not a power cut): make it
      // durable before any new group's frame claims it was (syncedEnd, segments/group.ts).
      io.datasyncSync("io:seal", o.fd);
      seg.syncedEnd = end.end;
      seg.coveredEnd = Math.min(end.covered ?? C.DATA_START, end.end);
      seg.writer = new SegmentWriter(o.id, o.fd, end.end, Math.max(bytes.length, end.end));
    } else if (!sealed) sealOnOpen(seg);
    segments.set(o.id, seg);
  }
  for (const slot of keydir.all()) if (slot.physical === 0) slot.reclaimedAt = now;
  return { keydir, segments, active: segments.get(activeId) ?? null, seq, maxId: Math.max(ids.length > 0 ? Math.max(...ids) : 0, nextId - 1) };
}
