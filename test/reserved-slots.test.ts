/**
 * Reserved slots (branch bulk-11, engine/keydir.ts `reserveFor`): a batch's decision that finds a
 * name absent in a scope that has a map puts an empty slot marked reserved into that map at once
 * (the bucket its miss read is written while still in cache), and the apply makes it real with no
 * map operation. Between decision and apply the reserved slot must be invisible — to stats,
 * listScopes, listSlots, probe, reads, export, the compaction plan and the GC's empty-slot test —
 * and a batch that is refused (a compare-and-set conflict, a limit) or whose write fails (an
 * injected EIO or ENOSPC at `io:append`, or at `io:sync` in sync mode, failing every batch queued
 * behind it too) must take back every slot it reserved. Method: (1) a batch held between its
 * decision and its apply (the log's start gate) leaves every observable answer as it was before
 * the call, while reserved slots are held; twin: a store whose decision makes a real slot (the
 * prototype slot1-10 did not land) is told apart. (2) Seeded steps of refused, failing and good
 * batches, 1–3 in flight, through a store as shipped and one that never reserves: same outcomes,
 * same slots field by field, same files byte for byte, and no reserved slot left after any step;
 * twins: a store that does not take its reservations back leaves reserved slots (counted in the
 * raw maps), and one whose reservations are real slots leaves slots the general store has not.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { initChecksum } from "../segments/checksum.js";
import type { Keydir, Slot } from "../engine/keydir.js";
import { slotEmpty } from "../engine/gc-policy.js";
import { planSegments } from "../engine/compaction-plan.js";
import { IoError, VersionConflictError } from "../rules/errors.js";
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
const NOW = 1_700_000_000_000;

/** "shipped"; "general": never reserves; "leaky": never takes a reservation back; "visible": the decision makes a real slot. */
type Variant = "shipped" | "general" | "leaky" | "visible";

/** The store's internals these tests read or replace. */
interface Inside {
  keydir: Keydir;
  log: { holdStarts(until: Promise<void>): void };
  unreserve(slot: Slot): void;
}

/** Opens a store in `dir` whose reservations behave as `variant` says. */
async function open(dir: string, variant: Variant, durability: "none" | "sync" = "none"): Promise<{ s: Store; inside: Inside }> {
  const s = await Store.open(dir, { durability, segmentBytes: 64 * 1024, clock: () => NOW, compaction: { workers: 0, auto: false }, faults: {} });
  const inside = s as unknown as Inside;
  const kd = inside.keydir;
  if (variant === "general") kd.reserveFor = (scope, key) => kd.get(scope, key);
  if (variant === "visible") kd.reserveFor = (scope, key) => kd.get(scope, key) ?? (kd.scopesWithRows().has(scope) ? kd.createAbsent(scope, key) : undefined);
  if (variant === "leaky") {
    inside.unreserve = () => undefined;
    kd.dropReserved = () => undefined;
  }
  return { s, inside };
}

/** Slots and compact rows in the keydir's maps that are reserved. */
function reservedHeld(kd: Keydir): number {
  let n = 0;
  for (const keys of kd.scopesWithRows().values()) for (const ref of keys.values()) if (!kd.holdsRecord(ref)) n += 1;
  return n;
}

/** Everything a caller or a pass can see of the store's slots, as text. */
async function view(s: Store, kd: Keydir, names: ReadonlyArray<readonly [string, string]>): Promise<string> {
  const st = s.stats();
  const scopes = await s.listScopes();
  const listed: string[] = [];
  for (const scope of scopes) listed.push(scope, ...(await s.listSlots(scope, 1_000_000)));
  const probes: string[] = [];
  for (const [scope, key] of names) probes.push(JSON.stringify(await s.probe(key, { scope })), s.readSync(key, { scope, inherit: false }).status);
  const exported: string[] = [];
  for await (const e of s.exportEntries()) exported.push(`${e.scope}/${e.key}/${e.kind}`);
  let planned = 0;
  for (const p of planSegments(s, NOW, null).values()) planned += p.survivors.length + p.droppable.length + p.deadPuts.length;
  const empty = [...kd.all()].filter((slot) => slotEmpty(kd, slot)).length;
  return JSON.stringify({ slots: st.slots, live: st.liveSlots, tombstones: st.tombstones, scopes: st.scopes, size: kd.size, listed, probes, exported, planned, empty });
}

