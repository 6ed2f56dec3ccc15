/**
 * How a hint is encoded (segments/hint.ts HintBuilder, slots-7): the builder indexes each record
 * as it adds it (slot hash, keyed and erase offsets, PUT scopes), and an encode after a loaded
 * version-3 hint keeps that hint's packed blocks verbatim and packs only the entries added since.
 * Both are shortcuts that must say exactly what the long way says.
 *
 * Method: seeded mixes of PUT, TOMBSTONE, CLEAR and SCOPE_ERASE records over several scopes and
 * keys (some not ASCII) are fed to real builders; the hint each encodes is read back with checkHint, and its
 * entries and index are compared with the reference — buildIndex over the same entries, and the
 * entries and index of a hint encoded the long way (every entry repacked:
 * setReuseLoadedBlocks(false)) or of one builder fed every record from the start. The loaded
 * prefix is a real version-3 file read back with readHint (blocks on first use). Then a real
 * store with 4 KiB segments is reopened and written to again and again, so every seal of the
 * active segment encodes after a loaded hint, and every open's state is compared field by field
 * with a scan of a hint-less copy. The twins: the comparison catches an index that differs in one
 * hash; and with the appended encode's minSeq check off (unsafeAppendIgnoringMinSeq), an added
 * record whose sequence lies below the loaded hint's range shifts every kept block's sequences and
 * the decoded entries differ — the check is what sends that case the long way.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { encodeRecord, type RecordInput } from "../segments/record.js";
import { appendedEncodes, buildIndex, checkHint, forEachEntry, HintBuilder, readHint, setHintVersionWritten, setReuseLoadedBlocks, unsafeAppendIgnoringMinSeq, writeHintFile, type HintEntry, type HintIndex, type LoadedHint } from "../segments/hint.js";
import type { HeaderChoice } from "../segments/header.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";
import { openState, scannedState } from "./helpers/recovered-state.js";

const SCOPES = ["global", "user:alice", "user:alice/notes", "team:x"];
const HEADER: HeaderChoice = { header: { segmentId: 7, generation: 1, headerSeq: 1, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, copy: 0, version: C.FORMAT_VERSION };

/** `n` seeded records from sequence `seq0` on (some sequences repeat or fall back, as after a copy). */
function records(seed: number, n: number, seq0: number): Buffer[] {
  const pick = rng(seed);
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const scope = SCOPES[Math.floor(pick() * SCOPES.length)] as string;
    const key = `k${Math.floor(pick() * 300)}${pick() < 0.1 ? "é" : ""}`;
    const seq = seq0 + i + (pick() < 0.05 ? -Math.floor(pick() * Math.min(i, 5)) : 0);
    const r = pick();
    let input: RecordInput;
    if (r < 0.65) input = { type: C.RecordType.PUT, seq, generation: 1 + Math.floor(pick() * 3), expiresAt: pick() < 0.2 ? 1_800_000_000_000 + i : 0, scope, key, value: Buffer.alloc(Math.floor(pick() * 300), i & 0xff) };
    else if (r < 0.85) input = { type: C.RecordType.TOMBSTONE, seq, generation: 1, expiresAt: Math.max(1, seq - 3), scope, key };
    else if (r < 0.95) input = { type: C.RecordType.CLEAR, seq, generation: 2, expiresAt: 1_800_000_000_000, scope, key };
    else input = { type: C.RecordType.SCOPE_ERASE, seq, generation: 0, expiresAt: 1_800_000_000_000, scope, key: "", value: Buffer.alloc(1 + Math.floor(pick() * 90), 3) };
    out.push(encodeRecord(input));
  }
  return out;
}

/** Adds `recs` to `b` laid out back to back from segment offset `from`; returns the end. */
function feed(b: HintBuilder, recs: readonly Buffer[], from: number): number {
  let at = from;
  for (const r of recs) {
    b.addRecord(r, 0, at);
    at += r.length;
  }
  return at;
}

/** Every entry of a checked hint, as plain data. */
function entriesOf(h: LoadedHint): HintEntry[] {
  const out: HintEntry[] = [];
  forEachEntry(h, (e) => out.push({ ...e, value: e.value === null ? null : new Uint8Array(e.value) }));
  return out;
}

/** The index as plain arrays (the scopes as a sorted set: their order is not part of what an open does with them). */
function indexOf(i: HintIndex): unknown {
  return { keyed: i.keyed, entryAt: [...i.entryAt], hashes: [...i.hashes], table: [...i.table], erases: [...i.erases], scopes: [...i.scopes].sort() };
}

