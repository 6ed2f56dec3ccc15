/**
 * The merged hint index (engine/hint-index.ts MergedIndex): once lookups after a hinted open reach
 * a fraction of the hinted entries, every hint table's cells go into one index, so a lookup probes
 * once instead of once per hint. The property: a slot built through the merged index is exactly
 * the slot the per-table probe builds and the slot a full scan builds, field by field, for every
 * stored name and for names not stored.
 *
 * Method: a real store (4 KiB segments: many hints; three scopes, ASCII and non-ASCII keys,
 * overwrites, forgets and undeletes, so most names have entries in several hints) is closed with
 * hints and copied three times; one copy's hints are deleted (the full scan). The others are opened
 * merged from the first lookup (policy after 0) and never merged (after Infinity), and every name
 * (stored ones and near misses) is looked up in a shuffled order in all three: every slot field
 * must be equal, and the first must have merged while the second never did. Then the default
 * policy: after a few lookups the open merges, and the lookups before and after agree with the scan.
 * A hint with a flipped byte in its first packed block (checked at first use, not at open) is
 * rescanned by the merge (which reads every hint whole), and the answers still equal the scan's.
 * Its twin: a broken merged probe that keeps only the first entry of a name (policy firstOnly)
 * builds slots that differ from the scan's (a name written in two hints loses one of its records),
 * so the comparison can fail.
 */
import * as fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import type { Slot } from "../engine/keydir.js";
import { HINT_MERGE_DEFAULT, setHintMerge, type HintSlots } from "../engine/hint-index.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { churnedHintStore, dropHints, hintIds } from "./helpers/hints.js";
import { rng } from "./helpers/rng.js";
import { hintPath } from "./helpers/recovered-state.js";
import { V3_HEADER_BYTES } from "./helpers/hint-layout.js";

const NOW = 1_800_000_000_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false }, clock: () => NOW };
const SCOPES = ["global", "user:alice", "user:bob/notes"];
const KEYS = Array.from({ length: 120 }, (_, i) => (i % 5 === 0 ? `ключ-${i}` : i % 7 === 0 ? `k${i}-☃` : `key-${i}`));

/** Every field of a slot, plain (the rare ones through their accessors). */
function fields(s: Slot | undefined): Record<string, number | string> | undefined {
  if (s === undefined) return undefined;
  const { scope, key, putSeq, putGen, seg, off, len, expiresAt, generation, physical, tombSeq, tombGen, tombSeg, tombOff, tombLen, clearSeq, clearSeg, clearOff, clearLen, reclaimedAt } = s;
  return { scope, key, putSeq, putGen, seg, off, len, expiresAt, generation, physical, tombSeq, tombGen, tombSeg, tombOff, tombLen, clearSeq, clearSeg, clearOff, clearLen, reclaimedAt };
}

/** The deferred source of a store's keydir (null once everything is applied). */
function sourceOf(s: Store): HintSlots | null {
  return (s.keydir as unknown as { deferred: HintSlots | null }).deferred;
}

const open: Store[] = [];
afterEach(async () => {
  setHintMerge(HINT_MERGE_DEFAULT);
  for (const s of open.splice(0)) await s.close();
});

/** The seeded store, closed: overwrites, forgets and undeletes across many small segments. */
const build = (): Promise<string> => churnedHintStore("hint-merge", 11, OPTS, SCOPES, KEYS);

/** A copy of `dir` opened with the merge policy `after` (hints kept), or with its hints deleted (after null: the full scan). */
async function openCopy(dir: string, after: number | null, firstOnly = false): Promise<Store> {
  const copy = tempDir("hint-merge-copy");
  fs.cpSync(dir, copy, { recursive: true });
  if (after === null) expect(dropHints(copy)).toBeGreaterThan(5);
  setHintMerge({ after: after ?? HINT_MERGE_DEFAULT.after, firstOnly });
  const s = await Store.open(copy, OPTS);
  setHintMerge(HINT_MERGE_DEFAULT);
  open.push(s);
  expect(s.keydir.isDeferred).toBe(after !== null);
  return s;
}