/** Holds the log's next group until the returned function is called (the batch stays decided, not applied). */
function holdLog(inside: Inside): () => void {
  let release = (): void => undefined;
  inside.log.holdStarts(new Promise<void>((resolve) => (release = resolve)));
  return release;
}

describe("a batch's reserved slots", () => {
  /** A store with two scopes' maps, a tombstone, and a batch of new names, overwrites and no-op forgets held between decision and apply. */
  async function heldBatch(variant: Variant): Promise<{ before: string; during: string; reserved: number; after: string; left: number }> {
    const { s, inside } = await open(tempDir(`reserved-held-${variant}`), variant);
    await s.batch([{ op: "write", key: "old0", value: "a" }, { op: "write", key: "old1", value: "b", scope: "user:a" }, { op: "write", key: "old2", value: "c" }]);
    await s.forget("old2");
    const ops: T.BatchOp[] = [];
    const names: Array<[string, string]> = [["global", "old0"], ["global", "old2"]];
    for (let i = 0; i < 300; i++) {
      const scope = i % 3 === 0 ? "user:a" : "global";
      ops.push({ op: "write", key: `new${i}`, value: `v${i}`, scope });
      if (i % 50 === 0) ops.push({ op: "forget", key: `gone${i}`, scope }); // an absent name: no record, nothing kept
      names.push([scope, `new${i}`], [scope, `gone${i}`]);
    }
    ops.push({ op: "write", key: "old0", value: "a2" }, { op: "write", key: "new1", value: "again" });
    const before = await view(s, inside.keydir, names);
    const release = holdLog(inside);
    let during = "";
    let reserved = 0;
    let done: ReturnType<typeof settle<T.BatchResult[]>>;
    try {
      done = settle(DEADLINE, s.batch(ops), "held batch");
      reserved = reservedHeld(inside.keydir);
      during = await view(s, inside.keydir, names);
    } finally {
      release();
    }
    expect((await done).ok).toBe(true);
    const after = await view(s, inside.keydir, names);
    const left = reservedHeld(inside.keydir);
    await s.close();
    return { before, during, reserved, after, left };
  }

  it("are invisible to every reader and pass until the batch is applied", async () => {
    const r = await heldBatch("shipped");
    expect(r.reserved).toBe(300); // every new name had a map to be reserved in; the absent forgets took theirs back
    expect(r.during).toBe(r.before);
    expect(r.after).not.toBe(r.before);
    expect(JSON.parse(r.after).slots).toBe(JSON.parse(r.before).slots + 300);
    expect(r.left).toBe(0);
  });

  it("twin: slots made real at the decision are seen before the apply", async () => {
    const r = await heldBatch("visible");
    expect(r.reserved).toBe(0);
    expect(r.during).not.toBe(r.before);
    expect(JSON.parse(r.during).slots).toBeGreaterThanOrEqual(JSON.parse(r.before).slots + 300);
  });
});

/** One step: batches started together, and a failure armed at `point` before them. */
interface Step {
  batches: T.BatchOp[][];
  fail?: { point: "io:append" | "io:sync"; errno: "EIO" | "ENOSPC" };
}

