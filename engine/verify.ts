/**
 * fsck of a segments directory: reads every segment file and checks both header copies and every
 * record's checksum and framing, without opening the store — so it also works on a store whose
 * recovery refuses to open because of corruption. Reports problems; changes nothing.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { CorruptionError } from "../rules/errors.js";
import { parseSegmentFileName, segmentFileName } from "../segments/file-names.js";
import { readWholeFile } from "../segments/whole-file.js";
import { chooseHeader, decodeHeader, formatOf } from "../segments/header.js";
import { assertSealedEnd, scanRecords } from "../segments/scan.js";
import type { ProgressFn, VerifyReport } from "../rules/types.js";
import { readManifest } from "./manifest.js";
import { elementAt } from "../rules/assert.js";

/**
 * Both header copies must be valid: open silently falls back to the other copy, so a damaged
 * current copy (say B) would otherwise pass verify while the segment reads as its older state
 * (issue 9 defect 12). Recovery rewrites the damaged copy at the next header write.
 */
function checkBothCopies(bytes: Uint8Array, id: number, report: VerifyReport): void {
  for (const [name, at] of [["A", C.HEADER_A_OFFSET], ["B", C.HEADER_B_OFFSET]] as const) {
    const copy = decodeHeader(bytes, at);
    if (copy === null) report.problems.push({ segment: id, offset: at, detail: `header copy ${name} is invalid (open falls back to the other copy)` });
    else if (copy.segmentId !== id) report.problems.push({ segment: id, offset: at, detail: `header copy ${name} names segment ${copy.segmentId}` });
  }
}

/** Verifies one segment file into `report`; returns the bytes it read (0 when compaction removed it meanwhile). */
function checkOne(file: string, id: number, report: VerifyReport): number {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch {
    return 0; // removed by a compaction meanwhile
  }
  try {
    const bytes = readWholeFile(fd);
    const choice = chooseHeader(bytes, id);
    const header = choice.header;
    checkBothCopies(bytes, id, report);
    const sealed = (header.flags & C.FLAG_SEALED) !== 0;
    const end = scanRecords(bytes, id, sealed, () => undefined, false, formatOf(choice));
    if (sealed) assertSealedEnd(id, header.sealedBytes, end.end, bytes.length);
    report.records += end.records;
    report.bytes += end.end;
    if (end.torn !== null) report.problems.push({ segment: id, offset: end.torn.offset, detail: `torn tail (${end.torn.reason}); recovery cuts it off` });
    return bytes.length;
  } catch (err) {
    if (!(err instanceof CorruptionError)) throw err;
    report.problems.push({ segment: err.segment, offset: err.offset, detail: err.message });
    return 0;
  } finally {
    fs.closeSync(fd);
  }
}

/** Every segment the manifest lists must have its file (a deleted file would bring forgotten values back). */
function checkManifest(segmentsDir: string, ids: number[], report: VerifyReport): void {
  let manifest: ReturnType<typeof readManifest>;
  try {
    manifest = readManifest(segmentsDir);
  } catch (err) {
    if (!(err instanceof CorruptionError)) throw err;
    report.problems.push({ segment: 0, offset: 0, detail: err.message });
    return;
  }
  const have = new Set(ids);
  for (const id of manifest?.ids ?? []) {
    // A file retired meanwhile is unlisted first; re-read before calling a listed file missing.
    if (!have.has(id) && !fs.existsSync(path.join(segmentsDir, segmentFileName(id))) && (readManifest(segmentsDir)?.ids ?? []).includes(id)) {
      report.problems.push({ segment: id, offset: 0, detail: `segment ${id} is listed in segments/MANIFEST but its file is missing (deleted?)` });
    }
  }
}

/** Checks every segment in `segmentsDir`; `onProgress(bytesDone, bytesTotal)` after each file. */
export async function verifySegments(segmentsDir: string, onProgress?: ProgressFn): Promise<VerifyReport> {
  const report: VerifyReport = { ok: true, segments: 0, records: 0, bytes: 0, problems: [] };
  if (!fs.existsSync(segmentsDir)) return report;
  const ids = fs.readdirSync(segmentsDir).map(parseSegmentFileName).filter((x): x is number => x !== null).sort((a, b) => a - b);
  checkManifest(segmentsDir, ids, report);
  const files = ids.map((id) => path.join(segmentsDir, segmentFileName(id)));
  const total = files.reduce((n, f) => n + (fs.statSync(f, { throwIfNoEntry: false })?.size ?? 0), 0);
  let done = 0;
  for (const [i, file] of files.entries()) {
    await new Promise((resolve) => setImmediate(resolve)); // keep the event loop (and a progress bar) alive
    done += checkOne(file, elementAt(ids, i, "segment id"), report);
    report.segments += 1;
    onProgress?.(done, total);
  }
  report.ok = report.problems.length === 0;
  return report;
}
