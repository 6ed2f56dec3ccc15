/**
 * One compaction in either mode: copy-on-write merges one or more sealed segments into one output;
 * in-place rewrites one sealed segment. Runs in a piscina worker (or inline when
 * `compaction.workers` is 0); imports only segments/ and worker-safe engine modules, never fs-ext.
 *
 * The main thread chooses what survives (`live` per source, from the keydir); this code copies
 * exactly those records, verifying each one's checksum on the way, and reports where each went and
 * which PUT records it dropped, so the main thread can apply the move in one turn.
 *
 * copy-on-write: write NNNN.seg.tmp (every source's survivors, in source order, each piece as it
 *   is copied: OutputFile), fdatasync, rename to its final name, fsync the directory. The
 *   output's id was reserved in the manifest before (an unlisted file below nextId is deleted at
 *   open), so the file is published only by the main thread's manifest write that lists it in
 *   place of its sources; they stay until then.
 * in-place: write a redo journal holding the surviving bytes and fdatasync it (into a new file,
 *   then the directory fsynced; or over the file the thread's previous rewrite left, renamed:
 *   writeJournal); make the shared generation odd; overwrite the segment from the front;
 *   truncate; fdatasync; write the header copy with generation+2; leave the journal for the next
 *   rewrite (the main thread removes it at the pass's end). A crash at any byte either finds no
 *   valid journal (the segment is untouched) or replays the journal onto the segment it names
 *   (replayJournal below).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { CorruptionError } from "../rules/errors.js";
import { FILE_MODE, journalFileName, segmentFileName, tmpFileName } from "../segments/file-names.js";
import { readHeader, writeHeader } from "../segments/header-io.js";
import { fsyncDir, unlinkQuietly } from "../segments/io.js";
import { ReadScratch, readAtSync, readWholePath } from "../segments/whole-file.js";
import * as io from "../segments/io.js";
import { chooseHeader, choiceOf, encodeHeader, formatOf, nextHeaderOffset, rewrittenVersion, type HeaderChoice, type SegmentHeader } from "../segments/header.js";
import { HINT_VERSION, HintBuilder, headerIdentity, hintFileName, hintVersionWritten, unlinkHint, type HintParts } from "../segments/hint.js";
import { RunPacker } from "../segments/hint-v3.js";
import { isLeanFrame } from "../segments/version-written.js";
import { assertSealedEnd, walkSealedPiece, type SealedPiece } from "../segments/scan.js";
import { recordLengthAt, recordNamesAt } from "../segments/record.js";
import { encodeRecordV3 } from "../segments/record-v3.js";
import { decodeJournal, encodeJournal, JOURNAL_CHECKSUM_BYTES, JOURNAL_HEAD_BYTES, journalBytes } from "../segments/journal.js";
import { bumpShared, GENERATION_MAX, loadShared } from "./generations.js";
import { assert, elementAt, fail } from "../rules/assert.js";
import { inFileOrder } from "./offset-order.js";
import type { FaultPoint } from "../rules/types.js";

/** One source segment of a compaction: which of its records survive. */
export interface SourceTask {
  segmentId: number;
  /**
   * Surviving records as [offset, length] pairs, distinct offsets in any order: the plan's (a
   * typed array: one copy across the worker boundary). The worker orders them (engine/offset-order.ts).
   */
  live: Uint32Array;
  /**
   * Offsets (ascending) of dead PUT records the main thread already knows (its slots point at
   * them): each must be a PUT record start; the worker does not name them in the result.
   */
  known: Uint32Array;
  /** The segment's generation cell (in-place publishes through it). */
  cell: number;
  /**
   * The lowest sequence of the survivors as the plan knows them (0: none known;
   * compaction-plan.ts lowestSeq), from which the hint is packed in one pass (packerFor: a
   * copy-on-write output's while it is copied, an in-place rewrite's from its compacted bytes).
   * A prediction, checked against the records: a wrong one costs time, never a wrong hint.
   */
  minSeq: number;
}

/** Most sources merged into one copy-on-write output (bounds a task's descriptors and result). */
export const MERGE_SOURCES_MAX = 64;

/** What the main thread asks a worker to do. */
export interface CompactionTask {
  mode: "copy-on-write" | "in-place";
  segmentsDir: string;
  /** copy-on-write: 1..MERGE_SOURCES_MAX sources, merged in this order; in-place: exactly one. */
  sources: SourceTask[];
  /** copy-on-write: the id of the new segment (reserved in the manifest); in-place: the source's id. */
  targetId: number;
  gens: SharedArrayBuffer;
  faults: SharedArrayBuffer | null;
}

/** What a compaction did to one source. */
export interface SourceResult {
  segmentId: number;
  /** New offset (in the output) of each live record, in the order of the source's `live` (the plan's, not the file's). */
  newOffsets: Uint32Array;
  /** PUT records dropped, but for the `known` ones: scope, key and old offset of each. */
  droppedScopes: string[];
  droppedKeys: string[];
  droppedOffsets: number[];
  /**
   * Every TOMBSTONE, CLEAR and SCOPE_ERASE record dropped: its type and names (an erasure's key is
   * ""), so that the main thread counts it gone (Slot.tombRecords, clearRecords; EraseRecord.records),
   * the latest of its slot or scope and the older ones no pointer names alike.
   */
  killTypes: number[];
  killScopes: string[];
  killKeys: string[];
  /** The source file's size. */
  bytesBefore: number;
}

/** What a compaction did. */
export interface CompactionResult {
  /** Per source, in the order of `task.sources`. */
  sources: SourceResult[];
  /** All sources' sizes together. */
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
  /**
   * in-place: the rewrite's journal, complete, was left on disk for this thread's next rewrite to
   * write over (writeJournal); the main thread removes it at the pass's end if no rewrite took it.
   */
  journalKept: boolean;
}

/**
 * What a pool's thread adds to its result (compaction-worker.ts): the store's compaction count as
 * it read it when the task began, -1 when the pool gave it no count (workerData.passes). Its
 * warm-up waits for that count to drop to 0 (warm-up.ts); without it, the warm-up falls back to
 * waiting for WARM_IDLE_MS of idleness and may run between a pass's jobs.
 */
export interface PassesSeen {
  passesSeen: number;
}

/**
 * Reused read buffers of this thread (a copy-on-write task takes them only in its copy turn,
 * copyTurns; a buffer still held gives a second taker a fresh one): the source — a piece of it
 * at a time for copy-on-write (copySource), the whole segment in place (its original bytes
 * restore a failed rewrite) — and the copy read back for its check. Neither view outlives the
 * task that took it: what a result carries is numbers and fresh strings. Up to 16 MiB is kept.
 * The source's and the journal's buffers are made their largest size at once (pages untouched
 * until used), as outScratch's are: sized to each segment, a slightly larger segment replaced
 * the buffer, and in place its whole 4 MiB was faulted in afresh (~11 ms a job, twice or three
 * times a pass; with the reserve an in-place pass ran ×1.12 in alternated fresh processes,
 * seventeenth session).
 */
export const SCRATCH_RETAIN_BYTES_MAX = 16 * 1024 * 1024;
const sourceScratch = new ReadScratch(SCRATCH_RETAIN_BYTES_MAX, 1, SCRATCH_RETAIN_BYTES_MAX);
/** An in-place job's journal: its encoded bytes, then the same file read back for the check. */
const JOURNAL_SCRATCH_BYTES = SCRATCH_RETAIN_BYTES_MAX + JOURNAL_HEAD_BYTES + JOURNAL_CHECKSUM_BYTES;
const journalScratch = new ReadScratch(JOURNAL_SCRATCH_BYTES, 1, JOURNAL_SCRATCH_BYTES);
/**
 * An in-place job's compacted bytes, or a copy-on-write output's records read back to pack its
 * hint when the plan's prediction missed (OutputFile.hintFromFile), one buffer for each of the
 * COPIES_IN_FLIGHT outputs. Up to 16 MiB each is kept: no fresh pages faulted in per output. Each
 * is made 16 MiB large at once (pages untouched until used): a later, larger job then reuses
 * every page a smaller one touched instead of replacing the buffer.
 */
const outScratch = new ReadScratch(SCRATCH_RETAIN_BYTES_MAX, 2, SCRATCH_RETAIN_BYTES_MAX);
/** The copy is read back in pieces of this size for its check. */
const BACK_CHUNK_BYTES = 1024 * 1024;
const backScratch = new ReadScratch(BACK_CHUNK_BYTES);

/**
 * Phases of this thread's tasks that run one at a time in arrival order (take() waits for the
 * phase before it to end). The pool hands a thread two tasks at once (compactor.ts
 * COPIES_IN_FLIGHT, REWRITES_IN_FLIGHT), and fair interleaving at every await would slow both so
 * that they finished together and neither's publication overlapped the other's work.
 */
class Turns {
  private last: Promise<void> = Promise.resolve();

  /** Waits for every earlier task's phase to end; resolves to the function that ends this one (idempotent). */
  async take(): Promise<() => void> {
    let end!: () => void;
    const mine = new Promise<void>((resolve) => {
      end = resolve;
    });
    const before = this.last;
    this.last = mine;
    await before;
    return end;
  }
}
/**
 * copy-on-write: the copy phase (reads, walk, copy). The later task copies while the earlier one's
 * output is fdatasynced, its hint packed and its name published — never beside its copy.
 */
