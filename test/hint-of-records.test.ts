/**
 * A compaction's output hint is packed straight from the copied records (segments/hint.ts
 * HintBuilder.ofRecords, segments/hint-v3.ts packRecords, compact-8): no version-2 entry per
 * record in between, each keyed entry's slot hash taken while its names are in hand. That is a
 * shortcut that must write exactly what the long way writes — a fresh builder, addRecord of each
 * record, encode.
 *
 * Method: seeded mixes of PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records over several scopes
 * (keys short, long and not ASCII; sequences that fall back; expiries; gaps between records)
 * are laid out in one buffer, and the file ofRecords encodes must equal the long way's byte for
 * byte, from 0 records to several thousand (many entry and index blocks); version 2 written
 * (a test's setHintVersionWritten) takes the long way. Then real stores are compacted in both
 * modes, inline and with a worker, and every key reads back after a reopen that opens every
 * segment from its hint. The twin: packRecords' slot hashes made wrong (unsafeSkewRecordHashes:
 * the scope/key separator left out, inline so the switch reaches the compaction code) — the byte
 * comparison sees a different file; checkHint still accepts it (its sums are of the bytes
 * written), so it is the reopened store that must show it: keys its hints no longer find.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { checkHint, HintBuilder, setHintVersionWritten } from "../segments/hint.js";
import { unsafeSkewRecordHashes } from "../segments/hint-v3.js";
import { setFormatVersionWritten } from "../segments/version-written.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { headerAt, laidOut, SCOPES } from "./helpers/laid-out.js";
import { openState } from "./helpers/recovered-state.js";

/** The long way: a fresh builder, addRecord of every record, encode (records in the frame of format `version`). */
function longWay(rec: Buffer, offsets: Uint32Array, end: number, version: 2 | 3 = C.FORMAT_VERSION as 3): Buffer | null {
  const b = new HintBuilder(version);
  for (const off of offsets) b.addRecord(rec, off - C.DATA_START, off);
  return b.encode(9, headerAt(end, version), end, true);
}

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeSkewRecordHashes(false);
  setHintVersionWritten(3);
  setFormatVersionWritten(C.FORMAT_VERSION as 3);
});

describe("a hint packed straight from records equals the one built record by record", () => {
  // Both record frames: format 3's varint fields (what new segments are written in) and format 2's
  // 48-byte frame (a compaction of an older store's segments keeps their frame).
  for (const version of [3, 2] as const) {
    for (const [seed, n] of [[1, 0], [2, 1], [3, 7], [4, 300], [5, 2500], [6, 9000]] as const) {
      it(`format ${version}, ${n} records (seed ${seed}): the same file, byte for byte, and it checks`, () => {
        setFormatVersionWritten(version);
        const { rec, offsets, end } = laidOut(seed, n, 1000 + seed);
        const want = longWay(rec, offsets, end, version);
        const got = HintBuilder.ofRecords({ rec, offsets, base: C.DATA_START }, 9, headerAt(end, version), end, true);
        expect(want).not.toBeNull();
        expect(got).not.toBeNull();
        expect(Buffer.compare(got as Buffer, want as Buffer)).toBe(0);
        const hint = checkHint(got as Buffer, 9, headerAt(end, version));
        expect(hint?.count).toBe(n);
      });
    }
  }

  it("version 2 written: ofRecords takes the long way", () => {
    setHintVersionWritten(2);
    const { rec, offsets, end } = laidOut(7, 500, 50);
    const got = HintBuilder.ofRecords({ rec, offsets, base: C.DATA_START }, 9, headerAt(end), end, true);
    expect(got?.readUInt8(4)).toBe(2);
    expect(Buffer.compare(got as Buffer, longWay(rec, offsets, end) as Buffer)).toBe(0);
  });

  it("slot hashes without the separator (twin): another file, which checkHint still accepts", () => {
    const { rec, offsets, end } = laidOut(8, 800, 10);
    unsafeSkewRecordHashes(true);
    const got = HintBuilder.ofRecords({ rec, offsets, base: C.DATA_START }, 9, headerAt(end), end, true) as Buffer;
    expect(Buffer.compare(got, longWay(rec, offsets, end) as Buffer)).not.toBe(0);
    expect(checkHint(got, 9, headerAt(end))).not.toBeNull(); // the sums are of the bytes written: only a comparison or a lookup sees it
  });
});

type Mode = "copy-on-write" | "in-place";
const KEYS = 1500;

/** The options of a store of this test: small segments, no automatic compaction. */
function optsOf(mode: Mode, workers: number): OpenOptions {
  return { durability: "none", segmentBytes: 32 * 1024, compaction: { mode, workers, auto: false } };
}

/** Writes KEYS keys over two scopes, forgets every third, compacts, closes; returns the directory. */
async function compacted(mode: Mode, workers: number, label: string): Promise<string> {
  const dir = tempDir(label);
  const s = await Store.open(dir, optsOf(mode, workers));
  for (let i = 0; i < KEYS; i += 100) {
    const ops = [];
    for (let j = i; j < i + 100; j++) ops.push({ op: "write" as const, scope: SCOPES[j % 2] as string, key: `k${j}`, value: `v${j}-`.padEnd(100 + (j % 50), "y") });
    await s.batch(ops);
  }
  for (let i = 0; i < KEYS; i += 3) await s.forget(`k${i}`, { scope: SCOPES[i % 2] as string });
  expect((await s.compact({ mode })).segments.length).toBeGreaterThan(2);
  await s.close();
  return dir;
}

/** Keys of the compacted store that do not read what they should after a reopen. */
async function wrongReads(dir: string, opts: OpenOptions): Promise<number> {
  const s = await Store.open(dir, opts);
  let wrong = 0;
  try {
    for (let i = 0; i < KEYS; i++) {
      const got = s.readSync(`k${i}`, { scope: SCOPES[i % 2] as string });
      const ok = i % 3 === 0 ? got.status === "NOT_FOUND" : got.status === "OK" && Buffer.from(got.value as Uint8Array).toString() === `v${i}-`.padEnd(100 + (i % 50), "y");
      if (!ok) wrong += 1;
    }
  } finally {
    await s.close();
  }
  return wrong;
}

describe("compacted stores open from hints packed from records", () => {
  for (const mode of ["copy-on-write", "in-place"] as const) {
    for (const workers of [0, 1]) {
      it(`${mode}, ${workers === 0 ? "inline" : "worker"}: every segment opens hinted and every key reads back`, async () => {
        const opts = optsOf(mode, workers);
        const dir = await compacted(mode, workers, `hint-records-${mode}-${workers}`);
        const opened = await openState(dir, opts);
        expect(opened.hinted).toBe(opened.segments);
        expect(await wrongReads(dir, opts)).toBe(0);
      }, 60_000);
    }
  }

  it("copy-on-write, inline, slot hashes skewed (twin): the reopened store misses keys", async () => {
    const opts = optsOf("copy-on-write", 0);
    unsafeSkewRecordHashes(true);
    const dir = await compacted("copy-on-write", 0, "hint-records-skew");
    unsafeSkewRecordHashes(false);
    const opened = await openState(dir, opts);
    expect(opened.hinted).toBe(opened.segments); // the skewed hints pass every check at open
    expect(await wrongReads(dir, opts)).toBeGreaterThan(0);
  }, 60_000);
});
