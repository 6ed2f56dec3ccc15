/**
 * One compaction of one sealed segment, in either mode. Runs in a piscina worker (or inline when
 * `compaction.workers` is 0); imports only segments/ and worker-safe engine modules, never fs-ext.
 *
 * The main thread chooses what survives (`live`, from the keydir); this code copies exactly those
 * records, verifying each one's checksum on the way, and reports where each went and which PUT
 * records it dropped, so the main thread can apply the move in one turn.
 *
 * copy-on-write: write NNNN.seg.tmp, fdatasync, rename to its final name, fsync the directory.
 *   The old file stays until the main thread has published the new one and its last reader ended.
 * in-place: write a redo journal holding the surviving bytes, fdatasync it and the directory; make
 *   the shared generation odd; overwrite the segment from the front; truncate; fdatasync; write
 *   the header copy with generation+2; delete the journal. A crash at any byte either finds no
 *   valid journal (the segment is untouched) or replays the journal (replayJournal below).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { CorruptionError } from "../rules/errors.js";
import { FILE_MODE, journalFileName, segmentFileName, tmpFileName } from "../segments/file-names.js";
import { readHeader, writeHeader } from "../segments/header-io.js";
import { fsyncDir, unlinkQuietly } from "../segments/io.js";
import { ReadScratch, readWholePath } from "../segments/whole-file.js";
import * as io from "../segments/io.js";
import { chooseHeader, encodeHeader, type HeaderChoice, type SegmentHeader } from "../segments/header.js";
import { HintBuilder, hintFileName, unlinkHint, writeHintFile } from "../segments/hint.js";
import { assertSealedEnd, walkSealed } from "../segments/scan.js";
import { recordNamesAt } from "../segments/record.js";
import { decodeJournal, encodeJournal } from "../segments/journal.js";
import { bumpShared, GENERATION_MAX, loadShared } from "./generations.js";
import { assert, elementAt } from "../rules/assert.js";
import type { FaultPoint } from "../rules/types.js";

/** What the main thread asks a worker to do. */
export interface CompactionTask {
  mode: "copy-on-write" | "in-place";
  segmentsDir: string;
  segmentId: number;
  /** copy-on-write: the id of the new segment; in-place: equal to segmentId. */
  targetId: number;
  /** Surviving records as [offset, length] pairs, sorted by offset. */
  live: number[];
  gens: SharedArrayBuffer;
  cell: number;
  faults: SharedArrayBuffer | null;
}

/** What a compaction did. */
export interface CompactionResult {
  /** New offset of each live record, in the order of `task.live`. */
  newOffsets: number[];
  /** PUT records dropped: scope, key and old offset of each. */
  droppedScopes: string[];
  droppedKeys: string[];
  droppedOffsets: number[];
  bytesBefore: number;
  bytesAfter: number;
  recordsKept: number;
  recordsDropped: number;
  /** No record survived: nothing was written; the main thread removes the segment. */
  empty: boolean;
  /** in-place: the generation written to the header (the main thread publishes it). */
  generation: number;
  /** The output's hint file was written (built from the copied records, not by a rescan). */
  hinted: boolean;
}

/**
 * Reused read buffers of this thread (tasks run one at a time per thread): the source segment,
 * and the copy read back for its check. Neither view outlives the task that took it: what a
 * result carries is numbers and fresh strings. Segments up to 16 MiB keep theirs.
 */
const SCRATCH_RETAIN_BYTES_MAX = 16 * 1024 * 1024;
const sourceScratch = new ReadScratch(SCRATCH_RETAIN_BYTES_MAX);
const backScratch = new ReadScratch(SCRATCH_RETAIN_BYTES_MAX);

/** Pauses or crashes at a fault point: blocking in a worker, awaited inline. */
export type FaultHit = (faults: SharedArrayBuffer | null, point: FaultPoint) => void | Promise<void>;


/**
 * Runs one compaction task on a sealed segment: copies the surviving records (checking each), then
 * publishes them durably — copy-on-write as a new file renamed into place, in-place through the
 * redo journal — and reports where each went. Never changes the keydir: the main thread applies it.
 */
