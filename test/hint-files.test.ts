/**
 * Hint files are a cache of the segment scan, never trusted (segments/hint.ts, DESIGN.md).
 *
 * Method: a seeded workload of writes, overwrites, TTLs, forgets, undeletes, batches and a chunked
 * scope erasure runs on a real store with 4 KiB segments (many seals, so many hints) and is
 * compacted in both modes; the store is closed, which leaves a prefix hint of the active segment.
 * The reference is the state a pure scan rebuilds: every slot's fields, every erasure, every
 * segment's extent, sequence range and scopes, taken from a copy opened with all hint files
 * deleted. Then copies of the directory are damaged in every way a hint can be wrong — each byte
 * class of the file with one bit flipped (every byte checked directly, a sample through a whole
 * open), truncated at every length, missing, of another version, stale after an in-place
 * compaction (same segment id and size class, new header), left behind by a retired segment — and
 * each reopen must report that segment as scanned (not hinted) and rebuild exactly the reference.
 * The twins take the protections away (the checksum recomputed over a changed entry: loaded, and
 * the state differs from the reference, so the comparison can see a wrong hint; a stale hint is
 * whole for the header it was written for, and only the identity check tells it from the new one). Damage to segment bytes under a valid hint is found by the
 * read (CorruptionError, never other bytes) and by verify; without the hint, by the open.
 * Hinted slots are built on first use (engine/hint-index.ts): reads, probes, writes, forgets and
 * undeletes of every key on a hinted store, before any pass over all slots, answer exactly as on
 * the scanned copy; its twin builds a slot without asking the deferred entries and differs.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { CorruptionError } from "../rules/errors.js";
import { checkHint, forEachEntry, HINT_HEADER_BYTES } from "../segments/hint.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { dropHints, hintIds } from "./helpers/hints.js";
import { rng } from "./helpers/rng.js";
import { copyDir, headerOf, hintPath, openState, recoveredState, scannedState } from "./helpers/recovered-state.js";
import { firstEntryFields, resealHint, sectionsOf, sectionsOfV3 } from "./helpers/hint-layout.js";

const NOW = 1_800_000_000_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false }, clock: () => NOW };
const SCOPES = ["global", "user:alice", "user:alice/notes", "user:bob"];

/** The seeded workload; returns the directory, closed. */
async function build(): Promise<string> {
  const dir = tempDir("hints");
  const s = await Store.open(dir, OPTS);
  const pick = rng(11);
  const key = (): string => `k${Math.floor(pick() * 60)}`;
  const scope = (): string => SCOPES[Math.floor(pick() * SCOPES.length)] as string;
  for (let i = 0; i < 400; i++) {
    const r = pick();
    if (r < 0.55) await s.write(key(), `v${i}-${"x".repeat(Math.floor(pick() * 200))}`, { scope: scope(), ...(pick() < 0.1 ? { ttlMs: 60_000 } : {}) });
    else if (r < 0.7) await s.forget(key(), { scope: scope() }).catch(() => undefined);
    else if (r < 0.78) await s.undelete(key(), { scope: scope() }).catch(() => undefined);
    else if (r < 0.9) {
      const sc = scope();
      await s.batch([{ op: "write", key: key(), value: `b${i}`, scope: sc }, { op: "forget", key: key(), scope: sc }, { op: "write", key: `${key()}b`, value: `c${i}`, scope: sc }]).catch(() => undefined);
    } else if (i % 40 === 0) await s.forgetScope("user:bob");
  }
  await s.compact({ mode: "copy-on-write" });
  for (let i = 0; i < 60; i++) await s.write(`late${i % 20}`, `late-${i}-${"y".repeat(120)}`, { scope: scope() });
  await s.compact({ mode: "in-place" });
  for (let i = 0; i < 10; i++) await s.write(`tail${i}`, `t${i}`);
  await s.close();
  return dir;
}

/** Opens `dir` with OPTS: its state and what the open found. */
const open = (dir: string): ReturnType<typeof openState> => openState(dir, OPTS);
/** The reference state: a scan of a hint-less copy of `dir`. */
const scanned = (dir: string): Promise<unknown> => scannedState(dir, OPTS, "hints-ref");

/** Recomputes a hint's checksums after a change (the protection taken away): its block sums and trailer. */
const reseal = resealHint;

