/**
 * compact-9: a compaction worker warms its per-record loops after its first task on a synthetic
 * segment in memory (engine/compaction-core.ts `warmRound`, scheduled by compaction-worker.ts),
 * so that the store's next pass runs them optimized. A warm-up round must do exactly what the
 * general path does with those records, and nothing else: touch no file, and leave its input as
 * it found it (a clobbering walk moves runs within the bytes it walks).
 *
 * Method: every round's output is compared byte for byte with the general path — the synthetic
 * segment's live records sliced out one by one in order, at offsets counted from DATA_START —
 * and its hint with the long way (a HintBuilder fed each copied record by addRecord, encoded);
 * the hint passes checkHint; the input is unchanged after rounds of both kinds. Its records take
 * the varint widths (sequences of 1–5 bytes, times of 6) and the types a store's hold; rounds 2
 * and 3 list the survivors in reverse, as a plan lists a segment of tombstones, and the worker
 * puts them in file order (engine/offset-order.ts): the same output; the ordering's own step
 * (warmOrder) answers the reversal and leaves its input as it was. Then a store with
 * a worker compacts three times with writes in between (the later passes run after the worker's
 * warm-up) and every key reads back, before and after a reopen; no file but the store's appears.
 * The twin: a clobbering round made to walk the segment itself (`unsafeWarmForTests.clobberInput`)
 * — the next round's input differs from a fresh build, and that round fails or its output differs.
 */
import * as fs from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { checkHint, HintBuilder } from "../segments/hint.js";
import { frameAtV3, varintBytes } from "../segments/record-v3.js";
import { survivorOrders, unsafeWarmForTests, warmDone, warmInput, warmOrder, warmRound } from "../engine/compaction-core.js";
import type { OpenOptions } from "../rules/types.js";
import { modelMisreads } from "./helpers/model-reads.js";
import { tempDir } from "./helpers/tmp.js";

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeWarmForTests.clobberInput = false;
  warmDone();
});

/** The general path's output for the synthetic segment: its live records in order, and their offsets in the output. */
function expectedCopy(): { out: Buffer; offsets: Uint32Array } {
  const seg = warmInput();
  const live = seg.src.live;
  const parts: Buffer[] = [];
  const offsets = new Uint32Array(live.length / 2);
  let at: number = C.DATA_START;
  for (let i = 0; i < live.length; i += 2) {
    const off = live[i] as number;
    const len = live[i + 1] as number;
    parts.push(Buffer.from(seg.bytes.subarray(off, off + len)));
    offsets[i / 2] = at;
    at += len;
  }
  return { out: Buffer.concat(parts), offsets };
}

/** The long way's hint of `out` (records at `offsets`): addRecord per record, then encode. */
function longWayHint(out: Buffer, offsets: Uint32Array, header: Parameters<typeof checkHint>[2], id: number): Buffer | null {
  const b = new HintBuilder(C.FORMAT_VERSION, Math.max(1024, offsets.length * 64));
  for (const off of offsets) b.addRecord(out, off - C.DATA_START, off);
  return b.encode(id, header, C.DATA_START + out.length, true);
}