export async function runCompaction(task: CompactionTask, hit: FaultHit): Promise<CompactionResult> {
  // I9: a crash at any step loses nothing live: copy-on-write publishes by tmp, fsync, rename, fsync dir; in-place by its redo journal.
  io.registerFaultTable(task.segmentsDir, task.faults);
  const file = path.join(task.segmentsDir, segmentFileName(task.segmentId));
  const fd = task.mode === "in-place" ? io.openFile("io:rewrite", file, "r+") : fs.openSync(file, "r");
  let bytes: Uint8Array | null = null;
  try {
    bytes = sourceScratch.readWholeFile(fd);
    const { header } = chooseHeader(bytes, task.segmentId);
    if ((header.flags & C.FLAG_SEALED) === 0) throw new Error(`segment ${task.segmentId} is not sealed`);
    const plan = planCopy(bytes, task, header.sealedBytes);
    const result: CompactionResult = { ...plan.result, generation: header.generation, hinted: false };
    if (plan.result.empty) return result;
    if (task.mode === "copy-on-write") {
      result.hinted = await writeCopy(task, header, plan, hit);
    } else {
      result.generation = await rewriteInPlace(fd, task, { generation: header.generation, original: bytes }, plan.out, hit);
      result.hinted = writeOutputHint(task, readHeader(fd, task.segmentId), plan.out, result.newOffsets);
    }
    return result;
  } finally {
    if (bytes !== null) sourceScratch.release(bytes);
    io.closeQuietly(fd);
  }
}

/**
 * Scans the whole segment (every record's fixed fields and checksum), checks that every live
 * location is a record start of the planned length, and copies the survivors into one buffer of
 * exactly their total length — one copy per run of adjacent survivors, no per-record allocation.
 * Each dropped PUT record is named (scope, key, old offset) for the main thread's accounting.
 */
function planCopy(bytes: Uint8Array, task: CompactionTask, sealedBytes: number): { out: Buffer; result: Omit<CompactionResult, "generation" | "hinted"> } {
  const live = task.live;
  let liveBytes = 0;
  for (let i = 1; i < live.length; i += 2) liveBytes += elementAt(live, i, "live offsets come in pairs");
  const src = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = Buffer.allocUnsafe(liveBytes);
  const result: Omit<CompactionResult, "generation" | "hinted"> = {
    newOffsets: [], droppedScopes: [], droppedKeys: [], droppedOffsets: [],
    bytesBefore: bytes.length, bytesAfter: 0, recordsKept: 0, recordsDropped: 0, empty: false,
  };
  let next = 0; // index into live of the next survivor, which the walk must meet in file order
  let runFrom = -1; // source offset where the current run of adjacent survivors starts
  let runTo = -1;
  let cursor = 0; // bytes of out filled by closed runs
  const flushRun = (): void => {
    if (runFrom < 0) return;
    cursor += src.copy(out, cursor, runFrom, runTo);
    runFrom = -1;
  };
  const scanned = walkSealed(bytes, task.segmentId, (offset, recordLength, type) => {
    const wantAt = next < live.length ? (live[next] as number) : -1;
    if (offset !== wantAt) {
      if (wantAt >= 0 && wantAt < offset) throw new CorruptionError(task.segmentId, wantAt, "live location is not a record start");
      result.recordsDropped += 1;
      if (type === C.RecordType.PUT) {
        const names = recordNamesAt(bytes, offset);
        result.droppedScopes.push(names.scope);
        result.droppedKeys.push(names.key);
        result.droppedOffsets.push(offset);
      }
      return;
    }
    const length = live[next + 1] as number;
    if (length !== recordLength) throw new CorruptionError(task.segmentId, offset, `keydir length ${length} != record length ${recordLength}`);
    next += 2;
    if (runFrom < 0 || runTo !== offset) {
      flushRun();
      runFrom = offset;
    }
    runTo = offset + length;
    result.newOffsets.push(C.DATA_START + cursor + (offset - runFrom));
  });
  flushRun();
  assertSealedEnd(task.segmentId, sealedBytes, scanned, bytes.length);
  if (next !== live.length) throw new CorruptionError(task.segmentId, 0, `${(live.length - next) / 2} live locations are not record starts`);
  assert(cursor === liveBytes, `segment ${task.segmentId}: copied ${cursor} of ${liveBytes} live bytes`);
  const found = live.length / 2;
  result.recordsKept = found;
  result.empty = found === 0;
  result.bytesAfter = found === 0 ? 0 : C.DATA_START + cursor;
  return { out, result };
}

