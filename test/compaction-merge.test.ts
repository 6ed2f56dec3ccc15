/**
 * Merged copy-on-write compaction (issue 11): several sealed segments become one output, and the
 * manifest — not the output's header — says which of them exists after a crash.
 *
 * Method: real stores in temp directories, compaction inline (`workers: 0`) so that every system
 * call of a pass runs on this thread, where segments/io.ts's observer records it in order. A store
 * of many small half-dead segments is compacted once; the test checks (1) that one output replaces
 * all of them, with the durability order of the design — output data synced, renamed, directory
 * synced; then one manifest write naming the output and none of its sources; only then the
 * sources' unlinks, and a directory fsync after the last of them before compact() resolves — and
 * that a reopen reads exactly the acknowledged content; (2) the crash window between the output's
 * durable rename and the publishing manifest write, rebuilt on disk from snapshots (the sources as
 * before the pass, the output beside them, the manifest as the reservation left it): reopen deletes
 * the unpublished output and every record is held once — and the twin with the protection off (the
 * manifest as it was before the pass, no id reserved) adopts the output beside all but one source,
 * so records are held twice, which the twin detects by scanning the files; (3) a failed publishing
 * manifest write (EIO injected right after the output's rename) rejects compact() with IoError,
 * withdraws the output, keeps the sources published, and the store reads, writes and reopens intact.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import type { OpenOptions } from "../src/index.js";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { chooseHeader } from "../segments/header.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { decodeRecord, isRecord, recordNamesAt } from "../segments/record.js";
import { walkSealed } from "../segments/scan.js";
import { readManifest, writeManifest } from "../engine/manifest.js";
import { tempDir } from "./helpers/tmp.js";
import { settle, within } from "./helpers/io-faults.js";

const DEADLINE = 30_000;
const KEYS = 2400;
const VALUE = (i: number): string => `v${i}:`.padEnd(200, "x");
const OPTS: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, compaction: { workers: 0, auto: false }, retention: { tombstoneRetentionMs: 0 } };

const segNames = (dir: string): string[] => fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".seg")).sort();
const idOf = (name: string): number => Number(name.slice(0, 8));

/** Writes KEYS keys, forgets every other one; returns the live content. */
async function fill(store: Engram): Promise<Map<string, string>> {
  const live = new Map<string, string>();
  for (let i = 0; i < KEYS; i += 200) {
    const ops = [];
    for (let j = i; j < i + 200; j++) ops.push({ op: "write" as const, scope: "s", key: `k${j}`, value: VALUE(j) });
    await store.batch(ops);
  }
  for (let i = 0; i < KEYS; i++) {
    if (i % 2 === 0) await store.forget(`k${i}`, { scope: "s" });
    else live.set(`k${i}`, VALUE(i));
  }
  return live;
}

/** Opens `dir` and checks every live key's value and every forgotten key's absence. */
async function checkContent(dir: string, live: ReadonlyMap<string, string>): Promise<void> {
  const store = await within(DEADLINE, Engram.open(dir, OPTS), "reopen");
  try {
    for (let i = 0; i < KEYS; i++) {
      const r = await store.read(`k${i}`, { scope: "s" });
      const want = live.get(`k${i}`);
      if (want === undefined) expect(r.status, `k${i} stays forgotten`).toBe("NOT_FOUND");
      else expect(r, `k${i}`).toMatchObject({ value: want });
    }
  } finally {
    await store.close();
  }
}

/** Every file of `dir`/segments, by name. */
function snapshot(dir: string): Map<string, Buffer> {
  const seg = path.join(dir, "segments");
  return new Map(fs.readdirSync(seg).map((n) => [n, fs.readFileSync(path.join(seg, n))]));
}

/** Replaces `dir`/segments with exactly `files`. */
function restore(dir: string, files: ReadonlyMap<string, Buffer>): void {
  const seg = path.join(dir, "segments");
  for (const n of fs.readdirSync(seg)) fs.rmSync(path.join(seg, n));
  for (const [n, b] of files) fs.writeFileSync(path.join(seg, n), b);
}