const copyTurns = new Turns();

/**
 * in-place: the whole rewrite, journal to hint rename. The later task waits in the thread, so it
 * starts the moment the earlier one ends, while the main thread takes the earlier one's answer and
 * publishes it, instead of a round trip later (the thirty-ninth session: ~3 ms a job). Two rewrites
 * interleaved at their awaits ran slower (docs/performance-history.md, eighteenth session).
 */
const rewriteTurns = new Turns();

/** Pauses or crashes at a fault point: blocking in a worker, awaited inline. */
export type FaultHit = (faults: SharedArrayBuffer | null, point: FaultPoint) => void | Promise<void>;


/**
 * Runs one compaction task: copies the surviving records of its sources (checking each), then
 * writes them durably — copy-on-write as one new file renamed into place, in-place through the
 * redo journal — and reports where each went. Never changes the keydir: the main thread applies it.
 */
export async function runCompaction(task: CompactionTask, hit: FaultHit): Promise<CompactionResult> {
  // I9: a crash at any step loses nothing live: copy-on-write publishes by tmp, fsync, rename, fsync dir, manifest; in-place by its redo journal.
  io.registerFaultTable(task.segmentsDir, task.faults);
  assert(task.sources.length >= 1 && task.sources.length <= MERGE_SOURCES_MAX, `a compaction has 1..${MERGE_SOURCES_MAX} sources, got ${task.sources.length}`);
  if (task.mode === "in-place") return rewriteInTurn(task, hit);
  assert(task.sources.every((src) => src.segmentId !== task.targetId), `copy-on-write output ${task.targetId} is none of its sources`);
  const endTurn = await copyTurns.take();
  try {
    const liveBytes = task.sources.reduce((n, src) => n + liveBytesOf(src.live), 0);
    return await copyAll(task, liveBytes, hit, endTurn);
  } finally {
    endTurn();
  }
}

/**
 * copy-on-write: every source's survivors written to the output's .tmp file as they are copied
 * (an OutputFile: `liveBytes` in all, its hint packed on the way), then (`endTurn` called: the
 * next task may copy) the output finished — headers, fdatasync, hint, rename.
 */
async function copyAll(task: CompactionTask, liveBytes: number, hit: FaultHit, endTurn: () => void): Promise<CompactionResult> {
  const result: CompactionResult = { sources: [], bytesBefore: 0, bytesAfter: 0, recordsKept: 0, recordsDropped: 0, empty: false, generation: 0, hinted: false, journalKept: false };
  if (liveBytes === 0) return copyNone(task, result);
  const output = new OutputFile(task, liveBytes);
  try {
    let first: SegmentHeader | null = null;
    let version = 0; // the sources' format version: one record frame per output (compactor.ts groups by it)
    let minSeq = 0;
    let maxSeq = 0;
    let cursor = 0;
    const fileOffsets: Uint32Array[] = []; // per source, what the output's hint lists
    for (let i = 0; i < task.sources.length; i++) {
      const src = elementAt(task.sources, i, "a source");
      const { part, header, version: own } = await copySource(task, src, version, output, cursor);
      fileOffsets.push(part.fileOffsets);
      first ??= header;
      version ||= own;
      if (header.minSeq !== 0 && (minSeq === 0 || header.minSeq < minSeq)) minSeq = header.minSeq;
      maxSeq = Math.max(maxSeq, header.maxSeq);
      cursor += part.copied;
      addSource(result, part);
    }
    assert(first !== null && cursor === liveBytes && output.written === liveBytes, `output ${task.targetId}: copied ${cursor} and wrote ${output.written} of ${liveBytes} live bytes`);
    finishTotals(result, cursor);
    assert(!result.empty, `output ${task.targetId}: live bytes are records`);
    endTurn();
    result.hinted = await output.finish({ ...first, minSeq, maxSeq }, version, fileOffsets, hit);
    return result;
  } catch (err) {
    output.abandon();
    throw err;
  }
}

/**
 * copy-on-write with nothing live: every source walked (each record checked, each dropped PUT
 * named, as for any copy) and no output written.
 */
async function copyNone(task: CompactionTask, result: CompactionResult): Promise<CompactionResult> {
  for (let i = 0; i < task.sources.length; i++) {
    const src = elementAt(task.sources, i, "a source");
    const { part } = await copySource(task, src, 0, null, 0);
    addSource(result, part);
  }
  finishTotals(result, 0);
  assert(result.empty, "a copy of no live bytes keeps no record");
  return result;
}

/** Bytes of one piece of a copy-on-write source as it is streamed (a piece grows to hold a record larger than it). */
const PIECE_BYTES = 1024 * 1024;

/**
 * Test switches, never set by the engine or any option (test/compaction-pieces.test.ts):
 * `pieceBytes` (0: PIECE_BYTES) makes pieces small enough that records straddle them and exceed
 * them; `skipPartial` starts each next piece where the last one ended instead of at the record it
 * held only in part — the carry that makes a streamed walk see every record whole, which the
 * test's twin shows by the corruption the walk then reports in a sound segment.
 */
export const unsafePiecesForTests = { pieceBytes: 0, skipPartial: false };

/**
 * Test switch, never set by the engine or any option (test/survivor-order.test.ts): `fileOrder`
 * returns a source's new offsets in file order instead of the plan's — what the main thread got
 * before the worker ordered the survivors, wrong once a plan lists them out of file order: the
 * main thread then moves a key's pointer onto another record.
 */
export const unsafeLiveOrderForTests = { fileOrder: false };

/** Sources this thread copied whose plan listed the survivors out of file order (SurvivorCopy ordered them). Read by tests. */
export const survivorOrders = { reordered: 0 };

/**
 * Copies the survivors of `src` to `sink` (output data offset `outFrom` on; null: a source with
 * none) and returns them with the source's header and format version (`version`: the output's, 0
 * until its first source, which a source of another format must not contradict). The segment is
 * read in pieces of PIECE_BYTES into this thread's kept source buffer, each walked and its
 * survivors copied before the next is read (compact-13: a source read whole was up to a segment's
 * size of fresh memory per source, never kept above 16 MiB; a first touch costs ~10 µs per 4 KiB
 * page on the machines measured). Each piece starts at a record: the one the last piece held
 * only in part.
 */
async function copySource(task: CompactionTask, src: SourceTask, version: number, sink: PieceSink | null, outFrom: number): Promise<{ part: CopiedSource; header: SegmentHeader; version: number }> {
  const fd = io.openRead(path.join(task.segmentsDir, segmentFileName(src.segmentId)));
  let buf: Buffer | null = null;
  try {
    const fileEnd = fs.fstatSync(fd).size;
    const pieceBytes = unsafePiecesForTests.pieceBytes > 0 ? unsafePiecesForTests.pieceBytes : PIECE_BYTES;
    buf = sourceScratch.take(Math.min(Math.max(pieceBytes, C.DATA_START), fileEnd));
    let piece: SealedPiece = { bytes: readPiece(fd, buf, 0, src.segmentId), base: 0, fileEnd };
    const { header, version: own } = sealedHeader(piece.bytes, src.segmentId);
    if (version !== 0 && own !== version) throw new Error(`segment ${src.segmentId} is format ${own}, the output's other sources ${version}: records are copied verbatim, so one output holds one record frame`);
    const copy = new SurvivorCopy(src, own, null, outFrom, true, sink); // each piece is read no more once walked
    let at: number = C.DATA_START;
    for (;;) {
      const stop = copy.piece(piece, at);
      if (stop === fileEnd) break;
      // The record at `stop` goes on past this piece (walkSealedPiece): the next piece starts with
      // it, and holds it whole — when not even one record fit, as long as the length it declares.
      let want = pieceBytes;
      if (stop === piece.base) {
        want = recordLengthAt(piece.bytes, 0, own);
        if (!(want > piece.bytes.length)) throw new CorruptionError(src.segmentId, stop, "a record that fits its piece does not walk");
      }
      const from = unsafePiecesForTests.skipPartial ? piece.base + piece.bytes.length : stop;
      sourceScratch.release(buf);
      buf = null;
      buf = sourceScratch.take(Math.min(want, fileEnd - from));
      await io.nextTurn(); // a pending write's completion (the other output in flight) runs between pieces
      piece = { bytes: readPiece(fd, buf, from, src.segmentId), base: from, fileEnd };
      at = from;
    }
    return { part: copy.finish(fileEnd, header.sealedBytes, fileEnd), header, version: own };
  } finally {
    if (buf !== null) sourceScratch.release(buf);
    io.closeQuietly(fd);
  }
}

/** Reads the file's bytes from offset `base` into all of `buf` (a page-cache copy into kept memory: no round trip through libuv's pool); a file that ends first is corruption (a sealed segment never shrinks under a copy). */
function readPiece(fd: number, buf: Buffer, base: number, segmentId: number): Buffer {
  const n = readAtSync(fd, buf, base);
  if (n !== buf.length) throw new CorruptionError(segmentId, base + n, `segment ends inside a piece read from ${base}`);
  return buf;
}

