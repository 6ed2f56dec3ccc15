/**
 * What recovery rebuilt, as plain data, and the reference it is compared with: the state a scan of
 * every segment rebuilds from a copy of the same directory with its hint files deleted. The hint
 * tests (hint-files, hint-v2) compare every open against it, field by field.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "vitest";
import { Store } from "../../engine/store.js";
import { hintFileName } from "../../segments/hint.js";
import { readHeader } from "../../segments/header-io.js";
import type { OpenOptions } from "../../rules/types.js";
import { tempDir } from "./tmp.js";
import { dropHints } from "./hints.js";

/** A copy of `src` in a fresh temporary directory named after `label`. */
export function copyDir(src: string, label: string): string {
  const dst = tempDir(label);
  fs.cpSync(src, dst, { recursive: true });
  return dst;
}

/** The path of segment `id`'s hint file under `dir`. */
export function hintPath(dir: string, id: number): string {
  return path.join(dir, "segments", hintFileName(id));
}

/** Segment `id`'s header as on disk under `dir`. */
export function headerOf(dir: string, id: number): ReturnType<typeof readHeader> {
  const fd = fs.openSync(path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`), "r");
  try {
    return readHeader(fd, id);
  } finally {
    fs.closeSync(fd);
  }
}

/** Everything recovery rebuilds, as plain data: every slot field, the erasures, each segment's extent, seq range and scopes. */
export function recoveredState(s: Store): unknown {
  const slots = [...s.keydir.all()]
    .map((x) => ({
      scope: x.scope, key: x.key, putSeq: x.putSeq, putGen: x.putGen, seg: x.seg, off: x.off, len: x.len, expiresAt: x.expiresAt, generation: x.generation,
      tombSeq: x.tombSeq, tombGen: x.tombGen, tombSeg: x.tombSeg, tombOff: x.tombOff, tombLen: x.tombLen,
      clearSeq: x.clearSeq, clearSeg: x.clearSeg, clearOff: x.clearOff, clearLen: x.clearLen,
      physical: x.physical, listedSeq: x.listedSeq, reclaimedAt: x.reclaimedAt > 0,
    }))
    .sort((a, b) => (a.scope + "\u0000" + a.key < b.scope + "\u0000" + b.key ? -1 : 1));
  const erases = [...s.keydir.erases.entries()].sort();
  const segs = [...s.segments.values()]
    .map((g) => ({ id: g.id, dataEnd: g.dataEnd, minSeq: g.minSeq, maxSeq: g.maxSeq, scopes: [...g.scopes].sort(), sealed: g.writer === null }))
    .sort((a, b) => a.id - b.id);
  return { slots, erases, segs, seq: s.sequence };
}

/** Opens `dir` with `opts`, returns its state and what the open found, closes it. */
export async function openState(dir: string, opts: OpenOptions): Promise<{ state: unknown; hinted: number; segments: number }> {
  const s = await Store.open(dir, opts);
  try {
    return { state: recoveredState(s), hinted: s.opened.hinted, segments: s.opened.segments };
  } finally {
    await s.close();
  }
}

/** The reference: what a scan of every segment of a hint-less copy of `dir` rebuilds. */
export async function scannedState(dir: string, opts: OpenOptions, label: string): Promise<unknown> {
  const copy = copyDir(dir, label);
  dropHints(copy);
  const r = await openState(copy, opts);
  expect(r.hinted).toBe(0);
  return r.state;
}
