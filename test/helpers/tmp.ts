/** Temporary directories for tests, removed when the test file ends. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll } from "vitest";

const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh empty directory `engram-<label>-XXXXXX` under `base` (the OS temp dir unless given), removed when the file ends. */
export function tempDir(label: string, base: string = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(base, `engram-${label}-`));
  made.push(dir);
  return dir;
}
