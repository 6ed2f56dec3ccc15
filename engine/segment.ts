/**
 * An open segment as the main thread sees it: file descriptor, header, generation cell, the
 * appender while it is active, and the count of reads in flight. A retired segment (replaced by
 * copy-on-write, or emptied) is unlinked at once (directory fsynced, `gone` resolves) and keeps
 * only its descriptor until its last reader ends.
 */
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { segmentFileName } from "../segments/file-names.js";
import { writeHeader } from "../segments/header-io.js";
import { fsyncDir } from "../segments/io.js";
import * as io from "../segments/io.js";
import type { HeaderChoice } from "../segments/header.js";
import type { SegmentWriter } from "../segments/writer.js";
import { unlinkHint, type HintBuilder } from "../segments/hint.js";
import type { GenerationTable } from "./generations.js";
import { assert } from "../rules/assert.js";
import type { EngramError } from "../rules/errors.js";

/**
 * Test switch, never set by the engine or any option (test/retired-close.test.ts): with `leave`,
 * a retired segment's descriptor is marked closed but never closed — the leak of an unlinked
 * file's blocks that the test's scan of the process's descriptors then finds.
 */
export const unsafeRetiredCloseForTests = { leave: false };

/** One segment file, open. */
export class Segment {
  readonly id: number;
  readonly fd: number;
  readonly cell: number;
  header: HeaderChoice;
  /** The appender while this is the active segment; null once sealed. */
  writer: SegmentWriter | null;
  /** The active segment's hint entries so far (every record written, in file order); null once sealed. */
  hint: HintBuilder | null = null;
  /**
   * The sealed hint's write while its syncs run on libuv's pool (engine/hints.ts writeSealedHintAsync);
   * null otherwise. Until it settles the segment is not compacted — an in-place rewrite's hint
   * must not be replaced by the older one — and flush() and close() wait for it.
   */
  hintWriting: Promise<boolean> | null = null;
  /** The data end a hint file on disk already covers for the current header (0: none known); close skips an unchanged one. */
  hintOnDiskEnd = 0;
  /** Offset just past the last record (the file size once sealed). */
  dataEnd: number;
  /** Offset up to which the file is known durable (an fdatasync covered it); group frames record it. */
  syncedEnd: number = 0;
  /** Offset up to which the group frames on disk prove the file durable (see CommitLog.markDurable). */
  coveredEnd: number = 0;
  /** Scopes with PUT records in this file (for eager erasure). */
  readonly scopes = new Set<string>();
  minSeq = 0;
  maxSeq = 0;
  /** Bytes of records known dead (an estimate kept by the write path; recounted by the GC). */
  deadBytes = 0;
  /** Reads between authorization and materialization now. */
  readers = 0;
  compacting = false;
  retired = false;
  /**
   * Set when an in-place rewrite of this segment was cut short with nothing put back — its worker
   * thread died after making the generation odd — so that its bytes are unknown until the next
   * open replays the rewrite's journal: every read of it throws this error instead of waiting for
   * a generation that no one will make even, and no pass takes it (engine/compactor.ts).
   */
  lost: EngramError | null = null;
  private closed = false;
  private goneResolve: (() => void) | null = null;
  /** Resolves once a retired segment's file is unlinked. */
  readonly gone: Promise<void>;

  constructor(id: number, fd: number, cell: number, header: HeaderChoice, dataEnd: number, writer: SegmentWriter | null) {
    this.id = id;
    this.fd = fd;
    this.cell = cell;
    this.header = header;
    this.dataEnd = dataEnd;
    this.syncedEnd = dataEnd;
    this.coveredEnd = dataEnd;
    this.writer = writer;
    this.gone = new Promise((resolve) => {
      this.goneResolve = resolve;
    });
  }

  /** Notes a sequence number written into this segment. */
  noteSeq(seq: number): void {
    if (this.minSeq === 0 || seq < this.minSeq) this.minSeq = seq;
    if (seq > this.maxSeq) this.maxSeq = seq;
  }

  /**
   * Writes the header that seals this segment — FLAG_SEALED, its sequence range and its length
   * (`dataEnd`, where its last record ends) — by the A/B rule: durable when it returns. The
   * caller has truncated the file to `dataEnd` and fdatasynced it first.
   */
  writeSealHeader(): void {
    assert(this.writer === null || this.writer.end === this.dataEnd, `segment ${this.id}: sealed where its records end`);
    this.header = writeHeader(this.fd, this.header, { ...this.header.header, flags: C.FLAG_SEALED, minSeq: this.minSeq, maxSeq: this.maxSeq, sealedBytes: this.dataEnd });
    assert((this.header.header.flags & C.FLAG_SEALED) !== 0 && this.header.header.sealedBytes === this.dataEnd, `segment ${this.id}: the new header is sealed at ${this.dataEnd}`);
  }

