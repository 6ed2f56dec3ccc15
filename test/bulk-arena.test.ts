/**
 * A batch's arena starts with a chunk the size of the host's last batch (branch bulk-9,
 * engine/batch-plan.ts `lastBatchBytes`, segments/record.ts `RecordArena(defersSums, firstBytes)`):
 * a batch like the one before lies in one chunk, one run to hash, note and write, instead of
 * seven doubling ones. Only the chunking may follow from it, never a byte. Method: (1) the same
 * seeded batches (sizes growing and shrinking, values from empty to past the largest chunk)
 * through two real stores, one sized (the default) and one whose every batch starts at the
 * smallest chunk (`forgetBatchBytes`, the general path): every file of the two directories is the
 * same byte for byte, while the sized store's plans take fewer runs (so the two paths did differ).
 * Twin: the same comparison finds one value byte changed in one batch. (2) A unit: records encoded
 * into arenas of any first size are the same bytes, and the first size is held within the bounds.
 * (3) Two per-record checks build their message only on failure now (a slot per new name,
 * keydir.ts createAbsent; a hint entry per record, hint.ts addLean): each still fails loudly, and
 * passes on the good input (the pair).
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as C from "../segments/constants.js";
import { initChecksum, writeRecordSums } from "../segments/checksum.js";
import { arenaChunks, encodeNamedInto, RecordArena, RECORD_ARENA_CHUNK_BYTES_MAX, RECORD_ARENA_CHUNK_BYTES_MIN } from "../segments/record.js";
import { forgetBatchBytes } from "../engine/batch-plan.js";
import { Keydir } from "../engine/keydir.js";
import { HintBuilder } from "../segments/hint.js";
import { encodeRecord } from "../segments/record.js";
import { InternalError } from "../rules/errors.js";
import { Store } from "../engine/store.js";
import type * as T from "../rules/types.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";
import { differing, filesOf } from "./helpers/dir-bytes.js";

beforeAll(async () => {
  await initChecksum();
});

/** Seeded batches: ops per batch growing then shrinking, values 0 B to 1.5 MiB (past the largest chunk), some forgets. */
function seededBatches(seed: number): T.BatchOp[][] {
  const next = rng(seed);
  const counts = [1, 3, 40, 400, 1000, 1000, 60, 1000, 2, 700, 1000, 5];
  return counts.map((count, b) =>
    Array.from({ length: count }, (_, i): T.BatchOp => {
      const key = `k${Math.floor(next() * 3000)}`;
      if (b > 2 && next() < 0.1) return { op: "forget", key };
      const size = next() < 0.003 ? 1_500_000 : Math.floor(next() * 600);
      return { op: "write", key, value: new Uint8Array(size).fill((b * 31 + i) & 0xff), scope: next() < 0.3 ? "user:a" : "global" };
    }),
  );
}

/** Runs `batches` through a store in `dir` (the general path when `unsized`); returns the record pieces each committed batch took. */
async function load(dir: string, batches: readonly T.BatchOp[][], unsized: boolean, change?: { batch: number; op: number }): Promise<number[]> {
  const s = await Store.open(dir, { durability: "none", clock: () => 1_700_000_000_000, compaction: { workers: 0, auto: false } });
  const pieces: number[] = [];
  const log = s.log as unknown as { appendWith(op: { records: Buffer[] }, value: unknown): Promise<unknown> };
  const append = log.appendWith.bind(log);
  log.appendWith = (op, value) => {
    pieces.push(op.records.length);
    return append(op, value);
  };
  for (let b = 0; b < batches.length; b++) {
    if (unsized) forgetBatchBytes(s);
    arenaChunks.clear(); // every chunk fresh and of the size asked: the pieces count the sizing alone (arena-recycle.test.ts: the pool)
    const ops = (batches[b] as T.BatchOp[]).map((op, i) => (change?.batch === b && change.op === i && op.op === "write" ? { ...op, value: Uint8Array.from(op.value as Uint8Array, (x, j) => (j === 0 ? x ^ 1 : x)) } : op));
    await s.batch(ops);
  }
  await s.close();
  return pieces;
}

