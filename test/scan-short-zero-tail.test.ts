/**
 * An unsealed, group-framed segment whose last group ends 1, 2 or 3 bytes before the end of the
 * file: no group fits in those bytes (a frame is GROUP_FRAME_BYTES), so when they are zeros the
 * writer simply left them unused and the scan must call it a clean end — before the fix the frame
 * decoder's "short" made it a torn tail that recovery could never cut away, and `verify()` after
 * every reopen reported it (test/crash-writes.test.ts met it at segment end 8189 of 8192). Method:
 * the active segment of a real store, copied while open after acknowledged durable writes, cut
 * right after its last group, then 1–3 zero bytes appended; the scan must end cleanly at the
 * group's end with every record delivered. Twin: one of those bytes non-zero is still a torn tail
 * (the rule must not swallow stray bytes).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { readGroupFrame } from "../segments/group.js";
import { scanRecords } from "../segments/scan.js";
import { tempDir } from "./helpers/tmp.js";

beforeAll(async () => {
  await initChecksum();
});

/** The active segment's bytes up to the end of its last valid group, from a store copied while open. */
async function activePrefix(): Promise<{ prefix: Buffer; records: number }> {
  const dir = tempDir("short-tail");
  const store = await Engram.open(dir, { durability: "sync", segmentBytes: 1 << 20, compaction: { workers: 0, auto: false } });
  for (let i = 0; i < 12; i++) await store.write(`k${i}`, `value-${i}`);
  const copy = tempDir("short-tail-copy");
  fs.cpSync(dir, copy, { recursive: true });
  await store.close();
  const segs = fs.readdirSync(path.join(copy, "segments")).filter((n) => /^\d{8}\.seg$/.test(n)).sort();
  const bytes = fs.readFileSync(path.join(copy, "segments", segs.at(-1) as string));
  let at = C.DATA_START;
  for (;;) {
    const f = readGroupFrame(bytes, at, bytes.length);
    if (typeof f === "string") break;
    at = f.bodyEnd;
  }
  expect(at).toBeGreaterThan(C.DATA_START);
  const prefix = Buffer.from(bytes.subarray(0, at));
  const whole = scanRecords(prefix, 1, false, () => undefined, false, C.FORMAT_VERSION);
  expect(whole.torn).toBeNull();
  expect(whole.end).toBe(at);
  return { prefix, records: whole.records };
}

describe("scan: fewer than 4 zero bytes after the last group are a clean end", () => {
  it("ends cleanly at the last group with 1, 2 or 3 zero bytes after it", async () => {
    const { prefix, records } = await activePrefix();
    expect(records).toBeGreaterThanOrEqual(12);
    for (const pad of [1, 2, 3]) {
      const bytes = Buffer.concat([prefix, Buffer.alloc(pad)]);
      const got = scanRecords(bytes, 1, false, () => undefined, false, C.FORMAT_VERSION);
      expect(got.torn).toBeNull();
      expect(got.end).toBe(prefix.length);
      expect(got.records).toBe(records);
    }
  });

  it("twin: a non-zero byte among them is still a torn tail", async () => {
    const { prefix } = await activePrefix();
    for (const pad of [1, 2, 3]) {
      const tail = Buffer.alloc(pad);
      tail[pad - 1] = 0x5a;
      const got = scanRecords(Buffer.concat([prefix, tail]), 1, false, () => undefined, false, C.FORMAT_VERSION);
      // Format 3: a zero first byte is a zero length ("empty"); a lone non-zero byte a length whose record is cut ("short").
      expect(got.torn).toEqual({ offset: prefix.length, reason: pad === 1 ? "short" : "empty" });
      expect(got.end).toBe(prefix.length);
    }
  });
});
