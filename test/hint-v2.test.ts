/**
 * Hint files version 2 (segments/hint.ts, docs/FORMAT.md "Hint files"): each hint carries its own
 * slot index — keyed entries' body offsets and slot hashes, an open-addressing table, the
 * SCOPE_ERASE entries' offsets and the PUT-scope list — so an open maps it instead of walking its
 * entries, and keyed entries are checked at their first use, not at open.
 *
 * Method: a seeded workload (writes, overwrites, TTLs, forgets, undeletes, scope erasures) on a
 * real store with 4 KiB segments leaves many sealed segments with version-2 hints; the reference
 * is what a pure scan rebuilds (a copy with every hint deleted). The test parses each hint's
 * sections from the documented layout (not from the module's private offsets), then damages one
 * section at a time: one bit flipped in each new header field and in each section (entry offsets,
 * hashes, table, erase offsets, scope list, the padding after the entries). Each flip must make
 * that segment scanned and the state exact. The twins take one protection away at a time: with the
 * checksum recomputed, a flip in the table, the hashes, the entry offsets or the scope list is
 * loaded and the state differs from the scan (only the checksum stands between them); a size
 * field is still refused by the layout check alone; a keyed entry made malformed is loaded (its
 * check is lazy) and its first use fails closed with CorruptionError, deletes the hint, and the
 * next open scans exactly; with the per-entry checks switched off (the unsafe twin) the same entry
 * is applied and the state differs from the scan (the point read's sequence check still refuses it). Version-1 hints (built here from the documented
 * v1 layout) are still read, give the exact state, and are rewritten as version 2. Version 3 is
 * written since (test/hint-v3.test.ts); this file has the store write version 2
 * (setHintVersionWritten), the layout every open still reads.
 */
import * as fs from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { CorruptionError } from "../rules/errors.js";
import { blankEntry, checkHint, decodeEntry, HINT_HEADER_BYTES, HINT_TRAILER_BYTES, HINT_V1_HEADER_BYTES, setHintVersionWritten, unsafeSkipHintEntryChecks } from "../segments/hint.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { setFormatVersionWritten } from "../segments/version-written.js";
import { dropHints, hintIds } from "./helpers/hints.js";
import { rng } from "./helpers/rng.js";
import { copyDir, headerOf, hintPath, openState, recoveredState, scannedState } from "./helpers/recovered-state.js";
import { resealHint, sectionsOf, type Sections } from "./helpers/hint-layout.js";

const NOW = 1_800_000_000_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false }, clock: () => NOW };
const SCOPES = ["global", "user:alice", "user:alice/notes", "user:bob"];

/** The seeded workload; returns the directory, closed (every segment hinted). */
async function build(): Promise<string> {
  const dir = tempDir("hints2");
  const s = await Store.open(dir, OPTS);
  const pick = rng(23);
  const key = (): string => `k${Math.floor(pick() * 80)}`;
  const scope = (): string => SCOPES[Math.floor(pick() * SCOPES.length)] as string;
  for (let i = 0; i < 500; i++) {
    const r = pick();
    if (r < 0.6) await s.write(key(), `v${i}-${"x".repeat(Math.floor(pick() * 150))}`, { scope: scope(), ...(pick() < 0.1 ? { ttlMs: 60_000 } : {}) });
    else if (r < 0.75) await s.forget(key(), { scope: scope() }).catch(() => undefined);
    else if (r < 0.85) await s.undelete(key(), { scope: scope() }).catch(() => undefined);
    else if (i % 25 === 0) await s.forgetScope(pick() < 0.5 ? "user:bob" : "user:alice/notes");
  }
  await s.close();
  return dir;
}

/** Opens `dir` with OPTS: its state and what the open found. */
const open = (dir: string): ReturnType<typeof openState> => openState(dir, OPTS);
/** The reference state: a scan of a hint-less copy of `dir`. */
const scanned = (dir: string): Promise<unknown> => scannedState(dir, OPTS, "hints2-ref");

/** Recomputes a hint's checksums after a change (the protection taken away). */
const reseal = resealHint;

/** The first non-empty table cell's byte position. */
function usedCell(b: Buffer, x: Sections): number {
  for (let c = 0; c < x.cells; c++) if (b.readInt32LE(x.table + 4 * c) !== 0) return x.table + 4 * c;
  throw new Error("no used cell");
}