/**
 * in-place: runInPlace in this thread's rewrite turn. The turn ends a macrotask later, so that the
 * thread answers the main thread before the next rewrite's synchronous read and copy run.
 */
async function rewriteInTurn(task: CompactionTask, hit: FaultHit): Promise<CompactionResult> {
  const endTurn = await rewriteTurns.take();
  try {
    return await runInPlace(task, elementAt(task.sources, 0, "an in-place task has one source"), hit);
  } finally {
    setImmediate(endTurn);
  }
}

/** in-place: one sealed segment rewritten through its redo journal (see the file comment). */
async function runInPlace(task: CompactionTask, src: SourceTask, hit: FaultHit): Promise<CompactionResult> {
  assert(task.sources.length === 1 && task.targetId === src.segmentId, `in-place rewrites one segment onto itself`);
  const fd = io.openFile("io:rewrite", path.join(task.segmentsDir, segmentFileName(src.segmentId)), "r+");
  let bytes: Uint8Array | null = null;
  let out: Buffer | null = null;
  try {
    bytes = sourceScratch.readWholeFile(fd);
    const { header, version } = sealedHeader(bytes, src.segmentId);
    out = outScratch.take(liveBytesOf(src.live));
    const part = copySurvivors(bytes, src, header.sealedBytes, version, out, 0, false); // the original bytes restore a failed rewrite
    const result: CompactionResult = { sources: [], bytesBefore: 0, bytesAfter: 0, recordsKept: 0, recordsDropped: 0, empty: false, generation: header.generation, hinted: false, journalKept: false };
    addSource(result, part);
    finishTotals(result, part.copied);
    if (result.empty) return result;
    const rewritten = await rewriteInPlace(fd, task, src, { generation: header.generation, original: bytes }, out, hit, part.fileOffsets);
    result.generation = rewritten.generation;
    result.hinted = rewritten.hinted;
    result.journalKept = rewritten.journalKept;
    return result;
  } finally {
    if (out !== null) outScratch.release(out);
    if (bytes !== null) sourceScratch.release(bytes);
    io.closeQuietly(fd);
  }
}

/** The current header of a source segment read whole into `bytes` (it must be sealed), and the format version its rewrites carry. */
function sealedHeader(bytes: Uint8Array, segmentId: number): { header: SegmentHeader; version: number } {
  const choice = chooseHeader(bytes, segmentId);
  if ((choice.header.flags & C.FLAG_SEALED) === 0) throw new Error(`segment ${segmentId} is not sealed`);
  return { header: choice.header, version: rewrittenVersion(choice) };
}

/** Total bytes of a live list ([offset, length] pairs). */
function liveBytesOf(live: Uint32Array): number {
  assert(live.length % 2 === 0, "live locations come in [offset, length] pairs");
  let n = 0;
  for (let i = 1; i < live.length; i += 2) n += live[i] as number;
  return n;
}

/** Adds one source's part to the task's result. */
function addSource(result: CompactionResult, part: CopiedSource): void {
  result.sources.push(part.source);
  result.bytesBefore += part.source.bytesBefore;
  result.recordsKept += part.kept;
  result.recordsDropped += part.dropped;
}

/** Sets the output's size once every source is copied (`copied` data bytes; none: empty). */
function finishTotals(result: CompactionResult, copied: number): void {
  result.empty = result.recordsKept === 0;
  assert(result.empty === (copied === 0), `a compaction keeps records exactly when it copies bytes`);
  result.bytesAfter = result.empty ? 0 : C.DATA_START + copied;
}

/** What copySurvivors did to one source. */
interface CopiedSource {
  source: SourceResult;
  /** The new offsets in file order: the output's record offsets, which its hint lists (source.newOffsets is in the plan's order). */
  fileOffsets: Uint32Array;
  /** Bytes it added to the output. */
  copied: number;
  kept: number;
  dropped: number;
}

/**
 * Scans the whole segment (every record's fixed fields and checksum), checks that every live
 * location is a record start of the planned length, and copies the survivors into `out` from
 * `base` on. Each dropped PUT record is named (scope, key, old offset) for the main thread's
 * accounting. With `clobber` (the caller reads `bytes` no more), each run of adjacent survivors
 * is moved down within `bytes` itself (copyWithin: no view object, no argument checks per run;
 * it lands below every byte the walk has yet to read) and the compacted prefix goes to `out` in
 * one copy; without, one Buffer copy per run. The segment is one piece here; copySource
 * streams a source in pieces through the same SurvivorCopy.
 */
function copySurvivors(bytes: Uint8Array, src: SourceTask, sealedBytes: number, version: number, out: Buffer, base: number, clobber: boolean): CopiedSource {
  const copy = new SurvivorCopy(src, version, out, base, clobber);
  const end = copy.piece({ bytes, base: 0, fileEnd: bytes.length }, C.DATA_START);
  return copy.finish(end, sealedBytes, bytes.length);
}

/** Where a clobbering copy's compacted pieces go when not into one buffer: a copy-on-write OutputFile. */
interface PieceSink {
  /** Takes `bytes` — whole survivor records of format `version`, back to back — as the output's data from `outAt` on. */
  put(bytes: Buffer, outAt: number, version: number): void;
}

/**
 * The survivors of one source copied, from output offset `outFrom` on, into `out` or (clobbering)
 * to `sink`, the source walked piece by piece in file order (one piece: the whole file). Runs of
 * adjacent survivors are copied when they end and at each piece's end (a piece's bytes are gone
 * once the next one is read).
 */
class SurvivorCopy {
  private readonly source: SourceResult;
  /** The source's survivors in file order, and the plan's index of each (null: `src.live` was in order). */
  private readonly live: Uint32Array;
  private readonly order: Uint32Array | null;
  /** New offset of each survivor of `live`, in file order. */
  private readonly fileOffsets: Uint32Array;
  private dropped = 0;
  /** Index into live of the next survivor, which the walk must meet in file order. */
  private next = 0;
  /** Index into known of the next dead PUT the main thread already knows. */
  private nextKnown = 0;
  /** File offsets of the current run of adjacent survivors ([runFrom, runTo); runFrom −1: none). */
  private runFrom = -1;
  private runTo = -1;
  /** Bytes of out filled by closed runs. */
  private cursor: number;
  /** The piece being walked, and where in out its first run went (clobber: the piece's compacted prefix goes there). */
  private bytes: Uint8Array = new Uint8Array(0);
  /** `bytes` as a Buffer (one view per piece, for the copies of runs without clobber). */
  private view: Buffer = Buffer.alloc(0);
  private base = 0;
  private pieceOut = 0;

  /** `out` takes the survivors (without `clobber`, it must); else, clobbering, `sink` does (neither: a source with none). */
  constructor(
    private readonly src: SourceTask,
    private readonly version: number,
    private readonly out: Buffer | null,
    private readonly outFrom: number,
    private readonly clobber: boolean,
    private readonly sink: PieceSink | null = null,
  ) {
    assert(clobber ? out === null || sink === null : out !== null && sink === null, "a copy has one place for its survivors");
    this.cursor = outFrom;
    const ordered = inFileOrder(src.live);
    this.live = ordered.live;
    this.order = ordered.order;
    if (ordered.order !== null) survivorOrders.reordered += 1;
    this.fileOffsets = new Uint32Array(src.live.length / 2);
    this.source = { segmentId: src.segmentId, newOffsets: this.fileOffsets, droppedScopes: [], droppedKeys: [], droppedOffsets: [], killTypes: [], killScopes: [], killKeys: [], bytesBefore: 0 };
  }

  /** Walks `piece` from file offset `from` (see walkSealedPiece), copying its survivors; returns where the walk stopped. */
  piece(piece: SealedPiece, from: number): number {
    this.bytes = piece.bytes;
    this.view = Buffer.from(piece.bytes.buffer, piece.bytes.byteOffset, piece.bytes.byteLength);
    this.base = piece.base;
    this.pieceOut = this.cursor;
    const end = walkSealedPiece(piece, from, this.src.segmentId, this.version, (offset, length, type) => this.visit(offset, length, type));
    this.flushRun();
    if (this.clobber) this.putCompacted();
    return end;
  }

