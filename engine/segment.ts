/**
 * An open segment as the main thread sees it: file descriptor, header, generation cell, the
 * appender while it is active, and the count of reads in flight. A retired segment (replaced by
 * copy-on-write, or emptied) keeps its descriptor until its last reader ends; then its file is
 * unlinked, the directory fsynced, and `gone` resolves.
 */
import * as path from "node:path";
import { fsyncDir, segmentFileName } from "../segments/file.js";
import * as io from "../segments/io.js";
import type { HeaderChoice } from "../segments/header.js";
import type { SegmentWriter } from "../segments/writer.js";
import type { GenerationTable } from "./generations.js";

/** One segment file, open. */
export class Segment {
  readonly id: number;
  readonly fd: number;
  readonly cell: number;
  header: HeaderChoice;
  /** The appender while this is the active segment; null once sealed. */
  writer: SegmentWriter | null;
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
  private closed = false;
  private goneResolve: (() => void) | null = null;
  /** Resolves once a retired segment's file is unlinked, or its unlink failed (see `removeError`). */
  readonly gone: Promise<void>;
  /** Why the unlink of this retired file failed (an IoError), null when it did not; retried by `retryRemove`. */
  removeError: unknown = null;

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

  /** A read starts using this file. */
  enter(): void {
    this.readers += 1;
  }

  /** A read stops using this file; the last one out removes a retired file. */
  leave(dir: string, gens: GenerationTable): void {
    this.readers -= 1;
    if (this.readers < 0) throw new Error(`segment ${this.id}: reader count below zero`);
    if (this.retired && this.readers === 0) this.remove(dir, gens);
  }

  /** Marks the segment replaced; its file goes as soon as no read holds it. */
  retire(dir: string, gens: GenerationTable): void {
    this.retired = true;
    if (this.readers === 0) this.remove(dir, gens);
  }

  /** Closes the descriptor without removing the file (store close). Never throws: the fd is gone either way. */
  close(gens: GenerationTable): void {
    if (this.closed) return;
    this.closed = true;
    io.closeQuietly(this.fd);
    gens.release(this.cell);
  }

  /**
   * Closes and unlinks a retired file. A failed unlink or directory fsync never escapes to the
   * read that happened to leave last: it is kept in `removeError` and retried by `retryRemove`.
   */
  private remove(dir: string, gens: GenerationTable): void {
    if (this.closed) return;
    this.close(gens);
    this.unlinkFile(dir);
    this.goneResolve?.();
  }

  private unlinkFile(dir: string): void {
    try {
      io.unlink("io:unlink", path.join(dir, segmentFileName(this.id)));
      fsyncDir(dir);
      this.removeError = null;
    } catch (err) {
      this.removeError = err;
    }
  }

  /** Tries again to remove a retired file whose unlink failed; returns the error, null once gone. */
  retryRemove(dir: string): unknown {
    if (this.retired && this.closed && this.removeError !== null) this.unlinkFile(dir);
    return this.removeError;
  }
}
