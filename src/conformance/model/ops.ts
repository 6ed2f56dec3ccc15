/**
 * Operations of the model-based test (src/conformance/cases/model.ts) and their fast-check
 * generators. fast-check is handed in by the caller (`conformance({ fastCheck })`): the package
 * does not depend on it at run time.
 * Operations are plain data, generated up front; anything that depends on the state (such as
 * "the current version" for a compare-and-set) is named symbolically and resolved when the
 * operation runs, so a shrunk sequence stays meaningful.
 */
import type * as FC from "fast-check";
import { KEYS, SCOPES, type ModelConfig } from "./spec.js";

/**
 * The most event-loop turns a group's `turn` row waits. A pass over the model's few segments
 * took 217–6,718 turns inline and 1,892–411,710 on a worker (setImmediate turns counted while
 * compact() ran, 6 passes each way and mode), so the waits are drawn log-uniformly up to here.
 */
export const TURNS_MAX = 16_384;

/** The fast-check module (its default export or the namespace). */
export type FastCheck = typeof FC;

/** How a write's expectedVersion is chosen when it runs. */
export type Expect = "current" | "null" | "stale" | "bogus";

export interface WriteSpec {
  scope: string;
  key: string;
  value: string | Uint8Array;
  expect?: Expect;
  clearTombstone?: boolean;
  /** undefined: not given; null: never expires. */
  ttlMs?: number | null;
}

export type Op =
  | ({ t: "write" } & WriteSpec)
  | { t: "forget"; scope: string; key: string }
  | { t: "forgetScope"; scope: string }
  | { t: "undelete"; scope: string; key: string }
  | { t: "batch"; ops: BatchRow[] }
  /** Issued back to back without awaiting (queued together: group commit), then awaited. */
  | { t: "concurrent"; ops: ConcurrentRow[] }
  | { t: "advance"; ms: number }
  /** gc() `times` times in a row (a value can need a second pass once older records are gone). */
  | { t: "gc"; times: 1 | 2 }
  | { t: "compact"; mode?: "copy-on-write" | "in-place" }
  | { t: "reopen" };

/** One op of a batch. */
export type BatchRow = ({ op: "write" } & WriteSpec) | { op: "forget"; scope: string; key: string };

export type ConcurrentRow =
  /** A batch issued among the group's rows: all or nothing, its new names held as compact rows until asked for. */
  | { op: "batch"; ops: BatchRow[] }
  | ({ op: "write" } & WriteSpec)
  | { op: "forget"; scope: string; key: string }
  | { op: "undelete"; scope: string; key: string }
  | { op: "forgetScope"; scope: string }
  /**
   * A read issued among the rows (readSync when `sync`, on a backend that has it): it answers the
   * state some prefix of the group's mutations leaves (they commit in issue order, a batch whole),
   * or fails closed with ScopeErasedDuringRead while a pass may move records; never another
   * record's bytes (the scope-erasure torn read, I4).
   */
  | { op: "read"; scope: string; key: string; inherit: boolean; sync: boolean }
  /**
   * A probe issued among the rows: it answers in its call, so it sees the state some prefix of
   * the group's rows issued before its turn leaves, with whatever a pass reclaimed meanwhile.
   */
  | { op: "probe"; scope: string; key: string }
  /** A compaction pass issued in the same turn as the rows around it (on a worker thread when the run has one). */
  | { op: "compact"; mode?: "copy-on-write" | "in-place" }
  /**
   * The group's issuing waits `turns` turns of the event loop (setImmediate) before its next row:
   * a pass issued before it goes on meanwhile (its flush, seal, plan, a worker's rewrites and
   * their publications), so the rows after it land in the middle of that pass, not before it.
   */
  | { op: "turn"; turns: number };

/** Per-run store configuration (the logical part is the model's config). */
export interface RunConfig extends ModelConfig {
  segmentBytes: number | undefined;
  compactionMode: "copy-on-write" | "in-place";
  /**
   * compaction.workers: 0 runs every pass inline (results independent of timing), 1 on a real
   * worker thread beside the steps — the engine's default, with its passes' rewrites in flight
   * while writes commit and reads run.
   */
  compactionWorkers: 0 | 1;
  durability: "none" | "sync";
}

