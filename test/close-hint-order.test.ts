/**
 * A close's prefix hint reaches the disk only after the bytes it covers are durable.
 *
 * Method: close() encodes the active segment's prefix hint while its final fdatasync runs on the
 * thread pool (engine/store.ts doClose) and writes it only after that sync and the sync mark's
 * own (engine/hints.ts writeEncodedHint). A store in `durability: "none"` writes batches that no
 * call syncs before close, and the io.ts observer records every state-changing call of the close.
 * In that record the hint's `.tmp` write must come after the segment's last write (the sync
 * mark) and after a sync of the segment that follows that write; the hint must cover exactly the
 * data end that write leaves; and a reopen must answer every key. Run in both `none` and `batch`
 * modes; `none` on a machine without a boot id (segments/boot-id.ts simulateBootForTests(null)),
 * where its close syncs — with one, it syncs nothing and stamps the hint instead
 * (test/boot-stamp.test.ts). The twin (`unsafeCloseHintForTests.writeBeforeSync`) writes the
 * encoded hint at once, before the final sync: the same check finds the hint written ahead of
 * the data it describes.
 * A hint encoded for an end the segment did not reach (a sync mark predicted, never written) is
 * not written at all: on disk it would claim bytes that are not there.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { encodeActiveHint, unsafeCloseHintForTests, writeEncodedHint } from "../engine/hints.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { simulateBootForTests } from "../segments/boot-id.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";

beforeEach(() => simulateBootForTests(null)); // a none-mode close syncs only where no boot id can stamp its hint
afterEach(() => {
  setIoObserver(null);
  unsafeCloseHintForTests.writeBeforeSync = false;
  simulateBootForTests(undefined);
});

const KEYS = 2_000;
const BATCH = 250;

/** What a close did to the active segment and its hint, in call order. */
interface CloseRecord {
  events: IoEvent[];
  /** Index of the hint's `.tmp` write, -1 when none. */
  hintWrite: number;
  /** Index of the segment's last write before the hint's, -1 when none. */
  lastDataWrite: number;
  /** Index of the first sync of the segment after that write, -1 when none. */
  syncAfterData: number;
  /** The data end the segment's last write before the hint left. */
  dataEnd: number;
}

/** Writes KEYS keys in batches with `options`, then closes under the observer and returns its record. */
async function closeRecorded(dir: string, options: OpenOptions): Promise<CloseRecord> {
  const store = await Store.open(dir, options);
  for (let b = 0; b < KEYS; b += BATCH) {
    await store.batch(Array.from({ length: BATCH }, (_, i) => ({ op: "write" as const, key: `k${b + i}`, value: `v${b + i}:${"x".repeat(120)}` })));
  }
  const events: IoEvent[] = [];
  setIoObserver((e) => events.push(e));
  await store.close();
  setIoObserver(null);
  const isSeg = (p: string): boolean => p.endsWith(".seg");
  const hintWrite = events.findIndex((e) => e.op === "write" && e.path.endsWith(".hint.tmp"));
  let lastDataWrite = -1;
  for (let i = 0; i < (hintWrite < 0 ? events.length : hintWrite); i++) {
    const e = events[i] as IoEvent;
    if (e.op === "write" && isSeg(e.path)) lastDataWrite = i;
  }
  const syncAfterData = events.findIndex((e, i) => i > lastDataWrite && e.op === "sync" && isSeg(e.path));
  const last = events[lastDataWrite];
  const dataEnd = last !== undefined && last.op === "write" ? last.offset + last.bytes : -1;
  return { events, hintWrite, lastDataWrite, syncAfterData, dataEnd };
}

/** The coversEnd of the one hint in `dir` (header offset 12, docs/FORMAT.md "Hint files"). */
function hintCoversEnd(dir: string): number {
  const segs = path.join(dir, "segments");
  const hints = fs.readdirSync(segs).filter((n) => n.endsWith(".hint"));
  expect(hints).toHaveLength(1);
  return fs.readFileSync(path.join(segs, hints[0] as string)).readUInt32LE(12);
}

/** True when the record shows the hint written after the data it covers was synced. */
function hintAfterDurableData(r: CloseRecord): boolean {
  return r.hintWrite > 0 && r.lastDataWrite >= 0 && r.syncAfterData > r.lastDataWrite && r.syncAfterData < r.hintWrite;
}

describe("close: the prefix hint follows the syncs of what it covers", () => {
  for (const durability of ["none", "batch"] as const) {
    it(`durability ${durability}: hint written after the sync mark and its sync, covering exactly the data end`, async () => {
      const dir = tempDir("close-hint");
      const options: OpenOptions = { durability, segmentBytes: 4 * 1024 * 1024, compaction: { workers: 0, auto: false } };
      const r = await closeRecorded(dir, options);
      expect(r.hintWrite, "the close wrote a hint").toBeGreaterThan(0);
      expect(hintAfterDurableData(r)).toBe(true);
      expect(hintCoversEnd(dir)).toBe(r.dataEnd);
      const reopened = await Store.open(dir, options);
      try {
        for (let i = 0; i < KEYS; i += 97) {
          const got = reopened.readSync(`k${i}`);
          expect(got.status === "OK" ? String(got.value) : null).toBe(`v${i}:${"x".repeat(120)}`);
        }
      } finally {
        await reopened.close();
      }
    });
  }

  it("twin: a hint written as soon as it is encoded comes before the sync of the data it covers", async () => {
    const dir = tempDir("close-hint-twin");
    unsafeCloseHintForTests.writeBeforeSync = true;
    const r = await closeRecorded(dir, { durability: "none", segmentBytes: 4 * 1024 * 1024, compaction: { workers: 0, auto: false } });
    expect(r.hintWrite, "the twin wrote a hint").toBeGreaterThan(0);
    expect(hintAfterDurableData(r)).toBe(false);
  });

  it("a hint encoded for an end the segment did not reach is not written", async () => {
    const dir = tempDir("close-hint-end");
    const store = await Store.open(dir, { durability: "none", segmentBytes: 4 * 1024 * 1024, compaction: { workers: 0, auto: false } });
    try {
      await store.batch(Array.from({ length: BATCH }, (_, i) => ({ op: "write" as const, key: `k${i}`, value: `v${i}` })));
      await store.flush(); // every byte durable: only the end differs
      const active = [...store.segments.values()].find((s) => s.writer !== null);
      expect(active).toBeDefined();
      const seg = active as NonNullable<typeof active>;
      const encoded = encodeActiveHint(store.segmentsDir, seg, seg.dataEnd + 48); // a mark predicted, never written
      expect(encoded).not.toBeNull();
      expect(writeEncodedHint(store.segmentsDir, encoded as NonNullable<typeof encoded>)).toBe(false);
      expect(fs.readdirSync(store.segmentsDir).filter((n) => n.endsWith(".hint"))).toEqual([]);
    } finally {
      await store.close();
    }
    expect(hintCoversEnd(dir)).toBeGreaterThan(0); // close still writes the hint it encodes itself
  });
});
