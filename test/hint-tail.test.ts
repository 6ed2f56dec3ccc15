/**
 * The active segment's tail after its hint (engine/recovery.ts tailIsZero): an open that finds a
 * valid prefix hint of the active segment reads the bytes after it in 256 KiB chunks and, when
 * they are all zeros (the preallocated tail after a clean close), takes the clean end the framed
 * scan would report without the buffer of the file's size the scan needs. Anything non-zero goes
 * to the scan, which decides as it always did.
 *
 * Method: real stores on real files, with segments of 1 MiB so that the preallocated tail after
 * the hint spans several chunks. The reference for every case is a full scan of a copy of the
 * same directory with its hint files deleted (the scan does not use hints). Cases: a clean close
 * (the tail is all zeros: counted in `opened.zeroTails`, the state equals the scan's); durable
 * writes appended after the hint was written (a copy taken while the store is open, as a crash
 * leaves it: the on-disk hint covers less than the file holds) — the new keys must be found; one
 * non-zero byte at the last byte of the file (the last chunk) and one just after the hint (the
 * first) — the scan must cut it as a torn tail exactly as the full scan does; the segment
 * truncated below the hint's end (the hint is refused and the segment scanned); and bits flipped
 * in the hint (refused, scanned). The twin switches the check off (`unsafeTrustHintTail`): the
 * appended writes are then lost, the garbage byte stays in the file, and the test sees both.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeTrustHintTail } from "../engine/recovery.js";
import { hintFileName } from "../segments/hint.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { dropHints } from "./helpers/hints.js";

const NOW = 1_800_000_000_000;
const SEGMENT_BYTES = 1024 * 1024;
const OPTS: OpenOptions = { durability: "sync", segmentBytes: SEGMENT_BYTES, compaction: { workers: 0, auto: false }, clock: () => NOW };
const KEYS = 300;

afterEach(() => unsafeTrustHintTail(false));

function copyDir(src: string, label: string): string {
  const dst = tempDir(label);
  fs.cpSync(src, dst, { recursive: true });
  return dst;
}

/** The single segment file of `dir` (the tests write less than one segment). */
function segFile(dir: string): string {
  const segs = path.join(dir, "segments");
  const names = fs.readdirSync(segs).filter((n) => n.endsWith(".seg"));
  expect(names).toHaveLength(1);
  return path.join(segs, names[0] as string);
}

/** The hint's coversEnd (header offset 12, docs/FORMAT.md "Hint files"). */
function coversEnd(dir: string): number {
  const seg = segFile(dir);
  const hint = path.join(path.dirname(seg), hintFileName(Number(path.basename(seg, ".seg"))));
  return fs.readFileSync(hint).readUInt32LE(12);
}

/** Writes KEYS keys with 200-byte values and closes: one active segment with a prefix hint. */
async function build(): Promise<string> {
  const dir = tempDir("hint-tail");
  const s = await Store.open(dir, OPTS);
  for (let i = 0; i < KEYS; i += 10) {
    await s.batch(Array.from({ length: 10 }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: `v${i + j}-${"x".repeat(200)}` })));
  }
  await s.close();
  return dir;
}

/** What the keys k0..k(n-1) read as, plus the store's sequence and active data end. */
function contents(s: Store, n: number): unknown {
  const values: Array<string | null> = [];
  for (let i = 0; i < n; i++) {
    const r = s.readSync(`k${i}`);
    values.push(r.status === "OK" ? String(r.value) : null);
  }
  return { values, seq: s.sequence, ends: [...s.segments.values()].map((g) => g.dataEnd) };
}

/** Opens `dir`, returns what it holds and what the open found, closes it. */
async function openState(dir: string, n: number): Promise<{ state: unknown; opened: Store["opened"] }> {
  const s = await Store.open(dir, OPTS);
  try {
    return { state: contents(s, n), opened: s.opened };
  } finally {
    await s.close();
  }
}

/** The state a full scan gives: a copy of `dir` without its hints. */
async function scanned(dir: string, n: number): Promise<{ state: unknown; opened: Store["opened"] }> {
  const ref = copyDir(dir, "hint-tail-ref");
  expect(dropHints(ref)).toBeGreaterThan(0);
  const r = await openState(ref, n);
  expect(r.opened.hinted).toBe(0);
  return r;
}

/** A copy of `dir` after `extra` more durable writes made once its hint was on disk, taken while the store is open (as a crash leaves it). */
async function withAppended(dir: string, extra: number): Promise<string> {
  const s = await Store.open(dir, OPTS);
  for (let i = KEYS; i < KEYS + extra; i++) await s.write(`k${i}`, `late-${i}`);
  const copy = copyDir(dir, "hint-tail-crash");
  await s.close();
  return copy;
}

/** Sets the byte at `at` of `file` to 0x5a. */
function poke(file: string, at: number): void {
  const fd = fs.openSync(file, "r+");
  try {
    fs.writeSync(fd, Buffer.from([0x5a]), 0, 1, at);
  } finally {
    fs.closeSync(fd);
  }
}

function byteAt(file: string, at: number): number {
  const b = fs.readFileSync(file);
  return b[at] as number;
}

