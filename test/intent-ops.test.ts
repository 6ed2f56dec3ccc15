/**
 * Fewer intent operations per op (branch slot1-10, engine/intents.ts): a plan's op on a name its
 * decision found no intent for records its intent with `Intents.add` — no lookup, it replaces
 * none — instead of `replace` (a get and a set), and Intents remembers the scope asked last (a
 * string compare instead of a lookup in the outer map). Method: (1) the same seeded batches —
 * several in flight at once, some refused mid-batch (a compare-and-set conflict), some failing
 * their write (an injected EIO or ENOSPC at `io:append`) — through a store as shipped and one
 * whose `intendNew` is the general `intend`: every batch's outcome, every slot field by field, the
 * queued intents and every file of the two directories are the same, while the shipped store took
 * the fast path (counted). Twin: a store whose refused batches leave the intents they added
 * behind is told apart by the same comparison. (2) A unit: seeded intent operations over more
 * scopes than the emptied maps kept (so scope maps are dropped and made again) answer like a plain
 * model, and a dropped scope's map is made again for its next intent; twin: an Intents that keeps
 * remembering a dropped map is told apart. (3) add()'s
 * paired check: a name that holds an intent fails loudly.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { initChecksum } from "../segments/checksum.js";
import { Intents, type Logical } from "../engine/intents.js";
import { Keydir, type Slot } from "../engine/keydir.js";
import { InternalError, IoError, VersionConflictError } from "../rules/errors.js";
import { Store } from "../engine/store.js";
import type * as T from "../rules/types.js";
import { rng } from "./helpers/rng.js";
import { tempDir } from "./helpers/tmp.js";
import { differing, filesOf } from "./helpers/dir-bytes.js";
import { guardUnhandledRejections, settle } from "./helpers/io-faults.js";

guardUnhandledRejections();

beforeAll(async () => {
  await initChecksum();
});

const DEADLINE = 20_000;

/** One step of the script: batches started together (in flight at once), and a failure armed before them. */
interface Step {
  batches: T.BatchOp[][];
  fail?: "EIO" | "ENOSPC";
}

/** Seeded steps: 1–3 batches in flight, repeated names within and across them, forgets, refusals, write failures. */
function seededSteps(seed: number): Step[] {
  const next = rng(seed);
  const steps: Step[] = [];
  for (let s = 0; s < 24; s++) {
    const batches = Array.from({ length: 1 + Math.floor(next() * 3) }, (_, b) => {
      const count = 1 + Math.floor(next() * (next() < 0.3 ? 400 : 40));
      const ops = Array.from({ length: count }, (_, i): T.BatchOp => {
        const key = `k${Math.floor(next() * 600)}`;
        const scope = next() < 0.3 ? "user:a" : next() < 0.5 ? `user:b${Math.floor(next() * 20)}` : "global";
        if (next() < 0.1) return { op: "forget", key, scope };
        return { op: "write", key, scope, value: `v${s}.${b}.${i}`.repeat(1 + Math.floor(next() * 20)) };
      });
      // A compare-and-set that cannot hold (no value has version 1: the first record is a write at 1 only in step 0): refused mid-batch.
      if (s > 0 && next() < 0.25) ops.splice(Math.floor(next() * ops.length), 0, { op: "write", key: `k${Math.floor(next() * 600)}`, value: "x", expectedVersion: 1 });
      return ops;
    });
    const roll = next();
    steps.push({ batches, fail: roll < 0.08 ? "EIO" : roll < 0.16 ? "ENOSPC" : undefined });
  }
  return steps;
}

/** A store's internals the comparison reads. */
interface Inside {
  keydir: Keydir;
  intents: Intents;
  intend(scope: string, key: string, state: Logical): Logical | undefined;
  intendNew(scope: string, key: string, state: Logical): undefined;
  unintend(scope: string, key: string, replaced: Logical | undefined, state: Logical): void;
}

type Variant = "shipped" | "general" | "leaky";

/** What one run left: each batch's outcome, the slots field by field, the intents queued, the fast path's count. */
interface Run {
  outcomes: string[];
  slots: string[];
  queued: string[];
  /** Intents queued after each step, summed (every batch of a step settled first). */
  left: number;
  added: number;
}

