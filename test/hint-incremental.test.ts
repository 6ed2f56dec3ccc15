/**
 * The active segment's hint is packed as its records arrive (segments/hint.ts HintBuilder with
 * segments/hint-v3.ts RecordPacker, hint1-10): an encode then only closes the last partial block
 * and writes the index. That is a shortcut that must write exactly what the general builder
 * writes — a version-2 entry per record, every entry packed at encode (setIncrementalPacking(false)).
 *
 * Method: seeded mixes of PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records over several scopes (keys
 * short, long and not ASCII, expiries, gaps between records) are fed to both builders, each
 * record in a buffer of its own that is overwritten once added (as a batch's reused arena), from
 * 0 records to several thousand (many entry blocks, and counts around one block's edge); the
 * files both encode must be equal byte for byte, and so must their version-2 bodies, counts and
 * ends. Also: sequences that fall below the first record's (the builder turns general midway),
 * version 2 written, an encode in the middle and more records after it, and a loaded version-3
 * prefix (a real file read back with readHint) with records appended, block reuse on and off.
 * Then real stores: a bulk load, close, reopen, more writes, close — both modes leave the same
 * hint files, and the reopened store is exact. The twin: the incremental packer's blocks closed
 * 200 bytes late (unsafeSkewIncrementalBlocks(200): an entry or so) — another file, which the comparison catches.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { encodeRecord, type RecordInput } from "../segments/record.js";
import { appendedEncodes, checkHint, HintBuilder, readHint, setHintVersionWritten, setIncrementalPacking, setReuseLoadedBlocks, writeHintFile, type LoadedHint } from "../segments/hint.js";
import { unsafeSkewIncrementalBlocks } from "../segments/hint-v3.js";
import type { HeaderChoice } from "../segments/header.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";
import { openState, scannedState } from "./helpers/recovered-state.js";

const SCOPES = ["global", "user:alice", "user:alice/notes", "team:x"];
const HEADER: HeaderChoice = { header: { segmentId: 7, generation: 1, headerSeq: 1, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, copy: 0, version: C.FORMAT_VERSION };

/** `n` seeded records from sequence `seq0` on; with `fallBelow`, now and then one below seq0 (the builder then turns general). */
function records(seed: number, n: number, seq0: number, fallBelow = false): RecordInput[] {
  const pick = rng(seed);
  const out: RecordInput[] = [];
  for (let i = 0; i < n; i++) {
    const scope = SCOPES[Math.floor(pick() * SCOPES.length)] as string;
    const key = pick() < 0.1 ? `long-${"x".repeat(40 + Math.floor(pick() * 200))}-${i}` : `k${Math.floor(pick() * 300)}${pick() < 0.1 ? "é漢" : ""}`;
    const seq = fallBelow && i > 0 && pick() < 0.01 ? Math.max(1, seq0 - 1 - Math.floor(pick() * 5)) : seq0 + i + (pick() < 0.05 ? -Math.floor(pick() * Math.min(i, 5)) : 0);
    const r = pick();
    if (r < 0.65) out.push({ type: C.RecordType.PUT, seq, generation: 1 + Math.floor(pick() * 300), expiresAt: pick() < 0.2 ? 1_800_000_000_000 + i : 0, scope, key, value: Buffer.alloc(Math.floor(pick() * 300), i & 0xff) });
    else if (r < 0.85) out.push({ type: C.RecordType.TOMBSTONE, seq, generation: 1, expiresAt: Math.max(1, seq - 3), scope, key });
    else if (r < 0.95) out.push({ type: C.RecordType.CLEAR, seq, generation: 2, expiresAt: 1_800_000_000_000, scope, key });
    else out.push({ type: C.RecordType.SCOPE_ERASE, seq, generation: 0, expiresAt: 1_800_000_000_000, scope, key: "", value: Buffer.alloc(1 + Math.floor(pick() * 90), 3) });
  }
  return out;
}

/** A builder of either kind (incremental: packing as records arrive; else the general one). */
function builder(incremental: boolean): HintBuilder {
  setIncrementalPacking(incremental);
  try {
    return new HintBuilder(C.FORMAT_VERSION);
  } finally {
    setIncrementalPacking(true);
  }
}

