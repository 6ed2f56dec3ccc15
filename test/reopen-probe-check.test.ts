/**
 * A restart changes no answer: randomized operations against a model, with every probe compared
 * before and after each reopen.
 *
 * Method (from an audit of the public operations, fifty-third session): a store of 4 KiB segments
 * (`durability: "none"`, an injected clock, the default 24 h retention, no automatic pass) over 6
 * scopes in a tree and 4 keys takes 400 random steps from a seeded generator: writes (some with a
 * TTL, some with expectedVersion), forgets, undeletes, forgetScope (lazy and eager), batches (one
 * in five with a bad row, which must write nothing), clock moves (1 ms to past the retention
 * window), gc(), compact() in either mode, and reopens. After every step each (scope, key) is
 * read with read() and readSync() and listed, and checked against the model (the nearest live
 * value up the scope chain, its version and scope); probe's valuePresent must match. At each
 * reopen every probe of the 24 slots is taken before the close and after the open, and must be
 * equal. The seeds are fourteen of 100–199, all of which the engine passes since the fifty-fourth
 * session (in the fifty-third, 9 of 100–139 found a probe that a restart changed; 100, 103, 119
 * and 126 are among them, one of each kind test/reopen-kill-records.test.ts pins down); no seed
 * found a read, list or answer that differs from the model. The twin runs the same seeds with
 * every `unsafeTombstoneForTests` rule off (`keepSuperseded`, `keepUnnamed`, `keepDroppedKill`,
 * `dropOverlapping`, `keepGeneration`, `ignoreOlder`: the rules before those sessions) and must
 * find a probe that a restart changed. The fifty-fifth session added a partial-compaction variant
 * (run's `partial`: every gc or compact step compacts a random third of the sealed segments), in
 * which a slot's older kill records stay in segments no pass touched while the latest one's rule
 * runs — layouts a full pass never leaves. It runs seeds 100–107; all of 100–199 pass. Its twin
 * sets `ignoreOlder` alone (the rule before that session) and must find a changed probe.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram, type BatchOp, type OpenOptions, type Value } from "../src/index.js";
import { unsafeTombstoneForTests } from "../engine/gc-policy.js";
import { tempDir } from "./helpers/tmp.js";

/** ENGRAM_REOPEN_CHECK_SEEDS="a-b" runs seeds a..b instead and prints each one's mismatches (to look for new seeds or kinds). */
const SEEDS_RANGE = process.env["ENGRAM_REOPEN_CHECK_SEEDS"];
const SEEDS = SEEDS_RANGE === undefined ? [100, 101, 102, 103, 106, 107, 109, 110, 111, 112, 114, 115, 119, 126] : seedsOf(SEEDS_RANGE);