/** PUT records (scope, key, seq) held by more than one sealed segment file of `dir` (compaction copies only sealed ones). */
function duplicatePuts(dir: string): number {
  const seen = new Set<string>();
  let dups = 0;
  for (const name of segNames(dir)) {
    const bytes = fs.readFileSync(path.join(dir, "segments", name));
    const header = chooseHeader(bytes, idOf(name)).header;
    if ((header.flags & C.FLAG_SEALED) === 0) continue;
    walkSealed(bytes.subarray(0, header.sealedBytes), idOf(name), C.FORMAT_VERSION, (offset, _len, type) => {
      if (type !== C.RecordType.PUT) return;
      const { scope, key } = recordNamesAt(bytes, offset);
      const rec = decodeRecord(bytes, offset, bytes.length, false);
      const id = `${scope}\u0000${key}\u0000${isRecord(rec) ? rec.seq : -1}`;
      if (seen.has(id)) dups += 1;
      seen.add(id);
    });
  }
  return dups;
}

beforeAll(async () => {
  await initChecksum();
});

describe("merged copy-on-write compaction", () => {
  it("one output replaces many half-dead segments, in the durability order, and reopens exact", async () => {
    const dir = tempDir("merge-order");
    const store = await Engram.open(dir, OPTS);
    const live = await fill(store);
    const before = new Set(segNames(dir));
    const events: IoEvent[] = [];
    setIoObserver((e) => events.push(e));
    let report;
    try {
      report = await within(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact");
    } finally {
      setIoObserver(null);
    }
    const sources = report.segments;
    expect(sources.length, "many sealed segments held garbage").toBeGreaterThanOrEqual(6);
    const after = segNames(dir);
    const outputs = after.filter((n) => !before.has(n) && chooseHeader(fs.readFileSync(path.join(dir, "segments", n)), idOf(n)).header.replacesId !== 0);
    expect(outputs.length, "all of them merged into one output").toBe(1);
    const out = outputs[0] as string;
    for (const id of sources) expect(after, `source ${id} is gone`).not.toContain(`${String(id).padStart(8, "0")}.seg`);

    const at = (pred: (e: IoEvent) => boolean, what: string): number => {
      const i = events.findIndex(pred);
      expect(i, what).toBeGreaterThanOrEqual(0);
      return i;
    };
    const dataSynced = at((e) => e.op === "sync" && e.path.endsWith(`${out}.tmp`), "the output's data is fdatasynced");
    const renamed = at((e) => e.op === "rename" && e.to.endsWith(out), "the output is renamed");
    const dirSynced = events.findIndex((e, i) => i > renamed && e.op === "dir-sync");
    const manifests = events.map((e, i) => (e.op === "rename" && e.to.endsWith("MANIFEST") ? i : -1)).filter((i) => i >= 0);
    const publishing = manifests.find((i) => i > renamed) ?? -1;
    const unlinks = events.map((e, i) => (e.op === "unlink" && /\/\d{8}\.seg$/.test(e.path) ? i : -1)).filter((i) => i >= 0);
    expect(dataSynced).toBeLessThan(renamed);
    expect(dirSynced, "the output's name is durable before the manifest names it").toBeGreaterThan(renamed);
    expect(publishing, "a manifest write publishes the output").toBeGreaterThan(dirSynced);
    expect(manifests.filter((i) => i > renamed).length, "one manifest write publishes the merged output").toBe(1);
    // The reservation: the last manifest written before the output's file was opened already has
    // nextId past the output's id (bytes 8..12 of the manifest: nextId).
    const opened = at((e) => e.op === "open" && e.path.endsWith(`${out}.tmp`), "the output's .tmp is created");
    const reservation = events.slice(0, opened).filter((e): e is Extract<IoEvent, { op: "write" }> => e.op === "write" && e.path.endsWith("MANIFEST.tmp")).pop();
    expect(reservation, "a manifest write precedes the output").toBeDefined();
    expect(Buffer.concat((reservation as Extract<IoEvent, { op: "write" }>).data).readUInt32LE(8), "it reserves the output's id").toBeGreaterThan(idOf(out));
    expect(events.filter((e) => e.op === "sync" && e.path.endsWith(`${out}.tmp`)).length, "one data sync for all the sources").toBe(1);
    expect(unlinks.length).toBe(sources.length);
    for (const u of unlinks) expect(u, "no source is unlinked before the manifest stops listing it").toBeGreaterThan(publishing);
    const lastUnlink = Math.max(...unlinks);
    expect(events.findIndex((e, i) => i > lastUnlink && e.op === "dir-sync"), "a directory fsync follows the last unlink").toBeGreaterThan(lastUnlink);
    const dirSyncs = events.filter((e, i) => i > renamed && e.op === "dir-sync").length;
    expect(dirSyncs, "publication: the manifest's directory fsync and one after the unlinks").toBe(3);
    const listed = readManifest(path.join(dir, "segments"));
    expect(listed?.ids).toContain(idOf(out));
    for (const id of sources) expect(listed?.ids).not.toContain(id);
    await store.close();
    await checkContent(dir, live);
    expect(duplicatePuts(dir)).toBe(0);
  });

  for (const reserved of [true, false]) {
    it(reserved
      ? "a crash after the output's rename, before the manifest publishes it: reopen drops the output, nothing is held twice"
      : "twin: without the reserved id the same crash state adopts the output beside its sources, and the scan finds records held twice", async () => {
      const dir = tempDir("merge-window");
      const first = await Engram.open(dir, OPTS);
      const live = await fill(first);
      await first.close();
      const before = snapshot(dir);
      const manifestBefore = readManifest(path.join(dir, "segments"));
      expect(manifestBefore).not.toBeNull();
      const store = await Engram.open(dir, OPTS);
      const report = await within(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact");
      await store.close();
      expect(report.segments.length).toBeGreaterThanOrEqual(2);
      const after = snapshot(dir);
      const out = [...after.keys()].find((n) => n.endsWith(".seg") && !before.has(n) && chooseHeader(after.get(n) as Buffer, idOf(n)).header.replacesId !== 0);
      expect(out, "the pass wrote one output").toBeDefined();
      const outId = idOf(out as string);
      // The crash state: every source as before the pass, the output durable beside them (with
      // its hint), the publishing manifest never written. With the reservation, the manifest on
      // disk already has nextId past the output; without, it is the one from before the pass.
      const crashed = new Map(before);
      crashed.set(out as string, after.get(out as string) as Buffer);
      const hint = [...after.keys()].find((n) => n.startsWith(`${String(outId).padStart(8, "0")}.hint`));
      if (hint !== undefined) crashed.set(hint, after.get(hint) as Buffer);
      crashed.delete("MANIFEST");
      restore(dir, crashed);
      const m = manifestBefore as { ids: number[]; nextId: number };
      expect(outId, "the output's id is at or past the old nextId").toBeGreaterThanOrEqual(m.nextId);
      writeManifest(path.join(dir, "segments"), reserved ? { ids: m.ids, nextId: outId + 1 } : m);

      await checkContent(dir, live); // the values are right either way: only the copies differ
      const present = segNames(dir);
      const sourcesLeft = report.segments.filter((id) => present.includes(`${String(id).padStart(8, "0")}.seg`));
      if (reserved) {
        expect(present, "the unpublished output is deleted at open").not.toContain(out);
        expect(sourcesLeft.length, "every source is kept").toBe(report.segments.length);
        expect(duplicatePuts(dir), "every record is held once").toBe(0);
      } else {
        expect(present, "the unreserved output is adopted").toContain(out);
        expect(sourcesLeft.length, "only the source its header names is dropped").toBe(report.segments.length - 1);
        expect(duplicatePuts(dir), "the twin finds records held twice").toBeGreaterThan(0);
      }
    });
  }

  it("EIO on the publishing manifest write: compact() rejects, the output is withdrawn, the sources stay, reopen intact", async () => {
    const dir = tempDir("merge-manifest-eio");
    const store = await Engram.open(dir, { ...OPTS, faults: {} });
    const live = await fill(store);
    await store.flush();
    const sealedBefore = store.stats().segments.filter((s) => s.sealed).map((s) => s.id);
    let armed = false;
    setIoObserver((e) => {
      if (!armed && e.op === "rename" && /\d{8}\.seg$/.test(e.to)) {
        armed = true; // the output's rename: the next manifest write is the one that publishes it
        store.faults.failAt?.("io:manifest", "EIO", 1);
      }
    });
    let r;
    try {
      r = await settle(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact");
    } finally {
      setIoObserver(null);
    }
    expect(armed, "the pass renamed an output").toBe(true);
    expect(store.faults.failuresLeft?.(), "the publishing manifest write was tried").toBe(0);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toBeInstanceOf(IoError);
    const ids = store.stats().segments.map((s) => s.id);
    for (const id of sealedBefore) expect(ids, `source ${id} still published`).toContain(id);
    for (const n of segNames(dir)) expect(ids, `no unpublished file ${n} stays`).toContain(idOf(n));
    for (const [k, v] of live) expect(await store.read(k, { scope: "s" }), k).toMatchObject({ value: v });
    await store.write("after", "ok", { scope: "s" });
    const again = await within(DEADLINE, store.compact({ mode: "copy-on-write" }), "compact again");
    expect(again.segments.length).toBeGreaterThan(0);
    await store.close();
    await checkContent(dir, live);
    expect(duplicatePuts(dir)).toBe(0);
  });
});
