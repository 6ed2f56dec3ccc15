/**
 * In-place compaction reuses its journal file (engine/compaction-core.ts writeJournal): the
 * journal of a segment's rewrite is left complete on disk once the rewrite is durable, and the
 * next rewrite renames that file to its own segment's name and writes over it, without a
 * directory fsync; the main thread removes the last one at the pass's end. The property: a power
 * cut anywhere from such a rename to the fdatasync of the journal written over the file opens
 * with every acknowledged operation intact, because recovery replays a complete journal onto the
 * segment its content names (replayJournal), whatever its file is called.
 *
 * Method: a real store (sync durability, tiny segments, workers 0) runs under the io.ts observer
 * (test/helpers/power-loss.ts), writes, forgets, then one in-place compact() of every segment.
 * The test first checks the reuse happened: one journal file created, every later rewrite's
 * journal written over it, none left after the pass. Every cut point from each rename of a
 * journal up to the fdatasync of the journal then written becomes several images (a random
 * subset of unsynced pages and of the directory operations since the last directory fsync kept),
 * each opened and read key by key. The twin opens the same images with recovery trusting the
 * file's name (unsafeJournalForTests.byName, the rule before reuse): an image whose rename
 * survived but whose new journal did not then holds a complete journal under another segment's
 * name, and must fail. Last, a failure injected at the reuse (the rename, or the open over the
 * old file) fails the pass with an IoError and leaves no journal, and the store stays whole.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { journalFiles, unsafeJournalForTests } from "../engine/compaction-core.js";
import { Store } from "../engine/store.js";
import { PowerLossRecorder, prng } from "./helpers/power-loss.js";
import { simulateBootForTests } from "../segments/boot-id.js";
import { INPLACE_OPTS, loadAndForget, violationsIn, wrongKeys } from "./helpers/inplace-images.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  setIoObserver(null);
  unsafeJournalForTests.byName = false;
  simulateBootForTests(undefined); // imageAt simulated reboots
});

const IMAGES_PER_CUT = Number(process.env["ENGRAM_JOURNAL_REUSE_IMAGES"] ?? 3);

/** The journal files under `dir`'s segments. */
function journalsIn(dir: string): string[] {
  return fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".journal"));
}

/** Cut points (calls applied) from each rename of a journal file up to the fdatasync of the journal written after it. */
function cutsInReuse(events: readonly IoEvent[]): number[] {
  const cuts: number[] = [];
  events.forEach((e, i) => {
    if (e.op !== "rename" || !e.path.endsWith(".journal")) return;
    for (let k = i + 1; k <= events.length; k++) {
      cuts.push(k); // after events[0..k-1]: the rename applied, later calls up to the journal's sync not
      const f = events[k];
      if (f === undefined || (f.op === "sync" && f.path.endsWith(".journal"))) break;
    }
  });
  return cuts;
}

