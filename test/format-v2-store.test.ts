/**
 * A format-2 store (48-byte record frames) opened, written, compacted and reopened by this code,
 * which writes format 3 (docs/FORMAT.md "A segment's version decides its record frame").
 *
 * Method: the store is built in format 2 through the test hook setFormatVersionWritten(2) —
 * several sealed segments and an unsealed active one, with overwrites and forgets — then the hook
 * is reset and the store reopened: every value reads back, new writes land in format-3 segments
 * (the format-2 active segment was sealed at open), compaction of everything (each mode) leaves
 * every segment in one format whose records all decode in it (verify() scans each with its
 * header's version), and a second reopen (hints, then without them) reads the same values.
 *
 * The twin: the same store with one format-2 segment's header rewritten to say version 3 (a valid
 * header checksum, records untouched): the open must fail with CorruptionError — the version in
 * the header is what picks the frame, and reading 48-byte frames as version 3 is detected, never
 * taken for other records.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, type OpenOptions } from "../src/index.js";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { chooseHeader, encodeHeader, formatOf } from "../segments/header.js";
import { parseSegmentFileName } from "../segments/file-names.js";
import { setFormatVersionWritten } from "../segments/version-written.js";
import { tempDir } from "./helpers/tmp.js";

afterEach(() => setFormatVersionWritten(3));

const PAD = "p".repeat(300);

function opts(mode: "copy-on-write" | "in-place"): OpenOptions {
  return { segmentBytes: 4096, compaction: { mode, workers: 0, auto: false } };
}

/** Each segment file's id and format version (its current header copy's). */
function versions(dir: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of fs.readdirSync(path.join(dir, "segments"))) {
    const id = parseSegmentFileName(name);
    if (id === null) continue;
    out.set(id, formatOf(chooseHeader(fs.readFileSync(path.join(dir, "segments", name)), id)));
  }
  return out;
}

/** Builds a format-2 store in `dir`; returns what each key should read. */
async function buildV2(dir: string, o: OpenOptions): Promise<Map<string, string | null>> {
  setFormatVersionWritten(2);
  const want = new Map<string, string | null>();
  const s = await Engram.open(dir, o);
  for (let i = 0; i < 30; i++) {
    await s.write(`k${i}`, `v2-${i}-${PAD}`);
    want.set(`k${i}`, `v2-${i}-${PAD}`);
  }
  for (let i = 0; i < 30; i += 3) {
    await s.write(`k${i}`, `v2b-${i}-${PAD}`);
    want.set(`k${i}`, `v2b-${i}-${PAD}`);
  }
  for (let i = 1; i < 30; i += 7) {
    await s.forget(`k${i}`);
    want.set(`k${i}`, null);
  }
  await s.close();
  setFormatVersionWritten(3);
  const v = versions(dir);
  expect(v.size).toBeGreaterThan(3);
  expect([...v.values()].every((x) => x === 2)).toBe(true);
  return want;
}

async function expectValues(s: Engram, want: Map<string, string | null>): Promise<void> {
  for (const [key, value] of want) {
    const got = await s.read(key);
    if (value === null) expect(got.status, key).not.toBe("OK");
    else expect(got, key).toMatchObject({ status: "OK", value });
  }
}

describe.each(["copy-on-write", "in-place"] as const)("a format-2 store under format-3 code (%s)", (mode) => {
  it("reads, appends in format 3, compacts each segment in its own format and reopens", async () => {
    await initChecksum();
    const dir = tempDir("v2store");
    const o = opts(mode);
    const want = await buildV2(dir, o);
    const before = versions(dir);
    const s = await Engram.open(dir, o);
    await expectValues(s, want);
    for (let i = 0; i < 30; i += 2) {
      await s.write(`k${i}`, `v3-${i}-${PAD}`);
      want.set(`k${i}`, `v3-${i}-${PAD}`);
    }
    for (let i = 30; i < 45; i++) {
      await s.write(`k${i}`, `v3-${i}-${PAD}`);
      want.set(`k${i}`, `v3-${i}-${PAD}`);
    }
    const mid = versions(dir);
    for (const [id, v] of mid) expect(v, `segment ${id}`).toBe(before.has(id) ? 2 : 3); // old segments keep 2, new ones are 3
    await expectValues(s, want);
    await s.compact({ mode });
    await expectValues(s, want);
    expect((await s.verify()).ok).toBe(true);
    await s.close();
    const after = versions(dir);
    expect(new Set(after.values())).toEqual(new Set([2, 3])); // both frames remain: nothing was re-encoded or mixed
    const again = await Engram.open(dir, o);
    await expectValues(again, want);
    expect((await again.verify()).ok).toBe(true);
    await again.close();
    for (const name of fs.readdirSync(path.join(dir, "segments"))) if (name.endsWith(".hint")) fs.rmSync(path.join(dir, "segments", name));
    const scanned = await Engram.open(dir, o);
    await expectValues(scanned, want);
    await scanned.close();
  });
});

describe("twin: a format-2 segment whose header says 3", () => {
  it("fails the open with CorruptionError instead of reading other records", async () => {
    await initChecksum();
    const dir = tempDir("v2lie");
    const o = opts("copy-on-write");
    await buildV2(dir, o);
    const good = await Engram.open(dir, o);
    await good.close(); // the same store opens with the truthful header
    const id = Math.min(...versions(dir).keys());
    const file = path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`);
    const bytes = fs.readFileSync(file);
    const choice = chooseHeader(bytes, id);
    const lie = encodeHeader(choice.header, C.FORMAT_VERSION);
    Buffer.from(lie).copy(bytes, choice.copy === 0 ? C.HEADER_A_OFFSET : C.HEADER_B_OFFSET);
    fs.writeFileSync(file, bytes);
    for (const name of fs.readdirSync(path.join(dir, "segments"))) if (name.endsWith(".hint")) fs.rmSync(path.join(dir, "segments", name));
    expect(formatOf(chooseHeader(fs.readFileSync(file), id))).toBe(3);
    await expect(Engram.open(dir, o)).rejects.toMatchObject({ code: "CORRUPTION" });
  });
});
