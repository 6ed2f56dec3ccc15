/**
 * Opening a directory: finish or undo interrupted compactions, then rebuild the keydir by scanning
 * every segment. Recovery yields a prefix of the commit sequence (I2): a torn tail of an unsealed
 * segment is cut off; corruption anywhere else throws CorruptionError and opens nothing.
 *
 * Order: delete *.tmp (unpublished copy-on-write output, unfinished hints); replay or drop each
 * *.journal (in-place compaction, I9); drop segments that a published copy-on-write output
 * replaces; then each segment is loaded from its hint file when that hint is valid for the
 * segment's current header (segments/hint.ts) and scanned otherwise — the active segment from
 * where its hint ends. Replay order does not matter (keydir.apply* are sequence-guarded). A hint
 * is a cache of the scan: sealed segments scanned for want of one get one (engine/hints.ts).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { CorruptionError, LimitExceededError } from "../rules/errors.js";
import { DIR_MODE, parseSegmentFileName, segmentFileName } from "../segments/file-names.js";
import { readHeader } from "../segments/header-io.js";
import { fsyncDir } from "../segments/io.js";
import { readFileRange, readWholeFile } from "../segments/whole-file.js";
import type { DecodedRecord } from "../segments/record.js";
import { blankEntry, decodeEntry, hintVersionWritten, HintBuilder, parseHintFileName, readHint, unlinkHint, writeHintFile, type LoadedHint } from "../segments/hint.js";
import { HintSlots } from "./hint-index.js";
import { hintTrusted, unsafeBootStampForTests, writeSealedHint } from "./hints.js";
import { decodeEraseList } from "../segments/erase-list.js";
import { formatOf, isFramed } from "../segments/header.js";
import { formatVersionWritten } from "../segments/version-written.js";
import { assertSealedEnd, scanRecords, type ScanEnd } from "../segments/scan.js";
import { committedAtOf, killedVersionOf } from "../segments/record-kinds.js";
import { SegmentWriter } from "../segments/writer.js";
import * as io from "../segments/io.js";
import { replayJournal } from "./compaction-core.js";
import { assertListedPresent, readManifest, reconcile, type Manifest } from "./manifest.js";
import type { GenerationTable } from "./generations.js";
import { applyClear, applyErase, applyPut, applyTombstone, Keydir } from "./keydir.js";
import { Segment } from "./segment.js";
import { ReclaimClock } from "./reclaim-clock.js";
import { readDeadBytes, type DeadBytesFile } from "../segments/dead-bytes.js";
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
  tornTails: number;
  journalsReplayed: number;
  /** Segments loaded from a valid hint file (the active one counts when its prefix was). */
  hinted: number;
  /** Unsealed hinted segments whose bytes after the hint were all zeros, so were checked and not scanned. */
  zeroTails: number;
  /** Boot-stamped hints refused because they were written under another boot (their segments scanned). */
  bootStampsRefused: number;
  /** The last close's segments/DEADBYTES as read (no entries: none, or damaged): its dead-byte estimates. */
  deadBytes: DeadBytesFile;
  /** The reclaim times this open gave, and the close's walk of them (engine/reclaim-clock.ts). */
  reclaims: ReclaimClock;
  /** The manifest as read at open (null: none), so the store rewrites it only when it changed. */
  manifest: Manifest | null;
}

/** What applyRecord reads of a record (a decoded one, or a hint entry). */
type Applied = Pick<DecodedRecord, "type" | "seq" | "generation" | "expiresAt" | "scope" | "key" | "value" | "length">;

