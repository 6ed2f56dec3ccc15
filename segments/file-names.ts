/**
 * The names and permission bits of the files in a segments directory (docs/FORMAT.md
 * "Directory and files"). Files are created 0600 and directories 0700 because memories can hold
 * personal data.
 */

/** Permission bits of every file engram creates. */
export const FILE_MODE = 0o600;
/** Permission bits of every directory engram creates. */
export const DIR_MODE = 0o700;

const NAME = /^(\d{8,10})\.seg$/;

/** "00000042.seg" for segment 42. */
export function segmentFileName(id: number): string {
  return `${String(id).padStart(8, "0")}.seg`;
}

/** "00000042.journal": the redo journal of an in-place compaction of segment 42. */
export function journalFileName(id: number): string {
  return `${String(id).padStart(8, "0")}.journal`;
}

/** "00000042.seg.tmp": copy-on-write output not yet published. */
export function tmpFileName(id: number): string {
  return `${segmentFileName(id)}.tmp`;
}

/** The segment id named by a file name, or null when the name is not a segment's. */
export function parseSegmentFileName(name: string): number | null {
  const m = NAME.exec(name);
  if (m === null) return null;
  // Ids are u32 (header field) and names are canonical: "000000042.seg" is not segment 42.
  const id = Number(m[1]);
  return id <= 0xffffffff && segmentFileName(id) === name ? id : null;
}