  /** Clobbering: hands the piece's compacted prefix (its survivors, moved down) to `out` or `sink`. */
  private putCompacted(): void {
    const n = this.cursor - this.pieceOut;
    if (n === 0) return;
    const compacted = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, n);
    if (this.out !== null) this.out.set(compacted, this.pieceOut);
    else {
      assert(this.sink !== null, `segment ${this.src.segmentId}: survivors have a place to go`);
      this.sink.put(compacted, this.pieceOut, this.version);
    }
  }

  /** Checks the walk met every planned location and ended where the header says; returns what was copied. */
  finish(scannedEnd: number, sealedBytes: number, fileBytes: number): CopiedSource {
    const { known, segmentId: id } = this.src;
    const live = this.live;
    assertSealedEnd(id, sealedBytes, scannedEnd, fileBytes);
    if (this.next !== live.length) throw new CorruptionError(id, 0, `${(live.length - this.next) / 2} live locations are not record starts`);
    if (this.nextKnown !== known.length) throw new CorruptionError(id, 0, `${known.length - this.nextKnown} dead locations are not record starts`);
    const copied = this.cursor - this.outFrom;
    let planned = 0; // the paired check: what was copied is exactly what the plan's lengths add up to
    for (let i = 1; i < live.length; i += 2) planned += live[i] as number;
    assert(copied === planned, `segment ${id}: copied ${copied} of ${planned} live bytes`);
    this.source.bytesBefore = fileBytes;
    this.source.newOffsets = this.inPlanOrder();
    return { source: this.source, fileOffsets: this.fileOffsets, copied, kept: live.length / 2, dropped: this.dropped };
  }

  /**
   * The new offsets in the order of the plan's `live` (the main thread relocates its i-th
   * survivor to the i-th): fileOffsets put back through `order`. Paired check: every slot filled
   * once (a new offset is never 0: the data starts after the headers).
   */
  private inPlanOrder(): Uint32Array {
    const order = this.order;
    if (order === null || unsafeLiveOrderForTests.fileOrder) return this.fileOffsets;
    const out = new Uint32Array(this.fileOffsets.length);
    for (let k = 0; k < order.length; k++) {
      const i = order[k] as number;
      assert(out[i] === 0, `segment ${this.src.segmentId}: survivor ${i} gets one new offset`);
      out[i] = this.fileOffsets[k] as number;
    }
    return out;
  }

  /** One record of the walk (file offset `offset`): a survivor joins a run; a dead one is counted, and named when the plan did not know it. */
  private visit(offset: number, recordLength: number, type: number): void {
    const { known, segmentId: id } = this.src;
    const live = this.live;
    const next = this.next;
    const wantAt = next < live.length ? (live[next] as number) : -1;
    if (offset !== wantAt) {
      if (wantAt >= 0 && wantAt < offset) throw new CorruptionError(id, wantAt, "live location is not a record start");
      this.dropped += 1;
      const knownAt = this.nextKnown < known.length ? (known[this.nextKnown] as number) : -1;
      if (knownAt >= 0 && knownAt < offset) throw new CorruptionError(id, knownAt, "dead location is not a record start");
      if (knownAt === offset) {
        if (type !== C.RecordType.PUT) throw new CorruptionError(id, offset, "dead location is not a PUT record");
        this.nextKnown += 1;
        return;
      }
      if (type === C.RecordType.PUT) {
        const names = recordNamesAt(this.bytes, offset - this.base, this.version);
        this.source.droppedScopes.push(names.scope);
        this.source.droppedKeys.push(names.key);
        this.source.droppedOffsets.push(offset);
      } else if (type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR || type === C.RecordType.SCOPE_ERASE) {
        const names = recordNamesAt(this.bytes, offset - this.base, this.version);
        this.source.killTypes.push(type);
        this.source.killScopes.push(names.scope);
        this.source.killKeys.push(names.key);
      }
      return;
    }
    const length = live[next + 1] as number;
    if (length !== recordLength) throw new CorruptionError(id, offset, `keydir length ${length} != record length ${recordLength}`);
    this.next = next + 2;
    if (this.runFrom < 0 || this.runTo !== offset) {
      this.flushRun();
      this.runFrom = offset;
    }
    this.runTo = offset + length;
    this.fileOffsets[next / 2] = C.DATA_START + this.cursor + (offset - this.runFrom);
  }

  /** Copies the current run (if any) into out: moved down within the piece with clobber, else copied straight. */
  private flushRun(): void {
    if (this.runFrom < 0) return;
    const from = this.runFrom - this.base;
    const to = this.runTo - this.base;
    if (this.clobber) {
      const at = this.cursor - this.pieceOut;
      assert(at <= from, "a run moves down, never over bytes the walk has yet to read");
      this.bytes.copyWithin(at, from, to);
    } else {
      this.view.copy(this.out as Buffer, this.cursor, from, to); // not clobbering: the constructor checked out
    }
    this.cursor += to - from;
    this.runFrom = -1;
  }
}

/**
 * The hint file's bytes (segments/hint.ts) for an output whose data is all of `out` (an in-place
 * rewrite's, a warm-up round's) and whose header on disk is `header`: packed straight from the
 * records (HintBuilder.ofRecords; no rescan of the written file). `newOffsets` lists every
 * record's offset in the output, in file order. Null when the builder cannot encode it (then no
 * hint: recovery scans).
 */
function encodeOutputHint(targetId: number, header: HeaderChoice, out: Buffer, newOffsets: readonly Uint32Array[]): HintParts | null {
  const offsets = newOffsets.length === 1 ? (newOffsets[0] as Uint32Array) : concatU32(newOffsets);
  const hint = HintBuilder.ofRecords({ rec: out, offsets, base: C.DATA_START }, targetId, header, C.DATA_START + out.length, true);
  return hint === null ? null : [hint];
}

