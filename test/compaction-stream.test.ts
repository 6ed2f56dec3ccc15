/**
 * A copy-on-write compaction writes its output piece by piece as it copies (engine/compaction-core.ts
 * OutputFile, compact-14): each source piece's compacted survivors go to the .tmp file at once
 * and are read back and compared there, and the output's hint is packed from each record as it
 * is written (segments/hint-v3.ts RunPacker, seventeenth session) from the plan's prediction of
 * the records' lowest sequence (SourceTask.minSeq) — checked at the end, a missed one sending the
 * hint the long way: packed from the output's records read back from the file. The output must be
 * exactly what assembling it whole gave: the same data, and the same hint file.
 *
 * Method: first, seeded mixes of PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records (test/helpers/
 * laid-out.ts: several scopes, long and non-ASCII keys, erase lists of up to 90 bytes, gaps) in
 * both record frames: a RunPacker fed them with the right prediction must give, byte for byte,
 * HintBuilder.ofRecords' file, and with a prediction one off either way must give nothing. Then
 * real stores, inline (workers 0, so the test switches and counters reach the compaction code)
 * and with a worker: writes over three scopes, forgets, a scope erasure (its SCOPE_ERASE record
 * survives, list and all), a copy-on-write compact() of every segment with garbage, in 16 KiB
 * segments and with 4 KiB pieces (records straddle pieces). Every output's hint file must equal
 * the hint packed from that output's whole records read back from disk (walkSealed), and every
 * key must read back after a reopen from those hints — with the prediction held (the streamed
 * packing ran), in the 48-byte record frame too, with every prediction made wrong
 * (`unsafeStreamedHintForTests.mispredictBy`: the long way ran), and with version-2 hints written. The twin makes the predictions wrong and
 * trusts them (`unchecked`): the outputs' hints then differ. The same for in-place rewrites,
 * whose hint is packed in one pass from the compacted bytes (hintOfRewrite, eighteenth session):
 * predictions held (every rewrite packed in one pass), all wrong (two passes), and the twin.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { hintPackings, unsafePiecesForTests, unsafeStreamedHintForTests } from "../engine/compaction-core.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { HintBuilder, hintFileName, setHintVersionWritten } from "../segments/hint.js";
import { RunPacker, runTotals } from "../segments/hint-v3.js";
import { readHeader } from "../segments/header-io.js";
import { walkSealed } from "../segments/scan.js";
import { recordLengthAt } from "../segments/record.js";
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
  unsafeStreamedHintForTests.mispredictBy = 0;
  unsafeStreamedHintForTests.unchecked = false;
  unsafePiecesForTests.pieceBytes = 0;
  setFormatVersionWritten(C.FORMAT_VERSION as 3);
  setHintVersionWritten(3);
});

/**
 * The hint of the records laid out by `seed`, packed by a RunPacker that predicts their lowest
 * sequence `off` above the true one (`trust`: its check skipped), against ofRecords' file.
 */
function bothHints(seed: number, n: number, version: 2 | 3, off = 0, trust = false): { streamed: Buffer | null; whole: Buffer | null } {
  setFormatVersionWritten(version);
  const { rec, offsets, end } = laidOut(seed, n, 100);
  const header = headerAt(end, version);
  const whole = HintBuilder.ofRecords({ rec, offsets, base: C.DATA_START }, 9, header, end, true);
  const lean = isLeanFrame(version);
  const totals = runTotals({ rec, offsets, base: C.DATA_START, lean });
  expect(totals).not.toBeNull();
  const packer = new RunPacker((totals?.minSeq ?? 0) + off, lean, 64, 4);
  for (const offset of offsets) {
    const length = packer.add(rec, offset - C.DATA_START, offset);
    expect(length).toBe(recordLengthAt(rec, offset - C.DATA_START, version)); // what OutputFile steps by
  }
  expect(packer.records).toBe(offsets.length);
  const run = packer.finish(trust);
  const streamed = run === null ? null : HintBuilder.ofPacked(run.totals, run.packed, 9, header, end, true);
  return { streamed, whole };
}

describe("a hint packed record by record as a copy writes them equals ofRecords' file", () => {
  for (const version of [3, 2] as const) {
    for (const [seed, n] of [[1, 1], [2, 40], [3, 3000]] as const) {
      it(`format ${version}, ${n} records (seed ${seed}): the same file, byte for byte; a prediction one off either way gives none`, () => {
        const { streamed, whole } = bothHints(seed, n, version);
        expect(whole).not.toBeNull();
        expect(Buffer.compare(streamed as Buffer, whole as Buffer)).toBe(0);
        expect(bothHints(seed, n, version, -1).streamed).toBeNull();
        expect(bothHints(seed, n, version, 1).streamed).toBeNull();
      });
    }
  }

  it("twin: a prediction one below, trusted, gives another file", () => {
    const { streamed, whole } = bothHints(3, 3000, 3, -1, true);
    expect(streamed).not.toBeNull();
    expect(Buffer.compare(streamed as Buffer, whole as Buffer)).not.toBe(0);
  });
});

const KEYS = 900;
/** Keys written before and after the scope erasure. */
const PADS = 40;

type Mode = "copy-on-write" | "in-place";