describe("compaction warm-up rounds", () => {
  it("copy and hint byte for byte the general path's, input unchanged", () => {
    const fresh = Buffer.from(warmInput().bytes);
    const want = expectedCopy();
    const id = warmInput().header.segmentId;
    const reorderedBefore = survivorOrders.reordered;
    for (let round = 0; round < 4; round++) {
      const r = warmRound(round);
      expect(r.out.equals(want.out), `round ${round}: output`).toBe(true);
      expect(Buffer.from(r.newOffsets.buffer).equals(Buffer.from(want.offsets.buffer)), `round ${round}: offsets`).toBe(true);
      expect(r.hint).not.toBeNull();
      const hint = Buffer.concat(r.hint ?? []);
      const long = longWayHint(r.out, r.newOffsets, r.header, id);
      expect(long !== null && hint.equals(long), `round ${round}: hint equals the long way's`).toBe(true);
      expect(checkHint(hint, id, r.header)).not.toBeNull();
      expect(warmInput().bytes.equals(fresh), `round ${round}: input unchanged`).toBe(true);
    }
    expect(survivorOrders.reordered - reorderedBefore).toBe(2); // rounds 2 and 3 were ordered
    // The mix a pass meets: dead PUTs known and named, tombstones kept.
    expect(want.offsets.length).toBe((warmInput().src.live.length / 2) | 0);
    expect(warmInput().src.known.length).toBeGreaterThan(0);
  });

  it("orders the segment's survivors listed in reverse, in a step of its own (warmOrder)", () => {
    // A pass orders a plan's survivors met out of file order (engine/offset-order.ts); the step's
    // own paired check compares each answer with the reversal, and the rounds after it still
    // copy byte for byte (the test above). Its input is the rounds' segment, left as it was.
    const fresh = Buffer.from(warmInput().bytes);
    const reversed = Uint32Array.from(warmInput().reversed.live);
    expect(warmOrder()).toBe(8);
    expect(warmInput().bytes.equals(fresh)).toBe(true);
    expect(Array.from(warmInput().reversed.live)).toEqual(Array.from(reversed));
    const n = reversed.length / 2;
    expect(reversed[0]).toBe(warmInput().src.live[2 * (n - 1)]); // the last survivor first
  });

  it("takes the varint widths and record types a store's segments hold", () => {
    // A pass's second segment on a store of 100k keys has sequences past 2^14 (3 varint bytes):
    // warm-up records all below it left those branches unoptimized (twenty-fourth session).
    const seg = warmInput();
    const seqWidths = new Set<number>();
    const types = new Set<number>();
    let wideTimes = 0;
    for (let at: number = C.DATA_START; at < seg.header.sealedBytes; ) {
      const f = frameAtV3(seg.bytes, at);
      seqWidths.add(varintBytes(f.seq));
      types.add(f.type);
      if (varintBytes(f.expiresAt) >= 6) wideTimes += 1;
      at += f.length;
    }
    expect([...seqWidths].sort()).toEqual([1, 2, 3, 4, 5]);
    expect([...types].sort()).toEqual([C.RecordType.PUT, C.RecordType.TOMBSTONE, C.RecordType.CLEAR].sort());
    expect(wideTimes).toBeGreaterThan(0);
  });

  it("twin: a clobbering round that walks the segment itself changes the next round's input (caught)", () => {
    const fresh = Buffer.from(warmInput().bytes);
    const want = expectedCopy();
    unsafeWarmForTests.clobberInput = true;
    const first = warmRound(0);
    expect(first.out.equals(want.out)).toBe(true); // the round itself still copies right
    expect(warmInput().bytes.equals(fresh)).toBe(false); // but its input moved
    let caught = false;
    try {
      const next = warmRound(1);
      caught = !next.out.equals(want.out);
    } catch {
      caught = true; // the walk meets moved bytes: a checksum or a live location that is no record start
    }
    expect(caught).toBe(true);
  });
});

describe("a store whose worker warmed up", () => {
  let dir: string;
  afterEach(() => {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const mode of ["copy-on-write", "in-place"] as const) {
    it(`${mode}: three passes with a worker, every key reads back before and after a reopen`, async () => {
      dir = tempDir(`warm-${mode}`);
      const opts: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, compaction: { mode, auto: false, workers: 1 } };
      let store = await Store.open(dir, opts);
      const model = new Map<string, string>();
      for (let pass = 0; pass < 3; pass++) {
        const ops = [];
        for (let i = 0; i < 1200; i++) {
          const key = `k${i}`;
          if ((i + pass) % 4 === 0) {
            ops.push({ op: "forget" as const, scope: "s", key });
            model.delete(key);
          } else {
            const value = `v${pass}-${i}-${"x".repeat(100)}`;
            ops.push({ op: "write" as const, scope: "s", key, value });
            model.set(key, value);
          }
        }
        await store.batch(ops);
        const rep = await store.compact({ mode });
        expect(rep.segments.length).toBeGreaterThan(0);
        expect(modelMisreads(store, model, 1200)).toBe(0);
      }
      await store.close();
      store = await Store.open(dir, opts);
      expect(modelMisreads(store, model, 1200)).toBe(0);
      await store.close();
      const names = fs.readdirSync(`${dir}/segments`);
      expect(names.filter((n) => n.endsWith(".tmp") || n.includes("journal"))).toEqual([]);
    }, 60_000);
  }
});
