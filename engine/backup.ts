/**
 * Online backup: a consistent copy of an open store into a new directory while it keeps serving.
 *
 * Consistency comes from two facts. (1) Every acknowledged write is applied, and an applied
 * write lies inside [0, dataEnd) of its segment: capturing each unsealed segment's bytes up to
 * its dataEnd in one synchronous turn of the main thread (the only writer) captures a prefix of
 * the commit sequence that holds every write acknowledged before the call. That turn comes once
 * the compactions queued before it are done, so the copy is the store at one instant during the
 * call (a write or forget issued meanwhile may be in it or not). (2) Sealed segments
 * change only by compaction: the copy is taken inside the compactor's serial chain, so no
 * compaction runs meanwhile, and a sealed segment is hard-linked (or copied) whole.
 *
 * A hard link shares the inode with the origin, so the origin must never write that file again.
 * Copy-on-write compaction never does (it writes a new file and unlinks the old name). In-place
 * compaction would: the compactor therefore compacts a segment whose link count is above one
 * copy-on-write instead (compactor.ts). Forgetting in the origin does not reach into a backup:
 * a backup is the user's own copy.
 *
 * Durability order: everything is written into a staging directory beside the target, each file
 * fsynced, the directories fsynced, the copy verified (every checksum), then the staging
 * directory is renamed to the target and the parent fsynced. The target appears complete or not
 * at all; a failure removes the staging directory (or the target, when only the parent's fsync
 * failed). Every call goes through segments/io.ts, so a failed one is an IoError (a full backup
 * volume: ENOSPC) and the store's injected failures reach it.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { InvalidArgumentError, CorruptionError, IoError } from "../rules/errors.js";
import { DIR_MODE, FILE_MODE, segmentFileName } from "../segments/file-names.js";
import * as io from "../segments/io.js";
import type { BackupReport } from "../rules/types.js";
import type { Segment } from "./segment.js";
import { verifySegments } from "./verify.js";

/** What the backup needs from the store. */
export interface BackupHost {
  readonly dir: string;
  readonly segmentsDir: string;
  readonly segments: Map<number, Segment>;
  /** Runs `job` with no compaction running or starting until it settles. */
  exclusive<R>(job: () => Promise<R>): Promise<R>;
  /** The store's fault table (`faults.failAt`), or null when fault injection is off. */
  readonly faultTable: SharedArrayBuffer | null;
}

/** Bytes read or written per call when copying. */
const CHUNK_BYTES = 1024 * 1024;

/** Throws InvalidArgumentError unless `target` is a usable backup destination for `dir`. */
function checkTarget(dir: string, target: unknown): string {
  if (typeof target !== "string" || target.length === 0) throw new InvalidArgumentError("backup needs a target directory path");
  const abs = path.resolve(target);
  const origin = path.resolve(dir);
  if (abs === origin || abs.startsWith(origin + path.sep)) throw new InvalidArgumentError(`backup target ${target} lies inside the store ${dir}; choose a directory outside it`);
  if (fs.existsSync(abs)) {
    if (!fs.statSync(abs).isDirectory() || fs.readdirSync(abs).length > 0) {
      throw new InvalidArgumentError(`backup target ${target} exists and is not an empty directory; choose a new path`);
    }
  }
  if (!fs.existsSync(path.dirname(abs))) throw new InvalidArgumentError(`the parent directory of backup target ${target} does not exist`);
  return abs;
}

/** Reads bytes [0, end) of an open file synchronously (fault point `io:read`). */
function readPrefix(fd: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(end);
  for (let done = 0; done < end; ) {
    const n = io.readAt(fd, out, done, Math.min(CHUNK_BYTES, end - done), done);
    if (n === 0) throw new Error(`segment file ended at ${done} of ${end} bytes`);
    done += n;
  }
  return out;
}

/** Writes `bytes` to a new file and fdatasyncs it (fault point io:copy); the fd is closed either way. */
function writeDurable(file: string, bytes: Buffer): void {
  const fd = io.openFile("io:copy", file, "wx", FILE_MODE);
  try {
    io.writeAllSync("io:copy", fd, [bytes], 0);
    io.datasyncSync("io:copy", fd);
  } finally {
    io.closeQuietly(fd);
  }
}

/** Copies a whole file and fdatasyncs the copy (fault point io:copy). */
function copyDurable(from: string, to: string): void {
  io.copyFile("io:copy", from, to);
  const fd = io.openFile("io:copy", to, "r");
  try {
    io.datasyncSync("io:copy", fd);
  } finally {
    io.closeQuietly(fd);
  }
}

