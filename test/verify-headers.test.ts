/**
 * verify() checks both header copies of every segment (issue 9 defect 12, first half).
 *
 * Method: a real store seals a segment (sealing writes header copy B, which becomes current); a
 * bit of copy B is then flipped on disk while the store is open, and verify() must report that
 * segment at offset 64. The old verify decoded only the copy chooseHeader picked — the valid
 * copy A — and passed. The twin flips nothing and must report no problem, so the check can tell.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

async function sealedStore(): Promise<{ dir: string; store: Engram }> {
  const dir = tempDir("verify-hdr");
  const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { workers: 0, auto: false } });
  for (let i = 0; i < 6; i++) await store.write(`k${i}`, "v".repeat(1200));
  expect(store.stats().segments.filter((s) => s.sealed).length).toBeGreaterThan(0);
  return { dir, store };
}

describe("verify() and the two header copies", () => {
  it("a damaged current copy B of a sealed segment is reported, though copy A is valid", async () => {
    const { dir, store } = await sealedStore();
    const file = path.join(dir, "segments", "00000001.seg");
    const fd = fs.openSync(file, "r+");
    const b = Buffer.alloc(1);
    fs.readSync(fd, b, 0, 1, 64 + 20);
    b[0] = (b[0] as number) ^ 0x04;
    fs.writeSync(fd, b, 0, 1, 64 + 20);
    fs.closeSync(fd);
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual(expect.arrayContaining([expect.objectContaining({ segment: 1, offset: 64 })]));
    await store.close();
  });

  it("twin: an undamaged store verifies clean", async () => {
    const { store } = await sealedStore();
    const report = await store.verify();
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);
    await store.close();
  });
});
