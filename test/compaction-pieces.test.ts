/**
 * compact-13: copy-on-write compaction streams each source in pieces (engine/compaction-core.ts
 * copySource; segments/scan.ts walkSealedPiece) instead of reading it whole. A piece ends wherever
 * its bytes end, so records straddle pieces, and a record larger than a piece must be read whole
 * in a piece of its own; every record must still be walked exactly once, checksummed, and copied
 * or named as the whole-file walk did, and damage must be reported at the same offset.
 *
 * Method: real stores (inline compaction, `workers: 0`, so the test's switch reaches the copy),
 * a seeded workload of values from 1 B to 20 KiB over 16 KiB segments, in the current record
 * frame and in format 2's 48-byte one, a third of the keys
 * forgotten, then one copy-on-write pass with pieces of 1 MiB (each source one piece), 4096 B,
 * 700 B and 64 B (smaller than most records: every record straddles or exceeds its piece). Each
 * store must read back exactly the model, and the stores must agree on every segment's stats.
 * Damage: one byte flipped inside a record in the middle of a sealed segment makes the pass reject
 * with CorruptionError naming the same segment and offset at every piece size. Twin: with the
 * carry of the partial record off (`unsafePiecesForTests.skipPartial`: the next piece starts where
 * the last one ended), the same sound store fails the pass with corruption.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CorruptionError, Engram } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { unsafePiecesForTests } from "../engine/compaction-core.js";
import { setFormatVersionWritten } from "../segments/version-written.js";
import * as C from "../segments/constants.js";
import { chooseHeader, formatOf } from "../segments/header.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";

const OPTS: OpenOptions = { durability: "none", segmentBytes: 16 * 1024, compaction: { workers: 0, auto: false, mode: "copy-on-write" }, retention: { tombstoneRetentionMs: 0 } };
const KEYS = 300;
const PIECES = [1 << 20, 4096, 700, 64];

afterEach(() => {
  unsafePiecesForTests.pieceBytes = 0;
  unsafePiecesForTests.skipPartial = false;
  setFormatVersionWritten(C.FORMAT_VERSION);
});

/** The seeded value of key i: 1 B to 3 KiB, one in twenty 12–20 KiB (larger than most pieces and than a segment's usual record). */
function valueOf(i: number, r: () => number): string {
  const big = r() < 0.05;
  const n = big ? 12_000 + Math.floor(r() * 8_000) : 1 + Math.floor(r() * 3_000);
  return `${i}:`.padEnd(n, String.fromCharCode(97 + (i % 26)));
}

/** Writes the workload into a fresh store and forgets every third key; returns its directory and the model of what must be read. */
async function build(format: 2 | 3 = 3): Promise<{ dir: string; model: Map<string, string> }> {
  setFormatVersionWritten(format); // the store's segments, and so its outputs (records are copied verbatim), in this frame
  const dir = tempDir("pieces-");
  const store = await Engram.open(dir, OPTS);
  const r = rng(1313);
  const model = new Map<string, string>();
  for (let i = 0; i < KEYS; i++) {
    const key = `k${String(i).padStart(4, "0")}`;
    const value = valueOf(i, r);
    await store.write(key, value, { scope: "user:a" });
    model.set(key, value);
  }
  for (let i = 0; i < KEYS; i += 3) {
    const key = `k${String(i).padStart(4, "0")}`;
    await store.forget(key, { scope: "user:a" });
    model.delete(key);
  }
  await store.close();
  setFormatVersionWritten(C.FORMAT_VERSION);
  return { dir, model };
}

/** A copy of the store directory `from` (its files as they are: the store is closed). */
function copyDir(from: string): string {
  const to = tempDir("pieces-copy-");
  fs.cpSync(from, to, { recursive: true });
  return to;
}

