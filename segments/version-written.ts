/**
 * Which segment format version new segments and records are written in: FORMAT_VERSION, or 2
 * through a test hook (so a test can build a version-2 store and open it with this code). Every
 * reader takes a segment's own version from its header instead; this is only the writer's choice.
 */
import * as C from "./constants.js";
import { assert } from "../rules/assert.js";

let written: number = C.FORMAT_VERSION;

/** The format version new segments and their records are written in. */
export function formatVersionWritten(): number {
  return written;
}

/** Test hook: write new segments in format `version` (2: the 48-byte record frame, or FORMAT_VERSION). */
export function setFormatVersionWritten(version: 2 | 3): void {
  assert(version === C.FORMAT_VERSION_FRAMED || version === C.FORMAT_VERSION, `format ${version} cannot be written`);
  written = version;
}

/** True when segments of format `version` use the version-3 record frame (segments/record-v3.ts); 1 and 2 share the 48-byte one. */
export function isLeanFrame(version: number): boolean {
  return version >= C.FORMAT_VERSION_LEAN;
}

/** Bytes of a GROUP frame in segments of format `version` (2 or later). */
export function groupFrameBytes(version: number): number {
  return isLeanFrame(version) ? C.GROUP_FRAME_BYTES_V3 : C.GROUP_FRAME_BYTES;
}