/** Writes `bad` as hint `id` of a fresh copy of `base`; returns the copy. */
function planted(base: string, id: number, bad: Buffer, label: string): string {
  const dir = copyDir(base, label);
  fs.writeFileSync(hintPath(dir, id), bad);
  return dir;
}

describe("hint files version 2", () => {
  // Version 3 is written since; this file keeps testing the version-2 layout, which is still read.
  // Hint version 2 over the 48-byte record frame (format 2), as it was written: the seeded
  // workload's segment layout (which erasure names which segment's slots) depends on the frame.
  beforeAll(() => {
    setHintVersionWritten(2);
    setFormatVersionWritten(2);
  });
  afterAll(() => {
    setHintVersionWritten(3);
    setFormatVersionWritten(3);
  });
  let base = "";
  let reference: unknown = null;
  /** A sealed segment whose hint has keyed entries, erase entries and scopes, with padding after its entries. */
  let rich = 0;

  afterEach(() => unsafeSkipHintEntryChecks(false));

  it("every hint written is version 2 with its index; a clean reopen is fully hinted and exact", async () => {
    base = await build();
    reference = await scanned(base);
    const ids = hintIds(base);
    for (const id of ids) {
      const b = fs.readFileSync(hintPath(base, id));
      expect(b[4], `hint ${id} version`).toBe(2);
      const x = sectionsOf(b);
      expect(x.total, "the documented layout adds up to the file").toBe(b.length);
      expect(x.cells & (x.cells - 1)).toBe(0);
      expect(x.cells).toBeGreaterThanOrEqual(2 * x.keyed);
      const h = checkHint(b, id, headerOf(base, id));
      expect(h, `hint ${id}`).not.toBeNull();
      expect(h?.index.keyed).toBe(x.keyed);
    }
    const candidates = ids.filter((id) => {
      const b = fs.readFileSync(hintPath(base, id));
      const x = sectionsOf(b);
      return b[5] === 1 && x.keyed > 0 && x.erases > 0 && x.scopesBytes > 0;
    });
    expect(candidates.length, "some sealed hint holds keyed entries, erasures and scopes").toBeGreaterThan(0);
    rich = candidates[0] as number;
    const r = await open(copyDir(base, "hints2-all"));
    expect(r.hinted).toBe(r.segments);
    expect(r.state).toEqual(reference);
  }, 60_000);

  it("one bit flipped in each new header field and each section: refused by checkHint; through an open, the summary's flips are scanned at open and the indexed region's are found at first use and rescanned: every read and the state exact", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOf(good);
    const positions: Array<[string, number]> = [
      ["keyed count", 48], ["cells", 52], ["erase count", 56], ["scope-list bytes", 60], ["block bytes", 64], ["reserved", 68],
      ["entry fixed fields", HINT_HEADER_BYTES + 20], ["entry offset", x.entryAt + 1], ["hash", x.hashes + 2], ["table cell", usedCell(good, x)], ["last cell", x.table + 4 * (x.cells - 1)],
      ["erase offset", x.summary], ["scope list length", x.scopes], ["scope list bytes", x.scopes + 2], ["block sum", x.sums + 3], ["trailer", good.length - 1],
    ];
    if (x.entryAt > HINT_HEADER_BYTES + x.bodyBytes) positions.push(["padding", HINT_HEADER_BYTES + x.bodyBytes]);
    const refDir = copyDir(base, "hints2-flip-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, OPTS);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    names.push(["global", "never-written"]);
    try {
      for (const [what, at] of positions) {
        const bad = Buffer.from(good);
        bad[at] = (bad[at] as number) ^ 0x08;
        expect(checkHint(bad, rich, headerOf(base, rich)), what).toBeNull();
        const s = await Store.open(planted(base, rich, bad, "hints2-flip"), OPTS);
        try {
          // Header and summary: refused at open. The indexed region: refused at open when the
          // open reads its block (the erase entries'), else found at first use.
          if (at < HINT_HEADER_BYTES || at >= x.summary) expect(s.opened.hinted, `${what}: refused at open`).toBe(s.opened.segments - 1);
          else expect(s.opened.hinted, what).toBeGreaterThanOrEqual(s.opened.segments - 1);
          for (const [scope, key] of names) {
            const o = { scope, inherit: false };
            expect(s.readSync(key, o), `${what}: ${scope}/${key}`).toEqual(ref.readSync(key, o));
          }
          expect(recoveredState(s), what).toEqual(reference);
        } finally {
          await s.close();
        }
      }
    } finally {
      await ref.close();
    }
  }, 120_000);

  it("twin: with the checksum recomputed, damage to the table, hashes, entry offsets or scope list is loaded and the answers differ", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOf(good);
    const damages: Array<[string, (b: Buffer) => void]> = [
      ["table emptied", (b) => b.fill(0, x.table, x.table + 4 * x.cells)],
      ["every hash flipped", (b) => {
        for (let i = 0; i < x.keyed; i++) b.writeUInt32LE((b.readUInt32LE(x.hashes + 4 * i) ^ 0x10000) >>> 0, x.hashes + 4 * i);
      }],
      ["every entry offset moved to the first keyed entry", (b) => {
        for (let i = 1; i < x.keyed; i++) b.writeUInt32LE(b.readUInt32LE(x.entryAt), x.entryAt + 4 * i);
      }],
      ["scope renamed", (b) => (b[x.scopes + 2] = (b[x.scopes + 2] as number) ^ 0x01)],
    ];
    expect(x.keyed).toBeGreaterThan(1);
    const refDir = copyDir(base, "hints2-twin-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, OPTS);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    try {
      for (const [what, damage] of damages) {
        const bad = Buffer.from(good);
        damage(bad);
        reseal(bad);
        expect(checkHint(bad, rich, headerOf(base, rich)), `${what}: whole, so loaded`).not.toBeNull();
        const s = await Store.open(planted(base, rich, bad, "hints2-twin"), OPTS);
        try {
          expect(s.opened.hinted, what).toBe(s.opened.segments);
          // Reads and probes first (the deferred path that the index serves), then the whole state.
          let differ = 0;
          for (const [scope, key] of names) {
            const o = { scope, inherit: false };
            if (JSON.stringify(s.readSync(key, o)) !== JSON.stringify(ref.readSync(key, o))) differ += 1;
          }
          const state = recoveredState(s);
          expect(differ > 0 || JSON.stringify(state) !== JSON.stringify(reference), what).toBe(true);
        } finally {
          await s.close();
        }
      }
    } finally {
      await ref.close();
    }
  }, 60_000);

  it("a size field changed: the layout check (before any checksum) refuses it", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    for (const [what, at, delta] of [["keyed", 48, 1], ["cells", 52, 16], ["cells not a power of two", 52, -1], ["erases", 56, 1], ["scope bytes", 60, 2], ["body bytes", 28, 4]] as const) {
      const bad = Buffer.from(good);
      bad.writeUInt32LE(bad.readUInt32LE(at) + delta, at); // checked before any checksum: no reseal needed
      expect(checkHint(bad, rich, headerOf(base, rich)), what).toBeNull();
    }
  });

  it("a malformed erase entry (checksum recomputed) is refused at open; twin: with entry checks off it is applied and the open goes wrong", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOf(good);
    const bad = Buffer.from(good);
    const eraseAt = bad.readUInt32LE(x.summary);
    bad.writeUInt32LE(eraseAt + 1, x.summary); // points one byte into the erase entry
    reseal(bad);
    expect(checkHint(bad, rich, headerOf(base, rich))).toBeNull();
    const r = await open(planted(base, rich, bad, "hints2-erase"));
    expect(r.hinted).toBe(r.segments - 1);
    expect(r.state).toEqual(reference);
    unsafeSkipHintEntryChecks(true);
    expect(checkHint(bad, rich, headerOf(base, rich)), "the unsafe twin loads it").not.toBeNull();
    const wrong = await open(planted(base, rich, bad, "hints2-erase-twin")).then((t) => t.state, (err: unknown) => err);
    expect(wrong).not.toEqual(reference);
  }, 60_000);

  it("a keyed entry made malformed (checksum recomputed) fails closed at first use: CorruptionError, hint deleted, the next open scans exactly; twin: unchecked, it is applied wrong", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOf(good);
    const bad = Buffer.from(good);
    const body = bad.subarray(HINT_HEADER_BYTES, HINT_HEADER_BYTES + x.bodyBytes);
    // The keyed entry whose slot is readable (a live PUT), its sequence pushed past the hint's range.
    const e = blankEntry();
    let victim: { at: number; scope: string; key: string } | null = null;
    const refStore = await Store.open(copyDir(base, "hints2-ref-read"), OPTS);
    const refReads = new Map<string, unknown>();
    try {
      for (let i = 0; i < x.keyed && victim === null; i++) {
        const at = bad.readUInt32LE(x.entryAt + 4 * i);
        decodeEntry(body, at, e);
        const read = refStore.readSync(e.key, { scope: e.scope, inherit: false });
        if (e.type === 1 && read.status === "OK") victim = { at, scope: e.scope, key: e.key };
      }
      expect(victim, "a live PUT in the hint").not.toBeNull();
      const v = victim as { at: number; scope: string; key: string };
      refReads.set("victim", refStore.readSync(v.key, { scope: v.scope, inherit: false }));
    } finally {
      await refStore.close();
    }
    const v = victim as { at: number; scope: string; key: string };
    const seqAt = v.at + 4 + 16;
    body.writeUInt32LE(body.readUInt32LE(seqAt) + 1_000_000, seqAt); // beyond maxSeq
    reseal(bad);
    expect(checkHint(bad, rich, headerOf(base, rich)), "not checked at open").not.toBeNull();

    const dir = planted(base, rich, bad, "hints2-lazy");
    const s = await Store.open(dir, OPTS);
    try {
      expect(s.opened.hinted).toBe(s.opened.segments);
      expect(() => s.readSync(v.key, { scope: v.scope, inherit: false })).toThrow(CorruptionError);
      expect(fs.existsSync(hintPath(dir, rich)), "the malformed hint is deleted").toBe(false);
      expect(() => s.readSync("never-written", { scope: "global", inherit: false }), "every later lookup refuses too").toThrow(CorruptionError);
      expect(() => [...s.keydir.all()], "and so does a pass over all slots").toThrow(CorruptionError);
    } finally {
      await s.close().catch(() => undefined);
    }
    const after = await open(dir);
    expect(after.hinted).toBe(after.segments - 1);
    expect(after.state).toEqual(reference);

    unsafeSkipHintEntryChecks(true);
    const twin = await Store.open(planted(base, rich, bad, "hints2-lazy-twin"), OPTS);
    try {
      // The point read's own sequence check still refuses the record (a second line), but the
      // keydir now holds the wrong version: the state differs from the scan's.
      const served = ((): unknown => {
        try {
          return twin.readSync(v.key, { scope: v.scope, inherit: false });
        } catch (err) {
          return err;
        }
      })();
      expect(served, "not the scan's answer").not.toEqual(refReads.get("victim"));
      expect(recoveredState(twin), "the unchecked entry is applied").not.toEqual(reference);
    } finally {
      await twin.close();
    }
  }, 60_000);

  it("a hint of many blocks: a bit flipped in a block the open does not read is found at first use, the segment rescanned, entries already applied kept; every read and the state exact; twin: cells emptied and resealed, entries are missed", async () => {
    const dir = tempDir("hints2-big");
    const big: OpenOptions = { ...OPTS, segmentBytes: 256 * 1024 };
    const s0 = await Store.open(dir, big);
    for (let i = 0; i < 6000; i++) await s0.write(`key-${String(i).padStart(5, "0")}`, `v${i}`, { scope: SCOPES[i % SCOPES.length] as string });
    await s0.close();
    const id = hintIds(dir).find((h) => fs.readFileSync(hintPath(dir, h))[5] === 1) as number;
    const good = fs.readFileSync(hintPath(dir, id));
    const x = sectionsOf(good);
    expect(x.blocks, "a hint of several blocks").toBeGreaterThan(4);
    expect(x.erases).toBe(0); // the open reads no block of it
    const refDir = copyDir(dir, "hints2-big-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, big);
    const want = recoveredState(ref);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    try {
      const at = x.table + 4 * Math.floor(x.cells / 2) + 1; // a table block in the middle
      const bad = Buffer.from(good);
      bad[at] = (bad[at] as number) ^ 0x40;
      const emptied = Buffer.from(good);
      const mid = x.table + 4 * Math.floor(x.cells / 2);
      emptied.fill(0, mid, mid + 4 * 256); // 256 cells in the middle of the table
      reseal(emptied);
      for (const [label, buf, exact] of [["flipped", bad, true], ["cells emptied, resealed", emptied, false]] as const) {
        const copy = copyDir(dir, "hints2-big-flip");
        fs.writeFileSync(hintPath(copy, id), buf);
        const s = await Store.open(copy, big);
        try {
          expect(s.opened.hinted, `${label}: loaded (its blocks are checked at first use)`).toBe(s.opened.segments);
          let differ = 0;
          for (const [scope, key] of names) {
            const o = { scope, inherit: false };
            if (JSON.stringify(s.readSync(key, o)) !== JSON.stringify(ref.readSync(key, o))) differ += 1;
          }
          if (exact) {
            expect(differ, label).toBe(0);
            expect(recoveredState(s), label).toEqual(want);
          } else expect(differ > 0 || JSON.stringify(recoveredState(s)) !== JSON.stringify(want), `${label}: only the block sum stood between them`).toBe(true);
        } finally {
          await s.close();
        }
      }
    } finally {
      await ref.close();
    }
  }, 120_000);

  it("the active segment's prefix hint damaged in a block: the close that cannot re-encode it deletes it, and the next open scans that segment exactly", async () => {
    const dir = tempDir("hints2-active");
    const opts: OpenOptions = { ...OPTS, segmentBytes: 1 << 20 };
    const s0 = await Store.open(dir, opts);
    for (let i = 0; i < 6000; i += 500) await s0.batch(Array.from({ length: 500 }, (_, j) => ({ op: "write" as const, key: `a${i + j}`, value: `v${i + j}` })));
    await s0.close();
    const ids = hintIds(dir);
    expect(ids.length, "one segment, the active one").toBe(1);
    const id = ids[0] as number;
    const good = fs.readFileSync(hintPath(dir, id));
    expect(good[5], "an unsealed (prefix) hint").toBe(0);
    const x = sectionsOf(good);
    expect(x.blocks).toBeGreaterThan(4);
    const bad = Buffer.from(good);
    const flipAt = x.table + 4 * Math.floor(x.cells / 2) + 2;
    bad[flipAt] = (bad[flipAt] as number) ^ 0x01;
    fs.writeFileSync(hintPath(dir, id), bad);
    const s1 = await Store.open(dir, opts);
    expect(s1.opened.hinted, "loaded: the damaged block is not read at open").toBe(1);
    await s1.write("after", "x");
    await s1.close();
    expect(fs.existsSync(hintPath(dir, id)), "the unreadable prefix hint is removed at close").toBe(false);
    const want = await scanned(dir);
    const r = await open(dir);
    expect(r.hinted).toBe(0);
    expect(r.state).toEqual(want);
    expect((r.state as { slots: unknown[] }).slots.length).toBe(6001);
  }, 60_000);

  it("version-1 hints are still read (state exact, fully hinted) and sealed ones are rewritten as version 2", async () => {
    const dir = copyDir(base, "hints2-v1");
    const ids = hintIds(dir);
    for (const id of ids) {
      const b = fs.readFileSync(hintPath(dir, id));
      const x = sectionsOf(b);
      // The version-1 layout: the first 48 header bytes (version 1), the entries, the xxh64.
      const v1 = Buffer.alloc(HINT_V1_HEADER_BYTES + x.bodyBytes + HINT_TRAILER_BYTES);
      b.copy(v1, 0, 0, HINT_V1_HEADER_BYTES);
      v1[4] = 1;
      b.copy(v1, HINT_V1_HEADER_BYTES, HINT_HEADER_BYTES, HINT_HEADER_BYTES + x.bodyBytes);
      reseal(v1);
      const h = checkHint(v1, id, headerOf(dir, id));
      expect(h?.version, `hint ${id} as v1`).toBe(1);
      expect(h?.index.keyed).toBe(x.keyed);
      fs.writeFileSync(hintPath(dir, id), v1);
    }
    const r = await open(dir);
    expect(r.hinted).toBe(r.segments);
    expect(r.state).toEqual(reference);
    for (const id of hintIds(dir)) {
      const sealed = (headerOf(dir, id).header.flags & 1) !== 0;
      if (sealed) expect(fs.readFileSync(hintPath(dir, id))[4], `sealed hint ${id} rewritten`).toBe(2);
    }
    const again = await open(dir);
    expect(again.hinted).toBe(again.segments);
    expect(again.state).toEqual(reference);
  }, 60_000);
});
