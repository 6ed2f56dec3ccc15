/**
 * In-place compaction's one sync for data and header (issue 11, compact-5): after the rewrite,
 * the worker truncates the segment, writes the new header copy and fdatasyncs once for both (it
 * was: truncate, fdatasync, header write, fdatasync). The property: a power cut anywhere between
 * the truncate and that sync — whatever subset of the unsynced pages and the size survives —
 * opens with every acknowledged operation intact, because the complete redo journal is still on
 * disk and recovery replays it.
 *
 * Method: a real store (sync durability, tiny segments, workers 0) runs under the io.ts observer
 * (test/helpers/power-loss.ts records every call with its bytes): writes, forgets, then one
 * in-place compact() of every segment. Every cut point from each segment's truncate up to the
 * fdatasync that follows it becomes several images (each a different random subset of unsynced
 * pages kept); each must open and read every key exactly as acknowledged. The twin deletes the
 * journal from the same images before opening (the protection off): some image must then fail to
 * open or read a key wrongly — the journal is what makes the single sync enough.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { simulateBootForTests } from "../segments/boot-id.js";
import { PowerLossRecorder, prng } from "./helpers/power-loss.js";
import { INPLACE_OPTS, loadAndForget, violationsIn, type KeyModel } from "./helpers/inplace-images.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  setIoObserver(null);
  simulateBootForTests(undefined); // imageAt simulated reboots
});

const IMAGES_PER_CUT = Number(process.env["ENGRAM_INPLACE_SYNC_IMAGES"] ?? 4);

/** Runs the workload under the recorder; returns it and the acknowledged state of every key. */
async function recorded(dir: string): Promise<{ rec: PowerLossRecorder; model: KeyModel }> {
  const rec = new PowerLossRecorder(dir);
  setIoObserver(rec.observe);
  const store = await Engram.open(dir, INPLACE_OPTS);
  const model = await loadAndForget(store);
  const report = await store.compact({ mode: "in-place" });
  expect(report.segments.length, "several segments rewritten in place").toBeGreaterThan(2);
  await store.close();
  setIoObserver(null);
  return { rec, model };
}

/** Cut points (calls applied) from each rewritten segment file's truncate up to the fdatasync of the same descriptor after it. */
function cutsInFinish(events: readonly IoEvent[]): number[] {
  const cuts: number[] = [];
  // Only the rewrites' truncates: those after the pass wrote its first journal (the load phase
  // before truncates segments too, when it seals them).
  const firstJournal = events.findIndex((e) => e.op === "write" && e.path.endsWith(".journal"));
  expect(firstJournal).toBeGreaterThan(0);
  events.forEach((e, i) => {
    if (i < firstJournal || e.op !== "truncate" || !e.path.endsWith(".seg")) return;
    for (let k = i + 1; k < events.length; k++) {
      const f = events[k] as IoEvent;
      cuts.push(k); // after events[0..k-1]: the truncate applied, later calls up to the sync not
      if (f.op === "sync" && f.fd === e.fd) break;
    }
  });
  return cuts;
}

describe("in-place compaction: one fdatasync for the truncated data and the new header", () => {
  it("a power cut anywhere from the truncate to that sync opens with everything intact; without the journal (twin) it does not", async () => {
    const dir = tempDir("inplace-sync");
    const { rec, model } = await recorded(dir);
    const cuts = cutsInFinish(rec.events);
    expect(cuts.length, "cut points inside the finish of several rewrites").toBeGreaterThan(4);
    const rng = prng(20261201);
    const safe: string[] = [];
    const twin: string[] = [];
    let journalsSeen = 0;
    for (const cut of cuts) {
      for (let n = 0; n < IMAGES_PER_CUT; n++) {
        const image = tempDir("inplace-sync-image");
        const twinImage = tempDir("inplace-sync-twin");
        const state = rng();
        rec.imageAt(cut, prng(Math.floor(state * 2 ** 31)), image);
        rec.imageAt(cut, prng(Math.floor(state * 2 ** 31)), twinImage); // the same pages kept
        const journals = fs.readdirSync(path.join(twinImage, "segments")).filter((f) => f.endsWith(".journal"));
        journalsSeen += journals.length;
        for (const j of journals) fs.rmSync(path.join(twinImage, "segments", j));
        safe.push(...(await violationsIn(image, model)).map((v) => `cut ${cut}: ${v}`));
        twin.push(...(await violationsIn(twinImage, model)).map((v) => `cut ${cut}: ${v}`));
        fs.rmSync(image, { recursive: true, force: true });
        fs.rmSync(twinImage, { recursive: true, force: true });
      }
    }
    console.log(`[compaction-inplace-sync] ${cuts.length} cut points × ${IMAGES_PER_CUT} images: ${safe.length} violations; twin without the journal: ${twin.length}`);
    expect(journalsSeen, "every image holds the rewrite's journal").toBe(cuts.length * IMAGES_PER_CUT);
    expect(safe).toEqual([]);
    expect(twin.length, "without the journal some cut opens wrong").toBeGreaterThan(0);
  });
});
