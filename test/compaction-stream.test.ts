/**
 * A copy-on-write compaction writes its output piece by piece as it copies (engine/compaction-core.ts
 * OutputFile, compact-14): each source piece's compacted survivors go to the .tmp file at once
 * and are read back and compared there, and only each record's hint prefix — its frame, names
 * and, for a SCOPE_ERASE, its erase list — is kept for the output's hint, which
 * HintBuilder.ofRecords then packs from those prefixes instead of from the whole records. The
 * output must be exactly what assembling it whole gave: the same data, and the same hint file.
 *
 * Method: first, seeded mixes of PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records (test/helpers/
 * laid-out.ts: several scopes, long and non-ASCII keys, erase lists of up to 90 bytes, gaps) in
 * both record frames: the hint packed
 * from their prefixes (hintPrefixBytes, RecordRun `at`) must equal, byte for byte, the one packed
 * from the whole records. Then real stores, inline (workers 0, so the test switch reaches the
 * compaction code) and with a worker: writes over three scopes, forgets, a scope erasure (its
 * SCOPE_ERASE record survives, list and all), a copy-on-write compact() of every segment with
 * garbage, in 16 KiB segments and with 4 KiB pieces (records straddle pieces). Every output's
 * hint file must equal the hint packed from that output's whole records read back from disk
 * (walkSealed), and every key must read back after a reopen from those hints. The twin leaves the
 * erase lists out of the prefixes (`unsafeHintPrefixForTests.dropEraseLists`): the unit
 * comparison and the output holding the erasure both see another file.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafePiecesForTests } from "../engine/compaction-core.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { HintBuilder, hintFileName } from "../segments/hint.js";
import { hintPrefixBytes, unsafeHintPrefixForTests } from "../segments/hint-v3.js";
import { readHeader } from "../segments/header-io.js";
import { walkSealed } from "../segments/scan.js";
import { segmentFileName } from "../segments/file-names.js";
import { isLeanFrame, setFormatVersionWritten } from "../segments/version-written.js";
import type { HeaderChoice } from "../segments/header.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { headerAt, laidOut, SCOPES } from "./helpers/laid-out.js";
import { within } from "./helpers/io-faults.js";

const T = 30_000;

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeHintPrefixForTests.dropEraseLists = false;
  unsafePiecesForTests.pieceBytes = 0;
  setFormatVersionWritten(C.FORMAT_VERSION as 3);
});

/** The hint prefixes of the records of `rec` at `offsets`, back to back, and where each starts. */
function prefixesOf(rec: Buffer, offsets: Uint32Array, version: 2 | 3): { rec: Buffer; at: Uint32Array } {
  const parts: Buffer[] = [];
  const at = new Uint32Array(offsets.length);
  let to = 0;
  for (let i = 0; i < offsets.length; i++) {
    const from = (offsets[i] as number) - C.DATA_START;
    const n = hintPrefixBytes(rec, from, isLeanFrame(version));
    at[i] = to;
    parts.push(rec.subarray(from, from + n));
    to += n;
  }
  return { rec: Buffer.concat(parts), at };
}

/** The hint of the records laid out in `rec`, packed from their prefixes, against the one packed from the whole records. */
function bothHints(seed: number, n: number, version: 2 | 3): { prefixed: Buffer | null; whole: Buffer | null } {
  setFormatVersionWritten(version);
  const { rec, offsets, end } = laidOut(seed, n, 100);
  const whole = HintBuilder.ofRecords({ rec, offsets, base: C.DATA_START }, 9, headerAt(end, version), end, true);
  const p = prefixesOf(rec, offsets, version);
  const prefixed = HintBuilder.ofRecords({ rec: p.rec, offsets, base: C.DATA_START, at: p.at }, 9, headerAt(end, version), end, true);
  return { prefixed, whole };
}

describe("a hint packed from the records' hint prefixes equals the one packed from the whole records", () => {
  for (const version of [3, 2] as const) {
    for (const [seed, n] of [[1, 1], [2, 40], [3, 3000]] as const) {
      it(`format ${version}, ${n} records (seed ${seed}): the same file, byte for byte`, () => {
        const { prefixed, whole } = bothHints(seed, n, version);
        expect(whole).not.toBeNull();
        expect(Buffer.compare(prefixed as Buffer, whole as Buffer)).toBe(0);
      });
    }
  }

  it("twin: prefixes without the erase lists give another file", () => {
    unsafeHintPrefixForTests.dropEraseLists = true;
    const { prefixed, whole } = bothHints(3, 3000, 3);
    expect(prefixed === null || Buffer.compare(prefixed, whole as Buffer) !== 0).toBe(true);
  });
});

const KEYS = 900;
/** Keys written before and after the scope erasure. */
const PADS = 40;

