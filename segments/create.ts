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
import { writeZeros } from "./writer.js";
import { assert } from "../rules/assert.js";

/**
 * Creates segment `header.segmentId` in `dir` with both header copies and `sizeBytes` of
 * preallocated space, of which the first `zeroBytes` after the headers are real zeros (allocated
 * blocks; the rest is an ftruncate hole), and returns its open fd (read/write). The file is
 * written as NNNNNNNN.seg.tmp, fdatasynced, renamed and the directory fsynced, so a crash never
 * leaves a segment file with a torn header (recovery deletes *.tmp). The zeros ride on that
 * fdatasync: the first durable appends then overwrite blocks the creation already allocated,
 * instead of the first one also carrying a zero step's allocation (segments/writer.ts).
 */
export function createSegmentFile(dir: string, header: SegmentHeader, sizeBytes: number, zeroBytes = 0): number {
  assert(zeroBytes >= 0 && C.DATA_START + zeroBytes <= Math.max(sizeBytes, C.DATA_START), "the zeros lie inside the preallocated space");
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
    writeZeros("io:preallocate", fd, C.DATA_START, C.DATA_START + zeroBytes); // the zeros' own fault point, wherever they are written
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
