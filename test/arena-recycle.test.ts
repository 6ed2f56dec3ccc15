/**
 * A batch's records are encoded into its arena's chunks (segments/record.ts RecordArena), and
 * once the commit log is done with them — the group's pwritev returned and the batch was applied
 * and resolved (engine/commit.ts LogOp.release) — the chunks go back to a pool that later batches
 * fill (compact-15: a fresh chunk per batch was fresh memory, a page fault per 4 KiB, 17 % of a
 * bulk load's main-thread time). The property: recycling reuses memory, never a byte a write still
 * needs — nothing reads a batch's records after its release.
 *
 * Method: the pool poisons every chunk given back (`unsafeArenaForTests.poison`: 0xa5 over it), so
 * a record read from a released chunk is garbage at once. Real stores, durability "none" and
 * "sync", take rounds of seeded batches issued in one turn (several queued at once, so chunks go
 * round while batches wait), of 1 to 300 ops with values of 0 to 3000 bytes, puts and forgets.
 * Every key must then read its last value, again after a reopen, and the pool must have handed
 * chunks out again. The twin (`recycleAtSeal`) gives a batch's chunks back when it is sealed —
 * before its group is written — and the same rounds must then read wrong values or fail closed.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { arenaChunks, unsafeArenaForTests } from "../segments/record.js";
import { initChecksum } from "../segments/checksum.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const T = 60_000;
const KEYS = 2000;
const ROUNDS = 12;
const BATCHES_PER_ROUND = 6;

beforeAll(async () => {
  await initChecksum();
});

afterEach(() => {
  unsafeArenaForTests.poison = false;
  unsafeArenaForTests.recycleAtSeal = false;
});

type Op = { op: "write"; key: string; value: Uint8Array } | { op: "forget"; key: string };

const keyOf = (i: number): string => `a${String(i).padStart(5, "0")}`;

/** A value of `bytes` bytes that names key i and round r in its first bytes, seeded after. */
function valueOf(i: number, r: number, bytes: number, next: () => number): Uint8Array {
  const v = new Uint8Array(bytes);
  for (let j = 0; j < bytes; j++) v[j] = j < 4 ? (i >> (8 * j)) & 255 : j < 6 ? (r + j) & 255 : Math.floor(next() * 256);
  return v;
}

/** Seeded rounds of batches; `want` ends as each key's last value (undefined: forgotten or never written). */
function roundsOf(seed: number): { rounds: Op[][][]; want: Map<string, Uint8Array | undefined> } {
  const next = rng(seed);
  const want = new Map<string, Uint8Array | undefined>();
  const rounds: Op[][][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const batches: Op[][] = [];
    for (let b = 0; b < BATCHES_PER_ROUND; b++) {
      const ops: Op[] = [];
      const names = new Set<string>();
      const n = 1 + Math.floor(next() * 300);
      for (let k = 0; k < n; k++) {
        const i = Math.floor(next() * KEYS);
        const key = keyOf(i);
        if (names.has(key)) continue; // one op per name per batch
        names.add(key);
        if (next() < 0.15 && want.get(key) !== undefined) {
          ops.push({ op: "forget", key });
          want.set(key, undefined);
        } else {
          const value = valueOf(i, r, Math.floor(next() * next() * 3000), next);
          ops.push({ op: "write", key, value });
          want.set(key, value);
        }
      }
      batches.push(ops);
    }
    rounds.push(batches);
  }
  return { rounds, want };
}

/** Keys whose readSync does not return `want`'s value (a read that fails closed counts too). */
function wrongKeys(s: Store, want: Map<string, Uint8Array | undefined>): number {
  let wrong = 0;
  for (const [key, value] of want) {
    try {
      const r = s.readSync(key);
      const got = r.status === "OK" ? r.value : undefined;
      if (value === undefined ? got !== undefined : !(got instanceof Uint8Array && Buffer.from(got).equals(Buffer.from(value)))) wrong++;
    } catch {
      wrong++;
    }
  }
  return wrong;
}

/** Runs the rounds (each round's batches issued in one turn) on a fresh store; returns wrong keys before and after a reopen. */
async function runRounds(durability: "none" | "sync", seed: number): Promise<{ before: number; after: number; reused: number }> {
  const dir = tempDir("arena-recycle");
  const options = { durability, segmentBytes: 256 * 1024, compaction: { workers: 0, auto: false } } as const;
  const { rounds, want } = roundsOf(seed);
  const reused0 = arenaChunks.reused;
  const s = await Store.open(dir, options);
  let before: number;
  try {
    for (const batches of rounds) await Promise.allSettled(batches.map((ops) => s.batch(ops)));
    before = wrongKeys(s, want);
  } finally {
    await s.close().catch(() => undefined);
  }
  const reused = arenaChunks.reused - reused0;
  let after = 0;
  try {
    const again = await Store.open(dir, options);
    try {
      after = wrongKeys(again, want);
    } finally {
      await again.close();
    }
  } catch {
    after = want.size; // the twin's store may not even open
  }
  return { before, after, reused };
}

describe("a batch's arena chunks are reused only once its group is written and applied", () => {
  for (const durability of ["none", "sync"] as const) {
    it(`durability ${durability}: every key reads its last value, before and after a reopen, with chunks poisoned on release`, async () => {
      unsafeArenaForTests.poison = true;
      const { before, after, reused } = await runRounds(durability, 11);
      console.log(`arena-recycle ${durability}: ${reused} chunks handed out again`);
      expect(reused).toBeGreaterThan(ROUNDS); // chunks went round
      expect(before).toBe(0);
      expect(after).toBe(0);
    }, T);
  }

  it("twin (recycleAtSeal): chunks given back at seal are overwritten before their batch is written", async () => {
    unsafeArenaForTests.poison = true;
    unsafeArenaForTests.recycleAtSeal = true;
    const { before, after } = await runRounds("none", 11);
    console.log(`arena-recycle twin: ${before} keys wrong before the reopen, ${after} after (of ${roundsOf(11).want.size})`);
    expect(before + after).toBeGreaterThan(0);
  }, T);
});