describe("the active segment's tail after its hint", () => {
  it("clean close: the tail is zeros, checked without a scan, and the state is the scan's", async () => {
    const dir = await build();
    const seg = segFile(dir);
    expect(fs.statSync(seg).size - coversEnd(dir)).toBeGreaterThan(2 * 256 * 1024); // several chunks
    const ref = await scanned(dir, KEYS);
    const got = await openState(dir, KEYS);
    expect(got.opened.hinted).toBe(1);
    expect(got.opened.zeroTails).toBe(1);
    expect(got.state).toEqual(ref.state);
    // The reopened store appends where the hint ended, and the next open still agrees with a scan.
    const s = await Store.open(dir, OPTS);
    await s.write("k0", "after-reopen");
    await s.close();
    const again = await openState(dir, KEYS);
    expect(again.opened.zeroTails).toBe(1);
    expect(again.state).toEqual((await scanned(dir, KEYS)).state);
    expect((again.state as { values: string[] }).values[0]).toBe("after-reopen");
  });

  it("durable writes after the hint: the tail is not zeros, the scan finds them", async () => {
    const dir = await build();
    const crashed = await withAppended(dir, 40);
    const ref = await scanned(crashed, KEYS + 40);
    const got = await openState(crashed, KEYS + 40);
    expect(got.opened.hinted).toBe(1);
    expect(got.opened.zeroTails).toBe(0);
    expect(got.state).toEqual(ref.state);
    expect((got.state as { values: Array<string | null> }).values[KEYS + 39]).toBe(`late-${KEYS + 39}`);
  });

  it("twin: with the tail trusted unread, the writes after the hint are lost", async () => {
    const dir = await build();
    const crashed = await withAppended(dir, 40);
    const ref = await scanned(crashed, KEYS + 40);
    unsafeTrustHintTail(true);
    const got = await openState(crashed, KEYS + 40);
    unsafeTrustHintTail(false);
    expect(got.opened.zeroTails).toBe(1);
    expect(got.state).not.toEqual(ref.state);
    expect((got.state as { values: Array<string | null> }).values[KEYS + 39]).toBeNull();
  });

  for (const where of ["last byte of the file", "first byte after the hint"] as const) {
    it(`one non-zero byte at the ${where}: cut as the full scan cuts it`, async () => {
      const dir = await build();
      const seg = segFile(dir);
      const at = where === "last byte of the file" ? fs.statSync(seg).size - 1 : coversEnd(dir);
      poke(seg, at);
      const ref = await scanned(dir, KEYS);
      const got = await openState(dir, KEYS);
      expect(got.opened.hinted).toBe(1);
      expect(got.opened.zeroTails).toBe(0);
      expect(got.opened.tornTails).toBe(ref.opened.tornTails);
      expect(got.opened.tornTails).toBe(1);
      expect(got.state).toEqual(ref.state);
      expect(byteAt(seg, at)).toBe(0); // re-zeroed with the torn tail
    });
  }

  it("twin: with the tail trusted unread, the garbage byte stays in the file", async () => {
    const dir = await build();
    const seg = segFile(dir);
    const at = fs.statSync(seg).size - 1;
    poke(seg, at);
    unsafeTrustHintTail(true);
    const got = await openState(dir, KEYS);
    unsafeTrustHintTail(false);
    expect(got.opened.tornTails).toBe(0);
    expect(byteAt(seg, at)).toBe(0x5a);
  });

  it("the segment cut below the hint's end: the hint is refused and the segment scanned", async () => {
    const dir = await build();
    const seg = segFile(dir);
    const end = coversEnd(dir);
    fs.truncateSync(seg, end - 100);
    const ref = await scanned(dir, KEYS);
    const got = await openState(dir, KEYS);
    expect(got.opened.hinted).toBe(0);
    expect(got.opened.zeroTails).toBe(0);
    expect(got.state).toEqual(ref.state);
  });

  it("the segment cut to exactly the hint's end (no tail at all): hinted, nothing to check", async () => {
    const dir = await build();
    const seg = segFile(dir);
    fs.truncateSync(seg, coversEnd(dir));
    const ref = await scanned(dir, KEYS);
    const got = await openState(dir, KEYS);
    expect(got.opened.hinted).toBe(1);
    expect(got.opened.zeroTails).toBe(1);
    expect(got.state).toEqual(ref.state);
    const s = await Store.open(dir, OPTS);
    await s.write("more", "m"); // the writer extends the file past the old end
    await s.close();
    expect((await openState(dir, KEYS)).state).toEqual((await scanned(dir, KEYS)).state);
  });

  it("two zero bytes after the hint's end: the scan decides (a short group, cut), as without the check", async () => {
    const dir = await build();
    const seg = segFile(dir);
    fs.truncateSync(seg, coversEnd(dir) + 2);
    const ref = await scanned(dir, KEYS);
    const got = await openState(dir, KEYS);
    expect(got.opened.hinted).toBe(1);
    expect(got.opened.zeroTails).toBe(0);
    expect(got.opened.tornTails).toBe(ref.opened.tornTails);
    expect(got.state).toEqual(ref.state);
  });

  it("a bit flipped in the hint: refused, the segment scanned, the state the scan's", async () => {
    const dir = await build();
    const seg = segFile(dir);
    const hint = path.join(path.dirname(seg), hintFileName(Number(path.basename(seg, ".seg"))));
    const ref = await scanned(dir, KEYS);
    const bytes = fs.readFileSync(hint);
    for (const at of [12, 20, 40]) {
      const bad = copyDir(dir, "hint-tail-flip");
      const copy = Buffer.from(bytes);
      copy[at] = (copy[at] as number) ^ 0x10;
      fs.writeFileSync(path.join(bad, "segments", path.basename(hint)), copy);
      const got = await openState(bad, KEYS);
      expect(got.opened.hinted, `byte ${at}`).toBe(0);
      expect(got.opened.zeroTails).toBe(0);
      expect(got.state, `byte ${at}`).toEqual(ref.state);
    }
  });
});