describe("a batch's arena sized from the last batch", () => {
  it("writes the general path's bytes, file for file, in fewer runs", async () => {
    for (const seed of [3, 17]) {
      const batches = seededBatches(seed);
      const sizedDir = tempDir("bulk-arena-sized");
      const generalDir = tempDir("bulk-arena-general");
      const sized = await load(sizedDir, batches, false);
      const general = await load(generalDir, batches, true);
      const a = filesOf(sizedDir);
      const b = filesOf(generalDir);
      expect(a.size).toBeGreaterThan(1); // a segment and its hint at least
      expect(differing(a, b)).toEqual([]);
      // The paths differed: the general path took more pieces (its arenas doubled through chunks).
      expect(sized.length).toBe(general.length);
      expect(sized.reduce((x, y) => x + y, 0)).toBeLessThan(general.reduce((x, y) => x + y, 0));
    }
  });

  it("twin: the comparison finds one value byte changed in one batch", async () => {
    const batches = seededBatches(5);
    const sizedDir = tempDir("bulk-arena-twin-a");
    const generalDir = tempDir("bulk-arena-twin-b");
    await load(sizedDir, batches, false);
    await load(generalDir, batches, true, { batch: 6, op: 10 });
    expect(differing(filesOf(sizedDir), filesOf(generalDir)).length).toBeGreaterThan(0);
  });
});

describe("RecordArena's first chunk", () => {
  it("changes no byte of the records, only where the chunks break", () => {
    const next = rng(11);
    const fields = Array.from({ length: 300 }, (_, i) => ({ seq: 10 + i, key: `key${i}`, value: new Uint8Array(next() < 0.02 ? 1_200_000 : Math.floor(next() * 3000)).fill(i & 0xff) }));
    const encodeAll = (firstBytes: number | undefined): { bytes: Buffer; runs: number } => {
      arenaChunks.clear(); // chunks of exactly the size asked (a kept one may be larger: fewer runs)
      const arena = new RecordArena(true, firstBytes);
      for (const f of fields) encodeNamedInto(arena, C.RecordType.PUT, C.RF_IN_BATCH, f.seq, 1, 0, "global", f.key, f.value, C.VALUE_BYTES_MAX);
      const runs = arena.runs();
      for (const run of runs) writeRecordSums(run);
      return { bytes: Buffer.concat(runs), runs: runs.length };
    };
    const general = encodeAll(undefined);
    for (const first of [0, 1, RECORD_ARENA_CHUNK_BYTES_MIN, 100_000, 700_000, RECORD_ARENA_CHUNK_BYTES_MAX, 1e9]) {
      const got = encodeAll(first);
      expect(got.bytes.equals(general.bytes)).toBe(true);
      expect(got.runs).toBeLessThanOrEqual(general.runs);
    }
    // Twin: a record one sequence off is other bytes.
    const off = new RecordArena(true);
    for (const f of fields) encodeNamedInto(off, C.RecordType.PUT, C.RF_IN_BATCH, f.seq + (f.seq === 200 ? 1 : 0), 1, 0, "global", f.key, f.value, C.VALUE_BYTES_MAX);
    const offRuns = off.runs();
    for (const run of offRuns) writeRecordSums(run);
    expect(Buffer.concat(offRuns).equals(general.bytes)).toBe(false);
  });

  it("is held within the chunk bounds", () => {
    const firstChunk = (firstBytes: number): number => {
      arenaChunks.clear();
      const arena = new RecordArena(true, firstBytes);
      arena.claim(1);
      return arena.current.length;
    };
    expect(firstChunk(0)).toBe(RECORD_ARENA_CHUNK_BYTES_MIN);
    expect(firstChunk(300_000)).toBe(300_000);
    expect(firstChunk(1e12)).toBe(RECORD_ARENA_CHUNK_BYTES_MAX);
  });
});

describe("per-record checks whose message is built only on failure", () => {
  it("createAbsent still refuses a name held, and makes one not held", () => {
    const keydir = new Keydir();
    const made = keydir.createAbsent("global", "a");
    expect(keydir.get("global", "a")).toBe(made);
    expect(() => keydir.createAbsent("global", "a")).toThrow(InternalError);
    expect(() => keydir.createAbsent("global", "a")).toThrow(/\(global, a\) replaced none/);
  });

  it("a format-3 hint still refuses an entry out of file order, and takes them in order", () => {
    const rec = encodeRecord({ type: C.RecordType.PUT, seq: 7, generation: 1, scope: "global", key: "k", value: "v" });
    const hint = new HintBuilder(C.FORMAT_VERSION);
    const first = hint.end; // the segment's data start
    hint.addRecord(rec, 0, first);
    hint.addRecord(rec, 0, first + rec.length);
    expect(hint.count).toBe(2);
    expect(() => hint.addRecord(rec, 0, first)).toThrow(`file order (${first} after ${first + 2 * rec.length})`);
  });
});