function seedsOf(range: string): number[] {
  const [from, to] = range.split("-").map(Number) as [number, number];
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
const STEPS = 400;
const RETENTION_MS = 86_400_000;
const SCOPES = ["global", "a", "a/b", "a/c", "d", "a/b/e"];
const KEYS = ["k1", "k2", "k3", "zz"];

/** The rules the twin turns off: the fifty-third session's and the fifty-fourth's (engine/gc-policy.ts). */
const RULES_OFF = ["keepSuperseded", "keepUnnamed", "keepDroppedKill", "dropOverlapping", "keepGeneration", "ignoreOlder"] as const;
/** Seeds of the partial-compaction runs (run's `partial`); with ENGRAM_REOPEN_CHECK_SEEDS, that range too. */
const PARTIAL_SEEDS = SEEDS_RANGE === undefined ? [100, 101, 102, 103, 104, 105, 106, 107] : seedsOf(SEEDS_RANGE);
/** A deadline per test that grows with the seeds it runs (a range from the environment may be long). */
const deadline = (seeds: number): number => Math.max(120_000, seeds * 15_000);

afterEach(() => {
  for (const rule of RULES_OFF) unsafeTombstoneForTests[rule] = false;
});

/** xorshift32: the run's only source of choices. */
function generator(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
}

/** A model slot: its latest value, that value's version and expiry (0: never), and whether a forget or erasure killed it. */
interface ModelSlot {
  value: Value;
  version: number;
  expiresAt: number;
  killed: boolean;
}

/**
 * One seeded run; returns the mismatches it found (the first few). `partial`: a gc() or compact()
 * step compacts a random third of the sealed segments only (`compact({ segments })`), so that a
 * slot's older kill records stay in segments no pass touched while its latest one's rule runs —
 * the fifty-fifth session's scenario generator (without it every pass compacts every segment
 * with garbage, and an older record goes with its segment before the latest can).
 */
async function run(seed: number, label: string, partial = false): Promise<string[]> {
  const rnd = generator(seed);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)] as T;
  let now = 1_000_000;
  const options: OpenOptions = { compaction: { workers: 0, auto: false }, clock: () => now, durability: "none", segmentBytes: 4096, retention: { tombstoneRetentionMs: RETENTION_MS } };
  const dir = tempDir(label);
  let s = await Engram.open(dir, options);
  const model = new Map<string, ModelSlot>();
  const id = (scope: string, key: string): string => `${scope}\u0000${key}`;
  const parent = (scope: string): string | null => (scope === "global" ? null : scope.includes("/") ? scope.slice(0, scope.lastIndexOf("/")) : "global");
  const within = (scope: string, root: string): boolean => scope === root || scope.startsWith(`${root}/`);
  const live = (m: ModelSlot | undefined): m is ModelSlot => m !== undefined && !m.killed && (m.expiresAt === 0 || now < m.expiresAt);
  const nearest = (key: string, scope: string): { value: Value; version: number; scope: string } | null => {
    for (let x: string | null = scope; x !== null; x = parent(x)) {
      const m = model.get(id(x, key));
      if (live(m)) return { value: m.value, version: m.version, scope: x };
    }
    return null;
  };
  const same = (a: Value, b: Value): boolean => (typeof a === "string" ? a === b : typeof b !== "string" && Buffer.from(a).equals(Buffer.from(b)));
  const found: string[] = [];
  const note = (step: number, what: string): void => {
    if (found.length < 4) found.push(`seed ${seed} step ${step}: ${what}`);
  };
  const valueOf = (): Value => (rnd() < 0.3 ? new Uint8Array([Math.floor(rnd() * 256), 1, 2]) : `v${Math.floor(rnd() * 1e6)}${rnd() < 0.3 ? "x".repeat(700) : ""}`);
  const remember = (scope: string, key: string, value: Value, version: number, ttlMs: number | undefined): void => {
    model.set(id(scope, key), { value, version, expiresAt: ttlMs === undefined ? 0 : now + ttlMs, killed: false });
  };
  const probes = async (): Promise<Map<string, string>> => {
    const out = new Map<string, string>();
    for (const scope of SCOPES) for (const key of KEYS) out.set(`${scope}|${key}`, JSON.stringify(await s.probe(key, { scope })));
    return out;
  };

  for (let step = 0; step < STEPS && found.length < 4; step++) {
    const r = rnd();
    const scope = pick(SCOPES);
    const key = pick(KEYS);
    if (r < 0.35) {
      const ttlMs = rnd() < 0.2 ? 1 + Math.floor(rnd() * 300) : undefined;
      const value = valueOf();
      const useExpected = rnd() < 0.2;
      const mine = model.get(id(scope, key));
      const expectedVersion = useExpected ? (rnd() < 0.5 ? (live(mine) ? mine.version : null) : 999_999) : undefined;
      const res = await s.write(key, value, { scope, ttlMs, expectedVersion }).catch((e: unknown) => e as { code?: string });
      if ("ok" in res) remember(scope, key, value, res.version, ttlMs);
      else if (!(expectedVersion === 999_999 && res.code === "VERSION_CONFLICT")) note(step, `write ${key}@${scope} failed ${String(res.code)}`);
    } else if (r < 0.5) {
      const m = model.get(id(scope, key));
      const wasLive = live(m);
      const res = await s.forget(key, { scope });
      if ((res.tombstoneSeq !== null) !== wasLive) note(step, `forget ${key}@${scope} answered ${JSON.stringify(res)}`);
      if (wasLive) m.killed = true;
    } else if (r < 0.55) {
      await s.undelete(key, { scope });
    } else if (r < 0.6) {
      const root = pick(SCOPES.filter((x) => x !== "global"));
      let killed = 0;
      for (const [k, m] of model) {
        if (!within(k.split("\u0000")[0] as string, root)) continue;
        if (live(m)) killed += 1;
        m.killed = true;
      }
      const res = await s.forgetScope(root, { reclaim: rnd() < 0.5 ? "eager" : "lazy" });
      if (res.slots !== killed) note(step, `forgetScope ${root} killed ${res.slots}, the model ${killed}`);
    } else if (r < 0.72) {
      const ops: BatchOp[] = [];
      const n = 1 + Math.floor(rnd() * 5);
      for (let i = 0; i < n; i++) {
        const o = { key: pick(KEYS), scope: pick(SCOPES) };
        if (rnd() < 0.7) ops.push({ op: "write", ...o, value: valueOf(), ...(rnd() < 0.2 ? { ttlMs: 1 + Math.floor(rnd() * 300) } : {}) });
        else ops.push({ op: "forget", ...o });
      }
      const bad = rnd() < 0.2;
      if (bad) ops.splice(Math.floor(rnd() * (n + 1)), 0, { op: "write", key: "", value: "x" });
      const res = await s.batch(ops).catch((e: unknown) => e as { code?: string });
      if (!Array.isArray(res)) {
        if (!bad || res.code !== "INVALID_ARGUMENT") note(step, `batch failed ${String(res.code)}`);
      } else if (bad) note(step, "a batch with a bad row was accepted");
      else {
        ops.forEach((o, i) => {
          const answer = res[i] as { version?: number; tombstoneSeq?: number | null };
          const oScope = o.scope ?? "global";
          if (o.op === "write") remember(oScope, o.key, o.value, answer.version as number, o.ttlMs ?? undefined);
          else {
            const m = model.get(id(oScope, o.key));
            const wasLive = live(m);
            if ((answer.tombstoneSeq !== null) !== wasLive) note(step, `batch forget ${o.key}@${oScope} answered ${JSON.stringify(answer)}`);
            if (wasLive) m.killed = true;
          }
        });
      }
    } else if (r < 0.8) now += pick([1, 50, 200, 1000, RETENTION_MS + 1]);
    else if (r < 0.86 && !partial) await s.gc();
    else if (r < 0.92) {
      const mode = rnd() < 0.5 ? "in-place" : "copy-on-write";
      if (!partial) await s.compact({ mode });
      else await s.compact({ mode, segments: s.stats().segments.filter((x) => x.sealed && rnd() < 0.34).map((x) => x.id) });
    }
    else {
      if (rnd() < 0.5) await s.flush();
      const before = await probes();
      await s.close();
      s = await Engram.open(dir, options);
      const after = await probes();
      for (const [slot, p] of before) if (after.get(slot) !== p) note(step, `reopen changed probe ${slot}: ${p} -> ${String(after.get(slot))}`);
    }
    for (const sc of SCOPES) {
      for (const k of KEYS) {
        const want = nearest(k, sc);
        for (const got of [await s.read(k, { scope: sc }), s.readSync(k, { scope: sc })]) {
          const ok = want === null ? got.status === "NOT_FOUND" : got.status === "OK" && same(want.value, got.value) && got.version === want.version && got.scope === want.scope;
          if (!ok) note(step, `read ${k}@${sc}: want ${JSON.stringify(want)} got ${JSON.stringify(got)}`);
        }
        const p = await s.probe(k, { scope: sc });
        if (p.valuePresent !== live(model.get(id(sc, k)))) note(step, `probe ${k}@${sc} valuePresent ${String(p.valuePresent)}`);
      }
      const listed: string[] = [];
      for await (const e of s.list({ scope: sc })) listed.push(`${e.key}:${e.scope}:${e.version}`);
      const wanted = [...KEYS].sort().flatMap((k) => {
        const w = nearest(k, sc);
        return w === null ? [] : [`${k}:${w.scope}:${w.version}`];
      });
      if (listed.join() !== wanted.join()) note(step, `list ${sc}: want ${wanted.join()} got ${listed.join()}`);
    }
  }
  await s.close();
  return found;
}