/**
 * The hint (segments/hint.ts) of a compaction output whose data is `out` and whose header on disk
 * is now `header`: built from the copied records themselves (no rescan of the written file), and
 * written with the hint's own durability order after the bytes it describes are durable. A failed
 * write leaves no hint (recovery then scans); returns whether one was written.
 */
function writeOutputHint(task: CompactionTask, header: HeaderChoice, out: Buffer, newOffsets: readonly number[]): boolean {
  return writeHintFile(task.segmentsDir, task.targetId, encodeOutputHint(task, header, out, newOffsets));
}

/** The hint file's bytes for a compaction output (see writeOutputHint); null when the builder cannot encode it (then no hint). */
function encodeOutputHint(task: CompactionTask, header: HeaderChoice, out: Buffer, newOffsets: readonly number[]): Buffer | null {
  const hint = new HintBuilder(Math.max(1024, newOffsets.length * 64));
  for (const off of newOffsets) hint.addRecord(out, off - C.DATA_START, off);
  return hint.encode(task.targetId, header, C.DATA_START + out.length, true);
}

/**
 * copy-on-write: the output's hint written as `.hint.tmp`, fdatasynced and renamed to its name
 * (fault point io:hint), WITHOUT its own directory fsync — the caller's fsync after the output's
 * rename covers both names. A failure leaves no hint and no .tmp; returns whether it was staged.
 */
function stageOutputHint(task: CompactionTask, header: HeaderChoice, out: Buffer, newOffsets: readonly number[]): boolean {
  const file = path.join(task.segmentsDir, hintFileName(task.targetId));
  const bytes = encodeOutputHint(task, header, out, newOffsets);
  if (bytes === null) return false;
  try {
    io.writeFileSynced("io:hint", `${file}.tmp`, bytes, FILE_MODE);
    io.rename("io:hint", `${file}.tmp`, file);
    return true;
  } catch {
    unlinkQuietly(`${file}.tmp`);
    return false;
  }
}

/**
 * copy-on-write output: NNNN.seg.tmp written and fdatasynced, renamed, directory fsynced. A
 * failure at any step removes what it created (no .seg.tmp left per retry, no unpublished .seg
 * that a later recovery would read) and rethrows; the source segment is untouched throughout.
 */
async function writeCopy(task: CompactionTask, source: SegmentHeader, plan: { out: Buffer; result: { newOffsets: number[] } }, hit: FaultHit): Promise<boolean> {
  const out = plan.out;
  const tmp = path.join(task.segmentsDir, tmpFileName(task.targetId));
  const final = path.join(task.segmentsDir, segmentFileName(task.targetId));
  const fd = io.openFile("io:copy", tmp, "wx+", FILE_MODE);
  let written: HeaderChoice;
  try {
    const header = encodeHeader({ ...source, segmentId: task.targetId, generation: 0, headerSeq: 0, flags: C.FLAG_SEALED, replacesId: task.segmentId, sealedBytes: C.DATA_START + out.length });
    io.writeAllSync("io:copy", fd, [header], C.HEADER_A_OFFSET);
    io.writeAllSync("io:copy", fd, [header], C.HEADER_B_OFFSET);
    io.writeAllSync("io:copy", fd, [out], C.DATA_START);
    io.datasyncSync("io:copy", fd);
    written = checkCopy(fd, task.targetId, out);
  } catch (err) {
    io.closeQuietly(fd);
    unlinkQuietly(tmp);
    throw err;
  }
  io.closeQuietly(fd);
  await hit(task.faults, "compaction:before-swap");
  // The output's hint goes in with the output: its bytes are durable before either name is, and
  // the one directory fsync below makes both names durable (a hint whose segment never got its
  // name is an orphan, deleted at open; a crash at after-rename finds both).
  const hinted = stageOutputHint(task, written, out, plan.result.newOffsets);
  let renamed = false;
  try {
    io.rename("io:rename", tmp, final);
    renamed = true;
    fsyncDir(task.segmentsDir);
  } catch (err) {
    unlinkQuietly(renamed ? final : tmp);
    if (hinted) unlinkHint(task.segmentsDir, task.targetId);
    throw err;
  }
  await hit(task.faults, "compaction:after-rename");
  return hinted;
}

