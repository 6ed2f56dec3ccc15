/**
 * After a hinted open, list(), listSlots() and a scope erasure apply only the deferred entries of
 * the scopes they walk (Keydir.loadScopes, scopeKeys and anyInSubtree, through
 * HintSlots.loadWithin); every other name stays in its hint. The property: each answer equals the
 * one the same store gives with every entry applied, and the store holds no name of any other
 * scope afterwards.
 *
 * How it works: a store of 4 KiB segments (13 of them, each with its hint) holds 40 names in each of seven
 * scopes chosen to trip a byte-level scope test — "global", "user:a", its child "user:a/s" and
 * grandchild "user:a/s/t", "user:a/sx" beside "user:a/s", the sibling "user:ab" whose bytes start
 * with "user:a" but continue without "/", and "agent:z". Each name's records are spread over
 * several hints by phases: a PUT, an overwrite, a forget (its tombstone in a later segment), an
 * undelete (a CLEAR) and a write after it, a value with a TTL. For each query the store is opened
 * twice: fresh (every name deferred), and as the reference, where stats() first applies every
 * entry. The answers must be equal, the fresh store must still be deferred and hold exactly the
 * names of the scopes walked (keydir.heldNow against the reference's listSlots of those scopes).
 * A lazy erasure of "user:a" in the fresh store must report the reference's count of slots, leave
 * every probe of every name as the reference's erasure leaves it, and so again after a reopen.
 * Checked by hand: a walk without the load (loadScopes and the subtree load doing nothing) lists
 * nothing and fails every comparison; a scope test that takes "user:ab" for a child of "user:a"
 * fails the held count after the erasure.
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import { Store } from "../engine/store.js";
import { scopeLineage } from "../rules/names.js";
import type { BatchOp, OpenOptions, ProbeResult } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";

const SCOPES = ["global", "user:a", "user:a/s", "user:a/s/t", "user:a/sx", "user:ab", "agent:z"];
const NAMES = 40;
const NOW = 1_700_000_000_000;
const OPTIONS: OpenOptions = { durability: "none", segmentBytes: 4096, clock: () => NOW, compaction: { workers: 0, auto: false } };

/** Every (scope, key) of the store. */
function everyName(): Array<{ scope: string; key: string }> {
  return SCOPES.flatMap((scope) => Array.from({ length: NAMES }, (_, i) => ({ scope, key: `n${i}` })));
}

/** Batches of 10 per phase, each name's records spread over segments (see the file's comment). */
async function build(dir: string): Promise<void> {
  const s = await Store.open(dir, OPTIONS);
  const all = everyName();
  const phase = async (pick: (i: number) => boolean, op: (n: { scope: string; key: string }) => BatchOp): Promise<void> => {
    const ops = all.filter((n) => pick(Number(n.key.slice(1)))).map(op);
    for (let i = 0; i < ops.length; i += 10) await s.batch(ops.slice(i, i + 10)); // small batches: a segment seals between them
  };
  await phase(() => true, (n) => ({ op: "write", key: n.key, value: `v1-${n.scope}-${n.key}-`.repeat(4), scope: n.scope }));
  await phase((i) => i % 5 === 1, (n) => ({ op: "write", key: n.key, value: `v2-${n.scope}-${n.key}-`.repeat(4), scope: n.scope }));
  await phase((i) => i % 5 === 2 || i % 5 === 3, (n) => ({ op: "forget", key: n.key, scope: n.scope }));
  for (const n of all.filter((x) => Number(x.key.slice(1)) % 5 === 3)) await s.undelete(n.key, { scope: n.scope });
  await phase((i) => i % 10 === 3, (n) => ({ op: "write", key: n.key, value: `v3-${n.scope}-${n.key}-`.repeat(4), scope: n.scope }));
  await phase((i) => i % 5 === 4, (n) => ({ op: "write", key: n.key, value: `ttl-${n.key}`, scope: n.scope, ttlMs: 3_600_000 }));
  expect(s.stats().segments.length).toBeGreaterThan(12);
  await s.close();
}

