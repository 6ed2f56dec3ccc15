/**
 * Group framing (format 2, issue 9 defect 4): an unacknowledged commit group is cut as a unit,
 * whatever subset of its pages reached the disk, while damage to a group proven durable is still
 * CORRUPTION.
 *
 * Method: a real store in `sync` mode writes acknowledged groups, then 100 writes issued in one
 * turn, which the commit log writes as ONE group (one writev + one fdatasync; the test checks the
 * frame count). The directory is copied while the store is still open — the bytes a crash right
 * after that fdatasync leaves, without close()'s sync mark — and a power cut is simulated on the
 * copy by zeroing pages of the last group (the kernel does not order page writeback inside one
 * fdatasync): the first page only (the reproduction), and seeded random subsets of its
 * pages. The copy must open with exactly the groups before it. The protection-off twin runs the
 * format-1 record-by-record rule over the same bytes and must refuse them ("zero length followed
 * by valid records", the old behaviour). Damage to a group that a later frame (or close()'s sync
 * mark) proves durable must stay CORRUPTION. Format-1 stores still open; unknown versions are
 * refused with NOT_SUPPORTED.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { CorruptionError } from "../src/errors.js";
import * as C from "../segments/constants.js";
import { checksum64, initChecksum } from "../segments/checksum.js";
import { encodeHeader } from "../segments/header.js";
import { encodeRecord } from "../segments/record.js";
import { readGroupFrame } from "../segments/group.js";
import { scanRecords } from "../segments/scan.js";
import { segmentFileName } from "../segments/file-names.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";
import { dropHints } from "./helpers/hints.js";
import { setFormatVersionWritten as pinFormat } from "../segments/version-written.js";
import { afterAll as afterAllPinned, beforeAll as beforeAllPinned } from "vitest";

// These tests pin the 48-byte record frame (format 2, still read): the version-3 frame has its own (format-record-v3.test.ts).
beforeAllPinned(() => pinFormat(2));
afterAllPinned(() => pinFormat(3));

const PAGE = 4096;
const OPTS = { durability: "sync" as const, segmentBytes: 1 << 20, compaction: { workers: 0, auto: false } };

function segFiles(dir: string): string[] {
  const d = path.join(dir, "segments");
  return fs.readdirSync(d).filter((n) => /^\d{8}\.seg$/.test(n)).sort().map((n) => path.join(d, n));
}

function copyDir(src: string): string {
  const dst = tempDir("frame-copy");
  fs.cpSync(src, dst, { recursive: true });
  fs.rmSync(path.join(dst, "LOCK"), { force: true });
  return dst;
}

/** Offsets of every valid group frame of an unsealed segment, walked from DATA_START. */
function groupsOf(bytes: Uint8Array): Array<{ at: number; end: number }> {
  const out: Array<{ at: number; end: number }> = [];
  for (let at = C.DATA_START; at < bytes.length; ) {
    const f = readGroupFrame(bytes, at, bytes.length);
    if (typeof f === "string") break;
    out.push({ at, end: f.bodyEnd });
    at = f.bodyEnd;
  }
  return out;
}

function zeroRange(file: string, from: number, to: number): void {
  const fd = fs.openSync(file, "r+");
  fs.writeSync(fd, Buffer.alloc(to - from), 0, to - from, from);
  fs.closeSync(fd);
}


/** A store with 20 acknowledged single-write groups, then one acknowledged group of 100 writes; copied open. */
async function crashImage(): Promise<{ image: string; file: string; last: { at: number; end: number }; before: number }> {
  const dir = tempDir("frame");
  const store = await Engram.open(dir, OPTS);
  for (let i = 0; i < 20; i++) await store.write(`base${i}`, `base-value-${i}`);
  await Promise.all(Array.from({ length: 100 }, (_, i) => store.write(`g${i}`, `group-value-${i}-${"x".repeat(200)}`)));
  const image = copyDir(dir); // what a crash right after the group's fdatasync leaves (no sync mark)
  await store.close();
  const file = segFiles(image).at(-1) as string;
  const groups = groupsOf(fs.readFileSync(file));
  expect(groups.length).toBe(21); // 20 single writes + the 100-write group: one frame each
  const last = groups[20] as { at: number; end: number };
  expect(last.end - last.at).toBeGreaterThan(3 * PAGE); // the group spans several pages
  return { image, file, last, before: 20 };
}