/** Adds `recs` to `b` from segment offset `from` (a gap before every 20th), each from a buffer of its own that is then overwritten; returns the end. */
function feed(b: HintBuilder, recs: readonly RecordInput[], from: number): number {
  let at = from;
  recs.forEach((input, i) => {
    if (i % 20 === 19) at += 1 + (i % 97);
    const bytes = encodeRecord(input);
    const piece = Buffer.alloc(bytes.length + 16, 0xee);
    bytes.copy(piece, 8);
    b.addRecord(piece, 8, at);
    piece.fill(0x5a); // a reused arena: nothing may be read from it after the call
    at += bytes.length;
  });
  return at;
}

/** What a builder says after `recs` (and `more`, after an encode in the middle, when given). */
function built(incremental: boolean, recs: readonly RecordInput[], more: readonly RecordInput[] | null = null): { file: Buffer | null; mid: Buffer | null; body: Buffer | null; count: number; end: number; bodyBytes: number } {
  const b = builder(incremental);
  let end = feed(b, recs, C.DATA_START);
  let mid: Buffer | null = null;
  if (more !== null) {
    mid = b.encode(7, HEADER, end, false);
    end = feed(b, more, end);
  }
  const facts = { count: b.count, end: b.end, bodyBytes: b.bodyBytes };
  const file = b.encode(7, HEADER, end, false);
  const body = b.entriesBody();
  return { file, mid, body: body === null ? null : Buffer.from(body), ...facts };
}

/** Expects both builders to say the same of `recs` (`more`): every file byte, the body, the counts. */
function expectSame(label: string, recs: readonly RecordInput[], more: readonly RecordInput[] | null = null): void {
  const inc = built(true, recs, more);
  const gen = built(false, recs, more);
  expect(inc.file, `${label}: a file`).not.toBeNull();
  expect(inc.file?.equals(gen.file as Buffer), `${label}: the same file`).toBe(true);
  expect(inc.mid === null ? null : inc.mid.equals(gen.mid as Buffer), `${label}: the same file midway`).toBe(more === null ? null : true);
  expect(inc.body?.equals(gen.body as Buffer), `${label}: the same version-2 body`).toBe(true);
  expect([inc.count, inc.end, inc.bodyBytes], `${label}: the same counts`).toEqual([gen.count, gen.end, gen.bodyBytes]);
  expect(checkHint(inc.file as Buffer, 7, HEADER), `${label}: the file checks`).not.toBeNull();
}

/** A version-3 hint of `recs` written to a fresh directory and read back lazily from its file. */
function loadedPrefix(recs: readonly RecordInput[]): { hint: LoadedHint; end: number } {
  const dir = tempDir("hint-incremental");
  const b = builder(false);
  const end = feed(b, recs, C.DATA_START);
  expect(writeHintFile(dir, 7, b.encode(7, HEADER, end, false))).toBe(true);
  const hint = readHint(dir, 7, HEADER);
  expect(hint?.bytes ?? null).not.toBeNull();
  return { hint: hint as LoadedHint, end };
}

/** The file of a builder of either kind that loads `prefix` (read anew) and adds `more`, with loaded-block reuse on or off. */
function appended(incremental: boolean, prefixRecs: readonly RecordInput[], more: readonly RecordInput[], reuse: boolean): Buffer | null {
  const { hint, end } = loadedPrefix(prefixRecs);
  setReuseLoadedBlocks(reuse);
  try {
    const b = builder(incremental);
    b.addLoaded(hint);
    return b.encode(7, HEADER, feed(b, more, end), false);
  } finally {
    setReuseLoadedBlocks(true);
  }
}

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeSkewIncrementalBlocks(0);
  setIncrementalPacking(true);
  setReuseLoadedBlocks(true);
  setHintVersionWritten(3);
});