/** The store at `dir` opened fresh (deferred), or as the reference (every entry applied by stats()). */
async function openAs(dir: string, reference: boolean): Promise<Store> {
  const s = await Store.open(dir, OPTIONS);
  expect(s.keydir.isDeferred).toBe(true); // opened from its hints
  if (reference) s.stats();
  expect(s.keydir.isDeferred).toBe(!reference);
  return s;
}

/** list() of `scope` as entries in key order. */
async function listed(s: Store, scope: string, inherit: boolean): Promise<string[]> {
  const out: string[] = [];
  for await (const e of s.list({ scope, inherit, limit: 10_000 })) out.push(`${e.scope} ${e.key} ${e.version}`);
  return out;
}

/** The names (slots with a record) the reference holds in `scopes`. */
async function slotsIn(reference: Store, scopes: readonly string[]): Promise<number> {
  let n = 0;
  for (const scope of scopes) n += (await reference.listSlots(scope, 10_000)).length;
  return n;
}

/** probe() of every name, exactly in its scope. */
async function probes(s: Store): Promise<ProbeResult[]> {
  const out: ProbeResult[] = [];
  for (const n of everyName()) out.push(await s.probe(n.key, { scope: n.scope, inherit: false }));
  return out;
}

describe("a listing or an erasure after a hinted open loads only its scopes", () => {
  const dir = tempDir("scoped-load");
  const referenceDir = tempDir("scoped-load-reference"); // a copy: one store is opened by one handle at a time
  beforeAll(async () => {
    await build(dir);
    fs.cpSync(dir, referenceDir, { recursive: true });
  }, 60_000);

  for (const scope of SCOPES) {
    for (const inherit of [true, false]) {
      it(`list ${scope}${inherit ? " with its lineage" : ""} and listSlots answer as with every entry applied`, async () => {
        const reference = await openAs(referenceDir, true);
        const fresh = await openAs(dir, false);
        const lineage = inherit ? scopeLineage(scope) : [scope];
        const want = await listed(reference, scope, inherit);
        expect(want.length).toBeGreaterThan(0);
        expect(await listed(fresh, scope, inherit)).toEqual(want);
        expect(fresh.keydir.isDeferred).toBe(true);
        expect(fresh.keydir.heldNow).toBe(await slotsIn(reference, lineage));
        expect(await fresh.listSlots(scope, 10_000)).toEqual(await reference.listSlots(scope, 10_000));
        expect(fresh.keydir.heldNow).toBe(await slotsIn(reference, lineage)); // listed again: loaded once
        await fresh.close();
        await reference.close();
      }, 60_000);
    }
  }

  it("a lazy erasure of a subtree reports and leaves what the reference's does, and so after a reopen", async () => {
    const copies = [tempDir("scoped-load-fresh"), tempDir("scoped-load-reference")];
    const results = [];
    for (const [i, copy] of copies.entries()) {
      fs.cpSync(dir, copy, { recursive: true });
      const s = await openAs(copy, i === 1);
      const erased = await s.forgetScope("user:a", { reclaim: "lazy" });
      if (i === 0) {
        expect(s.keydir.isDeferred).toBe(true);
        const reference = await openAs(referenceDir, true);
        expect(s.keydir.heldNow).toBe(await slotsIn(reference, ["user:a", "user:a/s", "user:a/s/t", "user:a/sx"]));
        await reference.close();
      }
      const now = await probes(s);
      await s.close();
      const reopened = await Store.open(copy, OPTIONS);
      results.push({ slots: erased.slots, now, reopened: await probes(reopened) });
      await reopened.close();
    }
    const [fresh, reference] = results as [(typeof results)[0], (typeof results)[0]];
    expect(reference.slots).toBeGreaterThan(0);
    expect(fresh.slots).toBe(reference.slots);
    expect(fresh.now).toEqual(reference.now);
    expect(fresh.reopened).toEqual(reference.reopened);
    expect(fresh.now.filter((p) => p.state === "live").length).toBeLessThan(reference.now.length / 2); // the erasure killed the subtree's values
  }, 60_000);
});
