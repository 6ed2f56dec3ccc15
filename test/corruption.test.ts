/**
 * Damaged segment files: bit flips, torn tails and deleted bytes.
 *
 * How it works: a store with 4 KiB segments (so that several segments seal) is filled with
 * ~150-byte values whose content is known, then closed; the test walks the record layout of
 * every DIR/segments/NNNNNNNN.seg itself (records from offset 128, length-prefixed, see
 * docs/FORMAT.md) and damages copies of that pristine directory:
 *   - one bit flipped at every byte of a record inside a sealed segment, and at sampled bytes
 *     of every record of every sealed segment: the reopen must throw CorruptionError (code
 *     CORRUPTION) naming that segment and an offset at or before the flipped byte;
 *   - one bit flipped at every byte of a record in the middle of the active segment (valid
 *     records after it, so it cannot be a torn final append): the same;
 *   - a header copy damaged: the A/B design may recover from the other copy, but then every
 *     value must read back exactly;
 *   - a store opened before the flip: verify() reports the damaged segment and offset, and
 *     reads of the damaged value throw CorruptionError or return the right bytes, never others;
 *   - the active segment truncated (or zeroed) at every byte of its last records, including
 *     inside a batch: the reopen succeeds with exactly the writes whose records end before the
 *     cut (each with its correct value and version), nothing after, batches all-or-none, and
 *     the store is writable and reopens cleanly afterwards;
 *   - bytes deleted from a sealed segment (mid-record, a whole record, its tail): corruption.
 * Whenever a damaged store does open, every key is read and must return its correct value or
 * nothing — never a wrong value ("never returns a wrong value" is checked on every path).
 *
 * Properties stressed: DESIGN.md I2 — recovery yields a prefix of the commit sequence, a torn
 * tail is cut, and corruption anywhere else is reported, never skipped or returned; I1 — an
 * acknowledged write is never silently dropped by recovery.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CorruptionError, Engram } from "../src/index.js";
import type { OpenOptions, Value } from "../src/types.js";
import { tempDir as freshDir } from "./helpers/tmp.js";
import { dropHints } from "./helpers/hints.js";
import { decodeRecord, isRecord } from "../segments/record.js";

const DATA_START = 128;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false } };

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(label = "corrupt"): string {
  const d = freshDir(`${label}`);
  dirs.push(d);
  return d;
}

function copyDir(src: string): string {
  const dst = tempDir("copy");
  fs.cpSync(src, dst, { recursive: true });
  return dst;
}

function segFile(dir: string, id: number): string {
  return path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`);
}

function segmentIds(dir: string): number[] {
  return fs
    .readdirSync(path.join(dir, "segments"))
    .filter((n) => /^\d{8}\.seg$/.test(n))
    .map((n) => Number(n.slice(0, 8)))
    .sort((a, b) => a - b);
}

interface Rec {
  off: number;
  len: number;
  type: number;
  seq: number;
  key: string;
}

/** The records of a segment file, walked by their length prefixes (FORMAT.md); group frames (type 6) left out. */
function recordsOf(file: string): Rec[] {
  return framesAndRecordsOf(file).filter((r) => r.type !== 6);
}

function framesAndRecordsOf(file: string): Rec[] {
  const b = fs.readFileSync(file);
  const out: Rec[] = [];
  let at = DATA_START;
  while (at < b.length) {
    const r = decodeRecord(b, at, b.length, false); // the store writes format 3 (its lean frame)
    if (!isRecord(r)) break;
    out.push({ off: at, len: r.length, type: r.type, seq: r.seq, key: r.key });
    at += r.length;
  }
  return out;
}

/** Every byte of a record's fixed fields, every 4th byte of its payload, and its checksum's last byte. */
function positionsIn(rec: Rec): number[] {
  const out: number[] = [];
  for (let d = 0; d < rec.len; d += d < 40 ? 1 : 4) out.push(rec.off + d);
  out.push(rec.off + rec.len - 1);
  return out;
}

function flipBit(file: string, pos: number, bit = 0): void {
  const fd = fs.openSync(file, "r+");
  try {
    const one = Buffer.alloc(1);
    fs.readSync(fd, one, 0, 1, pos);
    one[0] = (one[0] as number) ^ (1 << bit);
    fs.writeSync(fd, one, 0, 1, pos);
  } finally {
    fs.closeSync(fd);
  }
}

function deleteBytes(file: string, from: number, count: number): void {
  const b = fs.readFileSync(file);
  fs.writeFileSync(file, Buffer.concat([b.subarray(0, from), b.subarray(from + count)]));
}