describe("hint files", () => {
  let base = "";
  let reference: unknown = null;

  it("a clean reopen loads every segment from its hint and rebuilds exactly what the scan does", async () => {
    base = await build();
    reference = await scanned(base);
    const ids = hintIds(base);
    const r = await open(copyDir(base, "hints-all"));
    expect(r.segments).toBeGreaterThan(5);
    expect(ids.length).toBe(r.segments); // every segment, the active one included (its prefix)
    expect(r.hinted).toBe(r.segments);
    expect(r.state).toEqual(reference);
  }, 60_000);

  it("every byte of every hint, one bit flipped, and every truncation: checkHint refuses it", async () => {
    let checked = 0;
    for (const id of hintIds(base)) {
      const good = fs.readFileSync(hintPath(base, id));
      const header = headerOf(base, id);
      expect(checkHint(good, id, header), `hint ${id} is valid`).not.toBeNull();
      for (let at = 0; at < good.length; at++) {
        const bad = Buffer.from(good);
        bad[at] = (bad[at] as number) ^ (1 << (at % 8));
        expect(checkHint(bad, id, header), `hint ${id} byte ${at}`).toBeNull();
        checked += 1;
      }
      for (let len = 0; len < good.length; len += Math.max(1, Math.floor(good.length / 97))) expect(checkHint(good.subarray(0, len), id, header)).toBeNull();
      expect(checkHint(good, id + 1, header), "another segment's id").toBeNull();
    }
    expect(checked).toBeGreaterThan(1000);
  });

  it("a bit flipped in each byte class (header fields, entry offset, fixed fields, names, erase list, trailer): that segment is scanned, state exact", async () => {
    const ids = hintIds(base);
    const id = ids[Math.floor(ids.length / 2)] as number;
    const good = fs.readFileSync(hintPath(base, id));
    const positions = [0, 4, 5, 6, 8, 12, 16, 24, 28, 32, 40, HINT_HEADER_BYTES, HINT_HEADER_BYTES + 4, HINT_HEADER_BYTES + 8, HINT_HEADER_BYTES + 24, HINT_HEADER_BYTES + 44, HINT_HEADER_BYTES + 46, good.length - 40, good.length - 8, good.length - 1];
    for (const at of positions) {
      const dir = copyDir(base, "hints-flip");
      const bad = Buffer.from(good);
      bad[at] = (bad[at] as number) ^ 0x10;
      fs.writeFileSync(hintPath(dir, id), bad);
      const r = await open(dir);
      // Header, summary, trailer: refused at open. The checksummed blocks of the entries and index
      // (version 2): refused at open when the open reads that block, else found at first use and
      // the segment rescanned (test/hint-v2.test.ts); the state is exact either way.
      const summary = good[4] === 3 ? sectionsOfV3(good).summary : sectionsOf(good).summary;
      if (at < HINT_HEADER_BYTES || at >= summary) expect(r.hinted, `byte ${at}`).toBe(r.segments - 1);
      else expect(r.hinted, `byte ${at}`).toBeGreaterThanOrEqual(r.segments - 1);
      expect(r.state, `byte ${at}`).toEqual(reference);
    }
  }, 120_000);

  it("twin: the same flip with the checksum recomputed is loaded, and the state differs from the scan", async () => {
    const ids = hintIds(base);
    const id = ids[1] as number;
    const dir = copyDir(base, "hints-twin");
    const bad = fs.readFileSync(hintPath(dir, id));
    // The first entry's generation: verbatim in version 2, a varint in version 3 (bit 2 of its first byte: the value changes by 4).
    const genAt = bad[4] === 3 ? firstEntryFields(bad).generation : HINT_HEADER_BYTES + 4 + 24;
    bad[genAt] = (bad[genAt] as number) ^ 0x04;
    reseal(bad);
    fs.writeFileSync(hintPath(dir, id), bad);
    const r = await open(dir);
    expect(r.hinted).toBe(r.segments);
    expect(r.state).not.toEqual(reference);
  });

  it("a truncated, a missing and an other-version hint: scanned, state exact, and the open writes it anew", async () => {
    const id = hintIds(base)[0] as number;
    const cases: Array<[string, (f: string) => void]> = [
      ["truncated", (f) => fs.truncateSync(f, fs.statSync(f).size - 3)],
      ["missing", (f) => fs.rmSync(f)],
      [
        "version 4 (no reader knows it)",
        (f) => {
          const b = fs.readFileSync(f);
          b[4] = 4;
          reseal(b);
          fs.writeFileSync(f, b);
        },
      ],
    ];
    for (const [what, damage] of cases) {
      const dir = copyDir(base, "hints-case");
      damage(hintPath(dir, id));
      const r = await open(dir);
      expect(r.hinted, what).toBe(r.segments - 1);
      expect(r.state, what).toEqual(reference);
      expect(checkHint(fs.readFileSync(hintPath(dir, id)), id, headerOf(dir, id)), `${what}: rewritten at open`).not.toBeNull();
      expect((await open(dir)).hinted, `${what}: the next open uses it`).toBe(r.segments);
    }
  }, 60_000);

  it("stale after an in-place compaction: the old hint is refused; twin: whole for its old header, its entries are wrong for the new one", async () => {
    const dir = copyDir(base, "hints-stale");
    const s = await Store.open(dir, OPTS);
    const victim = [...s.segments.values()].find((g) => g.writer === null && [...s.keydir.all()].some((x) => x.seg === g.id)) as { id: number };
    const old = fs.readFileSync(hintPath(dir, victim.id));
    const oldHeader = headerOf(dir, victim.id);
    const inVictim = [...s.keydir.all()].filter((x) => x.seg === victim.id);
    for (const x of inVictim.filter((_, i) => i % 2 === 0)) await s.forget(x.key, { scope: x.scope });
    await s.flush();
    await s.compact({ mode: "in-place", segments: [victim.id] });
    await s.close();
    expect(fs.existsSync(path.join(dir, "segments", `${String(victim.id).padStart(8, "0")}.seg`)), "the victim keeps live records").toBe(true);
    expect(headerOf(dir, victim.id).header.generation, "rewritten in place").toBeGreaterThan(0);
    fs.writeFileSync(hintPath(dir, victim.id), old);
    const r = await open(dir);
    expect(r.hinted).toBe(r.segments - 1);
    expect(r.state).toEqual(await scanned(dir));
    // Twin: without the identity check the stale hint would pass (it is whole and well formed for
    // the header it was written for), and its entries describe records the rewrite moved or dropped.
    expect(checkHint(old, victim.id, oldHeader), "whole for its own header").not.toBeNull();
    expect(checkHint(old, victim.id, headerOf(dir, victim.id)), "refused for the rewritten one").toBeNull();
    const offsets = (h: NonNullable<ReturnType<typeof checkHint>>): number[] => {
      const out: number[] = [];
      forEachEntry(h, (e) => out.push(e.offset));
      return out;
    };
    const fresh = checkHint(fs.readFileSync(hintPath(dir, victim.id)), victim.id, headerOf(dir, victim.id));
    expect(fresh, "the open wrote the rewritten segment's hint").not.toBeNull();
    expect(offsets(checkHint(old, victim.id, oldHeader) as NonNullable<typeof fresh>)).not.toEqual(offsets(fresh as NonNullable<typeof fresh>));
  }, 60_000);

  it("a retired segment's hint goes with it; one planted back is deleted at open and never read", async () => {
    const dir = copyDir(base, "hints-retired");
    const s = await Store.open(dir, OPTS);
    const before = new Set(hintIds(dir));
    for (const x of [...s.keydir.all()]) await s.forget(x.key, { scope: x.scope }).catch(() => undefined);
    await s.compact({ mode: "copy-on-write" });
    await s.close();
    const live = new Set([...fs.readdirSync(path.join(dir, "segments"))].filter((n) => n.endsWith(".seg")).map((n) => Number(n.slice(0, 8))));
    const gone = [...before].filter((id) => !live.has(id));
    expect(gone.length).toBeGreaterThan(0);
    for (const id of gone) expect(fs.existsSync(hintPath(dir, id)), `hint of retired ${id}`).toBe(false);
    for (const id of gone) fs.copyFileSync(hintPath(base, id), hintPath(dir, id));
    const want = await scanned(dir);
    const r = await open(dir);
    for (const id of gone) expect(fs.existsSync(hintPath(dir, id)), `planted hint of ${id}`).toBe(false);
    expect(r.state).toEqual(want);
  }, 60_000);

  it("damage to segment bytes under a valid hint: the read throws CorruptionError and verify reports it; without the hint the open does", async () => {
    const dir = copyDir(base, "hints-damage");
    const s0 = await Store.open(dir, OPTS);
    const victim = [...s0.keydir.all()].find((x) => x.seg !== 0 && s0.segments.get(x.seg)?.writer === null && x.len > 100) as { scope: string; key: string; seg: number; off: number; len: number; putSeq: number };
    const readable = s0.readSync(victim.key, { scope: victim.scope, inherit: false }).status;
    await s0.close();
    const file = path.join(dir, "segments", `${String(victim.seg).padStart(8, "0")}.seg`);
    const b = fs.readFileSync(file);
    b[victim.off + victim.len - 20] = (b[victim.off + victim.len - 20] as number) ^ 0x01;
    fs.writeFileSync(file, b);
    const scanCopy = copyDir(dir, "hints-damage-scan");
    const s = await Store.open(dir, OPTS);
    try {
      expect(s.opened.hinted).toBe(s.opened.segments);
      if (readable === "OK") expect(() => s.readSync(victim.key, { scope: victim.scope, inherit: false })).toThrow(CorruptionError);
      const report = await s.verify();
      expect(report.ok).toBe(false);
    } finally {
      await s.close();
    }
    dropHints(scanCopy);
    await expect(Store.open(scanCopy, OPTS)).rejects.toBeInstanceOf(CorruptionError);
  }, 60_000);

  it("the active segment's prefix hint: writes after a reopen are scanned from where it ends, also after a crash (no close)", async () => {
    const dir = copyDir(base, "hints-active");
    const s = await Store.open(dir, { ...OPTS, durability: "sync" });
    expect(s.opened.hinted).toBe(s.opened.segments);
    for (let i = 0; i < 5; i++) await s.write(`after${i}`, `a${i}`);
    const crashed = copyDir(dir, "hints-active-crash"); // what a SIGKILL leaves: the close-time hint, more records after it
    await s.close();
    const want = await scanned(crashed);
    const r = await open(crashed);
    expect(r.hinted).toBe(r.segments);
    expect(r.state).toEqual(want);
    expect((r.state as { slots: Array<{ key: string }> }).slots.filter((x) => x.key.startsWith("after")).length).toBe(5);
  }, 60_000);

  it("deferred slots: before any pass over all slots, reads, probes and writes of hinted keys answer as a scanned store does", async () => {
    const dir = copyDir(base, "hints-lazy");
    const refDir = copyDir(base, "hints-lazy-ref");
    dropHints(refDir);
    const s = await Store.open(dir, OPTS);
    const ref = await Store.open(refDir, OPTS);
    try {
      expect(s.opened.hinted).toBe(s.opened.segments);
      expect(ref.opened.hinted).toBe(0);
      expect(s.keydir.isDeferred).toBe(true);
      const names = [...ref.keydir.all()].map((x) => [x.scope, x.key] as const);
      names.push(["global", "never-written"], ["user:alice", "k999"]);
      const ask = async (): Promise<void> => {
        for (const [scope, key] of names) {
          const o = { scope, inherit: false };
          expect(s.readSync(key, o), `${scope}/${key}`).toEqual(ref.readSync(key, o));
          expect(await s.probe(key, o), `${scope}/${key}`).toEqual(await ref.probe(key, o));
        }
      };
      await ask();
      expect(s.keydir.isDeferred, "reads and probes apply only the slots they ask for").toBe(true);
      for (const [i, [scope, key]] of names.entries()) {
        if (i % 3 === 0) for (const t of [s, ref]) await t.write(key, `new-${i}`, { scope });
        if (i % 5 === 1) for (const t of [s, ref]) await t.forget(key, { scope }).catch(() => undefined);
        if (i % 7 === 2) for (const t of [s, ref]) await t.undelete(key, { scope }).catch(() => undefined);
      }
      await ask();
      expect(recoveredState(s)).toEqual(recoveredState(ref));
      expect(s.keydir.isDeferred, "a pass over all slots applies the rest").toBe(false);
    } finally {
      await s.close();
      await ref.close();
    }
  }, 60_000);

  it("twin: a slot made without asking the deferred entries first misses them, and the comparison sees it", async () => {
    const dir = copyDir(base, "hints-lazy-twin");
    const refDir = copyDir(base, "hints-lazy-twin-ref");
    dropHints(refDir);
    const s = await Store.open(dir, OPTS);
    const ref = await Store.open(refDir, OPTS);
    try {
      const live = [...ref.keydir.all()].find((x) => ref.readSync(x.key, { scope: x.scope, inherit: false }).status === "OK") as { scope: string; key: string };
      s.keydir.ensureApplied(live.scope, live.key); // the bypass: no lookup of its hinted entries
      const o = { scope: live.scope, inherit: false };
      expect(s.readSync(live.key, o)).not.toEqual(ref.readSync(live.key, o));
    } finally {
      await s.close();
      await ref.close();
    }
  });

  it("a failed hint write (io:hint) leaves no hint and no .tmp; the seal and every call succeed; the next open scans", async () => {
    const dir = tempDir("hints-fail");
    const s = await Store.open(dir, { ...OPTS, faults: {} });
    s.faults.failAt?.("io:hint", "EIO", 1);
    for (let i = 0; i < 40; i++) await s.write(`k${i}`, `v${i}-${"z".repeat(300)}`);
    expect(s.faults.failuresLeft?.() ?? 0).toBe(0);
    await s.flush(); // the sealed hints' writes (their syncs on libuv's pool) settled
    const names = fs.readdirSync(path.join(dir, "segments"));
    expect(names.filter((n) => n.endsWith(".tmp"))).toEqual([]);
    const segs = names.filter((n) => n.endsWith(".seg")).length;
    expect(names.filter((n) => n.endsWith(".hint")).length).toBe(segs - 2); // not the active one, and not the one whose hint failed
    await s.close();
    const r = await open(dir);
    expect(r.hinted).toBe(r.segments - 1);
    for (let i = 0; i < 40; i++) expect(r.state).toBeDefined();
  }, 60_000);
});