/** A slot's fields, in a fixed order. */
function fieldsOf(s: Slot): string {
  return [s.scope, s.key, s.putSeq, s.putGen, s.seg, s.off, s.len, s.expiresAt, s.generation, s.physical, s.tombSeq, s.tombGen, s.tombSeg, s.tombOff, s.tombLen, s.clearSeq, s.listedSeq, s.reclaimedAt].join(",");
}

/** An outcome as text: the results, or the error's name (and errno). */
function outcomeOf(r: { ok: true; value: T.BatchResult[] } | { ok: false; error: unknown }): string {
  if (r.ok) return JSON.stringify(r.value);
  if (r.error instanceof IoError) return `IoError ${r.error.errno}`;
  if (r.error instanceof VersionConflictError) return "VersionConflictError";
  throw r.error;
}

/** Runs `steps` through a store in `dir`: as shipped, on the general path (`intend` for every op), or leaky (the twin: a refused batch keeps the intents it added). */
async function run(dir: string, steps: readonly Step[], variant: Variant): Promise<Run> {
  const s = await Store.open(dir, { durability: "none", segmentBytes: 64 * 1024, clock: () => 1_700_000_000_000, compaction: { workers: 0, auto: false }, faults: {} });
  const inside = s as unknown as Inside;
  let added = 0;
  const fast = inside.intendNew.bind(s);
  const general = inside.intend.bind(s);
  const restore = inside.unintend.bind(s);
  inside.intendNew = (scope, key, state) => {
    added += 1;
    return variant === "general" ? (general(scope, key, state) as undefined) : fast(scope, key, state);
  };
  if (variant === "leaky") inside.unintend = (scope, key, replaced, state) => (replaced === undefined ? undefined : restore(scope, key, replaced, state));
  const outcomes: string[] = [];
  let left = 0;
  for (const step of steps) {
    if (step.fail !== undefined) s.faults.failAt?.("io:append", step.fail, 1);
    const done = step.batches.map((ops, i) => settle(DEADLINE, s.batch(ops), `batch ${i}`));
    for (const r of await Promise.all(done)) outcomes.push(outcomeOf(r));
    s.faults.failAt?.("io:append", "EIO", 0);
    left += [...inside.intents.queuedSlots()].length; // every batch of the step settled: none is queued
  }
  const slots = [...inside.keydir.all()].map(fieldsOf).sort();
  const queued = [...inside.intents.queuedSlots()].map((q) => `${q.scope}/${q.key}`).sort();
  await s.close();
  return { outcomes, slots, queued, left, added };
}

describe("a plan's intents added without a lookup", () => {
  it("decide, apply and write what the general path does, refused and failed batches included", async () => {
    for (const seed of [7, 23]) {
      const steps = seededSteps(seed);
      const shippedDir = tempDir("intent-ops-shipped");
      const generalDir = tempDir("intent-ops-general");
      const shipped = await run(shippedDir, steps, "shipped");
      const general = await run(generalDir, steps, "general");
      expect(shipped.outcomes).toEqual(general.outcomes);
      expect(shipped.outcomes.some((o) => o === "VersionConflictError")).toBe(true);
      expect(shipped.outcomes.some((o) => o.startsWith("IoError"))).toBe(true);
      expect(shipped.outcomes.some((o) => o.startsWith("["))).toBe(true);
      expect(shipped.slots).toEqual(general.slots);
      expect(shipped.slots.length).toBeGreaterThan(100);
      expect(shipped.queued).toEqual([]);
      expect(general.queued).toEqual([]);
      expect(shipped.left + general.left).toBe(0);
      expect(differing(filesOf(shippedDir), filesOf(generalDir))).toEqual([]);
      expect(shipped.added).toBeGreaterThan(500); // the fast path ran (and in the general store the same ops went through intend)
      expect(shipped.added).toBe(general.added);
    }
  });

  it("twin: refused batches that keep the intents they added are told apart", async () => {
    const steps = seededSteps(7);
    const shipped = await run(tempDir("intent-ops-twin-a"), steps, "shipped");
    const leaky = await run(tempDir("intent-ops-twin-b"), steps, "leaky");
    expect(shipped.left).toBe(0);
    expect(leaky.left).toBeGreaterThan(0);
  });
});

/** A plain model of the intents: (scope, key) -> state, no memo, no kept maps. */
class ModelIntents {
  readonly states = new Map<string, Logical>();
  replace(id: string, state: Logical): Logical | undefined {
    const was = this.states.get(id);
    this.states.set(id, state);
    return was;
  }
  settle(id: string, seq: number): void {
    if (this.states.get(id)?.seq === seq) this.states.delete(id);
  }
}

