/**
 * The share tests' fixture: fresh store directories and every owner or client opened on them,
 * closed (newest first) and removed after the file's tests, whatever they left open.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll } from "vitest";
import { tempDir } from "./tmp.js";

/** Registers the cleanup; `storeDir()` makes a fresh `<tmp>/store` path, `open` takes what must be closed. */
export function shareFixture(label: string): { storeDir(): string; open: Array<{ close(): Promise<void> }> } {
  const dirs: string[] = [];
  const open: Array<{ close(): Promise<void> }> = [];
  afterAll(async () => {
    for (const s of open.reverse()) await s.close().catch(() => undefined);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  return {
    storeDir(): string {
      const d = tempDir(label);
      dirs.push(d);
      return path.join(d, "store");
    },
    open,
  };
}
