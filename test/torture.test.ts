/**
 * Torture (I3, I4): concurrent writers, sync and async readers across sibling and inherited
 * scopes, eager and lazy forgets, explicit and background compaction in both modes — and not one
 * read may return bytes of another slot, scope or version.
 *
 * Every value is `scope|key|nonce|padding`, padded so that all records have the same size: a read
 * at a moved offset then finds another *valid* record, the worst case for detection. A read is
 * correct when its value names the scope it reports, the key it asked for, and a nonce that was
 * written to exactly that slot with exactly the version reported. Async reads are held at
 * read:after-authorize while each round's compaction runs, so many of them straddle a rewrite;
 * they must then fail closed (ScopeErasedDuringRead), never return torn data.
 *
 * The twin run switches the protection off (unsafe.skipReadValidation, in-place) and must see
 * torn reads: that is what proves the checks here can fail. Rounds: ENGRAM_TORTURE_ROUNDS.
 */
import { describe, expect, it } from "vitest";
import { CorruptionError, Engram, ScopeErasedDuringRead, type ReadResult } from "../src/index.js";
import { rng } from "./helpers/crash-proc.js";
import { tempDir } from "./helpers/tmp.js";

const SCOPES = ["global", "user:a", "user:a/session:1", "user:a/session:2", "user:b", "user:b/session:1"];
const KEYS = Array.from({ length: 12 }, (_, i) => `k${i}`);
const WIDTH = 120;
const ROUNDS = Number(process.env["ENGRAM_TORTURE_ROUNDS"] ?? 30);

function valueFor(scope: string, key: string, nonce: number): string {
  const head = `${scope}|${key}|${nonce}|`;
  return head + "~".repeat(WIDTH - scope.length - key.length - head.length);
}

interface Counts {
  reads: number;
  found: number;
  notFound: number;
  failedClosed: number;
  torn: number;
  corruption: number;
  writes: number;
  forgets: number;
  compactions: number;
}

class Torture {
  readonly counts: Counts = { reads: 0, found: 0, notFound: 0, failedClosed: 0, torn: 0, corruption: 0, writes: 0, forgets: 0, compactions: 0 };
  /** nonce -> slot and version it was written with (version known once the write resolved). */
  private readonly written = new Map<number, { slot: string; version: number | null }>();
  private nonce = 0;
  private readonly pick: <T>(xs: readonly T[]) => T;

  constructor(private readonly store: Engram, private readonly random: () => number) {
    this.pick = <T>(xs: readonly T[]): T => xs[Math.floor(this.random() * xs.length)] as T;
  }

  private async mutate(): Promise<void> {
    const scope = this.pick(SCOPES);
    const key = this.pick(KEYS);
    if (this.random() < 0.75) {
      const nonce = ++this.nonce;
      const entry = { slot: `${scope}|${key}`, version: null as number | null };
      this.written.set(nonce, entry);
      entry.version = (await this.store.write(key, valueFor(scope, key, nonce), { scope })).version;
      this.counts.writes += 1;
    } else {
      await this.store.forget(key, { scope });
      this.counts.forgets += 1;
    }
  }

  private check(asked: string, key: string, r: ReadResult): void {
    this.counts.reads += 1;
    if (r.status === "NOT_FOUND") {
      this.counts.notFound += 1;
      return;
    }
    const [scope, k, nonceText] = String(r.value).split("|");
    const w = this.written.get(Number(nonceText));
    const lineageOk = asked === r.scope || asked.startsWith(`${r.scope}/`) || r.scope === "global";
    const ok = scope === r.scope && k === key && lineageOk && w !== undefined && w.slot === `${r.scope}|${key}` && (w.version === null || w.version === r.version);
    if (ok) this.counts.found += 1;
    else {
      this.counts.torn += 1;
      if (process.env["ENGRAM_TORTURE_DEBUG"]) console.log("TORN", asked, key, JSON.stringify(r).slice(0, 200), JSON.stringify(w));
    }
  }