/**
 * Paired check before the rename publishes a copy: the .tmp read back from disk is a sealed
 * segment whose header names it and says where its records end, and whose data is exactly the
 * bytes meant for it (every one of which passed its checksum in the source: no second walk).
 * Returns the header as read back (the output hint is keyed by it).
 */
function checkCopy(fd: number, targetId: number, out: Buffer): HeaderChoice {
  const choice = readHeader(fd, targetId);
  const header = choice.header;
  assert(header.segmentId === targetId && (header.flags & C.FLAG_SEALED) !== 0, `copy ${targetId}: header names it and is sealed`);
  assert(header.sealedBytes === C.DATA_START + out.length && fs.fstatSync(fd).size === header.sealedBytes, `copy ${targetId}: sealed where its data ends`);
  const back = backScratch.take(out.length);
  try {
    const n = fs.readSync(fd, back, 0, out.length, C.DATA_START);
    assert(n === out.length && back.equals(out), `copy ${targetId}: data read back equals data written`);
  } finally {
    backScratch.release(back);
  }
  return choice;
}

/**
 * Paired check before the generation goes odd: the journal read back from disk is complete, names
 * this segment and generation, and holds exactly the bytes the rewrite will put in place.
 */
function checkJournal(task: CompactionTask, generation: number, out: Buffer): void {
  const journal = decodeJournal(readWholePath(path.join(task.segmentsDir, journalFileName(task.segmentId))));
  assert(journal !== null, `journal of ${task.segmentId}: magic and checksum`);
  assert(journal.segmentId === task.segmentId && journal.generation === generation, `journal of ${task.segmentId}: id and generation ${generation}`);
  assert(journal.dataBytes === out.length && journal.data.length === out.length, `journal of ${task.segmentId}: length`);
  assert(Buffer.compare(journal.data, out) === 0, `journal of ${task.segmentId}: data`);
}

/** The segment as it was before an in-place rewrite: its header generation and every byte. */
interface Before {
  generation: number;
  original: Uint8Array;
}

/**
 * in-place: journal, generation odd, rewrite, generation+2 in the header. A failure before the
 * generation goes odd removes the journal; after, the original bytes are written back (they are
 * still in memory) and the generation is made even again in every case, so that no read ever
 * waits on it forever (issue 9, defect 16). Returns the published generation.
 */
async function rewriteInPlace(fd: number, task: CompactionTask, before: Before, out: Buffer, hit: FaultHit): Promise<number> {
  const generation = before.generation;
  const shared = loadShared(task.gens, task.cell);
  if (shared !== generation || generation % 2 !== 0) throw new Error(`segment ${task.segmentId}: header generation ${generation}, shared ${shared}`);
  const next = generation + 2;
  assert(next <= GENERATION_MAX, `segment ${task.segmentId}: generation ${next} fits the 31-bit shared cell`);
  const journal = path.join(task.segmentsDir, journalFileName(task.segmentId));
  try {
    writeJournal(task, next, out);
    checkJournal(task, next, out);
  } catch (err) {
    unlinkQuietly(journal);
    throw err;
  }
  await hit(task.faults, "compaction:after-journal");
  const odd = bumpShared(task.gens, task.cell); // odd: bytes are about to move
  assert(odd === generation + 1 && odd % 2 === 1, `segment ${task.segmentId}: the worker bumps even ${generation} to odd, got ${odd}`);
  try {
    const firstLength = out.readUInt32LE(0);
    io.writeAllSync("io:rewrite", fd, [out.subarray(0, firstLength)], C.DATA_START);
    await hit(task.faults, "compaction:mid-rewrite");
    io.writeAllSync("io:rewrite", fd, [out.subarray(firstLength)], C.DATA_START + firstLength);
    finishRewrite(fd, task.segmentId, next, out.length);
  } catch (err) {
    restoreOriginal(fd, task, before.original, next);
    bumpShared(task.gens, task.cell); // even again (next): the old bytes are back, or reads fail closed
    throw err;
  }
  await hit(task.faults, "compaction:after-rewrite");
  try {
    io.unlink("io:unlink", journal);
    fsyncDir(task.segmentsDir);
  } catch {
    // The rewrite is complete and its header durable; a leftover journal holds exactly these bytes
    // and replays idempotently (or is dropped as stale: replayJournal) at the next open.
  }
  return next;
}