/** Deletes leftovers of interrupted compactions; returns the number of journals replayed. */
function settleCompactions(dir: string, names: string[]): number {
  let replayed = 0;
  let changed = false;
  for (const name of names) {
    if (name.endsWith(".tmp")) {
      io.unlink("io:unlink", path.join(dir, name));
      changed = true;
    }
    const m = /^(\d{8,10})\.journal$/.exec(name);
    if (m !== null) changed = true;
    if (m !== null && replayJournal(dir, name)) replayed += 1;
  }
  if (changed) fsyncDir(dir); // nothing removed or replayed: nothing to make durable
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

/** The location applyRecord passes on (the apply* functions copy its fields, never keep it). */
const AT = { seg: 0, off: 0, len: 0 };

/** Replays one scanned record of `seg` at `off` into the keydir (the same apply* the commit path uses). */
function applyRecord(keydir: Keydir, seg: Segment, r: Applied, off: number): void {
  const at = AT;
  at.seg = seg.id;
  at.off = off;
  at.len = r.length;
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
  io.makeDir("io:create", dir, DIR_MODE);
  const names = fs.readdirSync(dir).sort();
  const journalsReplayed = settleCompactions(dir, names);
  const present = fs.readdirSync(dir).map(parseSegmentFileName).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const manifest = readManifest(dir);
  const ids = reconcile(dir, manifest, present, segmentFileName); // a listed file that is missing is corruption
  const opened = openAll(dir, ids);
  try {
    assertListedPresent(manifest, new Set(ids), new Set(opened.map((o) => o.header.header.replacesId)));
    return { ...rebuild(dir, gens, now, ids, opened, journalsReplayed, manifest?.nextId ?? 1), manifest };
  } catch (err) {
    // A store that refuses to open keeps no descriptor open (issue 9, defect 9).
    for (const o of opened) io.closeQuietly(o.fd);
    throw err;
  }
}

/** Deletes hint files whose segment is not among `ids` (retired or replaced while a hint stayed). */
function dropOrphanHints(dir: string, ids: readonly number[]): void {
  const keep = new Set(ids);
  for (const name of fs.readdirSync(dir)) {
    const id = parseHintFileName(name);
    if (id !== null && !keep.has(id)) unlinkHint(dir, id);
  }
}

/**
 * Reads the bytes of an unsealed segment from `from` on into a buffer of the file's size (offsets
 * stay file offsets); the bytes before `from` are unspecified and never read (a hint described
 * them): the scan starts at `from` and looks only forward.
 */
function readTail(fd: number, from: number, size: number): Uint8Array {
  // Not zero-filled: a 64 MiB active segment's prefix would cost a memset of every page per open
  // (half of a hinted open's time), for bytes nothing reads.
  return readFileRange(fd, Buffer.allocUnsafeSlow(size), from);
}

/** Bytes per read of the zero check of a hinted tail (one buffer, reused: few pages to fault in). */
const TAIL_CHUNK_BYTES = 256 * 1024;
/** TAIL_CHUNK_BYTES of zeros, the other side of every comparison of the zero check. */
const TAIL_ZEROS = new Uint8Array(TAIL_CHUNK_BYTES);
/** Test only (the unsafe twin of test/hint-tail.test.ts): when true, a hinted tail is taken as empty unread. */
let trustHintTail = false;

/** Test only: makes recovery take the bytes after an active segment's hint as zeros without reading them (true), or check them again (false). */
export function unsafeTrustHintTail(trust: boolean): void {
  trustHintTail = trust;
}

/**
 * True when the file's bytes [from, size) are all zero, read in small chunks into one buffer.
 * This is the common tail after a clean close (the hint covers every record, the rest is
 * preallocated), and there a framed scan from `from` would find the empty group at `from`, see
 * zeros to the end and report a clean end at `from` with nothing delivered: so the caller can
 * skip it, without the buffer of the file's size that the scan needs (64 MiB to allocate and
 * fault in, most of a hinted open's time). Any non-zero byte returns false and the scan decides.
 */
function tailIsZero(fd: number, from: number, size: number): boolean {
  if (trustHintTail) return true;
  // Fewer than 4 bytes after the hint: let the scan judge them (zeros there are a clean end, segments/scan.ts finishGroupFault).
  if (size - from > 0 && size - from < 4) return false;
  const chunk = Buffer.allocUnsafe(Math.min(TAIL_CHUNK_BYTES, Math.max(0, size - from)));
  for (let at = from; at < size; ) {
    const want = Math.min(chunk.length, size - at);
    const got = io.readAt(fd, chunk, 0, want, at);
    if (got === 0) return false; // the file shrank under us: let the scan see what is there
    if (Buffer.compare(chunk.subarray(0, got), TAIL_ZEROS.subarray(0, got)) !== 0) return false;
    at += got;
  }
  return true;
}

/** The valid hint of an opened segment, or null: its checks (segments/hint.ts) plus the file's length. */
function hintFor(dir: string, o: Opened): LoadedHint | null {
  const sealed = (o.header.header.flags & C.FLAG_SEALED) !== 0;
  if (!sealed && !isFramed(o.header)) return null; // a format-1 unsealed segment is scanned record by record
  const hint = readHint(dir, o.id, o.header);
  if (hint === null) return null;
  const size = fs.fstatSync(o.fd).size;
  // A sealed file of another length is damaged (the scan reports it); an unsealed one only grows.
  return (sealed ? size === hint.coversEnd : size >= hint.coversEnd) ? hint : null;
}

/**
 * The active segment's durable prefix after its scan (or its hint and a tail of zeros). What
 * recovery read may sit only in the page cache (a SIGKILL, not a power cut): it is made durable
 * before any new group's frame claims it was (syncedEnd, segments/group.ts). A plain hint that
 * covers all of it was written after those bytes were fdatasynced: nothing to sync. A boot-stamped
 * one (trusted: this boot) covers bytes a `none`-mode close never synced: with nothing after it the
 * open does not sync them either — the frames claim only the stamp's durable ends, and the commit
 * log holds the segment as unsynced until its next sync; with bytes after it the open syncs.
 */
function readyActive(seg: Segment, fd: number, end: ScanEnd, hint: LoadedHint | null, zeros: boolean): void {
  const stamp = hint?.stamp ?? null;
  if (stamp !== null && zeros) {
    const claimed = unsafeBootStampForTests.claimCoversEnd ? end.end : stamp.syncedEnd; // the twin claims what a plain hint may
    seg.syncedEnd = claimed;
    seg.coveredEnd = Math.min(stamp.coveredEnd, claimed);
    return;
  }
  if (seg.hintOnDiskEnd !== end.end || stamp !== null) io.datasyncSync("io:seal", fd);
  seg.syncedEnd = end.end;
  seg.coveredEnd = stamp !== null ? Math.min(stamp.coveredEnd, end.end) : Math.min(end.covered ?? C.DATA_START, end.end);
}

/** Rewrites a sealed segment's valid hint of an older version (1 or 2) in the current layout (best effort, as every hint write). */
function rewriteHint(dir: string, seg: Segment, hint: LoadedHint): void {
  const builder = new HintBuilder(formatOf(seg.header));
  builder.addLoaded(hint);
  writeHintFile(dir, seg.id, builder.encodeParts(seg.id, seg.header, hint.coversEnd, true));
}

/** A segment loaded from its hint: the erase entries that recovery applies at once. */
interface Hinted {
  seg: Segment;
  hint: LoadedHint;
  erases: number[];
}

/**
 * Rebuilds the keydir from the opened segments (recover's second half); `nextId` is the
 * manifest's. First every valid hint is indexed and handed to the keydir as deferred slots
 * (engine/hint-index.ts) — before anything else is applied, so that no slot is built without its
 * hinted entries — then the hints' erasures are applied and every other segment (and the active
 * segment after its hint) is scanned.
 */
function rebuild(dir: string, gens: GenerationTable, now: number, ids: number[], opened: Opened[], journalsReplayed: number, nextId: number): Omit<Recovered, "manifest"> {
  const keydir = new Keydir();
  const segments = new Map<number, Segment>();
  // An unsealed segment of an older format is read with its own rules and then sealed: appends go
  // only to segments of the written format, so one file never mixes two record frames (format 2
  // and 3) or two torn-tail rules (format 1 and 2).
  const unsealed = opened.filter((o) => (o.header.header.flags & C.FLAG_SEALED) === 0 && formatOf(o.header) === formatVersionWritten()).map((o) => o.id);
  const activeId = unsealed.length > 0 ? Math.max(...unsealed) : -1;
  dropOrphanHints(dir, opened.map((o) => o.id));
  const deferred = new HintSlots(now, dir);
  const hinted = new Map<number, Hinted>();
  let bootStampsRefused = 0;
  for (const o of opened) {
    const cell = gens.allocate(o.header.header.generation);
    if (cell === null) throw new LimitExceededError(`more than the open-segment limit of segments in ${dir}; compact with a build that merges segments`);
    const seg = new Segment(o.id, o.fd, cell, o.header, C.DATA_START, null);
    segments.set(o.id, seg);
    const hint = hintFor(dir, o);
    if (hint !== null && !hintTrusted(hint)) bootStampsRefused += 1;
    else if (hint !== null) hinted.set(o.id, { seg, hint, erases: deferred.add(hint, seg) });
  }
  if (hinted.size > 0) keydir.defer(deferred);
  const entry = blankEntry();
  for (const h of hinted.values()) {
    for (const at of h.erases) {
      decodeEntry(h.hint.body, at, entry);
      applyErase(keydir, entry.scope, entry.seq, entry.expiresAt, { seg: h.seg.id, off: entry.offset, len: entry.length }, decodeEraseList(entry.value));
    }
  }
  let seq = 0;
  let tornTails = 0;
  let zeroTails = 0;
  const unhinted: Segment[] = [];
  for (const o of opened) {
    const seg = segments.get(o.id) as Segment;
    const h = hinted.get(o.id);
    const sealed = (o.header.header.flags & C.FLAG_SEALED) !== 0;
    seq = Math.max(seq, o.header.header.createdSeq, o.header.header.maxSeq, seg.maxSeq);
    if (h !== undefined && sealed) {
      seg.dataEnd = h.hint.coversEnd;
      if (h.hint.version !== hintVersionWritten()) rewriteHint(dir, seg, h.hint); // once: the next open maps the current layout
      continue;
    }
    const how = scanInto(keydir, seg, o, h?.hint ?? null, o.id === activeId);
    if (how === "torn") tornTails += 1;
    if (how === "zeros") zeroTails += 1;
    seq = Math.max(seq, seg.maxSeq);
    if (!sealed && o.id !== activeId) sealOnOpen(seg);
    if (o.id !== activeId) unhinted.push(seg);
  }
  // Sealed segments that were scanned get the hint their scan computed (after the seals above).
  for (const seg of unhinted) writeSealedHint(dir, seg);
  // Every data end is final: the last close's reclaim times apply if its file names these segments.
  const deadBytes = readDeadBytes(dir);
  const reclaims = ReclaimClock.of(deadBytes, segments, now);
  deferred.useClock(reclaims);
  keydir.forEachHeld((slot) => {
    if (slot.physical === 0) slot.reclaimedAt = reclaims.at(slot); // deferred slots get the same rule when built (hint-index.ts)
  });
  return { keydir, segments, active: segments.get(activeId) ?? null, seq, maxId: Math.max(ids.length > 0 ? Math.max(...ids) : 0, nextId - 1), tornTails, journalsReplayed, hinted: hinted.size, zeroTails, bootStampsRefused, deadBytes, reclaims };
}

/**
 * Scans one segment into the keydir — all of it, or an unsealed one from where its hint ends —
 * collecting its hint entries on the way; cuts a torn tail; readies the active segment for
 * appends. Returns how the segment ended: a torn tail cut, a hinted tail of zeros (not scanned), or clean.
 */
function scanInto(keydir: Keydir, seg: Segment, o: Opened, hint: LoadedHint | null, active: boolean): "torn" | "zeros" | "clean" {
  const sealed = (o.header.header.flags & C.FLAG_SEALED) !== 0;
  const builder = new HintBuilder(formatOf(o.header));
  if (hint !== null) builder.addLoaded(hint);
  const from = hint?.coversEnd ?? C.DATA_START;
  const size = fs.fstatSync(o.fd).size;
  let end: ScanEnd;
  const zeros = hint !== null && !sealed && tailIsZero(o.fd, from, size);
  if (zeros) {
    end = { end: from, torn: null, records: 0, covered: from }; // what scanFramed returns for zeros from `from` on
  } else {
    const bytes = hint === null ? readWholeFile(o.fd) : readTail(o.fd, from, size);
    end = scanRecords(bytes, o.id, sealed, (r, off) => {
      applyRecord(keydir, seg, r, off);
      builder.addRecord(bytes, off, off);
    }, false, formatOf(o.header), from);
    if (sealed) assertSealedEnd(o.id, o.header.header.sealedBytes, end.end, bytes.length);
  }
  seg.dataEnd = end.end;
  if (end.torn !== null) {
    // Cut the torn tail and re-zero the preallocated space after it.
    io.truncate("io:seal", o.fd, end.end);
    io.truncate("io:seal", o.fd, Math.max(size, end.end));
    io.datasyncSync("io:seal", o.fd);
  }
  seg.hint = builder;
  if (hint !== null && end.end === hint.coversEnd && end.torn === null) seg.hintOnDiskEnd = hint.coversEnd; // nothing after it
  if (!sealed && active) {
    readyActive(seg, o.fd, end, hint, zeros);
    seg.writer = new SegmentWriter(o.id, o.fd, end.end, Math.max(size, end.end));
  }
  return end.torn !== null ? "torn" : zeros ? "zeros" : "clean";
}