describe("the active segment's hint packed as records arrive", () => {
  it("writes exactly the general builder's file, body and counts for every seeded mix, 0 records to thousands", () => {
    for (const n of [0, 1, 2, 7, 60, 61, 62, 63, 64, 65, 66, 120, 500, 4000]) {
      for (const seed of [1, 2, 3]) expectSame(`n ${n} seed ${seed}`, records(seed * 1000 + n, n, 1 + seed * 50));
    }
  });

  it("records below the first one's sequence turn the builder general midway: still the same file", () => {
    for (const seed of [4, 5, 6, 7]) expectSame(`seed ${seed}`, records(seed, 3000, 1000, true));
    expectSame("the second record below the first", [...records(8, 1, 500), ...records(9, 300, 400)]);
  });

  it("an encode in the middle changes nothing: the file then and after more records are the general builder's", () => {
    for (const seed of [11, 12]) expectSame(`seed ${seed}`, records(seed, 900, 10), records(seed + 100, 900, 910));
    expectSame("more below the first", records(13, 300, 500), records(14, 300, 100));
  });

  it("version 2 written: the builder turns general and writes version 2 as before", () => {
    setHintVersionWritten(2);
    for (const seed of [15, 16]) expectSame(`seed ${seed}`, records(seed, 1500, 7));
  });

  it("after a loaded version-3 hint (its blocks kept, or everything repacked): the general builder's file", () => {
    const before = appendedEncodes();
    for (const reuse of [true, false]) {
      for (const [seed, n, m] of [[17, 900, 700], [18, 40, 3], [19, 2000, 0]] as const) {
        const prefix = records(seed, n, 100);
        const more = records(seed + 50, m, 100 + n);
        const inc = appended(true, prefix, more, reuse);
        expect(inc, `seed ${seed} reuse ${reuse}: a file`).not.toBeNull();
        expect(inc?.equals(appended(false, prefix, more, reuse) as Buffer), `seed ${seed} reuse ${reuse}: the same file`).toBe(true);
      }
      // Added records below the loaded hint's first sequence: both builders repack everything.
      const low = records(20, 500, 100);
      const lower = records(21, 300, 50);
      expect(appended(true, low, lower, reuse)?.equals(appended(false, low, lower, reuse) as Buffer), `below the prefix, reuse ${reuse}`).toBe(true);
    }
    expect(appendedEncodes() - before, "the kept-blocks path was taken").toBeGreaterThanOrEqual(6);
  });

  it("twin: the incremental packer's blocks closed an entry or so late write another file, which the comparison catches", () => {
    const recs = records(22, 2000, 1);
    const general = built(false, recs).file as Buffer;
    unsafeSkewIncrementalBlocks(200);
    const skewed = built(true, recs).file as Buffer;
    expect(skewed.equals(general), "the skewed file differs").toBe(false);
    expect(checkHint(skewed, 7, HEADER), "its sums are of the bytes written: checkHint alone does not see it").not.toBeNull();
    unsafeSkewIncrementalBlocks(0);
    expect(built(true, recs).file?.equals(general), "without the skew the same again").toBe(true);
  });

  it("a store's hint files after a bulk load, a reopen and more writes are the same in both modes, and the store reopens exact", async () => {
    const files: Map<string, Buffer>[] = [];
    for (const incremental of [true, false]) {
      setIncrementalPacking(incremental);
      const dir = tempDir("hint-incremental-store");
      const opts = { durability: "none" as const };
      for (const round of [0, 1]) {
        const s = await Store.open(dir, opts);
        for (let b = 0; b < 8; b++) {
          const ops = Array.from({ length: 250 }, (_, i) => ({ op: "write" as const, scope: SCOPES[(b + i) % 4] as string, key: `r${round}-k${(b * 250 + i) % 1300}${i % 9 === 0 ? "é" : ""}`, value: Buffer.alloc(40 + (i % 200), i) }));
          await s.batch(ops);
        }
        await s.forget(`r${round}-k1`, { scope: SCOPES[1] as string });
        await s.close();
      }
      const hints = new Map<string, Buffer>();
      const segs = path.join(dir, "segments");
      for (const name of fs.readdirSync(segs).filter((f) => f.endsWith(".hint"))) hints.set(name, fs.readFileSync(path.join(segs, name)));
      expect(hints.size, "hints were written").toBeGreaterThan(0);
      files.push(hints);
      setIncrementalPacking(true);
      const opened = await openState(dir, opts);
      expect(opened.hinted, "the reopen is hinted").toBe(opened.segments);
      expect(opened.state, "the reopened state equals a scan's").toEqual(await scannedState(dir, opts, "hint-incremental-scan"));
    }
    const [inc, gen] = files as [Map<string, Buffer>, Map<string, Buffer>];
    expect([...inc.keys()].sort()).toEqual([...gen.keys()].sort());
    for (const [name, bytes] of inc) expect(bytes.equals(gen.get(name) as Buffer), `${name}: the same file`).toBe(true);
  });
});