async function expectExactlyBase(dir: string, groupKept: boolean): Promise<void> {
  const store = await Engram.open(dir, OPTS);
  try {
    for (let i = 0; i < 20; i++) expect(await store.read(`base${i}`)).toMatchObject({ status: "OK", value: `base-value-${i}` });
    for (let i = 0; i < 100; i++) {
      const got = await store.read(`g${i}`);
      if (groupKept) expect(got).toMatchObject({ status: "OK" });
      else expect(got).toEqual({ status: "NOT_FOUND" });
    }
    expect((await store.verify()).ok).toBe(true);
    // The store stays writable and the cut stays cut after another reopen.
    await store.write("after", "cut");
  } finally {
    await store.close();
  }
  const again = await Engram.open(dir, OPTS);
  expect(await again.read("after")).toMatchObject({ status: "OK", value: "cut" });
  expect(await again.read("g50")).toMatchObject({ status: groupKept ? "OK" : "NOT_FOUND" });
  await again.close();
}

describe("a torn unacknowledged group is cut as a unit", () => {
  it("the issue's reproduction: the first page of a 100-write group zeroed opens with exactly the groups before it", async () => {
    await initChecksum();
    const { image, file, last } = await crashImage();
    const firstPageEnd = (Math.floor(last.at / PAGE) + 1) * PAGE;
    zeroRange(file, last.at, firstPageEnd);
    // Protection off: the format-1 record-by-record rule refuses these bytes, as the old code did.
    const bytes = fs.readFileSync(file);
    expect(() => scanRecords(bytes, 1, false, () => undefined, false, 1)).toThrow(/zero length followed by valid records/);
    // Format 2: a torn tail at the group's frame.
    const end = scanRecords(bytes, 1, false, () => undefined, false, 2);
    expect(end.torn?.offset).toBe(last.at);
    await expectExactlyBase(image, false);
  });

  it("any subset of the group's pages lost (seeded): opens with the prefix, the whole group only when every page arrived", async () => {
    await initChecksum();
    const rounds = Number(process.env.ENGRAM_FRAME_ROUNDS ?? 12);
    const seed = Number(process.env.ENGRAM_FRAME_SEED ?? 20261201);
    const { image, file, last } = await crashImage();
    const random = rng(seed);
    let cuts = 0;
    for (let round = 0; round < rounds; round++) {
      const dir = copyDir(image);
      const f = path.join(dir, "segments", path.basename(file));
      let lost = 0;
      for (let page = Math.floor(last.at / PAGE) * PAGE; page < last.end; page += PAGE) {
        if (random() < 0.4) {
          zeroRange(f, Math.max(page, last.at), Math.min(page + PAGE, last.end));
          lost += 1;
        }
      }
      await expectExactlyBase(dir, lost === 0);
      if (lost > 0) cuts += 1;
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(cuts, `seed ${seed}`).toBeGreaterThan(0);
  });

  it("batch mode: several unsynced groups torn in any order open at the first damaged group", async () => {
    await initChecksum();
    const dir = tempDir("frame-batch");
    const store = await Engram.open(dir, { ...OPTS, durability: "batch", syncIntervalMs: 60_000 });
    await store.write("durable", "yes");
    await store.flush();
    for (let i = 0; i < 10; i++) await store.write(`u${i}`, `unsynced-${i}-${"y".repeat(500)}`);
    const image = copyDir(dir);
    await store.close();
    const file = segFiles(image).at(-1) as string;
    const groups = groupsOf(fs.readFileSync(file));
    expect(groups.length).toBe(11);
    const third = groups[3] as { at: number; end: number };
    zeroRange(file, third.at, third.at + 8); // group u2 lost its frame; u3..u9 reached the disk whole
    const reopened = await Engram.open(image, OPTS);
    expect(await reopened.read("durable")).toMatchObject({ status: "OK", value: "yes" });
    expect(await reopened.read("u1")).toMatchObject({ status: "OK" });
    for (const k of ["u2", "u3", "u9"]) expect(await reopened.read(k)).toEqual({ status: "NOT_FOUND" });
    await reopened.close();
  });
});

describe("damage to a group proven durable is corruption", () => {
  it("a group followed by a frame written after it was synced: CORRUPTION at that group", async () => {
    await initChecksum();
    const { image, file } = await crashImage();
    const groups = groupsOf(fs.readFileSync(file));
    const victim = groups[5] as { at: number; end: number };
    zeroRange(file, victim.at, victim.at + 16);
    const err = await Engram.open(image, OPTS).then(
      async (s) => {
        await s.close();
        return null;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CorruptionError);
    expect((err as CorruptionError).offset).toBe(victim.at);
  });

  it("close() writes a sync mark: damage to the last data group after a clean close is CORRUPTION; without the mark it is a torn tail", async () => {
    await initChecksum();
    const dir = tempDir("frame-mark");
    // Nothing synced before close (a `none`-mode close syncs nothing at all: it stamps its hint instead, test/boot-stamp.test.ts).
    const store = await Engram.open(dir, { ...OPTS, durability: "batch", syncIntervalMs: 60_000 });
    for (let i = 0; i < 5; i++) await store.write(`m${i}`, `mark-${i}`);
    const noMark = copyDir(dir);
    await store.close();
    const file = segFiles(dir).at(-1) as string;
    const groups = groupsOf(fs.readFileSync(file));
    expect(groups.length).toBe(6); // five writes and the sync mark
    const lastData = groups[4] as { at: number; end: number };
    const flip = (f: string): void => {
      const fd = fs.openSync(f, "r+");
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, lastData.end - 3);
      b[0] = (b[0] as number) ^ 0x10;
      fs.writeSync(fd, b, 0, 1, lastData.end - 3);
      fs.closeSync(fd);
    };
    flip(file);
    dropHints(dir); // the close's prefix hint would skip the damaged bytes: this is the scan's rule
    const err = (await Engram.open(dir, OPTS).then(() => null, (e: unknown) => e)) as CorruptionError;
    expect(err).toBeInstanceOf(CorruptionError);
    expect(err.offset).toBe(lastData.at + 70); // the damaged record, just past its group's frame
    // Twin: the same flip without the mark (a crash before close, durability "none") is an
    // unsynced tail: cut, the four groups before it intact.
    flip(path.join(noMark, "segments", path.basename(file)));
    const s = await Engram.open(noMark, OPTS);
    expect(await s.read("m3")).toMatchObject({ status: "OK", value: "mark-3" });
    expect(await s.read("m4")).toEqual({ status: "NOT_FOUND" });
    await s.close();
  });
});

/** A header copy as format version `version` wrote it (checksum recomputed). */
function headerAs(version: number, h: Parameters<typeof encodeHeader>[0]): Buffer {
  const b = Buffer.from(encodeHeader(h));
  b.writeUInt16LE(version, C.H_VERSION);
  b.writeBigUInt64LE(checksum64(b, 0, C.H_CHECKSUM), C.H_CHECKSUM);
  return b;
}

/** Writes a format-1 segment file by hand: both header copies, records back to back, preallocated zeros. */
function writeFormat1Segment(dir: string, id: number, records: Buffer[], sealed: boolean, createdSeq: number): void {
  const body = Buffer.concat(records);
  const end = C.DATA_START + body.length;
  const seqs = records.map((r) => Number(r.readBigUInt64LE(C.R_SEQ)));
  const h = headerAs(1, {
    segmentId: id, generation: 0, headerSeq: 0, flags: sealed ? C.FLAG_SEALED : 0, createdSeq,
    minSeq: sealed ? Math.min(...seqs) : 0, maxSeq: sealed ? Math.max(...seqs) : 0, replacesId: 0, sealedBytes: sealed ? end : 0,
  });
  const file = Buffer.alloc(sealed ? end : end + 8192);
  h.copy(file, C.HEADER_A_OFFSET);
  h.copy(file, C.HEADER_B_OFFSET);
  body.copy(file, C.DATA_START);
  fs.mkdirSync(path.join(dir, "segments"), { recursive: true });
  fs.writeFileSync(path.join(dir, "segments", segmentFileName(id)), file, { mode: 0o600 });
}

describe("format versions", () => {
  it("a format-1 store (old layout bytes) opens: records read back, its unsealed segment is sealed, a torn tail is cut, new writes are framed", async () => {
    await initChecksum();
    const dir = tempDir("format1");
    const put = (seq: number, key: string, value: string): Buffer => encodeRecord({ type: C.RecordType.PUT, seq, generation: 0, scope: "global", key, value });
    writeFormat1Segment(dir, 1, [put(1, "a", "alpha"), put(2, "b", "beta"), encodeRecord({ type: C.RecordType.TOMBSTONE, seq: 3, generation: 0, expiresAt: 2, scope: "global", key: "b" })], true, 0);
    const torn = put(6, "d", "delta-torn").subarray(0, 30); // the old format's torn last append
    writeFormat1Segment(dir, 2, [put(4, "c", "gamma"), put(5, "a", "alpha-2"), torn], false, 3);
    const store = await Engram.open(dir, OPTS);
    expect(await store.read("a")).toMatchObject({ status: "OK", value: "alpha-2", version: 5 });
    expect(await store.read("b")).toEqual({ status: "NOT_FOUND" });
    expect(await store.read("c")).toMatchObject({ status: "OK", value: "gamma" });
    expect(await store.read("d")).toEqual({ status: "NOT_FOUND" });
    const w = await store.write("e", "epsilon");
    expect(w.version).toBeGreaterThan(5);
    await store.close();
    const files = segFiles(dir);
    expect(files.length).toBe(3); // the format-1 unsealed segment was sealed; appends went to a new one
    const seg2 = fs.readFileSync(files[1] as string);
    expect(seg2.readUInt16LE(C.H_FLAGS) & C.FLAG_SEALED || seg2.readUInt16LE(C.HEADER_B_OFFSET + C.H_FLAGS) & C.FLAG_SEALED).toBeTruthy();
    expect(groupsOf(fs.readFileSync(files[2] as string)).length).toBeGreaterThan(0);
    const again = await Engram.open(dir, OPTS);
    expect(await again.read("e")).toMatchObject({ status: "OK", value: "epsilon", version: w.version });
    expect(await again.read("a")).toMatchObject({ status: "OK", value: "alpha-2" });
    expect((await again.verify()).ok).toBe(true);
    await again.close();
  });

  it("a segment of an unknown (newer) format version is refused with NOT_SUPPORTED naming the version, and nothing is changed", async () => {
    await initChecksum();
    const dir = tempDir("format4");
    const h = headerAs(4, { segmentId: 1, generation: 0, headerSeq: 0, flags: 0, createdSeq: 0, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 });
    const file = Buffer.alloc(C.DATA_START + 4096);
    h.copy(file, 0);
    h.copy(file, 64);
    fs.mkdirSync(path.join(dir, "segments"), { recursive: true });
    const p = path.join(dir, "segments", segmentFileName(1));
    fs.writeFileSync(p, file);
    await expect(Engram.open(dir, OPTS)).rejects.toMatchObject({ code: "NOT_SUPPORTED", message: expect.stringMatching(/format version 4/) });
    expect(fs.readFileSync(p).equals(file)).toBe(true);
    expect(fs.readdirSync(path.join(dir, "segments"))).toEqual([segmentFileName(1)]);
  });
});