/**
 * After a failed rewrite: puts the original bytes back, stamps generation `next` in the header
 * (the shared cell goes to `next` too, so the two stay equal), makes it durable, and drops the
 * journal. If that fails too, the journal is the segment's one good copy and stays for recovery.
 */
function restoreOriginal(fd: number, task: CompactionTask, original: Uint8Array, next: number): void {
  try {
    io.writeAllSync("io:rewrite", fd, [original], 0);
    io.truncate("io:rewrite", fd, original.length);
    io.datasyncSync("io:rewrite", fd);
    const current = readHeader(fd, task.segmentId);
    writeHeader(fd, current, { ...current.header, generation: next }, "io:rewrite");
    io.unlink("io:unlink", path.join(task.segmentsDir, journalFileName(task.segmentId)));
    fsyncDir(task.segmentsDir);
  } catch {
    // reported through the first failure; recovery replays the journal
  }
}

/** Truncates a rewritten segment, makes it durable, then publishes its generation in the header. */
function finishRewrite(fd: number, segmentId: number, generation: number, dataBytes: number): void {
  io.truncate("io:rewrite", fd, C.DATA_START + dataBytes);
  io.datasyncSync("io:rewrite", fd);
  const current = readHeader(fd, segmentId);
  writeHeader(fd, current, { ...current.header, generation, flags: C.FLAG_SEALED, sealedBytes: C.DATA_START + dataBytes }, "io:rewrite");
}

/** Writes the journal of a rewrite to `out` (segments/journal.ts) and makes it and its name durable. */
function writeJournal(task: CompactionTask, generation: number, out: Buffer): void {
  const body = encodeJournal(task.segmentId, generation, out);
  const file = path.join(task.segmentsDir, journalFileName(task.segmentId));
  io.writeFileSynced("io:journal", file, body, FILE_MODE);
  io.syncDir("io:journal", task.segmentsDir);
}

/**
 * Recovery of an in-place compaction: a complete journal is replayed onto its segment (idempotent);
 * an incomplete one is deleted (the segment was not touched before the journal was durable).
 * Returns true when it replayed.
 */
export function replayJournal(segmentsDir: string, segmentId: number): boolean {
  const file = path.join(segmentsDir, journalFileName(segmentId));
  const journal = decodeJournal(readWholePath(file));
  const segFile = path.join(segmentsDir, segmentFileName(segmentId));
  if (journal !== null && fs.existsSync(segFile)) {
    const { generation, dataBytes } = journal;
    if (journal.segmentId !== segmentId || dataBytes !== journal.data.length || generation < 0) throw new CorruptionError(segmentId, 0, "journal names another segment");
    const seg = io.openFile("io:rewrite", segFile, "r+");
    try {
      // A journal older than the segment's header (its removal failed after a complete rewrite,
      // and the segment moved on) is stale: replaying it would undo the later state.
      if (readHeader(seg, segmentId).header.generation <= generation) {
        io.writeAllSync("io:rewrite", seg, [journal.data], C.DATA_START);
        finishRewrite(seg, segmentId, generation, dataBytes);
      }
    } finally {
      io.closeQuietly(seg);
    }
  }
  io.unlink("io:unlink", file);
  fsyncDir(segmentsDir);
  return journal !== null;
}