function same(a: Value, b: Value): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** What was written, in commit order. */
interface Written {
  key: string;
  value: Value;
  version: number;
}

/** The state after a prefix of the writes: key -> last write (or undefined when forgotten). */
function stateOf(writes: Array<Written | { forget: string; seq: number }>): Map<string, Written | undefined> {
  const m = new Map<string, Written | undefined>();
  for (const w of writes) {
    if ("forget" in w) m.set(w.forget, undefined);
    else m.set(w.key, w);
  }
  return m;
}

const value = (i: number): Value => (i % 3 === 0 ? new Uint8Array(Array.from({ length: 120 }, (_, j) => (i * 7 + j) & 0xff)) : `value-${i}-${"abcdefghij".repeat(12)}`);

/**
 * Opens a (possibly damaged) directory. Returns the CorruptionError it threw, or null after
 * checking that every key reads back its right value or NOT_FOUND — never a wrong one. With
 * `exact`, every key must read back exactly (nothing lost either).
 */
async function openAndCheck(dir: string, expected: Map<string, Written | undefined>, exact: boolean): Promise<CorruptionError | null> {
  let store: Engram;
  dropHints(dir); // the damage is for the scan to find: a valid hint would skip the bytes it describes
  try {
    store = await Engram.open(dir, OPTS);
  } catch (err) {
    if (err instanceof CorruptionError) return err;
    throw err;
  }
  try {
    for (const [key, want] of expected) {
      let r;
      try {
        r = await store.read(key);
      } catch (err) {
        if (err instanceof CorruptionError && !exact) continue;
        throw err;
      }
      if (r.status === "NOT_FOUND") {
        if (exact && want !== undefined) throw new Error(`${key}: NOT_FOUND, want version ${want.version}`);
        continue;
      }
      if (want === undefined) throw new Error(`${key}: read ${String(r.value)} (version ${r.version}) of a forgotten key`);
      if (!same(r.value, want.value) || r.version !== want.version) {
        throw new Error(`${key}: WRONG VALUE version ${r.version} ${JSON.stringify(String(r.value).slice(0, 30))}, want version ${want.version}`);
      }
    }
  } finally {
    await store.close();
  }
  return null;
}

function expectCorruption(err: CorruptionError | null, segment: number, atOrBefore: number, what: string): void {
  expect(err, `${what}: reopen must throw CorruptionError`).toBeInstanceOf(CorruptionError);
  const e = err as CorruptionError;
  expect(e.code, what).toBe("CORRUPTION");
  expect(e.segment, `${what}: segment`).toBe(segment);
  expect(e.offset, `${what}: offset ${e.offset}`).toBeGreaterThanOrEqual(0);
  expect(e.offset, `${what}: offset ${e.offset}`).toBeLessThanOrEqual(atOrBefore);
}

