/**
 * Hint files in tests: a test that damages segment bytes to exercise recovery's scan (torn tails,
 * corruption rules) removes the hint files first, since a valid hint lets the open skip the scan of
 * the bytes it describes (docs/ENGINE.md "Hint files": damage there is found by reads and verify).
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** Deletes every `NNNNNNNN.hint` under DIR/segments; returns how many there were. */
export function dropHints(dir: string): number {
  const segs = path.join(dir, "segments");
  let n = 0;
  for (const name of fs.existsSync(segs) ? fs.readdirSync(segs) : []) {
    if (!name.endsWith(".hint")) continue;
    fs.rmSync(path.join(segs, name), { force: true });
    n += 1;
  }
  return n;
}

/** The segment ids that have a hint file under DIR/segments, ascending. */
export function hintIds(dir: string): number[] {
  return fs
    .readdirSync(path.join(dir, "segments"))
    .filter((n) => /^\d{8}\.hint$/.test(n))
    .map((n) => Number(n.slice(0, 8)))
    .sort((a, b) => a - b);
}