/** A store of this test: 16 KiB segments, copy-on-write, no automatic compaction. */
function optsOf(workers: number): OpenOptions {
  return { durability: "none", segmentBytes: 16 * 1024, compaction: { mode: "copy-on-write", workers, auto: false } };
}

/** The value of key i. */
const valueOf = (i: number): string => `v${i}-`.padEnd(60 + (i % 90), "z");

/**
 * Writes KEYS keys over three scopes, erases the third scope between two versions of PADS keys,
 * forgets every third key of the first two scopes, compacts (copy-on-write) and closes; returns
 * the directory and the outputs' ids.
 */
async function compacted(workers: number, label: string): Promise<{ dir: string; outputs: number[] }> {
  const dir = tempDir(label);
  const s = await Store.open(dir, optsOf(workers));
  for (let i = 0; i < KEYS; i += 100) {
    const ops = [];
    for (let j = i; j < i + 100; j++) ops.push({ op: "write" as const, scope: SCOPES[j % 3] as string, key: `k${j}`, value: valueOf(j) });
    await within(T, s.batch(ops), "batch");
  }
  // The erasure lands between two versions of the pad keys: the segment holding its record then
  // holds garbage too, so that record is copied into an output, erase list and all.
  const pads = async (version: number): Promise<void> => {
    await within(T, s.batch(Array.from({ length: PADS }, (_, j) => ({ op: "write" as const, key: `pad${j}`, value: `${version}`.repeat(40) }))), "pads");
  };
  await pads(1);
  await within(T, s.forgetScope(SCOPES[2] as string), "forgetScope");
  await pads(2);
  for (let i = 0; i < KEYS; i += 3) if (i % 3 !== 2) await within(T, s.forget(`k${i}`, { scope: SCOPES[i % 3] as string }), "forget");
  const before = new Set((await s.stats()).segments.map((x) => x.id));
  await within(T, s.compact({ mode: "copy-on-write" }), "compact");
  const outputs = (await s.stats()).segments.filter((x) => x.sealed && !before.has(x.id)).map((x) => x.id); // not the new active segment
  await within(T, s.close(), "close");
  return { dir, outputs };
}

/** Each output's hint file against the hint packed from its whole records read back from disk: ids whose files differ (or are missing). */
function differingHints(dir: string, outputs: readonly number[]): number[] {
  const differ: number[] = [];
  for (const id of outputs) {
    const file = path.join(dir, "segments", segmentFileName(id));
    const bytes = fs.readFileSync(file);
    const fd = fs.openSync(file, "r");
    let header: HeaderChoice;
    try {
      header = readHeader(fd, id);
    } finally {
      fs.closeSync(fd);
    }
    const offsets: number[] = [];
    walkSealed(bytes, id, header.version ?? C.FORMAT_VERSION, (offset) => offsets.push(offset));
    const rec = bytes.subarray(C.DATA_START, header.header.sealedBytes);
    const want = HintBuilder.ofRecords({ rec, offsets: Uint32Array.from(offsets), base: C.DATA_START }, id, header, header.header.sealedBytes, true);
    const hintFile = path.join(dir, "segments", hintFileName(id));
    if (want === null || !fs.existsSync(hintFile) || Buffer.compare(fs.readFileSync(hintFile), want) !== 0) differ.push(id);
  }
  return differ;
}

/** Reopens `dir` and counts the keys that do not read back as written (or as erased/forgotten). */
async function wrongAfterReopen(dir: string, workers: number): Promise<number> {
  const s = await Store.open(dir, optsOf(workers));
  let wrong = 0;
  try {
    for (let i = 0; i < KEYS; i++) {
      const scope = SCOPES[i % 3] as string;
      const r = s.readSync(`k${i}`, { scope });
      const gone = i % 3 === 2 || i % 3 === 0;
      if (gone ? r.status !== "NOT_FOUND" : r.status !== "OK" || r.value !== valueOf(i)) wrong += 1;
    }
  } finally {
    await within(T, s.close(), "close");
  }
  return wrong;
}

describe("a streamed copy-on-write output is the one assembling it whole gave", () => {
  for (const workers of [0, 1]) {
    it(`workers ${workers}: every output's hint equals its whole records' hint, and every key reads back after a reopen`, async () => {
      if (workers === 0) unsafePiecesForTests.pieceBytes = 4096; // inline: records straddle pieces
      const { dir, outputs } = await compacted(workers, `compaction-stream-${workers}`);
      expect(outputs.length).toBeGreaterThan(0);
      expect(differingHints(dir, outputs)).toEqual([]);
      expect(await wrongAfterReopen(dir, workers)).toBe(0);
    });
  }

  it("twin (inline): prefixes without the erase lists write a hint that differs for the output holding the erasure", async () => {
    unsafeHintPrefixForTests.dropEraseLists = true;
    const { dir, outputs } = await compacted(0, "compaction-stream-twin");
    expect(differingHints(dir, outputs).length).toBeGreaterThan(0);
  });
});