describe("in-place compaction reuses its journal file", () => {
  it("writes one journal file per pass and leaves none behind", async () => {
    const dir = tempDir("journal-reuse-count");
    const store = await Engram.open(dir, INPLACE_OPTS);
    const model = await loadAndForget(store);
    const before = { ...journalFiles };
    const events: IoEvent[] = [];
    setIoObserver((e) => events.push(e));
    const report = await store.compact({ mode: "in-place" });
    setIoObserver(null);
    const rewrites = events.filter((e) => e.op === "sync" && e.path.endsWith(".journal")).length;
    expect(rewrites, "several segments rewritten through a journal").toBeGreaterThan(2);
    expect(report.segments.length).toBeGreaterThanOrEqual(rewrites);
    expect(journalFiles.created - before.created, "one journal file made").toBe(1);
    expect(journalFiles.reused - before.reused, "every later rewrite wrote over it").toBe(rewrites - 1);
    expect(events.filter((e) => e.op === "rename" && e.path.endsWith(".journal")).length, "each reuse renamed it to its segment").toBe(rewrites - 1);
    expect(journalsIn(dir), "the pass removed the last one").toEqual([]);
    expect(await wrongKeys(store, model)).toEqual([]);
    await store.close();
    const again = await Store.open(dir, INPLACE_OPTS);
    try {
      expect(again.opened.journalsReplayed, "nothing to replay after a clean pass").toBe(0);
    } finally {
      await again.close();
    }
  });

  it("a power cut from a journal's rename to its new content's fdatasync opens intact; trusting the name (twin) does not", async () => {
    const dir = tempDir("journal-reuse");
    const rec = new PowerLossRecorder(dir);
    setIoObserver(rec.observe);
    const store = await Engram.open(dir, INPLACE_OPTS);
    const model = await loadAndForget(store);
    await store.compact({ mode: "in-place" });
    await store.close();
    setIoObserver(null);
    const cuts = cutsInReuse(rec.events);
    expect(cuts.length, "cut points inside several reuses").toBeGreaterThan(4);
    const rng = prng(20261204);
    const safe: string[] = [];
    const twin: string[] = [];
    for (const cut of cuts) {
      for (let n = 0; n < IMAGES_PER_CUT; n++) {
        const image = tempDir("journal-reuse-image");
        const twinImage = tempDir("journal-reuse-twin");
        const state = Math.floor(rng() * 2 ** 31);
        rec.imageAt(cut, prng(state), image);
        rec.imageAt(cut, prng(state), twinImage); // the same pages and directory operations kept
        safe.push(...(await violationsIn(image, model)).map((v) => `cut ${cut}: ${v}`));
        unsafeJournalForTests.byName = true;
        try {
          twin.push(...(await violationsIn(twinImage, model)).map((v) => `cut ${cut}: ${v}`));
        } finally {
          unsafeJournalForTests.byName = false;
        }
        fs.rmSync(image, { recursive: true, force: true });
        fs.rmSync(twinImage, { recursive: true, force: true });
      }
    }
    console.log(`[journal-reuse] ${cuts.length} cut points × ${IMAGES_PER_CUT} images: ${safe.length} violations; twin trusting the file name: ${twin.length}`);
    expect(safe).toEqual([]);
    expect(twin.length, "trusting the name, some image opens wrong").toBeGreaterThan(0);
  });

  for (const at of ["rename", "open"] as const) {
    it(`a failure at the reuse's ${at} fails the pass with an IoError, leaves no journal, and the store stays whole`, async () => {
      const dir = tempDir(`journal-reuse-fail-${at}`);
      const store = await Engram.open(dir, { ...INPLACE_OPTS, faults: {} });
      const model = await loadAndForget(store);
      let armed = false;
      setIoObserver((e) => {
        // Armed once the first rewrite's journal is durable: the next io:journal call is the
        // reuse's rename; or, armed at that rename, the open over the renamed file.
        const trigger = at === "rename" ? e.op === "sync" && e.path.endsWith(".journal") : e.op === "rename" && e.path.endsWith(".journal");
        if (!armed && trigger) {
          armed = true;
          store.faults.failAt?.("io:journal", "EIO", 1);
        }
      });
      const failed = await store.compact({ mode: "in-place" }).then(
        () => null,
        (err: unknown) => err,
      );
      setIoObserver(null);
      expect(armed, "a rewrite reused a journal").toBe(true);
      expect(failed, "the pass failed with the injected error").toBeInstanceOf(IoError);
      expect(store.faults.failuresLeft?.() ?? 0).toBe(0);
      expect(journalsIn(dir), "no journal left").toEqual([]);
      expect(await wrongKeys(store, model)).toEqual([]);
      await store.compact({ mode: "in-place" });
      expect(journalsIn(dir)).toEqual([]);
      expect(await wrongKeys(store, model)).toEqual([]);
      await store.close();
      const again = await Engram.open(dir, INPLACE_OPTS);
      try {
        expect(await wrongKeys(again, model)).toEqual([]);
        expect((await again.verify()).problems).toEqual([]);
      } finally {
        await again.close();
      }
    });
  }
});