/** Encodes `b` as segment 7's hint covering up to `end` and checks it back in memory. */
function encoded(b: HintBuilder, end: number): { bytes: Buffer; hint: LoadedHint } {
  const bytes = b.encode(7, HEADER, end, false);
  expect(bytes).not.toBeNull();
  const hint = checkHint(bytes as Buffer, 7, HEADER);
  expect(hint).not.toBeNull();
  return { bytes: bytes as Buffer, hint: hint as LoadedHint };
}

/** A version-3 prefix hint of `recs` written to a fresh directory and read back from the file (blocks on first use). */
function loadedPrefix(recs: readonly Buffer[]): { dir: string; hint: LoadedHint; end: number } {
  const dir = tempDir("hint-append");
  const b = new HintBuilder(C.FORMAT_VERSION);
  const end = feed(b, recs, C.DATA_START);
  expect(writeHintFile(dir, 7, b.encode(7, HEADER, end, false))).toBe(true);
  const hint = readHint(dir, 7, HEADER);
  expect(hint).not.toBeNull();
  expect((hint as LoadedHint).bytes).not.toBeNull(); // read lazily from the file
  return { dir, hint: hint as LoadedHint, end };
}

/** The hint of a builder that loads `prefix` and adds `more` after it, encoded with reuse on or off. */
function appended(prefix: LoadedHint, prefixEnd: number, more: readonly Buffer[], reuse: boolean): { bytes: Buffer; hint: LoadedHint } {
  setReuseLoadedBlocks(reuse);
  try {
    const b = new HintBuilder(C.FORMAT_VERSION);
    b.addLoaded(prefix);
    const end = feed(b, more, prefixEnd);
    return encoded(b, end);
  } finally {
    setReuseLoadedBlocks(true);
  }
}