/** Seeded steps: new and repeated names in three scopes, forgets (of absent names too), refusals mid-batch, failing writes. */
function stepsOf(seed: number, durability: "none" | "sync"): Step[] {
  const next = rng(seed);
  const pick = (n: number): number => Math.floor(next() * n);
  return Array.from({ length: 20 }, (_, s): Step => {
    const batches = Array.from({ length: 1 + pick(3) }, (_, b) =>
      Array.from({ length: 1 + pick(next() < 0.3 ? 300 : 30) }, (_, i): T.BatchOp => {
        const scope = ["global", "user:a", `user:b${pick(4)}`][pick(3)] as string;
        const key = `k${pick(900)}`;
        return next() < 0.15 ? { op: "forget", key, scope } : { op: "write", key, scope, value: `v${s}.${b}.${i}` };
      }),
    );
    for (const ops of batches) if (s > 0 && next() < 0.3) ops.splice(pick(ops.length + 1), 0, { op: "write", key: `k${pick(900)}`, value: "x", expectedVersion: 1 }); // refused: no value is at version 1 after step 0
    const roll = next();
    const point = durability === "sync" ? "io:sync" : "io:append";
    return { batches, fail: roll < 0.12 ? { point, errno: "EIO" } : roll < 0.24 ? { point, errno: "ENOSPC" } : undefined };
  });
}

/** Runs `steps`; returns the outcomes, the slots field by field, and the reserved slots left after each step, summed. */
async function runSteps(dir: string, steps: readonly Step[], variant: Variant, durability: "none" | "sync"): Promise<{ outcomes: string[]; slots: string[]; left: number }> {
  const { s, inside } = await open(dir, variant, durability);
  const outcomes: string[] = [];
  let left = 0;
  for (const step of steps) {
    if (step.fail !== undefined) s.faults.failAt?.(step.fail.point, step.fail.errno, 1);
    for (const r of await Promise.all(step.batches.map((ops, i) => settle(DEADLINE, s.batch(ops), `batch ${i}`)))) {
      if (r.ok) outcomes.push(JSON.stringify(r.value));
      else if (r.error instanceof IoError) outcomes.push(`IoError ${r.error.errno}`);
      else if (r.error instanceof VersionConflictError) outcomes.push("VersionConflictError");
      else throw r.error;
    }
    s.faults.failAt?.(step.fail?.point ?? "io:append", "EIO", 0);
    left += reservedHeld(inside.keydir); // every batch of the step settled: nothing is reserved
  }
  const slots = [...inside.keydir.all()].map((x) => [x.scope, x.key, x.putSeq, x.putGen, x.seg, x.off, x.len, x.generation, x.physical, x.tombSeq, x.tombSeg, x.tombOff].join(",")).sort();
  await s.close();
  return { outcomes, slots, left };
}

describe("refused and failed batches take their reservations back", () => {
  for (const durability of ["none", "sync"] as const) {
    it(`leave what a store that never reserves leaves (durability ${durability})`, async () => {
      const steps = stepsOf(durability === "none" ? 11 : 29, durability);
      const shippedDir = tempDir("reserved-steps-shipped");
      const generalDir = tempDir("reserved-steps-general");
      const shipped = await runSteps(shippedDir, steps, "shipped", durability);
      const general = await runSteps(generalDir, steps, "general", durability);
      expect(shipped.outcomes).toEqual(general.outcomes);
      expect(shipped.outcomes).toContain("VersionConflictError");
      expect(shipped.outcomes.some((o) => o.startsWith("IoError"))).toBe(true);
      expect(shipped.slots).toEqual(general.slots);
      expect(shipped.slots.length).toBeGreaterThan(300);
      expect(shipped.left).toBe(0);
      expect(differing(filesOf(shippedDir), filesOf(generalDir))).toEqual([]);
    });
  }

  it("twin: a store that keeps its reservations, or makes them real, is told apart", async () => {
    const steps = stepsOf(11, "none");
    const general = await runSteps(tempDir("reserved-twin-general"), steps, "general", "none");
    const leaky = await runSteps(tempDir("reserved-twin-leaky"), steps, "leaky", "none");
    const visible = await runSteps(tempDir("reserved-twin-visible"), steps, "visible", "none");
    expect(leaky.left).toBeGreaterThan(0);
    expect(visible.slots).not.toEqual(general.slots);
  });
});