/** A state with sequence `seq`. */
function stateOf(seq: number): Logical {
  return { seq, live: true, version: seq, lastVersion: seq, generation: 1, tombstoned: false, killSeq: 0, exists: true };
}

/** Seeded operations on `intents` and the model: replace or add (as a plan picks), restore newest first, settle; returns where the two first disagree ("" for nowhere). */
function compareWithModel(intents: Intents, seed: number): string {
  const next = rng(seed);
  const model = new ModelIntents();
  const keydir = new Keydir();
  let seq = 0;
  let scope = "s0";
  for (let round = 0; round < 400; round++) {
    const taken: Array<{ scope: string; key: string; replaced: Logical | undefined; state: Logical }> = [];
    for (let i = 0; i < 1 + Math.floor(next() * 8); i++) {
      if (next() < 0.4) scope = `s${Math.floor(next() * 40)}`; // mostly the scope of the call before, as callers do
      const key = `k${Math.floor(next() * 6)}`;
      const id = `${scope}/${key}`;
      const seen = intents.logical(keydir, scope, key, 0);
      const had = model.states.get(id);
      if ((had?.seq ?? 0) !== seen.seq) return `round ${round}: logical(${id}) ${seen.seq}, model ${had?.seq ?? 0}`;
      const state = stateOf(++seq);
      const replaced = intents.lastSlot === null ? intents.replace(scope, key, state) : intents.add(scope, key, state);
      model.replace(id, state);
      taken.push({ scope, key, replaced, state });
    }
    if (next() < 0.3) {
      for (let i = taken.length - 1; i >= 0; i--) {
        const t = taken[i] as (typeof taken)[number];
        intents.restore(t.scope, t.key, t.replaced, t.state);
        if (t.replaced === undefined) model.states.delete(`${t.scope}/${t.key}`);
        else model.states.set(`${t.scope}/${t.key}`, t.replaced);
      }
    } else {
      for (const t of taken) {
        if (next() < 0.8) {
          intents.settle(t.scope, t.key, t.state.seq);
          model.settle(`${t.scope}/${t.key}`, t.state.seq);
        }
      }
    }
    const queued = [...intents.queuedSlots()].map((q) => `${q.scope}/${q.key}`).sort();
    const want = [...model.states.keys()].sort();
    if (queued.join(" ") !== want.join(" ")) return `round ${round}: queued ${queued.length}, model ${want.length}`;
  }
  return "";
}

describe("Intents' remembered scope", () => {
  it("answers like a plain model while scope maps are dropped and made again", () => {
    for (const seed of [1, 2, 3]) expect(compareWithModel(new Intents(), seed)).toBe("");
  });

  /** 17 scopes with an intent each; the last settles (its map dropped: 17 > 16 kept) and gets a new intent at once. Returns the intents queued. */
  function dropAndAdd(intents: Intents): string[] {
    for (let i = 0; i < 17; i++) intents.set(`s${i}`, "a", stateOf(i + 1));
    intents.settle("s16", "a", 17);
    intents.logical(new Keydir(), "s16", "b", 0);
    intents.add("s16", "b", stateOf(18));
    return [...intents.queuedSlots()].map((q) => `${q.scope}/${q.key}`);
  }

  it("makes a dropped scope's map again for its next intent; twin: one that keeps remembering the dropped map is told apart", () => {
    expect(dropAndAdd(new Intents())).toContain("s16/b");
    const broken = new Intents();
    const inner = broken as unknown as { slots: Map<string, Map<string, Logical>>; dropIfEmpty(scope: string, keys: Map<string, Logical>): void };
    inner.dropIfEmpty = (scope, keys) => {
      if (keys.size === 0 && inner.slots.size > 16) inner.slots.delete(scope); // the memo is not forgotten
    };
    expect(dropAndAdd(broken)).not.toContain("s16/b");
  });
});

describe("Intents.add", () => {
  it("fails loudly on a name that holds an intent, and adds one that holds none (the pair)", () => {
    const intents = new Intents();
    expect(intents.add("global", "a", stateOf(1))).toBeUndefined();
    expect(intents.logical(new Keydir(), "global", "a", 0).seq).toBe(1);
    expect(() => intents.add("global", "a", stateOf(2))).toThrow(InternalError);
  });
});
