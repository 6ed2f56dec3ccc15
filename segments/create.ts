/**
 * Creating a segment file: both header copies and its preallocated space, made durable under a
 * temporary name and renamed into place (docs/FORMAT.md "The A/B update rule").
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "./constants.js";
import { FILE_MODE, segmentFileName, tmpFileName } from "./file-names.js";
import { encodeHeader, type SegmentHeader } from "./header.js";
import * as io from "./io.js";

/**
 * Creates segment `header.segmentId` in `dir` with both header copies and `sizeBytes` of
 * zeroed, preallocated space, and returns its open fd (read/write). The file is written as
 * NNNNNNNN.seg.tmp, fdatasynced, renamed and the directory fsynced, so a crash never leaves a
 * segment file with a torn header (recovery deletes *.tmp).
 */
export function createSegmentFile(dir: string, header: SegmentHeader, sizeBytes: number): number {
  const file = path.join(dir, segmentFileName(header.segmentId));
  const tmp = path.join(dir, tmpFileName(header.segmentId));
  if (fs.existsSync(file)) throw new Error(`EEXIST: segment file ${file} already exists`);
  const fd = io.openFile("io:create", tmp, "wx+", FILE_MODE);
  let renamed = false;
  try {
    const bytes = encodeHeader(header);
    io.writeAllSync("io:create", fd, [bytes], C.HEADER_A_OFFSET);
    io.writeAllSync("io:create", fd, [bytes], C.HEADER_B_OFFSET);
    io.truncate("io:create", fd, Math.max(sizeBytes, C.DATA_START));
    io.datasyncSync("io:create", fd);
    io.rename("io:rename", tmp, file);
    renamed = true;
    io.fsyncDir(dir);
  } catch (err) {
    // Nothing was acknowledged on this file: leave neither an fd nor an orphan .seg/.seg.tmp.
    io.closeQuietly(fd);
    io.unlinkQuietly(renamed ? file : tmp);
    throw err;
  }
  return fd;
}