/** The arrays of `parts` end to end, in one array. */
function concatU32(parts: readonly Uint32Array[]): Uint32Array {
  const all = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

/**
 * The output's hint (`bytes`, encoded by OutputFile.encodeHint; null: there is none, and nothing is
 * staged) written as `.hint.tmp`, fdatasynced and renamed to its name (fault point io:hint),
 * WITHOUT its own directory fsync — the caller's next directory fsync covers it (with the
 * output's rename, or the journal's removal). A failure leaves no hint and no .tmp; returns
 * whether it was staged.
 */
function stageHintBytes(task: CompactionTask, bytes: HintParts | null): boolean {
  if (bytes === null) return false;
  const file = path.join(task.segmentsDir, hintFileName(task.targetId));
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
 * Runs `encode` on this thread while `io` (an fdatasync on libuv's pool) runs on another core,
 * and settles only once `io` has: no caller closes a descriptor a pending call still uses.
 * `io`'s failure comes first; else `encode`'s.
 */
async function overlapped<R>(io: Promise<void>, encode: () => R): Promise<R> {
  let encoded: R;
  try {
    encoded = encode();
  } catch (err) {
    await io; // its own failure, if any, is the one reported
    throw err;
  }
  await io;
  return encoded;
}

/**
 * A copy-on-write output being written, NNNN.seg.tmp (compact-14). Each piece's compacted
 * survivors go to the file as soon as they are copied, at their place after the headers, and
 * are read back and compared at once (the paired check: every byte is the one meant for it, each
 * of which passed its checksum in the source). No output-sized buffer holds their bytes: that was
 * up to 16 MiB of fresh memory per output, whose first touches (~10 µs per 4 KiB page on the
 * machines measured) were most of a pass's page faults. The output's hint is packed from each
 * record as it is written (segments/hint-v3.ts RunPacker, from the plan's prediction of the
 * lowest sequence, SourceTask.minSeq): its fields are read once. Until the seventeenth session
 * each record's hint prefix was kept instead and the hint packed from them at the end, the
 * fields read three times (~40 % of a cold pass's worker time). When the prediction misses, or
 * version 2 is written, the hint is packed from the output's records read back from the file.
 *
 * finish(): the headers (sealed where the data ends), an fdatasync on libuv's pool while the hint
 * is finished, the checks, the hint staged, the rename and the directory fsync (the output is
 * published later, by the main thread's manifest write). Any failure removes what was made — no
 * .seg.tmp left per retry, no .seg that a later recovery would have to drop — and rethrows; the
 * sources are untouched throughout.
 */
class OutputFile implements PieceSink {
  private readonly tmp: string;
  private readonly fd: number;
  /** True while this object still owns the .tmp (abandon() removes it); finish() takes it over. */
  private owned = true;
  /** Data bytes written so far (from DATA_START), each read back and checked. */
  written = 0;
  /** Records written so far, and the records the plan named (one per live location). */
  private records = 0;
  private readonly planned: number;
  /** The lowest sequence the plan predicts among the records (0: none predicted). */
  private readonly predicted: number;
  /** The hint packed as the records are written (made at the first piece: it needs their frame; null: none, packed at finish from the file). */
  private packer: RunPacker | null = null;

  /** Creates the .tmp of `task`'s output, whose data will be `dataBytes` of records. */
  constructor(private readonly task: CompactionTask, private readonly dataBytes: number) {
    assert(dataBytes > 0, `output ${task.targetId}: a copy with live bytes`);
    this.planned = task.sources.reduce((n, src) => n + src.live.length / 2, 0);
    this.predicted = task.sources.reduce((low, src) => (src.minSeq > 0 && (low === 0 || src.minSeq < low) ? src.minSeq : low), 0);
    this.tmp = path.join(task.segmentsDir, tmpFileName(task.targetId));
    this.fd = io.openFile("io:copy", this.tmp, "wx+", FILE_MODE);
  }

  /** Writes `bytes` (whole records, the output's next ones) at data offset `outAt`, checks them read back, adds them to the hint. */
  put(bytes: Buffer, outAt: number, version: number): void {
    assert(outAt === this.written && outAt + bytes.length <= this.dataBytes, `output ${this.task.targetId}: pieces come in order, inside its ${this.dataBytes} data bytes`);
    io.writeAllSync("io:copy", this.fd, [bytes], C.DATA_START + outAt);
    this.checkBack(bytes, C.DATA_START + outAt);
    if (this.written === 0) this.packer = packerFor(this.predicted, version, this.dataBytes, this.planned);
    this.addRecords(bytes, version, C.DATA_START + outAt);
    this.written += bytes.length;
  }

  /** Paired check right after the write: the file's bytes at `fileAt` are `bytes`. */
  private checkBack(bytes: Buffer, fileAt: number): void {
    const back = backScratch.take(Math.min(BACK_CHUNK_BYTES, bytes.length));
    try {
      for (let at = 0; at < bytes.length; at += back.length) {
        const want = Math.min(back.length, bytes.length - at);
        const n = io.readAt(this.fd, back, 0, want, fileAt + at);
        assert(n === want && back.subarray(0, want).equals(bytes.subarray(at, at + want)), `copy ${this.task.targetId}: data read back equals data written`);
      }
    } finally {
      backScratch.release(back);
    }
  }

  /** Counts the records in `bytes` (checked records, back to back, the first at file offset `fileAt`) and adds each to the hint being packed. */
  private addRecords(bytes: Buffer, version: number, fileAt: number): void {
    const packer = this.packer;
    for (let p = 0; p < bytes.length; ) {
      const length = packer !== null ? packer.add(bytes, p, fileAt + p) : recordLengthAt(bytes, p, version);
      if (!(length > 0 && p + length <= bytes.length && this.records < this.planned)) fail(`copy ${this.task.targetId}: whole records, one per planned record`);
      this.records += 1;
      p += length;
    }
  }

  /**
   * Finishes the output whose sources' header is `source` (the first source's, with every source's
   * sequence range) and whose records lie at `fileOffsets` (per source, in file order); resolves
   * to whether its hint was written.
   */
  async finish(source: SegmentHeader, version: number, fileOffsets: readonly Uint32Array[], hit: FaultHit): Promise<boolean> {
    const { task, fd } = this;
    const replacesId = elementAt(task.sources, 0, "a copy has a source").segmentId;
    assert(this.written === this.dataBytes && this.records === this.planned, `copy ${task.targetId}: every planned record written`);
    const header = encodeHeader({ ...source, segmentId: task.targetId, generation: 0, headerSeq: 0, flags: C.FLAG_SEALED, replacesId, sealedBytes: C.DATA_START + this.dataBytes }, version);
    io.writeAllSync("io:copy", fd, [header], C.HEADER_A_OFFSET);
    io.writeAllSync("io:copy", fd, [header], C.HEADER_B_OFFSET);
    const written = checkCopyHeader(fd, task.targetId, this.dataBytes);
    const hint = await overlapped(io.datasync("io:copy", fd), () => this.encodeHint(written, fileOffsets));
    checkCopy(fd, task.targetId, this.dataBytes, written);
    this.owned = false;
    io.closeQuietly(fd);
    await hit(task.faults, "compaction:before-swap");
    const hinted = publishCopy(task, hint);
    // The output and its hint now have their names, durable, but no manifest lists them: a worker
    // that stops here leaves them to the main thread's removeUnpublished (or to the next open).
    await hit(task.faults, "compaction:after-output-rename");
    return hinted;
  }

  /** The output's hint file bytes for its header `header`: the packed run's, else packed from the records read back; null when they cannot be encoded (then no hint: recovery scans). */
  private encodeHint(header: HeaderChoice, newOffsets: readonly Uint32Array[]): HintParts | null {
    assert(this.packer === null || this.packer.records === this.records, `copy ${this.task.targetId}: every record written was packed`);
    const hint = this.packer === null ? null : packedHint(this.packer, this.task.targetId, header, this.dataBytes);
    if (hint === null) {
      hintPackings.fromFile += 1;
      return this.hintFromFile(header, newOffsets);
    }
    hintPackings.streamed += 1;
    return hint;
  }

  /** The hint packed from the output's records read back from its file (a prediction that missed, or version 2 written). */
  private hintFromFile(header: HeaderChoice, newOffsets: readonly Uint32Array[]): HintParts | null {
    const data = outScratch.take(this.dataBytes);
    try {
      const n = readAtSync(this.fd, data, C.DATA_START);
      assert(n === this.dataBytes, `copy ${this.task.targetId}: its ${this.dataBytes} data bytes read back for the hint`);
      return encodeOutputHint(this.task.targetId, header, data, newOffsets);
    } finally {
      outScratch.release(data);
    }
  }

  /** Removes the .tmp after a failure before finish() took it over (idempotent). */
  abandon(): void {
    if (!this.owned) return;
    this.owned = false;
    io.closeQuietly(this.fd);
    unlinkQuietly(this.tmp);
  }
}

/**
 * How compactions' hints were packed in this thread. Copy-on-write outputs: `streamed` as their
 * records were written (the prediction held), `fromFile` from the records read back. In-place
 * rewrites (hintOfRewrite): `onePass` from the prediction, `twoPass` without one or after a miss.
 * Read by tests.
 */
export const hintPackings = { streamed: 0, fromFile: 0, onePass: 0, twoPass: 0 };

/**
 * Test switches, never set by the engine or any option (test/compaction-stream.test.ts):
 * `mispredictBy` lowers every output's and in-place rewrite's predicted lowest sequence by that
 * much (a plan that named a wrong one); `unchecked` writes the hint packed from the prediction
 * without checking it against the records — the check that sends a missed prediction the long
 * way. The pair shows the check is what keeps the packed hint the records' own.
 */
export const unsafeStreamedHintForTests = { mispredictBy: 0, unchecked: false };

/**
 * A finished copy-on-write output's hint staged beside it and its .tmp renamed to its name,
 * the directory fsynced once for both; a failure removes both and rethrows. Resolves to whether
 * the hint was written.
 */
function publishCopy(task: CompactionTask, hint: HintParts | null): boolean {
  const tmp = path.join(task.segmentsDir, tmpFileName(task.targetId));
  const final = path.join(task.segmentsDir, segmentFileName(task.targetId));
  // The output's hint goes in with the output: its bytes are durable before either name is, and
  // the one directory fsync below makes both names durable (a hint whose segment never got its
  // name, or was never listed, is an orphan, deleted at open).
  const hinted = stageHintBytes(task, hint);
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
  return hinted;
}

/** The header of a copy as read back: sealed, naming it, ending where its `dataBytes` of data do. */
function checkCopyHeader(fd: number, targetId: number, dataBytes: number): HeaderChoice {
  const choice = readHeader(fd, targetId);
  const header = choice.header;
  assert(header.segmentId === targetId && (header.flags & C.FLAG_SEALED) !== 0, `copy ${targetId}: header names it and is sealed`);
  assert(header.sealedBytes === C.DATA_START + dataBytes, `copy ${targetId}: sealed where its data ends`);
  return choice;
}

/**
 * Paired check before the rename publishes a copy: the .tmp read back from disk is a sealed
 * segment whose header is still the one its hint was keyed by (`keyed`) and whose size is where
 * its records end (its data was read back piece by piece as it was written: OutputFile.put).
 */
function checkCopy(fd: number, targetId: number, dataBytes: number, keyed: HeaderChoice): void {
  const choice = checkCopyHeader(fd, targetId, dataBytes);
  assert(headerIdentity(choice) === headerIdentity(keyed), `copy ${targetId}: the header its hint is keyed by`);
  assert(fs.fstatSync(fd).size === choice.header.sealedBytes, `copy ${targetId}: sealed where its data ends`);
}

/**
 * Paired check before the generation goes odd: the journal read back from disk is complete, names
 * this segment and generation, and holds exactly the bytes the rewrite will put in place.
 */
function checkJournal(task: CompactionTask, src: SourceTask, generation: number, out: Buffer): void {
  const fd = io.openRead(path.join(task.segmentsDir, journalFileName(src.segmentId)));
  let bytes: Uint8Array | null = null;
  try {
    bytes = journalScratch.readWholeFile(fd);
    const journal = decodeJournal(bytes);
    assert(journal !== null, `journal of ${src.segmentId}: magic and checksum`);
    assert(journal.segmentId === src.segmentId && journal.generation === generation, `journal of ${src.segmentId}: id and generation ${generation}`);
    assert(journal.dataBytes === out.length && journal.data.length === out.length, `journal of ${src.segmentId}: length`);
    assert(Buffer.compare(journal.data, out) === 0, `journal of ${src.segmentId}: data`);
  } finally {
    if (bytes !== null) journalScratch.release(bytes);
    io.closeQuietly(fd);
  }
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
 * waits on it forever (issue 9, defect 16). The new hint is written and fdatasynced as a .tmp
 * while the journal and the rewrite are made durable (HintInFlight), and renamed only after the
 * rewrite's header is durable and checked; a failure removes it. The complete journal is left
 * for this thread's next rewrite (journalLeft). Returns the published generation.
 */
async function rewriteInPlace(fd: number, task: CompactionTask, src: SourceTask, before: Before, out: Buffer, hit: FaultHit, newOffsets: Uint32Array): Promise<{ generation: number; hinted: boolean; journalKept: boolean }> {
  const generation = before.generation;
  const shared = loadShared(task.gens, src.cell);
  if (shared !== generation || generation % 2 !== 0) throw new Error(`segment ${src.segmentId}: header generation ${generation}, shared ${shared}`);
  const next = generation + 2;
  assert(next <= GENERATION_MAX, `segment ${src.segmentId}: generation ${next} fits the 31-bit shared cell`);
  const staged: { hint: HintInFlight | null } = { hint: null };
  try {
    const expected = await journalAndHint(fd, task, src, next, out, newOffsets, staged);
    await hit(task.faults, "compaction:after-journal");
    await rewriteFromJournal(fd, task, src, before, next, out, formatOf(expected), hit);
    await hit(task.faults, "compaction:after-rewrite");
    const hinted = await publishHint(fd, task, src, expected, out, newOffsets, staged);
    // The rewrite is complete and its header durable: the journal holds exactly these bytes and
    // replays idempotently (or is dropped as stale: replayJournal) if a crash finds it. Its file is
    // written over by the next rewrite, or removed at the pass's end with one directory fsync
    // (which also makes the hint's rename durable: a hint is never needed for correctness).
    journalLeft = { dir: task.segmentsDir, file: path.join(task.segmentsDir, journalFileName(src.segmentId)) };
    return { generation: next, hinted, journalKept: true };
  } finally {
    if (staged.hint !== null) await staged.hint.abandon();
  }
}

/**
 * The hint file of an in-place rewrite's records `out` (at `newOffsets`, under `header`; or a
 * warm-up round's), packed in one pass from the plan's prediction `predicted` of their lowest
 * sequence (packerFor: segments/hint-v3.ts RunPacker), checked at its end; without a prediction, after a miss,
 * or with version-2 hints written, packed in two passes from the records (encodeOutputHint): a
 * wrong prediction costs time, never a wrong hint. Null when the records cannot be encoded. With
 * the journal reused, the two passes (~6 ms a 4 MiB segment) outlasted the journal's write and
 * fdatasync they overlap (eighteenth session: ×1.01–1.05 in alternated fresh processes).
 */
function hintOfRewrite(targetId: number, header: HeaderChoice, out: Buffer, newOffsets: Uint32Array, predicted: number): HintParts | null {
  const packer = packerFor(predicted, formatOf(header), out.length, newOffsets.length);
  if (packer !== null) {
    for (let p = 0; p < out.length; ) {
      const length = packer.add(out, p, C.DATA_START + p);
      assert(length > 0, `hint of ${targetId}: records have lengths`);
      p += length;
    }
    const hint = packedHint(packer, targetId, header, out.length);
    if (hint !== null) {
      hintPackings.onePass += 1;
      return hint;
    }
  }
  hintPackings.twoPass += 1;
  return encodeOutputHint(targetId, header, out, [newOffsets]);
}

/**
 * The one-pass packer of a hint over `keyed` records (`dataBytes` of them, in record frame
 * `version`) whose lowest sequence the plan predicts as `minSeq` (lowered by the test switch's
 * `mispredictBy`); null without a prediction or with version-2 hints written: then the hint is
 * packed from the records in two passes.
 */
function packerFor(minSeq: number, version: number, dataBytes: number, keyed: number): RunPacker | null {
  const predicted = minSeq - unsafeStreamedHintForTests.mispredictBy;
  if (!(predicted > 0) || hintVersionWritten() !== HINT_VERSION) return null;
  return new RunPacker(predicted, isLeanFrame(version), Math.max(Math.ceil(dataBytes / 4), PACKED_ENTRY_BYTES_GUESS * keyed), keyed);
}

/**
 * Packed bytes a hint entry is first given room for, beside a quarter of the records' bytes: a
 * segment of small records (the tombstones a pass seals: ~40 B a record, ~17 B an entry) outgrew
 * the quarter, and the packer's growth — a branch the worker's warm-up never takes — deoptimized
 * the optimized packing loop mid-segment (thirty-eighth session, `--trace-deopt-verbose`).
 * Pages of the room not written are never touched.
 */
const PACKED_ENTRY_BYTES_GUESS = 24;

/** The hint file of the `dataBytes` of records `packer` packed, under `header`; null when its prediction missed (checked unless the test switch `unchecked` is set). */
function packedHint(packer: RunPacker, targetId: number, header: HeaderChoice, dataBytes: number): HintParts | null {
  const run = packer.finish(unsafeStreamedHintForTests.unchecked);
  return run === null ? null : HintBuilder.ofPackedParts(run.totals, run.packed, targetId, header, C.DATA_START + dataBytes, true);
}

/**
 * Writes the rewrite's journal (generation `next`, data `out`) and makes it durable. While its
 * fdatasync runs on libuv's pool, this thread encodes the new hint — keyed by the header the
 * rewrite will write (checked against the one it did write: publishHint) — starts it towards the
 * disk in `staged`, and reads the journal back and checks it. A failure removes the journal.
 * Returns the header the hint is for.
 */
async function journalAndHint(fd: number, task: CompactionTask, src: SourceTask, next: number, out: Buffer, newOffsets: Uint32Array, staged: { hint: HintInFlight | null }): Promise<HeaderChoice> {
  const expected = rewrittenHeader(readHeader(fd, src.segmentId), unsafeHintOverlapForTests.mispredict ? next - 2 : next, out.length);
  try {
    await overlapped(writeJournal(task, src, next, out), () => {
      const bytes = hintOfRewrite(task.targetId, expected, out, newOffsets, src.minSeq);
      if (bytes !== null) staged.hint = new HintInFlight(task, bytes);
      checkJournal(task, src, next, out);
    });
  } catch (err) {
    unlinkQuietly(path.join(task.segmentsDir, journalFileName(src.segmentId)));
    throw err;
  }
  return expected;
}

/**
 * With the journal durable: the generation odd, `out` (records of format `version`) written over
 * the segment's data (the first record alone first: fault point mid-rewrite), the header at
 * generation `next`, all made durable (finishRewrite). A failure puts the original bytes back and
 * makes the generation even again, then rethrows.
 */
async function rewriteFromJournal(fd: number, task: CompactionTask, src: SourceTask, before: Before, next: number, out: Buffer, version: number, hit: FaultHit): Promise<void> {
  const odd = bumpShared(task.gens, src.cell); // odd: bytes are about to move
  assert(odd === before.generation + 1 && odd % 2 === 1, `segment ${src.segmentId}: the worker bumps even ${before.generation} to odd, got ${odd}`);
  try {
    const firstLength = recordLengthAt(out, 0, version); // the segment's own frame (`version`): format 3 starts with a varint
    io.writeAllSync("io:rewrite", fd, [out.subarray(0, firstLength)], C.DATA_START);
    await hit(task.faults, "compaction:mid-rewrite");
    io.writeAllSync("io:rewrite", fd, [out.subarray(firstLength)], C.DATA_START + firstLength);
    finishRewrite(fd, src.segmentId, next, out.length);
  } catch (err) {
    restoreOriginal(fd, task, src, before.original, next);
    bumpShared(task.gens, src.cell); // even again (next): the old bytes are back, or reads fail closed
    throw err;
  }
}

/**
 * The rewrite's hint given its name, once the rewrite is durable: the one `staged` was keyed by
 * the header the rewrite meant to write (`expected`); if the one on disk differs, it is encoded
 * again for that one and staged the slow way (a hint never names a header it was not built for).
 * Resolves to whether a hint was staged; a hint that fails is simply not there (recovery scans).
 */
async function publishHint(fd: number, task: CompactionTask, src: SourceTask, expected: HeaderChoice, out: Buffer, newOffsets: Uint32Array, staged: { hint: HintInFlight | null }): Promise<boolean> {
  const written = readHeader(fd, src.segmentId);
  const early = staged.hint;
  staged.hint = null;
  if (headerIdentity(written) !== headerIdentity(expected) && !unsafeHintOverlapForTests.unchecked) {
    if (early !== null) await early.abandon();
    return stageHintBytes(task, encodeOutputHint(task.targetId, written, out, [newOffsets]));
  }
  return early !== null && (await early.publish());
}

/**
 * An in-place rewrite's new hint on its way to the disk: written to its `.hint.tmp` at
 * construction and fdatasynced on libuv's pool from then on (fault point io:hint;
 * io.writeFileSyncedAsync), while the journal and the rewrite are made durable; then either
 * renamed to its name (publish) — WITHOUT its own directory fsync, which the pass's last one
 * shares (compactor.ts removeKeptJournals; a hint is never needed for correctness, so a rename a
 * crash loses costs a scan) — or removed (abandon).
 * Until the seventeenth session it was written and synced on this thread after the rewrite
 * (~1.7 ms a segment).
 */
class HintInFlight {
  private readonly file: string;
  /** Settles true once the .tmp's content is durable, false when a step failed (never rejects). */
  private readonly durable: Promise<boolean>;

  /** Starts writing `bytes` as the hint of `task`'s target. */
  constructor(task: CompactionTask, bytes: HintParts) {
    this.file = path.join(task.segmentsDir, hintFileName(task.targetId));
    this.durable = io.writeFileSyncedAsync("io:hint", `${this.file}.tmp`, bytes, FILE_MODE).then(
      () => true,
      () => false,
    );
  }

  /** Renames the .tmp to the hint's name once durable; false (and no .tmp left) when any step failed. */
  async publish(): Promise<boolean> {
    if (await this.durable) {
      try {
        io.rename("io:hint", `${this.file}.tmp`, this.file);
        return true;
      } catch {
        // no hint: recovery scans the segment
      }
    }
    unlinkQuietly(`${this.file}.tmp`);
    return false;
  }

  /** Waits for the writes to settle and removes the .tmp (the rewrite failed, or the hint was keyed by another header). */
  async abandon(): Promise<void> {
    await this.durable;
    unlinkQuietly(`${this.file}.tmp`);
  }
}

/**
 * After a failed rewrite: puts the original bytes back, stamps generation `next` in the header
 * (the shared cell goes to `next` too, so the two stay equal), makes it durable, and drops the
 * journal. If that fails too, the journal is the segment's one good copy and stays for recovery.
 */
function restoreOriginal(fd: number, task: CompactionTask, src: SourceTask, original: Uint8Array, next: number): void {
  try {
    io.writeAllSync("io:rewrite", fd, [original], 0);
    io.truncate("io:rewrite", fd, original.length);
    io.datasyncSync("io:rewrite", fd);
    const current = readHeader(fd, src.segmentId);
    writeHeader(fd, current, { ...current.header, generation: next }, "io:rewrite");
    io.unlink("io:unlink", path.join(task.segmentsDir, journalFileName(src.segmentId)));
    fsyncDir(task.segmentsDir);
  } catch {
    // reported through the first failure; recovery replays the journal
  }
}

/**
 * Test switches, never set by the engine or any option (test/compaction-hint-overlap.test.ts):
 * `mispredict` keys an in-place rewrite's early hint by the old generation (a wrong prediction of
 * the header the rewrite writes); `unchecked` stages that hint without comparing its header with
 * the one on disk — the check that re-encodes it for the real header. The pair shows the check is
 * what keeps a rewritten segment's hint usable at the next open.
 */
export const unsafeHintOverlapForTests = { mispredict: false, unchecked: false };

/** The header choice finishRewrite writes over `current` for generation `generation` and `dataBytes` of data. */
function rewrittenHeader(current: HeaderChoice, generation: number, dataBytes: number): HeaderChoice {
  const header = { ...current.header, generation, flags: C.FLAG_SEALED, sealedBytes: C.DATA_START + dataBytes, headerSeq: current.header.headerSeq + 1 };
  return choiceOf(header, nextHeaderOffset(current) === C.HEADER_A_OFFSET ? 0 : 1, rewrittenVersion(current));
}

/**
 * Truncates a rewritten segment and writes its generation into the header copy that is not
 * current, then makes both durable with one fdatasync. One sync, not two (data, then header), is
 * enough because the complete journal stays until after it: a crash before the sync finishes
 * leaves the journal, and recovery replays it whatever subset of these writes reached the disk
 * (the header read then has the old generation or this one, both ≤ the journal's: replayJournal).
 */
function finishRewrite(fd: number, segmentId: number, generation: number, dataBytes: number): void {
  io.truncate("io:rewrite", fd, C.DATA_START + dataBytes);
  const current = readHeader(fd, segmentId);
  const header = encodeHeader(rewrittenHeader(current, generation, dataBytes).header, rewrittenVersion(current));
  io.writeAllSync("io:rewrite", fd, [header], nextHeaderOffset(current));
  io.datasyncSync("io:rewrite", fd);
}

/**
 * The journal file this thread's last in-place rewrite left complete on disk (rewriteInPlace),
 * for its next rewrite in the same directory to write over instead of making a new file per
 * segment, as RocksDB recycles its logs. A new 3 MB file cost each segment its block allocation,
 * a directory fsync after the create and another after the unlink; an overwrite of the same
 * file's blocks needs neither (eighteenth session). Null: none, or taken by a rewrite under way.
 */
let journalLeft: { dir: string; file: string } | null = null;

/** How this thread's journals were written since it started (tests and bench/): `created` as new files, `reused` over the file a previous rewrite left. */
export const journalFiles = { created: 0, reused: 0 };

/**
 * Writes the journal of a rewrite to `out` (segments/journal.ts) and makes it durable where
 * recovery finds it (fault point io:journal at each step). The write is made on this thread, in
 * the call's synchronous part, and only the fdatasync on libuv's pool: the caller's work overlaps
 * the sync (journalAndHint). Until the twenty-third session the write went through the pool as
 * well, and the fdatasync could start only once this thread, busy encoding the hint, saw the
 * write complete (~2.5 ms a 4 MiB segment, the sync not overlapped). The descriptor is closed
 * only once no call on it is pending. Over the file a previous rewrite left (reuseJournal), else
 * into a new one whose name is then made durable by a directory fsync.
 */
async function writeJournal(task: CompactionTask, src: SourceTask, generation: number, out: Buffer): Promise<void> {
  const body = encodeJournal(src.segmentId, generation, out, journalScratch.take(journalBytes(out.length)));
  const file = path.join(task.segmentsDir, journalFileName(src.segmentId));
  let reused = false;
  let fd: number;
  try {
    reused = reuseJournal(task.segmentsDir, file);
    fd = io.openFile("io:journal", file, reused ? "r+" : "w", FILE_MODE);
    try {
      io.writeAllSync("io:journal", fd, [body], 0);
    } catch (err) {
      io.closeQuietly(fd);
      throw err;
    }
  } finally {
    journalScratch.release(body); // written: free for checkJournal's read back while the sync runs
  }
  try {
    await io.datasync("io:journal", fd);
  } finally {
    io.closeQuietly(fd);
  }
  // A reused file's rename needs no directory fsync: recovery finds the file under either name,
  // and replays a complete journal onto the segment its content names (replayJournal). A crash
  // before this journal is durable leaves the old one — complete (its segment's rewrite was
  // durable before it was left: replayed idempotently) — or a torn mix its checksum refuses,
  // while this segment is untouched until the fdatasync above returned.
  if (!reused) io.syncDir("io:journal", task.segmentsDir);
  journalFiles[reused ? "reused" : "created"] += 1;
}

/** Takes the journal this thread left in `dir` and renames it `file`; false when there is none to take (a new file is made). */
function reuseJournal(dir: string, file: string): boolean {
  const left = journalLeft;
  journalLeft = null;
  if (left === null || left.dir !== dir || !fs.existsSync(left.file)) return false; // removed at its pass's end
  if (left.file !== file) io.rename("io:journal", left.file, file);
  return true;
}

/**
 * The segment a complete journal file `name` is replayed onto: the one its content names
 * (`contentId`), unless the test twin trusts the name — the rule before journal files were
 * reused, under which a reused file renamed but not yet written over is CorruptionError.
 */
function journalSegment(name: string, contentId: number): number {
  if (!unsafeJournalForTests.byName) return contentId;
  const m = /^(\d{8,10})\.journal$/.exec(name);
  return m === null ? contentId : Number(m[1]);
}

/**
 * Test switch, never set by the engine or any option (test/journal-reuse.test.ts): `byName`
 * replays a journal onto the segment its file name gives, as recovery did before journal files
 * were reused.
 */
export const unsafeJournalForTests = { byName: false };

/** Records of the warm-up's synthetic segment: each round walks, copies and hints them once, as a pass does per output. */
const WARM_RECORDS = 2048;

/** The id the warm-up's hint names: no file of it is ever written (the segment lives in memory only). */
const WARM_SEGMENT_ID = 0x7fff_fff0;

/** A synthetic sealed segment in memory (never a file) and the task source that keeps 3 of its 4 records. */
export interface WarmSegment {
  bytes: Buffer;
  src: SourceTask;
  /** `src` with its survivors listed in reverse (a plan's walk meets a segment's tombstones out of file order): the worker orders them. */
  reversed: SourceTask;
  header: SegmentHeader;
  liveBytes: number;
}

/**
 * The varint widths' boundaries (2^14, 2^21, 2^28) the warm-up's sequences cross: its records
 * are in quarters, the first with sequences from 1, each other one centred on a boundary. A real
 * store's sequences take 3 varint bytes from 2^14 on: with the warm-up's all below it, the
 * frame's readers (probeV3, varintBytes) and the hint's were optimized for 1 and 2 bytes only,
 * and deoptimized at the first pass's second segment (its copy ran 8–11 ms instead of 3,
 * twenty-fourth session's trace of compact-ab).
 */
const WARM_SEQ_BOUNDARIES = [0x4000, 0x20_0000, 0x1000_0000] as const;

/** A time in ms as CLEARs, erasures and expiring PUTs carry (6 varint bytes: the wide path of varintBytes). */
const WARM_TIME_MS = 1_800_000_000_000;

/** The sequence of the warm-up's record `i` (ascending in file order; see WARM_SEQ_BOUNDARIES). */
function warmSeq(i: number): number {
  const quarterRecords = WARM_RECORDS / (WARM_SEQ_BOUNDARIES.length + 1);
  const quarter = Math.floor(i / quarterRecords);
  const within = i - quarter * quarterRecords;
  return quarter === 0 ? 1 + within : (WARM_SEQ_BOUNDARIES[quarter - 1] as number) - quarterRecords / 2 + within;
}

/**
 * Builds the warm-up's segment in the format new segments are written in (FORMAT_VERSION, the
 * lean frame): PUT records, some TOMBSTONEs (naming the version they killed, as forget writes
 * them) and some CLEARs in one scope; of every four records one is a dead PUT, half of those
 * known to the "plan" (skipped) and half not (named, as a pass names them). Its numbers take
 * the varint widths a store's do: sequences of 1 to 5 bytes, times of 6, a generation of 2.
 */
function warmSegment(): WarmSegment {
  const value = new Uint8Array(200).fill(0x5a);
  const recs: Buffer[] = [];
  for (let i = 0; i < WARM_RECORDS; i++) {
    const seq = warmSeq(i);
    const generation = i % 16 === 3 ? 300 : 1;
    if (i % 8 === 5) recs.push(encodeRecordV3({ type: C.RecordType.TOMBSTONE, seq, generation, scope: "warm", key: warmKey(i - 1), expiresAt: warmSeq(i - 1) }));
    else if (i % 32 === 7) recs.push(encodeRecordV3({ type: C.RecordType.CLEAR, seq, generation: generation + 1, scope: "warm", key: warmKey(i - 1), expiresAt: WARM_TIME_MS }));
    else recs.push(encodeRecordV3({ type: C.RecordType.PUT, seq, generation, scope: "warm", key: warmKey(i), value, expiresAt: i % 32 === 11 ? WARM_TIME_MS + i : 0 }));
  }
  const sealedBytes = C.DATA_START + recs.reduce((n, r) => n + r.length, 0);
  const header: SegmentHeader = { segmentId: WARM_SEGMENT_ID, generation: 0, headerSeq: 0, flags: C.FLAG_SEALED, createdSeq: 1, minSeq: 1, maxSeq: warmSeq(WARM_RECORDS - 1), replacesId: 0, sealedBytes };
  const bytes = Buffer.alloc(sealedBytes);
  bytes.set(encodeHeader(header, C.FORMAT_VERSION), C.HEADER_A_OFFSET);
  const live: number[] = [];
  const known: number[] = [];
  let at = C.DATA_START;
  recs.forEach((r, i) => {
    bytes.set(r, at);
    if (i % 4 !== 0) live.push(at, r.length);
    else if (i % 8 === 0) known.push(at);
    at += r.length;
  });
  const liveU32 = Uint32Array.from(live);
  const minSeq = warmSeq(1); // the first that lives: record 0 is a dead PUT
  assert(minSeq === 2 && warmSeq(WARM_RECORDS - 1) > 0x1000_0000, "the warm-up's sequences run from 1 varint byte to 5");
  const src: SourceTask = { segmentId: WARM_SEGMENT_ID, live: liveU32, known: Uint32Array.from(known), cell: 0, minSeq };
  const reversedPairs = new Uint32Array(liveU32.length);
  for (let i = 0; i < liveU32.length; i += 2) reversedPairs.set(liveU32.subarray(i, i + 2), liveU32.length - 2 - i);
  return { bytes, src, reversed: { ...src, live: reversedPairs }, header, liveBytes: liveBytesOf(liveU32) };
}

/** The key of the warm-up's record `i`. */
function warmKey(i: number): string {
  return `w${String(i).padStart(8, "0")}`;
}

/** The warm-up's segment, built on its first round and dropped after its last (warmDone). */
let warm: WarmSegment | null = null;

/**
 * The rounds' own buffers, kept from round to round until warmDone: the clobbering walk's copy of
 * the segment and the output. Fresh ones per round were ~2 MB of first touches each (~6 ms on the
 * machines measured), a third of a warm round's time. Never the tasks' scratch.
 */
let warmCopy: Buffer | null = null;
let warmOut: Buffer | null = null;

/**
 * One warm-up round: the per-record loops a compaction runs (the walk with its checksums and the
 * copy, alternately by moving runs within the source and by a copy per run; the output hint
 * packed in one pass from the copied records, as both modes pack it) over the synthetic
 * segment (its survivors listed in file order in two rounds of four, in reverse in the other
 * two, as a plan lists a segment of tombstones), in buffers of its own — never the tasks'
 * scratch, which a task holds across its awaits. A pass otherwise runs those loops cold, once
 * per output: V8 optimizes a loop only after it ran a while (compact-9's measurements in
 * docs/performance-history.md). Touches no file and no shared state. Returns the round's output (in a buffer the next round reuses) and hint, for the paired
 * check of the tests.
 */
export function warmRound(round: number): { out: Buffer; hint: HintParts | null; newOffsets: Uint32Array; header: HeaderChoice } {
  const seg = warmInput();
  const clobber = round % 2 === 0;
  // A clobbering walk moves runs within its input: it walks a copy, so every round reads the same segment.
  let bytes = seg.bytes;
  if (clobber && !unsafeWarmForTests.clobberInput) {
    warmCopy ??= Buffer.allocUnsafeSlow(seg.bytes.length);
    seg.bytes.copy(warmCopy);
    bytes = warmCopy;
  }
  warmOut ??= Buffer.allocUnsafeSlow(seg.liveBytes);
  const out = warmOut;
  const reversed = round % 4 >= 2; // every pairing of the two copy variants and the two orders
  const part = copySurvivors(bytes, reversed ? seg.reversed : seg.src, seg.header.sealedBytes, C.FORMAT_VERSION, out, 0, clobber);
  assert(part.copied === out.length && part.kept === seg.src.live.length / 2, `warm-up: copied ${part.copied} of ${out.length} bytes`);
  const n = part.fileOffsets.length;
  assert(!reversed || part.source.newOffsets[0] === part.fileOffsets[n - 1], "warm-up: reversed survivors' new offsets come back in their order");
  const header = choiceOf({ ...seg.header, sealedBytes: C.DATA_START + out.length }, 0, C.FORMAT_VERSION);
  // Both copy variants pack their hint record by record from the prediction, as OutputFile
  // (copy-on-write, while writing) and hintOfRewrite (in place, from the compacted bytes) do.
  const hint = hintOfRewrite(WARM_SEGMENT_ID, header, out, part.fileOffsets, seg.src.minSeq);
  return { out, hint, newOffsets: part.fileOffsets, header };
}

/** Times warmOrder orders the synthetic segment's reversed survivors: enough that V8 optimizes the loops (a /tmp script: 2 times left a 26.5k-entry order at 5.6–10.9 ms, 8 at 1.2–1.6). */
const WARM_ORDERS = 8;

/**
 * The warm-up's step for the survivors' ordering (engine/offset-order.ts): the synthetic
 * segment's survivors, listed in reverse, put in file order WARM_ORDERS times. A pass orders
 * them for every segment a plan lists out of file order, once per segment, so the code otherwise
 * runs cold where it matters: the bench's in-place pass ordered ~26.5k tombstones in 4–12 ms on
 * a worker whose warm-up had reached its round 3 (twenty-fifth session). Paired check: each
 * answer is the reversal. Returns the orders made (tests).
 */
export function warmOrder(): number {
  const seg = warmInput();
  const n = seg.reversed.live.length / 2;
  for (let t = 0; t < WARM_ORDERS; t++) {
    const { live, order } = inFileOrder(seg.reversed.live);
    assert(order !== null && order[0] === n - 1 && order[n - 1] === 0 && live[0] === seg.src.live[0], "warm-up: reversed survivors come back in file order");
  }
  return WARM_ORDERS;
}

/** The warm-up's synthetic segment (built on first use; the same object until warmDone). */
export function warmInput(): Readonly<WarmSegment> {
  warm ??= warmSegment();
  return warm;
}

/**
 * Test switch, never set by the engine or any option (test/compaction-warm.test.ts): with
 * `clobberInput`, a clobbering warm-up round walks the synthetic segment itself instead of a copy,
 * so the runs it moves down are what the next round reads — the copy that keeps every round's
 * input the same segment.
 */
export const unsafeWarmForTests = { clobberInput: false };

/** Drops the warm-up's segment (its last round ran). */
export function warmDone(): void {
  warm = null;
  warmCopy = null;
  warmOut = null;
}

/**
 * Recovery of an in-place compaction: the journal file `name` (NNNNNNNN.journal), if complete, is
 * replayed onto the segment its content names (idempotent) — not the one its name gives: a reused
 * journal file is renamed before it is written over (writeJournal), so a crash between can leave a
 * complete journal under the next segment's name. An incomplete one is deleted (the segment was not
 * touched before the journal was durable). Returns true when it replayed.
 */
export function replayJournal(segmentsDir: string, name: string): boolean {
  const file = path.join(segmentsDir, name);
  const journal = decodeJournal(readWholePath(file));
  const segmentId = journal === null ? 0 : journalSegment(name, journal.segmentId);
  const segFile = path.join(segmentsDir, segmentFileName(segmentId));
  if (journal !== null && segmentId > 0 && fs.existsSync(segFile)) {
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