describe("randomized operations with reopens", () => {
  it(`every answer matches the model and no probe changes across a restart (${SEEDS.length} seeds × ${STEPS} steps)`, async () => {
    const found: string[] = [];
    for (const seed of SEEDS) {
      const mine = await run(seed, `reopen-check-${seed}`);
      if (SEEDS_RANGE !== undefined) console.log(`seed ${seed}: ${mine.length === 0 ? "pass" : mine[0]}`);
      found.push(...mine);
    }
    expect(found).toEqual([]);
  }, deadline(SEEDS.length));

  it("twin: with the retention rules before the fifty-third and fifty-fourth sessions, some restart changes a probe", async () => {
    for (const rule of RULES_OFF) unsafeTombstoneForTests[rule] = true;
    const found: string[] = [];
    const changed = (): boolean => found.some((f) => f.includes("reopen changed probe"));
    for (const seed of SEEDS) {
      found.push(...(await run(seed, `reopen-check-twin-${seed}`)));
      if (changed()) break; // one seed that shows it is enough
    }
    expect(changed(), found.join("\n")).toBe(true);
  }, deadline(SEEDS.length));
});

describe("randomized operations with reopens, compacting some segments at a time", () => {
  it(`every answer matches the model and no probe changes across a restart (${PARTIAL_SEEDS.length} seeds × ${STEPS} steps)`, async () => {
    const found: string[] = [];
    for (const seed of PARTIAL_SEEDS) {
      const mine = await run(seed, `reopen-check-partial-${seed}`, true);
      if (SEEDS_RANGE !== undefined) console.log(`partial seed ${seed}: ${mine.length === 0 ? "pass" : mine[0]}`);
      found.push(...mine);
    }
    expect(found).toEqual([]);
  }, deadline(PARTIAL_SEEDS.length));

  it("twin: with an older kill record let outlive the latest (ignoreOlder), some restart changes a probe", async () => {
    unsafeTombstoneForTests.ignoreOlder = true;
    const found: string[] = [];
    const changed = (): boolean => found.some((f) => f.includes("reopen changed probe"));
    for (const seed of PARTIAL_SEEDS) {
      const mine = await run(seed, `reopen-check-partial-twin-${seed}`, true);
      if (SEEDS_RANGE !== undefined) console.log(`partial twin seed ${seed}: ${mine.length === 0 ? "pass" : mine[0]}`);
      found.push(...mine);
      if (changed() && SEEDS_RANGE === undefined) break; // one seed that shows it is enough
    }
    expect(changed(), found.join("\n")).toBe(true);
  }, deadline(PARTIAL_SEEDS.length));
});
