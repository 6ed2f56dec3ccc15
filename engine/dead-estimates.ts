/**
 * The segments' dead bytes carried from one process to the next (docs/ENGINE.md "Scheduling"): a
 * close writes them to segments/DEADBYTES (segments/dead-bytes.ts), the open reads them back. An
 * open from hint files counts no dead bytes, so without them a store used by short processes (a
 * CLI command each) forgot at every open what the earlier ones had killed, and grew without bound.
 * Advisory: an estimate only chooses which segments the automatic pass plans.
 */
import * as C from "../segments/constants.js";
import { writeDeadBytes, type DeadBytesEntry, type DeadBytesFile } from "../segments/dead-bytes.js";
import type { Segment } from "./segment.js";
import type { Retained } from "./reclaim-clock.js";

/**
 * Test switch, never set by the engine or any option (test/space-reopen.test.ts): with
 * `ignoreFile`, the open reads no estimates — the store before segments/DEADBYTES, whose every
 * open forgot what earlier processes had killed.
 */
export const unsafeDeadBytesForTests = { ignoreFile: false };

/**
 * At open: sets each segment's dead bytes from the estimates of `file` (the last close's, as
 * recovery read it) plus its retention records whose window has ended (`droppable`: the reclaim
 * clock's), where an entry still names the segment's bytes (its id, header generation and data
 * end), at most the bytes it holds. Returns the entries as read (JSON), for saveEstimates
 * to skip an unchanged file.
 */
export function loadEstimates(file: DeadBytesFile, segments: ReadonlyMap<number, Segment>, droppable: ReadonlyMap<number, number>): string {
  if (unsafeDeadBytesForTests.ignoreFile) return "[]";
  const entries = file.entries;
  for (const e of entries) {
    const seg = segments.get(e.id);
    if (seg === undefined || seg.header.header.generation !== e.generation || seg.dataEnd !== e.dataEnd) continue;
    seg.deadBytes = Math.min(e.deadBytes + (droppable.get(e.id) ?? 0), seg.dataEnd - C.DATA_START);
  }
  return JSON.stringify(entries);
}

/**
 * At close, once every segment's data end is final: writes an entry for every segment — its dead
 * bytes, and the latest reclaim time of the slots whose retention record it holds (`reclaimedBy`,
 * engine/reclaim-clock.ts; 0 for none) — to `dir` (best effort), unless they are what the open
 * read (`read`, loadEstimates'). Every segment, not only those with garbage: the next open applies
 * the reclaim times only when the file names exactly the segments it finds.
 */
export function saveEstimates(dir: string, segments: ReadonlyMap<number, Segment>, read: string, retained: ReadonlyMap<number, Retained>): void {
  const entries: DeadBytesEntry[] = [];
  for (const seg of segments.values()) {
    if (seg.retired) continue;
    const dataBytes = seg.dataEnd - C.DATA_START;
    const deadBytes = Math.min(Math.max(0, seg.deadBytes), dataBytes);
    const r = retained.get(seg.id);
    entries.push({ id: seg.id, generation: seg.header.header.generation, dataEnd: seg.dataEnd, deadBytes, reclaimedBy: r?.reclaimedBy ?? 0, retainedBytes: Math.min(r?.retainedBytes ?? 0, dataBytes) });
  }
  entries.sort((a, b) => a.id - b.id);
  if (JSON.stringify(entries) === read) return;
  writeDeadBytes(dir, entries);
}