describe("bit flips", () => {
  let pristine: string;
  let expected: Map<string, Written | undefined>;
  let sealed: number[];
  let active: number;

  beforeAll(async () => {
    pristine = tempDir("pristine");
    const store = await Engram.open(pristine, OPTS);
    const writes: Written[] = [];
    for (let i = 0; i < 80; i++) {
      const key = `k${String(i).padStart(2, "0")}`;
      const v = value(i);
      writes.push({ key, value: v, version: (await store.write(key, v)).version });
    }
    // A durable close: in `none` durability close() syncs nothing (test/boot-stamp.test.ts), and
    // damage to bytes never synced is a torn tail, not corruption. flush() syncs; close then marks.
    await store.flush();
    await store.close();
    expected = stateOf(writes);
    const ids = segmentIds(pristine);
    active = ids[ids.length - 1] as number;
    sealed = ids.slice(0, -1);
    expect(sealed.length).toBeGreaterThanOrEqual(2);
    expect(recordsOf(segFile(pristine, active)).length).toBeGreaterThanOrEqual(5);
    // The pristine copy opens and reads back exactly.
    expect(await openAndCheck(copyDir(pristine), expected, true)).toBeNull();
  });

  it("every header-field byte and every 4th payload byte of one record in a sealed segment: CorruptionError at that record", async () => {
    const seg = sealed[0] as number;
    const recs = recordsOf(segFile(pristine, seg));
    const rec = recs[Math.floor(recs.length / 2)] as Rec;
    for (const pos of positionsIn(rec)) {
      const dir = copyDir(pristine);
      flipBit(segFile(dir, seg), pos, pos % 8);
      expectCorruption(await openAndCheck(dir, expected, false), seg, pos, `sealed seg ${seg} flip at ${pos} (record at ${rec.off})`);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sampled bytes of every record of every sealed segment: CorruptionError", async () => {
    for (const seg of sealed) {
      const recs = recordsOf(segFile(pristine, seg));
      expect(recs.length).toBeGreaterThan(1);
      for (const [i, rec] of recs.entries()) {
        // length field, type, seq, key, value, checksum: rotate through the fields
        const picks = [0, 4, 16, 45, rec.len - 20, rec.len - 1];
        const pos = rec.off + (picks[i % picks.length] as number);
        const dir = copyDir(pristine);
        flipBit(segFile(dir, seg), pos, (i * 3) % 8);
        expectCorruption(await openAndCheck(dir, expected, false), seg, pos, `sealed seg ${seg} record ${i} flip at ${pos}`);
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it("every header-field byte and every 4th payload byte of a record in the middle of the active segment: CorruptionError, not a torn tail", async () => {
    const recs = recordsOf(segFile(pristine, active));
    const rec = recs[Math.floor(recs.length / 2) - 1] as Rec;
    const failures: string[] = [];
    for (const pos of positionsIn(rec)) {
      const dir = copyDir(pristine);
      flipBit(segFile(dir, active), pos, pos % 8);
      let err: CorruptionError | null;
      try {
        err = await openAndCheck(dir, expected, true);
      } catch (e) {
        failures.push(`flip at ${pos} (record at ${rec.off}, +${pos - rec.off}): ${String(e)}`);
        continue;
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
      if (!(err instanceof CorruptionError) || err.segment !== active || err.offset > pos) {
        failures.push(`flip at ${pos} (record at ${rec.off}, +${pos - rec.off}): ${err === null ? "opened" : `${err.segment}@${err.offset}`}`);
      }
    }
    expect(failures, `records after the damaged one must not be silently dropped:\n${failures.join("\n")}`).toEqual([]);
  });

  it("a damaged header copy: either recovered from the other copy with every value exact, or CorruptionError", async () => {
    for (const seg of [sealed[0] as number, active]) {
      for (const pos of [0, 8, 17, 40, 60, 64, 72, 81, 120, 127]) {
        const dir = copyDir(pristine);
        flipBit(segFile(dir, seg), pos, 1);
        const err = await openAndCheck(dir, expected, true);
        if (err !== null) expectCorruption(err, seg, pos, `header flip seg ${seg} at ${pos}`);
        fs.rmSync(dir, { recursive: true, force: true });
      }
      // Both copies damaged: nothing to recover from.
      const dir = copyDir(pristine);
      flipBit(segFile(dir, seg), 20, 2);
      flipBit(segFile(dir, seg), 64 + 20, 2);
      expectCorruption(await openAndCheck(dir, expected, false), seg, 127, `both header copies of seg ${seg}`);
    }
  });

  it("verify() on a store opened before the flip reports the segment and offset; reads never return other bytes", async () => {
    const dir = copyDir(pristine);
    const store = await Engram.open(dir, OPTS);
    try {
      expect((await store.verify()).ok).toBe(true);
      const seg = sealed[1] as number;
      const recs = recordsOf(segFile(dir, seg));
      const rec = recs[1] as Rec;
      const pos = rec.off + rec.len - 30; // inside the value
      flipBit(segFile(dir, seg), pos, 5);
      const activeRecs = recordsOf(segFile(dir, active));
      const arec = activeRecs[1] as Rec;
      const apos = arec.off + arec.len - 30;
      flipBit(segFile(dir, active), apos, 3);
      const report = await store.verify();
      expect(report.ok).toBe(false);
      expect(report.problems).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ segment: seg, offset: rec.off }),
          expect.objectContaining({ segment: active, offset: arec.off }),
        ]),
      );
      for (const p of report.problems) expect(typeof p.detail).toBe("string");
      for (const r of [rec, arec]) {
        const want = expected.get(r.key) as Written;
        for (const read of [() => store.read(r.key), async () => store.readSync(r.key)]) {
          const got = await read().catch((e: unknown) => e);
          if (got instanceof CorruptionError) {
            expect(got.code).toBe("CORRUPTION");
            continue;
          }
          expect(got, `${r.key} returned something other than its value or CorruptionError`).toMatchObject({ status: "OK", version: want.version });
          expect(same((got as { value: Value }).value, want.value), `${r.key}: wrong bytes returned`).toBe(true);
        }
      }
    } finally {
      await store.close();
    }
    // And the damaged directory does not reopen.
    expect(await openAndCheck(dir, expected, false)).toBeInstanceOf(CorruptionError);
  });
});

describe("torn tail of the active segment", () => {
  let pristine: string;
  let log: Array<(Written & { rec: Rec }) | { forget: string; seq: number; rec: Rec } | { batch: Array<Written & { rec: Rec }>; commit: Rec }>;
  let active: number;
  let baseline: Map<string, Written | undefined>;

  beforeAll(async () => {
    pristine = tempDir("torn");
    const store = await Engram.open(pristine, OPTS);
    // Enough to seal some segments, then a tail of known records in the active segment.
    // Write until a fresh segment becomes active, so the tail below lies in one segment.
    const before: Written[] = [];
    for (let i = 0; segmentIds(pristine).length < 3 || i < 40; i++) {
      before.push({ key: `old${i}`, value: value(i), version: (await store.write(`old${i}`, value(i))).version });
    }
    const ids0 = segmentIds(pristine);
    const tailStart = ids0[ids0.length - 1] as number;
    const ops: Array<{ kind: "write"; key: string; value: Value } | { kind: "forget"; key: string } | { kind: "batch"; rows: Array<{ key: string; value: Value }> }> = [
      { kind: "write", key: "t1", value: "tail-one" },
      { kind: "write", key: "old1", value: "old1-overwritten" },
      { kind: "forget", key: "t1" },
      { kind: "batch", rows: [{ key: "b1", value: "batch-1" }, { key: "b2", value: new Uint8Array([1, 2, 3]) }, { key: "old2", value: "old2-in-batch" }] },
      { kind: "write", key: "t2", value: "tail-two" },
    ];
    const results: Array<Written | { forget: string; seq: number } | { batch: Written[] }> = [];
    for (const op of ops) {
      if (op.kind === "write") results.push({ key: op.key, value: op.value, version: (await store.write(op.key, op.value)).version });
      else if (op.kind === "forget") results.push({ forget: op.key, seq: (await store.forget(op.key)).tombstoneSeq as number });
      else {
        const r = await store.batch(op.rows.map((row) => ({ op: "write" as const, ...row })));
        results.push({ batch: op.rows.map((row, i) => ({ ...row, version: (r[i] as { version: number }).version })) });
      }
    }
    await store.close();
    const ids = segmentIds(pristine);
    active = ids[ids.length - 1] as number;
    // The tail must lie in one segment for the cuts below to be meaningful.
    expect(active).toBe(tailStart);
    const recs = recordsOf(segFile(pristine, active));
    const bySeq = new Map(recs.map((r) => [r.seq, r]));
    log = results.map((r) => {
      if ("batch" in r) {
        const rows = r.batch.map((w) => ({ ...w, rec: bySeq.get(w.version) as Rec }));
        const last = rows[rows.length - 1]?.rec as Rec;
        const commit = recs.find((x) => x.off === last.off + last.len) as Rec;
        return { batch: rows, commit };
      }
      if ("forget" in r) return { ...r, rec: bySeq.get(r.seq) as Rec };
      return { ...r, rec: bySeq.get(r.version) as Rec };
    });
    for (const l of log) {
      if ("batch" in l) {
        for (const w of l.batch) expect(w.rec, w.key).toBeDefined();
        expect(l.commit.type).toBe(5);
      } else expect(l.rec).toBeDefined();
    }
    baseline = stateOf(before);
  });

  /** The state a cut at `cut` must leave: every op whose records end at or before it. */
  function expectedAt(cut: number): Map<string, Written | undefined> {
    const m = new Map(baseline);
    for (const l of log) {
      if ("batch" in l) {
        if (l.commit.off + l.commit.len > cut) break;
        for (const w of l.batch) m.set(w.key, w);
      } else {
        if (l.rec.off + l.rec.len > cut) break;
        if ("forget" in l) m.set(l.forget, undefined);
        else m.set(l.key, l);
      }
    }
    // keys of later ops that were never written before must be absent
    for (const l of log) {
      const keys = "batch" in l ? l.batch.map((w) => w.key) : ["forget" in l ? l.forget : l.key];
      for (const k of keys) if (!m.has(k)) m.set(k, undefined);
    }
    return m;
  }

  it("cuts inside and between every record of the tail open with exactly the prefix before them (truncated and zeroed)", async () => {
    const first = log[0] as { rec: Rec };
    const recs = recordsOf(segFile(pristine, active)).filter((r) => r.off >= first.rec.off);
    const last = recs[recs.length - 1] as Rec;
    const cuts = new Set<number>([last.off + last.len]);
    // Every record boundary, every byte of the fixed header fields, and points in the payload.
    for (const r of recs) {
      for (const d of [0, 1, 4, 5, 16, 39, 41, r.len >> 1, r.len - 8, r.len - 1]) cuts.add(r.off + d);
    }
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      for (const how of ["truncate", "zero"] as const) {
        const dir = copyDir(pristine);
        const file = segFile(dir, active);
        if (how === "truncate") fs.truncateSync(file, cut);
        else {
          const size = fs.statSync(file).size;
          const fd = fs.openSync(file, "r+");
          fs.writeSync(fd, Buffer.alloc(size - cut), 0, size - cut, cut);
          fs.closeSync(fd);
        }
        const want = expectedAt(cut);
        const err = await openAndCheck(dir, want, true).catch((e: unknown) => e);
        expect(err, `${how} at ${cut}: ${String(err)}`).toBeNull();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it("after a torn-tail open the store is writable, verifies clean, and reopens with the same state", async () => {
    const last = log[log.length - 1] as { rec: Rec };
    const dir = copyDir(pristine);
    fs.truncateSync(segFile(dir, active), last.rec.off + Math.floor(last.rec.len / 2));
    const want = expectedAt(last.rec.off);
    let s = await Engram.open(dir, OPTS);
    try {
      expect(await s.read("t2")).toEqual({ status: "NOT_FOUND" });
      const w = await s.write("after", "cut");
      expect((await s.verify()).ok).toBe(true);
      await s.close();
      expect(await openAndCheck(dir, new Map([...want, ["after", { key: "after", value: "cut", version: w.version }]]), true)).toBeNull();
      s = await Engram.open(dir, OPTS);
      expect((await s.verify()).ok).toBe(true);
    } finally {
      await s.close();
    }
  });
});

describe("deleted bytes", () => {
  let pristine: string;
  let expected: Map<string, Written | undefined>;
  let seg: number;

  beforeAll(async () => {
    pristine = tempDir("del");
    const store = await Engram.open(pristine, OPTS);
    const writes: Written[] = [];
    for (let i = 0; i < 60; i++) writes.push({ key: `d${i}`, value: value(i), version: (await store.write(`d${i}`, value(i))).version });
    await store.close();
    expected = stateOf(writes);
    seg = segmentIds(pristine)[0] as number;
  });

  it("bytes cut out of the middle of a record of a sealed segment: CorruptionError", async () => {
    const recs = recordsOf(segFile(pristine, seg));
    for (const [i, n] of [[1, 1], [2, 10], [3, 57]] as const) {
      const rec = recs[i] as Rec;
      const dir = copyDir(pristine);
      deleteBytes(segFile(dir, seg), rec.off + 20, n);
      expectCorruption(await openAndCheck(dir, expected, false), seg, rec.off + 20, `${n} bytes deleted in record ${i}`);
    }
  });

  it("a sealed segment truncated mid-record: CorruptionError (a sealed segment has no torn tail)", async () => {
    const recs = recordsOf(segFile(pristine, seg));
    const last = recs[recs.length - 1] as Rec;
    const dir = copyDir(pristine);
    fs.truncateSync(segFile(dir, seg), last.off + 10);
    expectCorruption(await openAndCheck(dir, expected, false), seg, last.off + 10, "sealed segment cut mid-record");
  });

  it("a whole record cut out of a sealed segment is corruption, not a silently missing value", async () => {
    const recs = recordsOf(segFile(pristine, seg));
    const rec = recs[2] as Rec;
    const dir = copyDir(pristine);
    deleteBytes(segFile(dir, seg), rec.off, rec.len);
    const err = await openAndCheck(dir, expected, false);
    expectCorruption(err, seg, Number.MAX_SAFE_INTEGER, `record ${rec.key} at ${rec.off} deleted from sealed segment ${seg}`);
  });

  it("a sealed segment's last record cut off at a record boundary is corruption too", async () => {
    const recs = recordsOf(segFile(pristine, seg));
    const last = recs[recs.length - 1] as Rec;
    const dir = copyDir(pristine);
    fs.truncateSync(segFile(dir, seg), last.off);
    const err = await openAndCheck(dir, expected, false);
    expectCorruption(err, seg, Number.MAX_SAFE_INTEGER, `last record ${last.key} of sealed segment ${seg} cut off`);
  });
});
