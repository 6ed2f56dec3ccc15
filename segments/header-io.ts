/**
 * Reading and rewriting the two header copies of an open segment (A/B: the current copy is never
 * written, docs/FORMAT.md "The A/B update rule"). The codec is header.ts.
 */
import * as fs from "node:fs";
import * as C from "./constants.js";
import { chooseHeader, choiceOf, encodeHeader, nextHeaderOffset, rewrittenVersion, type HeaderChoice, type SegmentHeader } from "./header.js";
import * as io from "./io.js";
import type { FaultPoint } from "../rules/types.js";

/** Reads both header copies of an open segment and picks the current one. */
export function readHeader(fd: number, segmentId: number): HeaderChoice {
  const bytes = new Uint8Array(C.DATA_START);
  const n = fs.readSync(fd, bytes, 0, C.DATA_START, 0);
  return chooseHeader(bytes.subarray(0, n), segmentId);
}

/**
 * Writes `next` over the copy that is not current and fdatasyncs; the current copy stays intact
 * until that write is durable, so a tear at any byte still opens. Returns the new choice.
 */
export function writeHeader(fd: number, current: HeaderChoice, next: SegmentHeader, point: FaultPoint = "io:seal"): HeaderChoice {
  const header = { ...next, headerSeq: current.header.headerSeq + 1 };
  // The segment keeps its record frame: a format-2 segment stays 2, a format-1 one becomes 2 (its
  // records read the same there), never 3 (whose frame its records do not have).
  const version = rewrittenVersion(current);
  const bytes = encodeHeader(header, version);
  const at = nextHeaderOffset(current);
  io.writeAllSync(point, fd, [bytes], at);
  io.datasyncSync(point, fd);
  return choiceOf(header, at === C.HEADER_A_OFFSET ? 0 : 1, version);
}
