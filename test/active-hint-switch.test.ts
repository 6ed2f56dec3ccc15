/**
 * The bench switch that keeps no hint for the write path's segments drops hints and nothing else.
 *
 * Method: `unsafeActiveHintForTests.none` (engine/hints.ts) lets bench/bulk-cpu.ts measure what
 * keeping the active segment's hint current costs a load (`TREE#nohint`). A switch that skipped
 * the entries but still wrote a hint at seal or close would write one that claims records it
 * does not index, and a reopen from it would lose names (checked by hand: such a switch leaves
 * seven hints here, and the reopen answers nothing for k0); so the switch takes the builder away.
 * A store in 32 KiB segments (several seals) writes 1,500 keys by batches and overwrites a third,
 * in `none` and in `sync` durability, and closes: with the switch set, no `.hint` file is left in
 * its segments directory and the reopen reports every segment scanned (`opened.hinted` 0); with
 * it unset (the control, which must differ for the check to mean anything), every segment has a
 * hint and the reopen reports them all hinted. Both reopens answer every key with its latest
 * value, and after a second reopen (whose open wrote hints for the sealed segments it scanned)
 * still do.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeActiveHintForTests } from "../engine/hints.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => {
  unsafeActiveHintForTests.none = false;
});

const KEYS = 1_500;
const BATCH = 100;
const SEGMENT_BYTES = 32 * 1024;

/** The value written last to key `i` (`round` 0, then 1 for every third key). */
function valueOf(i: number, round: number): Uint8Array {
  return new Uint8Array(64).fill((i * 7 + round * 13) & 0xff);
}

/** Writes every key, then every third again, in batches of BATCH; closes. */
async function load(dir: string, options: OpenOptions): Promise<void> {
  const s = await Store.open(dir, options);
  for (const round of [0, 1]) {
    for (let from = 0; from < KEYS; from += BATCH) {
      const ops = [];
      for (let i = from; i < from + BATCH; i++) if (round === 0 || i % 3 === 0) ops.push({ op: "write" as const, key: `k${i}`, value: valueOf(i, round) });
      if (ops.length > 0) await s.batch(ops);
    }
  }
  await s.close();
}

/** Opens `dir`, checks every key's latest value, closes; returns what the open reported. */
async function reopenAndCheck(dir: string, options: OpenOptions): Promise<{ hinted: number; segments: number }> {
  const s = await Store.open(dir, options);
  const opened = { hinted: s.opened.hinted, segments: s.opened.segments };
  for (let i = 0; i < KEYS; i++) {
    const got = s.readSync(`k${i}`);
    expect(got.status === "OK" ? got.value : undefined, `k${i}`).toEqual(valueOf(i, i % 3 === 0 ? 1 : 0));
  }
  await s.close();
  return opened;
}

/** The `.hint` files in the store's segments directory. */
function hintFiles(dir: string): string[] {
  return fs.readdirSync(path.join(dir, "segments")).filter((f) => f.endsWith(".hint"));
}

describe("unsafeActiveHintForTests.none", () => {
  for (const durability of ["none", "sync"] as const) {
    const options: OpenOptions = { durability, segmentBytes: SEGMENT_BYTES, compaction: { auto: false } };

    it(`leaves no hint and loses nothing (${durability})`, async () => {
      const dir = tempDir("nohint");
      unsafeActiveHintForTests.none = true;
      await load(dir, options);
      unsafeActiveHintForTests.none = false;
      expect(hintFiles(dir)).toEqual([]);
      const first = await reopenAndCheck(dir, options);
      expect(first.segments).toBeGreaterThan(3);
      expect(first.hinted).toBe(0);
      const second = await reopenAndCheck(dir, options);
      expect(second.hinted).toBeGreaterThanOrEqual(first.segments - 1); // the first reopen hinted what it scanned and sealed
    });

    it(`control: with the switch unset every segment has its hint (${durability})`, async () => {
      const dir = tempDir("hint");
      await load(dir, options);
      const segments = fs.readdirSync(path.join(dir, "segments")).filter((f) => f.endsWith(".seg"));
      expect(hintFiles(dir).length).toBe(segments.length);
      const first = await reopenAndCheck(dir, options);
      expect(first.hinted).toBe(first.segments);
    });
  }
});
