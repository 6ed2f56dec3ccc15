/**
 * A batch's records are carved from one RecordArena (segments/record.ts) so that they lie back to
 * back in memory; the commit log then hashes the group's body and writes it run by run
 * (segments/group.ts `contiguousRuns`, segments/checksum.ts `checksum64Of`) instead of one
 * concatenated copy and one iovec per record. Method: the property is "same bytes, fewer pieces".
 * Random splits of random bytes — some views adjacent in one ArrayBuffer, some with a gap, some in
 * other buffers — must give runs whose concatenation and streamed checksum equal the original's;
 * a view with a one-byte gap must never merge (its twin: merging it would change the bytes, and
 * the test shows that a run built across the gap hashes differently). Then the real store: batches
 * of 1000 written durably and not, reopened, every value read back, and the arena's chunks shown
 * to give a 1000-op batch only a handful of runs.
 */
import { describe, expect, it, beforeAll } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { checksum64, checksum64Of, initChecksum } from "../segments/checksum.js";
import { contiguousRuns } from "../segments/group.js";
import { RecordArena, RECORD_ARENA_CHUNK_BYTES_MAX } from "../segments/record.js";
import { Engram } from "../src/index.js";

/** A deterministic byte source (xorshift32). */
function bytesOf(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed | 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

beforeAll(async () => {
  await initChecksum();
});

describe("contiguous runs", () => {
  it("merge exactly the neighbours that lie back to back, keeping every byte in order (200 random splits)", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const base = bytesOf(4096, seed);
      const other = bytesOf(512, seed + 1000);
      const parts: Uint8Array[] = [];
      let at = 0;
      let x = seed;
      while (at < base.length) {
        x = (x * 1103515245 + 12345) >>> 0;
        const len = Math.min(1 + (x % 300), base.length - at);
        const gap = x % 7 === 0 ? 1 : 0; // sometimes skip a byte: those two views must stay apart
        if (at + gap + len > base.length) break;
        parts.push(base.subarray(at + gap, at + gap + len));
        at += gap + len;
        if (x % 11 === 0) parts.push(other.subarray(0, 1 + (x % 100))); // a view of another buffer
      }
      const runs = contiguousRuns(parts);
      const whole = Buffer.concat(parts);
      expect(Buffer.concat(runs).equals(whole)).toBe(true);
      expect(checksum64Of(runs)).toBe(checksum64(whole, 0, whole.length));
      expect(runs.length).toBeLessThanOrEqual(parts.length);
      for (let i = 1; i < runs.length; i++) {
        const a = runs[i - 1] as Uint8Array;
        const b = runs[i] as Uint8Array;
        expect(a.buffer === b.buffer && a.byteOffset + a.byteLength === b.byteOffset).toBe(false); // nothing left unmerged
      }
    }
  });

  it("twin: a run built across a one-byte gap would change the bytes and the checksum", () => {
    const base = bytesOf(64, 7);
    const parts = [base.subarray(0, 10), base.subarray(11, 20)];
    expect(contiguousRuns(parts)).toBe(parts); // nothing merges: the same array comes back
    const acrossGap = new Uint8Array(base.buffer, base.byteOffset, 20);
    const whole = Buffer.concat(parts);
    expect(checksum64(acrossGap, 0, 20)).not.toBe(checksum64(whole, 0, whole.length));
  });

  it("an arena carves consecutive buffers back to back and starts a new chunk only when one is full", () => {
    const arena = new RecordArena();
    const taken = Array.from({ length: 1000 }, (_, i) => arena.take(300 + (i % 40)));
    const runs = contiguousRuns(taken);
    expect(runs.length).toBeGreaterThan(1);
    expect(runs.length).toBeLessThanOrEqual(12); // 4 KiB doubling to 1 MiB: ~7 chunks for ~320 KB
    const big = arena.take(RECORD_ARENA_CHUNK_BYTES_MAX + 1); // larger than any chunk: its own
    expect(big.length).toBe(RECORD_ARENA_CHUNK_BYTES_MAX + 1);
  });
});

describe("batches through the arena, on a real store", () => {
  for (const durability of ["sync", "none"] as const) {
    it(`20 batches of 1000 (durability ${durability}) read back whole before and after reopen`, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-arena-"));
      try {
        const value = (i: number): Uint8Array => bytesOf(200 + (i % 97), i + 1);
        let s = await Engram.open(dir, { durability });
        for (let b = 0; b < 20; b++) {
          const ops = Array.from({ length: 1000 }, (_, j) => ({ op: "write" as const, key: `k${b * 1000 + j}`, value: value(b * 1000 + j) }));
          await s.batch(ops);
        }
        const check = (st: Engram): void => {
          for (let i = 0; i < 20_000; i += 37) {
            const r = st.readSync(`k${i}`);
            expect(r.status).toBe("OK");
            if (r.status === "OK") expect(Buffer.from(r.value as Uint8Array)).toEqual(Buffer.from(value(i)));
          }
        };
        check(s);
        await s.close();
        s = await Engram.open(dir, { durability });
        check(s);
        expect((await s.verify()).ok).toBe(true);
        await s.close();
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);
  }
});