/** Opens `dir`, compacts it once with pieces of `pieceBytes`, reads every key; returns what was read and the segments' stats. */
async function compactWith(dir: string, pieceBytes: number, model: Map<string, string>): Promise<{ read: Map<string, string>; segments: string }> {
  unsafePiecesForTests.pieceBytes = pieceBytes;
  const store = await Engram.open(dir, OPTS);
  try {
    const report = await store.compact({ mode: "copy-on-write" });
    expect(report.bytesAfter).toBeLessThan(report.bytesBefore);
    const read = new Map<string, string>();
    for (let i = 0; i < KEYS; i++) {
      const key = `k${String(i).padStart(4, "0")}`;
      const got = await store.read(key, { scope: "user:a" });
      if (got.status === "OK") read.set(key, got.value as string);
    }
    expect(read.size).toBe(model.size);
    const segments = JSON.stringify(store.stats().segments.map((s) => [s.sealed, s.liveBytes]));
    return { read, segments };
  } finally {
    await store.close();
  }
}

/** Flips one byte in the middle of the largest sealed segment file of `dir`, inside its records; returns the file's id. */
function damage(dir: string): number {
  const segDir = path.join(dir, "segments");
  const names = fs.readdirSync(segDir).filter((n) => n.endsWith(".seg"));
  const largest = names.map((n) => ({ n, size: fs.statSync(path.join(segDir, n)).size })).sort((a, b) => b.size - a.size)[0];
  expect(largest).toBeDefined();
  const file = path.join(segDir, (largest as { n: string }).n);
  const bytes = fs.readFileSync(file);
  const at = Math.floor(bytes.length * 0.6);
  bytes[at] = (bytes[at] as number) ^ 0x40;
  fs.writeFileSync(file, bytes);
  return Number.parseInt((largest as { n: string }).n, 10);
}

describe("copy-on-write compaction streamed in pieces", () => {
  it.each([3, 2] as const)("reads back the model and agrees on every segment at pieces of 1 MiB, 4096 B, 700 B and 64 B (format %i frames)", async (format) => {
    const { dir, model } = await build(format);
    const segDir = path.join(dir, "segments");
    const formats = fs.readdirSync(segDir).filter((n) => n.endsWith(".seg")).map((n) => formatOf(chooseHeader(fs.readFileSync(path.join(segDir, n)), Number.parseInt(n, 10))));
    expect(formats.length).toBeGreaterThan(4);
    expect(formats.every((f) => f === format)).toBe(true); // the sources walked in pieces are in the frame asked for
    const results = [];
    for (const pieceBytes of PIECES) results.push(await compactWith(copyDir(dir), pieceBytes, model));
    for (const { read } of results) expect([...read.entries()]).toEqual([...model.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
    for (const { segments } of results) expect(segments).toBe(results[0]?.segments);
  }, 60_000);

  it("reports a flipped byte as corruption of the same segment and offset at every piece size", async () => {
    const { dir } = await build();
    const broken = copyDir(dir);
    const id = damage(broken);
    const seen: string[] = [];
    for (const pieceBytes of PIECES) {
      unsafePiecesForTests.pieceBytes = pieceBytes;
      const store = await Engram.open(copyDir(broken), OPTS);
      try {
        const err: unknown = await store.compact({ mode: "copy-on-write" }).then(() => null, (e: unknown) => e);
        expect(err).toBeInstanceOf(CorruptionError);
        const c = err as CorruptionError;
        expect(c.segment).toBe(id);
        seen.push(`${c.segment}@${c.offset}: ${c.message}`);
      } finally {
        await store.close();
      }
    }
    expect(new Set(seen).size).toBe(1);
  }, 60_000);

  it("twin: without the carry of the partial record, a sound store's pass fails with corruption", async () => {
    const { dir } = await build();
    unsafePiecesForTests.pieceBytes = 700;
    unsafePiecesForTests.skipPartial = true;
    const store = await Engram.open(copyDir(dir), OPTS);
    try {
      const err: unknown = await store.compact({ mode: "copy-on-write" }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(CorruptionError);
    } finally {
      await store.close();
    }
  }, 60_000);
});
