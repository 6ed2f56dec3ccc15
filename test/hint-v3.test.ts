/**
 * Hint files version 3 (segments/hint-v3.ts, docs/FORMAT.md "Hint files"): entries packed —
 * varints, the record length derived, offsets and sequences as deltas, scopes interned — in
 * blocks of their own xxh64, decoded on first use into the version-2 entry layout.
 *
 * Method: the seeded workload of test/hint-v2.test.ts (writes, overwrites, TTLs, forgets,
 * undeletes, scope erasures) on a real store with 4 KiB segments leaves many sealed segments with
 * version-3 hints; the reference is what a pure scan rebuilds (a copy with every hint deleted).
 * The same workload written as version 2 (setHintVersionWritten) gives the size the new layout
 * is compared with. Each section, found from the documented layout (test/helpers/hint-layout.ts,
 * not the module's offsets), is damaged one at a time: a bit flipped in every header field and
 * section, truncations, a missing file; each is refused (by checkHint, and through an open: the
 * segment scanned, or the block found at first use and the segment rescanned) and every read and
 * the state stay exact. The twins take one protection away at a time: with the checksums
 * recomputed a changed entry is loaded and the state differs (only the checksum stood between
 * them); a packed block that passes its checksum but does not decode fails closed at first use
 * (CorruptionError, the hint deleted, the next open scans exactly), and with the decoder's and
 * the entries' checks both off it is applied and the state goes wrong. Version-2 and version-1
 * hints are still read exactly and rewritten as version 3.
 */
import * as fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { CorruptionError } from "../rules/errors.js";
import { checkHint, HINT_HEADER_BYTES, HINT_TRAILER_BYTES, HINT_V1_HEADER_BYTES, setHintVersionWritten, unsafeSkipHintEntryChecks } from "../segments/hint.js";
import { unsafeTrustPackedEntries } from "../segments/hint-v3.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { dropHints, hintIds } from "./helpers/hints.js";
import { rng } from "./helpers/rng.js";
import { copyDir, headerOf, hintPath, openState, recoveredState, scannedState } from "./helpers/recovered-state.js";
import { firstEntryFields, resealHint, sectionsOf, sectionsOfV3, V3_HEADER_BYTES } from "./helpers/hint-layout.js";

const NOW = 1_800_000_000_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false }, clock: () => NOW };
const SCOPES = ["global", "user:alice", "user:alice/notes", "user:bob"];

/** The seeded workload, written with hint version `version`; returns the directory, closed. */
async function build(version: 2 | 3): Promise<string> {
  setHintVersionWritten(version);
  try {
    const dir = tempDir(`hints3-v${version}`);
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
    await s.flush(); // a durable close writes the active segment's hint as version 3 (unflushed, `none` stamps it: version 4)
    await s.close();
    return dir;
  } finally {
    setHintVersionWritten(3);
  }
}

/** Opens `dir` with OPTS: its state and what the open found. */
const open = (dir: string): ReturnType<typeof openState> => openState(dir, OPTS);

/** Total bytes of `dir`'s hint files. */
function hintBytes(dir: string): number {
  return hintIds(dir).reduce((n, id) => n + fs.statSync(hintPath(dir, id)).size, 0);
}

/** Writes `bad` as hint `id` of a fresh copy of `base`; returns the copy. */
function planted(base: string, id: number, bad: Buffer, label: string): string {
  const dir = copyDir(base, label);
  fs.writeFileSync(hintPath(dir, id), bad);
  return dir;
}

/** Every read of `names` on `s` equals `ref`'s; returns how many differ. */
function differing(s: Store, ref: Store, names: ReadonlyArray<readonly [string, string]>): number {
  let n = 0;
  for (const [scope, key] of names) {
    const o = { scope, inherit: false };
    const got = ((): unknown => {
      try {
        return s.readSync(key, o);
      } catch (err) {
        return err;
      }
    })();
    if (JSON.stringify(got) !== JSON.stringify(ref.readSync(key, o))) n += 1;
  }
  return n;
}

