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
import { Engram, type OpenOptions } from "../src/index.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { PowerLossRecorder, prng } from "./helpers/power-loss.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => setIoObserver(null));

const KEYS = 240;
const IMAGES_PER_CUT = Number(process.env["ENGRAM_INPLACE_SYNC_IMAGES"] ?? 4);
const OPTS: OpenOptions = { segmentBytes: 16 * 1024, retention: { tombstoneRetentionMs: 0 }, compaction: { mode: "in-place", workers: 0, auto: false } };
const valueOf = (i: number): string => `v${i}:`.padEnd(200 + (i % 7) * 40, "q");

/** Runs the workload under the recorder; returns it and the acknowledged state of every key. */
async function recorded(dir: string): Promise<{ rec: PowerLossRecorder; model: Map<string, string | null> }> {
  const rec = new PowerLossRecorder(dir);
  setIoObserver(rec.observe);
  const store = await Engram.open(dir, OPTS);
  const model = new Map<string, string | null>();
  for (let i = 0; i < KEYS; i += 20) {
    const ops = [];
    for (let j = i; j < i + 20; j++) {
      ops.push({ op: "write" as const, scope: "global", key: `k${j}`, value: valueOf(j) });
      model.set(`k${j}`, valueOf(j));
    }
    await store.batch(ops);
  }
  for (let i = 0; i < KEYS; i += 3) {
    await store.forget(`k${i}`);
    model.set(`k${i}`, null);
  }
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

/** Opens `image` and counts keys that do not read as `model` (an open failure counts as one, with its message). */
async function violationsIn(image: string, model: ReadonlyMap<string, string | null>): Promise<string[]> {
  let store: Engram;
  try {
    store = await Engram.open(image, { compaction: { workers: 0, auto: false } });
  } catch (err) {
    return [`open failed: ${String(err)}`];
  }
  const out: string[] = [];
  try {
    for (const [key, want] of model) {
      try {
        const got = await store.read(key);
        const state = got.status === "OK" ? String(got.value) : null;
        if (state !== want) out.push(`${key} read ${state === null ? "NOT_FOUND" : state.slice(0, 12)}`);
      } catch (err) {
        out.push(`${key} threw ${String(err)}`);
      }
    }
  } finally {
    await store.close();
  }
  return out;
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