  private async guarded(asked: string, key: string, read: () => ReadResult | Promise<ReadResult>): Promise<void> {
    try {
      this.check(asked, key, await read());
    } catch (err) {
      this.counts.reads += 1;
      if (err instanceof ScopeErasedDuringRead) this.counts.failedClosed += 1;
      else if (err instanceof CorruptionError) this.counts.corruption += 1;
      else throw err;
    }
  }

  /** Reads held at read:after-authorize until this round's compaction is done. */
  private heldReads(n: number): Promise<void>[] {
    return Array.from({ length: n }, () => {
      const scope = this.pick(SCOPES);
      const key = this.pick(KEYS);
      return this.guarded(scope, key, () => this.store.read(key, { scope }));
    });
  }

  private syncReads(n: number): void {
    for (let i = 0; i < n; i++) {
      const scope = this.pick(SCOPES);
      const key = this.pick(KEYS);
      void this.guarded(scope, key, () => this.store.readSync(key, { scope }));
    }
  }

  private async disturb(round: number): Promise<void> {
    const roll = this.random();
    if (roll < 0.45) {
      await this.store.compact({ mode: round % 2 === 0 ? "in-place" : "copy-on-write" });
      this.counts.compactions += 1;
    } else if (roll < 0.7) {
      await this.store.forgetScope(this.pick(["user:a/session:1", "user:a/session:2", "user:b/session:1"]), { reclaim: "eager" });
      this.counts.compactions += 1;
    } else if (roll < 0.85) {
      await this.store.forgetScope(this.pick(["user:a/session:2", "user:b"]));
    } else {
      await this.store.gc();
    }
  }

  /** One round: mutations, held reads, a disturbance with writers and sync readers alongside. */
  async round(round: number): Promise<void> {
    await Promise.all(Array.from({ length: 24 }, () => this.mutate()));
    const reads = Promise.all(this.heldReads(16));
    await this.store.faults.waitFor("read:after-authorize");
    const writers = Promise.all(Array.from({ length: 8 }, () => this.mutate()));
    this.syncReads(8);
    await this.disturb(round);
    this.syncReads(8);
    await writers;
    await this.releaseAll(reads);
  }

  private async releaseAll(reads: Promise<unknown>): Promise<void> {
    let done = false;
    void reads.then(() => {
      done = true;
    });
    while (!done) {
      this.store.faults.release("read:after-authorize");
      await Promise.race([reads, this.store.faults.waitFor("read:after-authorize")]);
    }
  }
}

async function torture(seed: number, unsafe: boolean): Promise<Counts> {
  const store = await Engram.open(tempDir("torture"), {
    durability: "none",
    segmentBytes: 8 * 1024,
    compaction: { mode: "in-place", workers: 1, auto: true, garbageRatio: 0.3 },
    faults: { pauseAt: ["read:after-authorize"] },
    ...(unsafe ? { unsafe: { skipReadValidation: true } } : {}),
  });
  const t = new Torture(store, rng(seed));
  for (let round = 0; round < ROUNDS; round++) await t.round(round);
  const stats = store.stats();
  t.counts.compactions = Math.max(t.counts.compactions, stats.compactions);
  store.faults.release("read:after-authorize");
  await store.close();
  return t.counts;
}

describe("torture: concurrent reads, writes, forgets and compaction", () => {
  it("never returns a torn read", async () => {
    const seed = Number(process.env["ENGRAM_TORTURE_SEED"] ?? 20261129);
    const counts = await torture(seed, false);
    console.log(`torture seed=${seed} rounds=${ROUNDS}`, JSON.stringify(counts));
    expect(counts.torn).toBe(0);
    expect(counts.corruption).toBe(0);
    expect(counts.found).toBeGreaterThan(0);
    expect(counts.failedClosed).toBeGreaterThan(0);
    expect(counts.compactions).toBeGreaterThan(0);
  });

  it("sees torn reads when read validation is switched off (the twin that proves the checks can fail)", async () => {
    const counts = await torture(7, true);
    console.log(`torture (unsafe) rounds=${ROUNDS}`, JSON.stringify(counts));
    expect(counts.torn + counts.corruption).toBeGreaterThan(0);
    expect(counts.failedClosed).toBe(0);
  });
});