/** The generators of configurations and operations, built over the caller's fast-check. */
export function arbitraries(fc: FastCheck): { opArb: FC.Arbitrary<Op>; configArb: FC.Arbitrary<RunConfig> } {
  /** ENGRAM_MODEL_MODES=copy-on-write (or in-place) restricts the compaction modes tried. */
  const MODES = (process.env["ENGRAM_MODEL_MODES"] ?? "copy-on-write,in-place")
    .split(",")
    .filter((m): m is "copy-on-write" | "in-place" => m === "copy-on-write" || m === "in-place");
  const modeArb = fc.constantFrom(...(MODES.length > 0 ? MODES : (["copy-on-write", "in-place"] as const)));
  /** ENGRAM_MODEL_WORKERS=0 (or 1) makes every run's compaction inline (or on a worker thread). */
  const WORKERS = process.env["ENGRAM_MODEL_WORKERS"];
  const workersArb = fc.constantFrom<0 | 1>(...(WORKERS === "0" ? [0 as const] : WORKERS === "1" ? [1 as const] : [0 as const, 0 as const, 0 as const, 1 as const]));

  const scopeArb = fc.constantFrom(...SCOPES);
  const keyArb = fc.constantFrom(...KEYS);

  /** Mostly short values; sometimes ~1.5 KB so that 4 KiB segments seal and rotate. */
  const valueArb: FC.Arbitrary<string | Uint8Array> = fc.oneof(
    { weight: 6, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 16 }) },
    { weight: 1, arbitrary: fc.nat({ max: 25 }).map((n) => String.fromCharCode(97 + n).repeat(1500)) },
    { weight: 1, arbitrary: fc.constantFrom("", "é€😀", "\u0000nul-in-value") },
  );

  const writeSpecArb: FC.Arbitrary<WriteSpec> = fc.record(
    {
      scope: scopeArb,
      key: keyArb,
      value: valueArb,
      expect: fc.constantFrom<Expect>("current", "null", "stale", "bogus"),
      clearTombstone: fc.boolean(),
      ttlMs: fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 9000 })),
    },
    { requiredKeys: ["scope", "key", "value"] },
  );

  const batchRowArb = fc.oneof(
    { weight: 3, arbitrary: writeSpecArb.map((w) => ({ op: "write" as const, ...w })) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("forget" as const), scope: scopeArb, key: keyArb }) },
  );

  /** A wait of 1 to TURNS_MAX turns, log-uniform (as many short waits as long ones). */
  const turnArb: FC.Arbitrary<ConcurrentRow> = fc
    .integer({ min: 0, max: Math.log2(TURNS_MAX) - 1 })
    .chain((e) => fc.integer({ min: 2 ** e, max: 2 ** (e + 1) }))
    .map((turns) => ({ op: "turn" as const, turns }));

  /** A read among a group's rows (async or readSync, inheriting or not), or one in four a probe. */
  const readArb: FC.Arbitrary<ConcurrentRow> = fc.oneof(
    { weight: 3, arbitrary: fc.record({ op: fc.constant("read" as const), scope: scopeArb, key: keyArb, inherit: fc.boolean(), sync: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("probe" as const), scope: scopeArb, key: keyArb }) },
  );

  const concurrentRowArb: FC.Arbitrary<ConcurrentRow> = fc.oneof(
    { weight: 5, arbitrary: writeSpecArb.map((w) => ({ op: "write" as const, ...w })) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("forget" as const), scope: scopeArb, key: keyArb }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("undelete" as const), scope: scopeArb, key: keyArb }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("forgetScope" as const), scope: fc.constantFrom("user:a", "user:b", "user:a/session:1") }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("batch" as const), ops: fc.array(batchRowArb, { minLength: 1, maxLength: 4 }) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("compact" as const), mode: modeArb }, { requiredKeys: ["op"] }) },
    { weight: 2, arbitrary: turnArb },
    { weight: 2, arbitrary: readArb },
  );

  /** A plain write of ~1.5 KB: two or three fill a 4 KiB segment, so the write path rotates the segment a pass is sealing. */
  const fillArb: FC.Arbitrary<ConcurrentRow> = fc.record({
    op: fc.constant("write" as const),
    scope: scopeArb,
    key: keyArb,
    value: fc.nat({ max: 25 }).map((n) => String.fromCharCode(65 + n).repeat(1500)),
  });

  /** A pass, a wait of some turns, then rows that land while it runs (or after it, when it was short). */
  const duringArb: FC.Arbitrary<Op> = fc
    .tuple(
      fc.record({ op: fc.constant("compact" as const), mode: modeArb }, { requiredKeys: ["op"] }),
      turnArb,
      fc.array(fc.oneof({ weight: 2, arbitrary: concurrentRowArb }, { weight: 1, arbitrary: fillArb }, { weight: 2, arbitrary: readArb }), { minLength: 1, maxLength: 6 }),
    )
    .map(([compact, turn, rows]) => ({ t: "concurrent" as const, ops: [compact, turn, ...rows] }));

  const opArb: FC.Arbitrary<Op> = fc.oneof(
    { weight: 30, arbitrary: writeSpecArb.map((w) => ({ t: "write" as const, ...w })) },
    { weight: 10, arbitrary: fc.record({ t: fc.constant("forget" as const), scope: scopeArb, key: keyArb }) },
    { weight: 4, arbitrary: fc.record({ t: fc.constant("forgetScope" as const), scope: fc.constantFrom("user:a", "user:a", "user:b", "user:a/session:1", "user:b/session:2", "global") }) },
    { weight: 6, arbitrary: fc.record({ t: fc.constant("undelete" as const), scope: scopeArb, key: keyArb }) },
    { weight: 6, arbitrary: fc.record({ t: fc.constant("batch" as const), ops: fc.array(batchRowArb, { minLength: 1, maxLength: 4 }) }) },
    { weight: 5, arbitrary: fc.record({ t: fc.constant("concurrent" as const), ops: fc.array(concurrentRowArb, { minLength: 2, maxLength: 6 }) }) },
    { weight: 3, arbitrary: duringArb },
    { weight: 8, arbitrary: fc.record({ t: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 0, max: 2000 }), fc.integer({ min: 2000, max: 10_000 })) }) },
    { weight: 6, arbitrary: fc.record({ t: fc.constant("gc" as const), times: fc.constantFrom(1 as const, 2 as const) }) },
    { weight: 3, arbitrary: fc.record({ t: fc.constant("compact" as const), mode: modeArb }, { requiredKeys: ["t"] }) },
    { weight: 4, arbitrary: fc.constant({ t: "reopen" as const }) },
  );

  const configArb: FC.Arbitrary<RunConfig> = fc.record({
    tombstoneWrites: fc.constantFrom("auto-clear" as const, "auto-clear" as const, "require-clear" as const),
    defaultTtlMs: fc.constantFrom<number | null | undefined>(undefined, undefined, null, 7000),
    sessionTtlMs: fc.constantFrom<number | null | undefined>(undefined, 3000, null),
    autoCompaction: fc.boolean(),
    segmentBytes: fc.constantFrom<number | undefined>(4096, 4096, undefined),
    compactionMode: modeArb,
    compactionWorkers: workersArb,
    durability: fc.constantFrom("none" as const, "none" as const, "none" as const, "sync" as const),
  });
  return { opArb, configArb };
}

/** Shows an op briefly in failure reports (long values abbreviated). */
export function showOp(op: Op): string {
  return JSON.stringify(op, (_k, v: unknown) => {
    if (v instanceof Uint8Array) return `bytes[${[...v].join(",")}]`;
    if (typeof v === "string" && v.length > 20) return `${v.slice(0, 3)}…(${v.length})`;
    return v;
  });
}