describe("hint encoding shortcuts", () => {
  afterEach(() => {
    setReuseLoadedBlocks(true);
    unsafeAppendIgnoringMinSeq(false);
  });

  it("the index the builder keeps while adding records is buildIndex's over the same entries, in every seeded mix (versions 3 and 2)", async () => {
    await initChecksum();
    for (const version of [3, 2] as const) {
      setHintVersionWritten(version);
      try {
        for (let seed = 1; seed <= 12; seed++) {
          const b = new HintBuilder(256); // small: the arrays grow several times
          const end = feed(b, records(seed, 50 + seed * 40, 1), C.DATA_START);
          const { hint } = encoded(b, end);
          expect(hint.version).toBe(version);
          const body = b.entriesBody() as Buffer;
          expect(hint.body.equals(body)).toBe(true);
          const ref = buildIndex(body, version === 2);
          expect(indexOf(hint.index)).toEqual(indexOf(ref));
          if (version === 2) expect(hint.index.scopes).toEqual(ref.scopes); // version 2 stores the builder's scope list as it is: even the order
        }
      } finally {
        setHintVersionWritten(3);
      }
    }
  });

  it("twin: an index that differs in one hash is caught by the comparison", async () => {
    await initChecksum();
    const b = new HintBuilder(C.FORMAT_VERSION);
    const end = feed(b, records(5, 200, 1), C.DATA_START);
    const { hint } = encoded(b, end);
    const ref = buildIndex(b.entriesBody() as Buffer, false);
    const wrong: HintIndex = { ...ref, hashes: Uint32Array.from(ref.hashes, (h, i) => (i === 17 ? (h ^ 1) >>> 0 : h)) };
    expect(indexOf(hint.index)).not.toEqual(indexOf(wrong));
  });

  it("an encode after a loaded version-3 hint keeps its blocks, and says exactly what repacking every entry says", async () => {
    await initChecksum();
    for (let seed = 1; seed <= 8; seed++) {
      const first = records(100 + seed, 300 + 90 * seed, 1);
      const more = records(200 + seed, 40 + 70 * seed, 2000 + seed);
      const a = loadedPrefix(first);
      const before = appendedEncodes();
      const fast = appended(a.hint, a.end, more, true);
      expect(appendedEncodes()).toBe(before + 1);
      const b = loadedPrefix(first);
      const slow = appended(b.hint, b.end, more, false);
      expect(appendedEncodes()).toBe(before + 1); // the long way did not take the shortcut
      const scratch = new HintBuilder(C.FORMAT_VERSION);
      const whole = encoded(scratch, feed(scratch, [...first, ...more], C.DATA_START));
      expect(entriesOf(fast.hint)).toEqual(entriesOf(slow.hint));
      expect(entriesOf(fast.hint)).toEqual(entriesOf(whole.hint));
      expect(indexOf(fast.hint.index)).toEqual(indexOf(slow.hint.index));
      expect(indexOf(fast.hint.index)).toEqual(indexOf(buildIndex(fast.hint.body, false)));
      expect([fast.hint.minSeq, fast.hint.maxSeq, fast.hint.count, fast.hint.coversEnd]).toEqual([slow.hint.minSeq, slow.hint.maxSeq, slow.hint.count, slow.hint.coversEnd]);
      // The kept blocks are the loaded file's bytes: the new file starts with them.
      const prefixFile = fs.readFileSync(path.join(a.dir, "00000007.hint"));
      const packed = prefixFile.readUInt32LE(68);
      expect(fast.bytes.subarray(80, 80 + packed).equals(prefixFile.subarray(80, 80 + packed))).toBe(true);
    }
  });

  it("an added record below the loaded hint's sequences goes the long way (byte for byte its encode); twin: with that check off the kept blocks decode to other sequences", async () => {
    await initChecksum();
    const first = records(31, 400, 1000);
    const low = [encodeRecord({ type: C.RecordType.PUT, seq: 5, generation: 1, scope: "global", key: "early", value: Buffer.from("v") })];
    const a = loadedPrefix(first);
    const before = appendedEncodes();
    const checked = appended(a.hint, a.end, low, true);
    expect(appendedEncodes()).toBe(before);
    const b = loadedPrefix(first);
    const slow = appended(b.hint, b.end, low, false);
    expect(checked.bytes.equals(slow.bytes)).toBe(true);
    const scratch = new HintBuilder(C.FORMAT_VERSION);
    const whole = encoded(scratch, feed(scratch, [...first, ...low], C.DATA_START));
    expect(entriesOf(checked.hint)).toEqual(entriesOf(whole.hint));

    unsafeAppendIgnoringMinSeq(true);
    const c = loadedPrefix(first);
    const bad = appended(c.hint, c.end, low, true);
    expect(appendedEncodes()).toBe(before + 1);
    const got = entriesOf(bad.hint).map((e) => e.seq);
    const want = entriesOf(whole.hint).map((e) => e.seq);
    expect(got).not.toEqual(want);
  });

  it("a loaded hint whose file was damaged since it was read: the encode gives nothing (the hint is then removed), never a hint of other entries", async () => {
    await initChecksum();
    const a = loadedPrefix(records(41, 600, 1));
    const file = path.join(a.dir, "00000007.hint");
    const bytes = fs.readFileSync(file);
    bytes[90] = (bytes[90] as number) ^ 0x10; // inside the first packed block
    fs.writeFileSync(file, bytes);
    const b = new HintBuilder(C.FORMAT_VERSION);
    b.addLoaded(a.hint);
    const end = feed(b, records(42, 30, 5000), a.end);
    expect(b.encode(7, HEADER, end, false)).toBeNull();
  });

  it("a store reopened and written to again and again: every seal after a hinted reopen keeps the loaded blocks, and every open equals a scan", async () => {
    const NOW = 1_800_000_000_000;
    const opts: OpenOptions = { durability: "none", segmentBytes: 8192, compaction: { workers: 0, auto: false }, clock: () => NOW };
    const dir = tempDir("hint-append-store");
    const pick = rng(77);
    const before = appendedEncodes();
    for (let round = 0; round < 6; round++) {
      const s = await Store.open(dir, opts);
      for (let i = 0; i < 90; i++) {
        const scope = SCOPES[Math.floor(pick() * SCOPES.length)] as string;
        const key = `k${Math.floor(pick() * 60)}`;
        const r = pick();
        if (r < 0.7) await s.write(key, `r${round}-${i}-${"y".repeat(Math.floor(pick() * 120))}`, { scope });
        else if (r < 0.9) await s.forget(key, { scope }).catch(() => undefined);
        else if (i % 30 === 0) await s.forgetScope("team:x");
      }
      await s.close();
      const got = await openState(dir, opts);
      expect(got.hinted).toBe(got.segments);
      expect(got.state).toEqual(await scannedState(dir, opts, `hint-append-scan-${round}`));
    }
    expect(appendedEncodes()).toBeGreaterThan(before);
  });
});
