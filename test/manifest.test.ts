/**
 * The segment manifest (issue 9 defect 12, second half): a deleted segment file is noticed by open
 * and by verify, and never brings a forgotten value back; the crash windows around it resolve.
 *
 * Method: a real store writes k into segment 1 and forgets it in segment 2 (4 KiB segments, one
 * filler per segment), closes, and segment 2 — the one holding the tombstone — is deleted by hand.
 * Open must refuse with CorruptionError naming segment 2; on the old code it opened and read("k")
 * returned the forgotten value. verify() on an open store reports a file deleted under it. The
 * crash windows: a segment file not yet listed (created after the last manifest write) is adopted
 * with its records; a retired file not yet unlinked (listed no more) is deleted, not replayed.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { CorruptionError, Engram } from "../src/index.js";
import { readManifest, writeManifest } from "../engine/manifest.js";
import { initChecksum } from "../segments/checksum.js";
import { tempDir } from "./helpers/tmp.js";

const OPTS = { segmentBytes: 4096, compaction: { workers: 0, auto: false } };
const FILL = "f".repeat(3880); // fills a segment alone (format 3's lean frames: 3800 left room for the tombstone)

const seg = (dir: string, id: number): string => path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`);

async function forgottenInSegment2(): Promise<string> {
  const dir = tempDir("manifest");
  const store = await Engram.open(dir, OPTS);
  await store.write("k", "the forgotten value"); // segment 1
  await store.write("fill1", FILL); // segment 2
  await store.forget("k"); // segment 3: the tombstone
  await store.write("fill2", FILL); // segment 4
  await store.close();
  return dir;
}

describe("a deleted segment file", () => {
  it("open refuses with CorruptionError naming it; the forgotten value does not come back", async () => {
    const dir = await forgottenInSegment2();
    fs.rmSync(seg(dir, 3));
    const err = await Engram.open(dir, OPTS).then(
      async (s) => {
        const r = await s.read("k");
        await s.close();
        return r;
      },
      (e: unknown) => e,
    );
    expect(err, "the store opened and read k as").toBeInstanceOf(CorruptionError);
    expect((err as CorruptionError).segment).toBe(3);
    expect(String((err as Error).message)).toMatch(/missing/);
  });

  it("verify() on an open store reports a segment file deleted under it", async () => {
    const dir = await forgottenInSegment2();
    const store = await Engram.open(dir, OPTS);
    fs.rmSync(seg(dir, 3));
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual(expect.arrayContaining([expect.objectContaining({ segment: 3 })]));
    await store.close();
  });

  it("twin: the same store with every file in place opens, reads k as forgotten, and verifies clean", async () => {
    const dir = await forgottenInSegment2();
    const store = await Engram.open(dir, OPTS);
    expect(await store.read("k")).toEqual({ status: "NOT_FOUND" });
    expect((await store.verify()).ok).toBe(true);
    await store.close();
  });
});

describe("the manifest's crash windows", () => {
  it("a segment created after the last manifest write is adopted; a retired one not yet unlinked is deleted", async () => {
    await initChecksum();
    const dir = await forgottenInSegment2();
    const segDir = path.join(dir, "segments");
    const m = readManifest(segDir);
    expect(m?.ids).toEqual([1, 2, 3, 4]);
    // A crash before segment 4 was listed: the manifest still says ids 1-3, next id 4.
    writeManifest(segDir, { ids: [1, 2, 3], nextId: 4 });
    let s = await Engram.open(dir, OPTS);
    expect(await s.read("fill2")).toMatchObject({ status: "OK", value: FILL });
    await s.close();
    // A crash after segment 2 was unlisted (retired) but before its unlink: it is deleted, not replayed.
    const now = readManifest(segDir) as { ids: number[]; nextId: number };
    writeManifest(segDir, { ids: now.ids.filter((id) => id !== 2), nextId: now.nextId });
    s = await Engram.open(dir, OPTS);
    expect(fs.existsSync(seg(dir, 2))).toBe(false);
    expect(await s.read("fill1")).toEqual({ status: "NOT_FOUND" });
    expect(await s.read("fill2")).toMatchObject({ status: "OK" });
    await s.close();
  });
});