  /** A read starts using this file. */
  enter(): void {
    this.readers += 1;
  }

  /** A read stops using this file; the last one out closes a retired file's descriptor. */
  leave(_dir: string, gens: GenerationTable): void {
    this.readers -= 1;
    assert(this.readers >= 0, `segment ${this.id}: reader count never goes below zero`);
    if (this.retired && this.readers === 0) this.closeUnlinked(gens);
  }

  /**
   * Retires the segment (replaced by copy-on-write, or emptied): its file is unlinked and the
   * directory fsynced NOW, before the caller counts its records gone (I6: recovery must never read
   * a retired segment again, whatever GC drops next), and `gone` resolves (I8: no file under the
   * directory holds its bytes). A read still holding it keeps a valid descriptor of the unlinked
   * file — the bytes it was authorized for — and the last one out closes it (or close() does).
   */
  retire(dir: string, gens: GenerationTable): void {
    assert(!this.retired, `segment ${this.id} is retired once`);
    assert(this.writer === null, `segment ${this.id}: only a sealed segment is retired`);
    const file = path.join(dir, segmentFileName(this.id));
    unlinkDurably(file, dir, this.id); // throws (an IoError) with nothing changed in memory: the caller keeps it published
    this.retired = true;
    this.goneResolve?.();
    if (this.readers === 0) this.closeUnlinked(gens);
  }

  /**
   * Unlinks this sealed segment's file (and its hint) WITHOUT the directory fsync, trying once
   * more after a failure: a merged compaction unlinks several sources behind one fsync, then calls
   * markRetired. Throws the IoError when the file may still be named in the directory.
   */
  unlinkFile(dir: string): void {
    assert(!this.retired && this.writer === null, `segment ${this.id}: only a published sealed segment is unlinked`);
    const file = path.join(dir, segmentFileName(this.id));
    try {
      io.unlink("io:unlink", file);
    } catch {
      io.unlink("io:unlink", file); // a transient EIO must not fail a compaction that is otherwise done
    }
    unlinkHint(dir, this.id); // swallows failures: an orphan hint is never read
  }

  /**
   * Marks the segment retired once the manifest no longer lists it (recovery deletes such a file
   * before reading anything). A read still holding it keeps its descriptor; the last one out
   * closes it (or close() does). `gone` waits for markGone.
   */
  markRetired(gens: GenerationTable): void {
    assert(!this.retired, `segment ${this.id} is retired once`);
    this.retired = true;
    if (this.readers === 0) this.closeUnlinked(gens);
  }

  /** A retired segment's unlink is durable (a directory fsync followed it): `gone` resolves (I8). */
  markGone(): void {
    assert(this.retired, `segment ${this.id}: only a retired segment is gone`);
    this.goneResolve?.();
  }

  /** True once the descriptor is closed: a read must not use it (the number may be reused). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Closes the descriptor without removing the file (store close, or a segment withdrawn). */
  close(gens: GenerationTable): void {
    if (this.closed) return;
    this.closed = true;
    io.closeQuietly(this.fd);
    gens.release(this.cell);
  }

  /**
   * Closes a retired segment's descriptor once no read holds it, on libuv's pool: its file is
   * unlinked, so this close frees its blocks (milliseconds on ext4, io.closeInBackground), which
   * the thread publishing a compaction need not wait for. From here no read uses the descriptor.
   */
  private closeUnlinked(gens: GenerationTable): void {
    assert(this.retired && this.readers === 0, `segment ${this.id}: only a retired segment no read holds is closed in the background`);
    if (this.closed) return;
    this.closed = true;
    if (!unsafeRetiredCloseForTests.leave) io.closeInBackground(this.fd);
    gens.release(this.cell);
  }

}

/**
 * Unlinks `file` (and the segment's hint) and fsyncs `dir`, trying once more after a failure (a transient EIO must not
 * fail a compaction that is otherwise done). Throws the IoError when the file may still be named
 * in the directory, so that the caller leaves the segment published.
 */
function unlinkDurably(file: string, dir: string, id: number): void {
  for (let attempt = 0; ; attempt++) {
    try {
      io.unlink("io:unlink", file);
      unlinkHint(dir, id); // with its segment (swallows failures: an orphan hint is never read)
      fsyncDir(dir);
      return;
    } catch (err) {
      if (attempt >= 1) throw err;
    }
  }
}