/** Every stored name and two near misses of each (a near miss may be another stored name: listed once), shuffled. */
function names(): Array<readonly [string, string]> {
  const seen = new Set<string>();
  const out: Array<readonly [string, string]> = [];
  for (const name of SCOPES.flatMap((scope) => KEYS.flatMap((key) => [[scope, key], [scope, `${key}0`], [`${scope}x`, key]] as const))) {
    const id = `${name[0]}\0${name[1]}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(name);
  }
  const r = rng(17);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j] as (typeof out)[number], out[i] as (typeof out)[number]];
  }
  return out;
}

describe("slots built through the merged hint index", () => {
  it("equal the per-table probe's and the full scan's, field by field, stored names and near misses", async () => {
    const dir = await build();
    expect(hintIds(dir).length).toBeGreaterThan(5);
    const merged = await openCopy(dir, 0);
    const each = await openCopy(dir, Infinity);
    const full = await openCopy(dir, null);
    let found = 0;
    let asked = 0;
    for (const [scope, key] of names()) {
      const want = fields(full.keydir.get(scope, key));
      expect(fields(merged.keydir.get(scope, key))).toEqual(want);
      expect(fields(each.keydir.get(scope, key))).toEqual(want);
      if (SCOPES.includes(scope) && KEYS.includes(key)) {
        expect(want).toBeDefined(); // every stored name has a slot (a near miss may be another stored name)
        found++;
      }
      asked++;
      // Paired: the merged store answered through its index, the other through each table.
      if (asked === 1) expect([sourceOf(merged)?.isMerged, sourceOf(each)?.isMerged]).toEqual([true, false]);
    }
    expect(found).toBe(SCOPES.length * KEYS.length);
    expect([sourceOf(merged)?.isMerged, sourceOf(each)?.isMerged]).toEqual([true, false]);
  });

  it("the default policy merges after some lookups, and answers before and after equal the scan's", async () => {
    const dir = await build();
    const deferred = await openCopy(dir, HINT_MERGE_DEFAULT.after);
    const full = await openCopy(dir, null);
    let before = 0;
    for (const [scope, key] of names()) {
      if (sourceOf(deferred)?.isMerged !== true) before++;
      expect(fields(deferred.keydir.get(scope, key))).toEqual(fields(full.keydir.get(scope, key)));
    }
    expect(before).toBeGreaterThan(0);
    expect(sourceOf(deferred)?.isMerged).toBe(true);
  });

  it("above entriesMax the default policy never merges (the build would block one lookup too long), and the answers equal the scan's", async () => {
    const dir = await build();
    const full = await openCopy(dir, null);
    const copy = tempDir("hint-merge-copy");
    fs.cpSync(dir, copy, { recursive: true });
    setHintMerge({ ...HINT_MERGE_DEFAULT, entriesMax: 1 }); // every store of this test holds more than one entry
    const bounded = await Store.open(copy, OPTS);
    setHintMerge(HINT_MERGE_DEFAULT);
    open.push(bounded);
    expect(bounded.keydir.isDeferred).toBe(true);
    for (const [scope, key] of names()) expect(fields(bounded.keydir.get(scope, key))).toEqual(fields(full.keydir.get(scope, key)));
    // Paired with the default-policy case above, on the same store: there the same lookups merged.
    expect(sourceOf(bounded)?.isMerged).toBe(false);
  });

  it("a hint whose first packed block fails its checksum is rescanned by the merge, and the answers equal the scan's", async () => {
    const dir = await build();
    const ids = hintIds(dir);
    const id = ids[ids.length >> 1] as number;
    const file = hintPath(dir, id);
    const bytes = fs.readFileSync(file);
    bytes[V3_HEADER_BYTES] = (bytes[V3_HEADER_BYTES] as number) ^ 0x08; // inside the first entry block: found at first use, not at open
    fs.writeFileSync(file, bytes);
    const merged = await openCopy(dir, 0);
    expect(merged.opened.hinted).toBe(ids.length); // the open did not read the block
    const full = await openCopy(dir, null);
    for (const [scope, key] of names()) expect(fields(merged.keydir.get(scope, key))).toEqual(fields(full.keydir.get(scope, key)));
    expect(sourceOf(merged)?.isMerged).toBe(true);
    // Paired: that hint's table is the rescan's (its bytes in memory), every other one still the file's blocks.
    const tables = (sourceOf(merged) as unknown as { tables: Array<{ segmentId: number; hint: { bytes: unknown } }> }).tables;
    expect(tables.filter((t) => t.hint.bytes === null).map((t) => t.segmentId)).toEqual([id]);
  });

  it("twin: a merged probe that keeps only a name's first entry builds slots that differ from the scan's", async () => {
    const dir = await build();
    const broken = await openCopy(dir, 0, true);
    const full = await openCopy(dir, null);
    let differ = 0;
    for (const [scope, key] of names()) {
      if (JSON.stringify(fields(broken.keydir.get(scope, key))) !== JSON.stringify(fields(full.keydir.get(scope, key)))) differ++;
    }
    expect(sourceOf(broken)?.isMerged).toBe(true);
    expect(differ).toBeGreaterThan(100);
  });
});