/** A store of this test: 16 KiB segments, no automatic compaction. */
function optsOf(workers: number, mode: Mode = "copy-on-write"): OpenOptions {
  return { durability: "none", segmentBytes: 16 * 1024, compaction: { mode, workers, auto: false } };
}

/** The value of key i. */
const valueOf = (i: number): string => `v${i}-`.padEnd(60 + (i % 90), "z");

/**
 * Writes KEYS keys over three scopes, erases the third scope between two versions of PADS keys,
 * forgets every third key of the first two scopes, compacts (copy-on-write by default) and
 * closes; returns the directory and the outputs' ids (in place: the segments rewritten).
 */
async function compacted(workers: number, label: string, mode: Mode = "copy-on-write"): Promise<{ dir: string; outputs: number[] }> {
  const dir = tempDir(label);
  const s = await Store.open(dir, optsOf(workers, mode));
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
  const report = await within(T, s.compact({ mode }), "compact");
  const rewritten = new Set(report.segments);
  // Copy-on-write: the new sealed segments (not the new active one); in place: those rewritten and not emptied.
  const outputs = (await s.stats()).segments.filter((x) => x.sealed && (mode === "in-place" ? rewritten.has(x.id) : !before.has(x.id))).map((x) => x.id);
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
      const before = { ...hintPackings };
      const { dir, outputs } = await compacted(workers, `compaction-stream-${workers}`);
      expect(outputs.length).toBeGreaterThan(0);
      if (workers === 0) expect(hintPackings.streamed - before.streamed).toBe(outputs.length); // every prediction held
      expect(differingHints(dir, outputs)).toEqual([]);
      expect(await wrongAfterReopen(dir, workers)).toBe(0);
    });
  }

  it("inline, every prediction wrong: every output's hint is packed from its file, and equals its whole records' hint", async () => {
    unsafeStreamedHintForTests.mispredictBy = 1;
    const before = { ...hintPackings };
    const { dir, outputs } = await compacted(0, "compaction-stream-mispredict");
    expect(hintPackings.fromFile - before.fromFile).toBe(outputs.length);
    expect(hintPackings.streamed - before.streamed).toBe(0);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 0)).toBe(0);
  });

  it("inline, records in the 48-byte frame (format 2 written): every output streamed, equal to its whole records' hint", async () => {
    setFormatVersionWritten(2);
    unsafePiecesForTests.pieceBytes = 4096;
    const before = { ...hintPackings };
    const { dir, outputs } = await compacted(0, "compaction-stream-format2");
    expect(outputs.length).toBeGreaterThan(0);
    expect(hintPackings.streamed - before.streamed).toBe(outputs.length);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 0)).toBe(0);
  });

  it("inline, version-2 hints written: packed from the file, equal to the whole records' hint", async () => {
    setHintVersionWritten(2);
    const before = { ...hintPackings };
    const { dir, outputs } = await compacted(0, "compaction-stream-v2");
    expect(hintPackings.fromFile - before.fromFile).toBe(outputs.length);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 0)).toBe(0);
  });

  it("twin (inline): wrong predictions trusted write hints that differ", async () => {
    unsafeStreamedHintForTests.mispredictBy = 1;
    unsafeStreamedHintForTests.unchecked = true;
    const { dir, outputs } = await compacted(0, "compaction-stream-twin");
    expect(differingHints(dir, outputs).length).toBe(outputs.length);
  });
});

describe("an in-place rewrite's hint packed in one pass is the one two passes gave", () => {
  it("inline, every prediction held: every rewritten segment's hint packed in one pass, equal to its whole records' hint", async () => {
    const before = { ...hintPackings };
    const { dir, outputs } = await compacted(0, "compaction-stream-inplace", "in-place");
    expect(outputs.length).toBeGreaterThan(2);
    expect(hintPackings.onePass - before.onePass).toBe(outputs.length);
    expect(hintPackings.twoPass - before.twoPass).toBe(0);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 0)).toBe(0);
  });

  it("with a worker: every rewritten segment's hint equals its whole records' hint", async () => {
    const { dir, outputs } = await compacted(1, "compaction-stream-inplace-worker", "in-place");
    expect(outputs.length).toBeGreaterThan(2);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 1)).toBe(0);
  });

  it("inline, every prediction wrong: every hint packed in two passes, equal to its whole records' hint", async () => {
    unsafeStreamedHintForTests.mispredictBy = 1;
    const before = { ...hintPackings };
    const { dir, outputs } = await compacted(0, "compaction-stream-inplace-mispredict", "in-place");
    expect(hintPackings.twoPass - before.twoPass).toBe(outputs.length);
    expect(hintPackings.onePass - before.onePass).toBe(0);
    expect(differingHints(dir, outputs)).toEqual([]);
    expect(await wrongAfterReopen(dir, 0)).toBe(0);
  });

  it("twin (inline): wrong predictions trusted write hints that differ", async () => {
    unsafeStreamedHintForTests.mispredictBy = 1;
    unsafeStreamedHintForTests.unchecked = true;
    const { dir, outputs } = await compacted(0, "compaction-stream-inplace-twin", "in-place");
    expect(outputs.length).toBeGreaterThan(2);
    expect(differingHints(dir, outputs).length).toBe(outputs.length);
  });
});