/** The highest sequence number the segments hold (applied records and segment headers). */
function highestSequence(host: BackupHost): number {
  let seq = 0;
  for (const seg of host.segments.values()) seq = Math.max(seq, seg.maxSeq, seg.header.header.createdSeq);
  return seq;
}

/** Where one segment of the snapshot comes from. */
type Part = { id: number; sealed: true; bytes: number } | { id: number; sealed: false; data: Buffer };

/** Captures the segments in one synchronous turn: sealed ones by id, unsealed ones by content. */
function snapshot(host: BackupHost): Part[] {
  const parts: Part[] = [];
  for (const seg of [...host.segments.values()].sort((a, b) => a.id - b.id)) {
    if (seg.writer === null) parts.push({ id: seg.id, sealed: true, bytes: fs.fstatSync(seg.fd).size });
    else parts.push({ id: seg.id, sealed: false, data: readPrefix(seg.fd, seg.dataEnd) });
  }
  return parts;
}

/** The errnos of a hard link refused by the file system, not failed: the segment is copied instead. */
const LINK_REFUSED: ReadonlySet<string> = new Set(["EXDEV", "EPERM", "ENOTSUP", "EMLINK", "EOPNOTSUPP"]);

/** Puts one part into `segmentsDir` of the staging copy; returns true when it was hard-linked. */
function place(host: BackupHost, part: Part, segmentsDir: string): boolean {
  const to = path.join(segmentsDir, segmentFileName(part.id));
  if (!part.sealed) {
    writeDurable(to, part.data);
    return false;
  }
  const from = path.join(host.segmentsDir, segmentFileName(part.id));
  try {
    io.link("io:copy", from, to);
    return true;
  } catch (err) {
    if (!(err instanceof IoError) || !LINK_REFUSED.has(err.errno)) throw err;
    copyDurable(from, to);
    return false;
  }
}

/**
 * Runs `job` with the store's fault table (`faults.failAt`) applying to the staging copy's files
 * and to an empty target `dest` the copy replaces, as it applies to the store's own: an injected
 * failure at io:copy, io:dir-sync or io:rename reaches a backup's calls too
 * (test/backup-faults.test.ts). The target's parent is not registered: it is the user's
 * directory, and its final fsync is never injected.
 */
async function withFaultTable<R>(host: BackupHost, staging: string, dest: string, job: () => Promise<R>): Promise<R> {
  const dirs = [staging, path.join(staging, "segments"), dest];
  for (const d of dirs) io.registerFaultTable(d, host.faultTable);
  try {
    return await job();
  } finally {
    for (const d of dirs) io.registerFaultTable(d, null);
  }
}

/** backup(): see the file comment. */
export async function backupStore(host: BackupHost, target: unknown): Promise<BackupReport> {
  const dest = checkTarget(host.dir, target);
  const staging = path.join(path.dirname(dest), `.${path.basename(dest)}.engram-backup-${randomUUID()}`);
  let renamed = false;
  try {
    return await withFaultTable(host, staging, dest, async () => {
      const segmentsDir = path.join(staging, "segments");
      io.makeDir("io:create", segmentsDir, DIR_MODE);
      const taken = await host.exclusive(async () => {
        const sequence = highestSequence(host);
        const parts = snapshot(host);
        let linked = 0;
        for (const part of parts) if (place(host, part, segmentsDir)) linked += 1;
        return { parts, linked, sequence };
      });
      io.syncDir("io:dir-sync", segmentsDir);
      io.syncDir("io:dir-sync", staging);
      const verify = await verifySegments(segmentsDir);
      if (!verify.ok) {
        const p = verify.problems[0];
        throw new CorruptionError(p?.segment ?? 0, p?.offset ?? 0, `the backup copy does not verify: ${p?.detail ?? "unknown problem"}`);
      }
      if (fs.existsSync(dest)) io.removeDir("io:rename", dest); // checked empty above (checkTarget): it makes way for the copy
      io.rename("io:rename", staging, dest);
      renamed = true;
      io.syncDir("io:dir-sync", path.dirname(dest));
      const bytes = taken.parts.reduce((n, p) => n + (p.sealed ? p.bytes : p.data.length), 0);
      return { dir: dest, segments: taken.parts.length, linked: taken.linked, copied: taken.parts.length - taken.linked, bytes, sequence: taken.sequence, verify };
    });
  } catch (err) {
    // A backup that failed leaves nothing: neither its staging directory nor, when only the
    // parent's fsync after the rename failed, a target whose name may not survive a power cut.
    fs.rmSync(renamed ? dest : staging, { recursive: true, force: true });
    throw err;
  }
}