describe("hint files version 3", () => {
  let base = "";
  let reference: unknown = null;
  /** A sealed segment whose hint has keyed entries, erase entries and scopes. */
  let rich = 0;
  /** A sealed segment whose hint has keyed entries and no erase entry (the open decodes none of its blocks). */
  let plain = 0;

  afterEach(() => {
    unsafeSkipHintEntryChecks(false);
    unsafeTrustPackedEntries(false);
    setHintVersionWritten(3);
  });

  it("every hint written is version 3, the documented layout adds up, it is under half the version-2 size, and a clean reopen is fully hinted and exact", async () => {
    base = await build(3);
    reference = await scannedState(base, OPTS, "hints3-ref");
    const v2 = await build(2);
    const ids = hintIds(base);
    let entries = 0;
    for (const id of ids) {
      const b = fs.readFileSync(hintPath(base, id));
      expect(b[4], `hint ${id} version`).toBe(3);
      const x = sectionsOfV3(b);
      expect(x.total, "the documented layout adds up to the file").toBe(b.length);
      expect(x.cells, "exactly twice the keyed entries (at least 16)").toBe(Math.max(16, 2 * x.keyed));
      expect(x.packedBytes).toBeLessThan(x.bodyBytes);
      entries += x.count;
      const h = checkHint(b, id, headerOf(base, id));
      expect(h, `hint ${id}`).not.toBeNull();
      expect(h?.index.keyed).toBe(x.keyed);
    }
    // The same records, the same index; only the entries' encoding differs.
    expect(hintIds(v2)).toEqual(ids);
    expect(hintBytes(base), `v3 ${hintBytes(base)} B against v2 ${hintBytes(v2)} B for ${entries} entries`).toBeLessThan(0.6 * hintBytes(v2));
    const v2State = await open(copyDir(v2, "hints3-v2-same"));
    expect(v2State.state, "the same workload: the same state").toEqual(reference);
    const pick = (erases: boolean): number =>
      ids.find((id) => {
        const b = fs.readFileSync(hintPath(base, id));
        const x = sectionsOfV3(b);
        return b[5] === 1 && x.keyed > 2 && (erases ? x.erases > 0 : x.erases === 0) && x.scopesBytes > 0;
      }) ?? -1;
    rich = pick(true);
    plain = pick(false);
    expect(rich, "a sealed hint with keyed entries, erasures and scopes").toBeGreaterThan(0);
    expect(plain, "a sealed hint with keyed entries and no erasure").toBeGreaterThan(0);
    const r = await open(copyDir(base, "hints3-all"));
    expect(r.hinted).toBe(r.segments);
    expect(r.state).toEqual(reference);
  }, 60_000);

  it("a bit flipped in every header field and every section, and every truncation: checkHint refuses it; through an open the segment is scanned (header, summary) or rescanned at first use (blocks): every read and the state exact", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOfV3(good);
    const header = headerOf(base, rich);
    for (let at = 0; at < good.length; at++) {
      const bad = Buffer.from(good);
      bad[at] = (bad[at] as number) ^ (1 << (at % 8));
      expect(checkHint(bad, rich, header), `byte ${at} of ${good.length}`).toBeNull();
    }
    for (let len = 0; len < good.length; len++) expect(checkHint(good.subarray(0, len), rich, header), `truncated to ${len}`).toBeNull();
    const positions: Array<[string, number]> = [
      ["version", 4], ["count", 24], ["body bytes", 28], ["keyed", 48], ["cells", 52], ["erases", 56], ["scope bytes", 60], ["block bytes", 64], ["packed bytes", 68], ["entry blocks", 72], ["reserved", 76],
      ["first entry byte", V3_HEADER_BYTES], ["last packed byte", x.index - 1], ["hash", x.index + 1], ["table", x.index + 4 * x.keyed + 2], ["erase offset", x.summary],
      ["scope flag", x.scopes], ["scope bytes", x.scopes + 3], ["block row", x.rows + 1], ["block sum", x.rows + 14], ["index sum", x.sums + 1], ["trailer", good.length - 1],
    ];
    const refDir = copyDir(base, "hints3-flip-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, OPTS);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    names.push(["global", "never-written"]);
    try {
      for (const [what, at] of positions) {
        const bad = Buffer.from(good);
        bad[at] = (bad[at] as number) ^ 0x08;
        const s = await Store.open(planted(base, rich, bad, "hints3-flip"), OPTS);
        try {
          if (at < V3_HEADER_BYTES || at >= x.summary) expect(s.opened.hinted, `${what}: refused at open`).toBe(s.opened.segments - 1);
          else expect(s.opened.hinted, what).toBeGreaterThanOrEqual(s.opened.segments - 1);
          expect(differing(s, ref, names), what).toBe(0);
          expect(recoveredState(s), what).toEqual(reference);
        } finally {
          await s.close();
        }
      }
    } finally {
      await ref.close();
    }
  }, 120_000);

  it("truncated, missing, or of an unknown version: scanned, state exact, and the open writes a version-3 hint anew", async () => {
    const cases: Array<[string, (f: string) => void]> = [
      ["truncated by 3", (f) => fs.truncateSync(f, fs.statSync(f).size - 3)],
      ["truncated to its header", (f) => fs.truncateSync(f, V3_HEADER_BYTES)],
      ["missing", (f) => fs.rmSync(f)],
      ["version 4", (f) => {
        const b = fs.readFileSync(f);
        b[4] = 4;
        resealHint(b);
        fs.writeFileSync(f, b);
      }],
    ];
    for (const [what, damage] of cases) {
      const dir = copyDir(base, "hints3-case");
      damage(hintPath(dir, rich));
      const r = await open(dir);
      expect(r.hinted, what).toBe(r.segments - 1);
      expect(r.state, what).toEqual(reference);
      expect(fs.readFileSync(hintPath(dir, rich))[4], `${what}: rewritten`).toBe(3);
      const again = await open(dir);
      expect(again.hinted, `${what}: fully hinted again`).toBe(again.segments);
      expect(again.state, what).toEqual(reference);
    }
  }, 60_000);

  it("twin: with the checksums recomputed, a changed generation, scope index or emptied table is loaded and the state differs from the scan", async () => {
    const good = fs.readFileSync(hintPath(base, plain));
    const x = sectionsOfV3(good);
    const f = firstEntryFields(good);
    const damages: Array<[string, (b: Buffer) => void]> = [
      ["first entry's generation + 4", (b) => (b[f.generation] = (b[f.generation] as number) ^ 0x04)],
      ["table emptied", (b) => b.fill(0, x.index + 4 * x.keyed, x.summary)],
      ["scope renamed", (b) => (b[x.scopes + 3] = (b[x.scopes + 3] as number) ^ 0x01)],
    ];
    const refDir = copyDir(base, "hints3-twin-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, OPTS);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    try {
      for (const [what, damage] of damages) {
        const bad = Buffer.from(good);
        damage(bad);
        resealHint(bad);
        expect(checkHint(bad, plain, headerOf(base, plain)), `${what}: whole, so loaded`).not.toBeNull();
        const s = await Store.open(planted(base, plain, bad, "hints3-twin"), OPTS);
        try {
          expect(s.opened.hinted, what).toBe(s.opened.segments);
          // Reads first (the deferred path the table serves), then the whole state.
          const differ = differing(s, ref, names);
          expect(differ > 0 || JSON.stringify(recoveredState(s)) !== JSON.stringify(reference), `${what}: only the checksum stood between them`).toBe(true);
        } finally {
          await s.close();
        }
      }
    } finally {
      await ref.close();
    }
  }, 60_000);

  it("a packed block that passes its checksum but does not decode fails closed at first use: CorruptionError, hint deleted, the next open scans exactly; twin: with the decoder's and the entries' checks off it is applied and the state is wrong", async () => {
    const good = fs.readFileSync(hintPath(base, plain));
    const bad = Buffer.from(good);
    bad[V3_HEADER_BYTES] = (bad[V3_HEADER_BYTES] as number) & ~7; // the first entry's type: 0, no entry's
    resealHint(bad);
    expect(checkHint(bad, plain, headerOf(base, plain)), "checkHint decodes every block: refused").toBeNull();
    const refDir = copyDir(base, "hints3-bad-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, OPTS);
    const inSeg = [...ref.keydir.all()].find((t) => t.seg === plain || t.tombSeg === plain);
    await ref.close();
    expect(inSeg, "a slot with a record in that segment").toBeDefined();
    const victim = inSeg as { scope: string; key: string };
    const dir = planted(base, plain, bad, "hints3-bad");
    // The first lookup that meets the block fails closed: a read's, or already the open's own when
    // an erasure of another segment names a slot of this one (recovery applies erasures at open).
    const s = await Store.open(dir, OPTS).catch((err: unknown) => err);
    if (s instanceof Store) {
      try {
        expect(s.opened.hinted, "not decoded at open").toBe(s.opened.segments);
        expect(() => s.readSync(victim.key, { scope: victim.scope, inherit: false })).toThrow(CorruptionError);
        expect(() => s.readSync("never-written", { scope: "global", inherit: false }), "every later lookup refuses too").toThrow(CorruptionError);
        expect(() => [...s.keydir.all()], "and so does a pass over all slots").toThrow(CorruptionError);
      } finally {
        await s.close().catch(() => undefined);
      }
    } else expect(s, "the open's own lookup refused").toBeInstanceOf(CorruptionError);
    expect(fs.existsSync(hintPath(dir, plain)), "the malformed hint is deleted").toBe(false);
    const after = await open(dir);
    expect(after.hinted).toBe(after.segments - 1);
    expect(after.state).toEqual(reference);

    unsafeTrustPackedEntries(true);
    unsafeSkipHintEntryChecks(true);
    const wrong = await open(planted(base, plain, bad, "hints3-bad-twin")).then((t) => t.state, (err: unknown) => err);
    expect(wrong, "unchecked, the malformed entry goes in").not.toEqual(reference);
    expect(wrong, "and nothing fails closed").not.toBeInstanceOf(CorruptionError);
  }, 60_000);

  it("a block holding an erase entry that passes its checksum but does not decode is refused at open (the open decodes it), the segment scanned exactly", async () => {
    const good = fs.readFileSync(hintPath(base, rich));
    const x = sectionsOfV3(good);
    const bad = Buffer.from(good);
    bad[V3_HEADER_BYTES] = (bad[V3_HEADER_BYTES] as number) & ~7; // the first entry's type: 0, no entry's
    resealHint(bad);
    expect(x.entryBlocks, "one block: the erase entries are in it").toBe(1);
    expect(checkHint(bad, rich, headerOf(base, rich))).toBeNull();
    const r = await open(planted(base, rich, bad, "hints3-erase"));
    expect(r.hinted).toBe(r.segments - 1);
    expect(r.state).toEqual(reference);
  }, 60_000);

  it("a hint of many blocks: a bit flipped in a packed block the open does not read is found at first use, the segment rescanned, entries already applied kept; every read and the state exact; twin: a block's entries cut short and resealed are missed", async () => {
    const dir = tempDir("hints3-big");
    const big: OpenOptions = { ...OPTS, segmentBytes: 1 << 20 };
    const s0 = await Store.open(dir, big);
    for (let i = 0; i < 12000; i += 500) await s0.batch(Array.from({ length: 500 }, (_, j) => ({ op: "write" as const, key: `key-${String(i + j).padStart(5, "0")}`, value: `v${i + j}`, scope: SCOPES[(i + j) % SCOPES.length] as string })));
    await s0.close();
    const id = hintIds(dir)[0] as number;
    const good = fs.readFileSync(hintPath(dir, id));
    const x = sectionsOfV3(good);
    expect(x.entryBlocks, "a hint of several entry blocks").toBeGreaterThan(4);
    expect(x.erases).toBe(0);
    const refDir = copyDir(dir, "hints3-big-ref");
    dropHints(refDir);
    const ref = await Store.open(refDir, big);
    const want = recoveredState(ref);
    const names = [...ref.keydir.all()].map((t) => [t.scope, t.key] as const);
    try {
      const mid = Math.floor(x.entryBlocks / 2);
      const midFrom = V3_HEADER_BYTES + good.readUInt32LE(x.rows + 20 * (mid - 1));
      const bad = Buffer.from(good);
      bad[midFrom + 7] = (bad[midFrom + 7] as number) ^ 0x02;
      // The twin: the middle block's first entry's key bytes swapped for another name of the same length, resealed.
      const renamed = Buffer.from(good);
      const keyAt = renamed.indexOf("key-", midFrom, "latin1");
      renamed.write("kez-", keyAt, "latin1");
      resealHint(renamed);
      for (const [label, buf, exact] of [["flipped", bad, true], ["renamed, resealed", renamed, false]] as const) {
        const copy = copyDir(dir, "hints3-big-flip");
        fs.writeFileSync(hintPath(copy, id), buf);
        const s = await Store.open(copy, big);
        try {
          expect(s.opened.hinted, `${label}: loaded (its blocks are checked at first use)`).toBe(s.opened.segments);
          const differ = differing(s, ref, names);
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

  it("version-2 and version-1 hints are still read (state exact, fully hinted) and sealed ones are rewritten as version 3", async () => {
    const v2 = await build(2);
    const v1dir = copyDir(v2, "hints3-v1");
    for (const id of hintIds(v1dir)) {
      const b = fs.readFileSync(hintPath(v1dir, id));
      expect(b[4]).toBe(2);
      const x = sectionsOf(b);
      const v1 = Buffer.alloc(HINT_V1_HEADER_BYTES + x.bodyBytes + HINT_TRAILER_BYTES);
      b.copy(v1, 0, 0, HINT_V1_HEADER_BYTES);
      v1[4] = 1;
      b.copy(v1, HINT_V1_HEADER_BYTES, HINT_HEADER_BYTES, HINT_HEADER_BYTES + x.bodyBytes);
      resealHint(v1);
      fs.writeFileSync(hintPath(v1dir, id), v1);
    }
    for (const [label, dir] of [["version 2", v2], ["version 1", v1dir]] as const) {
      const r = await open(dir);
      expect(r.hinted, label).toBe(r.segments);
      expect(r.state, label).toEqual(reference);
      for (const id of hintIds(dir)) {
        const sealed = (headerOf(dir, id).header.flags & 1) !== 0;
        if (sealed) expect(fs.readFileSync(hintPath(dir, id))[4], `${label}: sealed hint ${id} rewritten`).toBe(3);
      }
      const again = await open(dir);
      expect(again.hinted, label).toBe(again.segments);
      expect(again.state, label).toEqual(reference);
    }
  }, 60_000);
});
