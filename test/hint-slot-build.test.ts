/**
 * Slot building after a hinted open (engine/hint-index.ts `load`): the lookup name is encoded and
 * hashed in one pass for ASCII keys, with the scope's bytes and hash kept from the previous lookup,
 * and once a hint's blocks are all loaded its views are read without asking HintBytes per access.
 * The property: a slot built on first use from the hints is exactly the slot a full scan builds,
 * and a lookup hash is exactly slotHash over the name's UTF-8 bytes, whatever came before it.
 *
 * Method: (1) query names — ASCII, non-ASCII keys and scopes, names at and past the byte limits —
 * looked up in an order that switches scope, repeats it, and goes back, each compared with
 * slotHash over Buffer.from(scope)+Buffer.from(key) and those bytes. Its twin: the hash a stale
 * scope cache would give (the previous scope's bytes with this key) differs from the right one for
 * every switch of scope, so a stale cache would be caught. (2) A real store (4 KiB segments, three
 * scopes (scopes are ASCII by their grammar), ASCII and non-ASCII keys, overwrites, forgets, undeletes) is closed with hints, copied,
 * and the copy's hints deleted; both are opened, the first deferred, and every name is looked up
 * in a shuffled order in both: every slot field must be equal. Its twin: names one byte or one
 * character off each stored name find no slot in either (a fast path that matched on a prefix, a
 * truncated name or the hash alone would build one).
 */
import * as fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import type { Slot } from "../engine/keydir.js";
import { queryHash } from "../engine/hint-index.js";
import { slotHash } from "../segments/hint.js";
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX } from "../rules/limits.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { churnedHintStore, dropHints, hintIds } from "./helpers/hints.js";
import { rng } from "./helpers/rng.js";

const NOW = 1_800_000_000_000;
const OPTS: OpenOptions = { durability: "none", segmentBytes: 4096, compaction: { workers: 0, auto: false }, clock: () => NOW };
const SCOPES = ["global", "user:alice", "user:bob/notes"];
const KEYS = Array.from({ length: 120 }, (_, i) => (i % 5 === 0 ? `ключ-${i}` : i % 7 === 0 ? `k${i}-☃` : `key-${i}`));

/** slotHash over the UTF-8 bytes of scope and key, and those bytes (the reference). */
function reference(scope: string, key: string): { hash: number; bytes: Buffer } {
  const bytes = Buffer.concat([Buffer.from(scope, "utf8"), Buffer.from(key, "utf8")]);
  const scopeLen = Buffer.byteLength(scope, "utf8");
  return { hash: slotHash(bytes, 0, scopeLen, scopeLen, bytes.length - scopeLen), bytes };
}

/** Every field of a slot, plain (the rare ones through their accessors). */
function fields(s: Slot | undefined): Record<string, number | string> | undefined {
  if (s === undefined) return undefined;
  const { scope, key, putSeq, putGen, seg, off, len, expiresAt, generation, physical, tombSeq, tombGen, tombSeg, tombOff, tombLen, clearSeq, clearSeg, clearOff, clearLen, reclaimedAt } = s;
  return { scope, key, putSeq, putGen, seg, off, len, expiresAt, generation, physical, tombSeq, tombGen, tombSeg, tombOff, tombLen, clearSeq, clearSeg, clearOff, clearLen, reclaimedAt };
}

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe("the lookup name and its hash", () => {
  const names: Array<[string, string]> = [
    ["global", "a"],
    ["global", "key-1"],
    ["user:ålice", "key-1"],
    ["user:ålice", "ключ"],
    ["global", "key-1"],
    ["global", "k-☃"],
    ["user:bob/notes", "x".repeat(KEY_BYTES_MAX)],
    ["global", "é".repeat(KEY_BYTES_MAX / 2)],
    ["user:ålice", "key-1"],
    ["a/".repeat(SCOPE_BYTES_MAX / 2 - 1) + "a", "k"],
  ];

  it("is slotHash over the name's UTF-8 bytes in any order of scopes", () => {
    for (let round = 0; round < 3; round++) {
      for (const [scope, key] of round === 1 ? [...names].reverse() : names) {
        const got = queryHash(scope, key);
        const want = reference(scope, key);
        expect(got.hash).toBe(want.hash);
        expect(got.bytes.equals(want.bytes)).toBe(true);
      }
    }
  });

  it("is -1 for a name longer than any stored one (the query scratch would truncate it)", () => {
    const scope = "s/".repeat(SCOPE_BYTES_MAX / 2 - 1) + "s";
    expect(queryHash(scope, "é".repeat(KEY_BYTES_MAX)).hash).toBe(-1);
    expect(queryHash(scope, "x".repeat(KEY_BYTES_MAX + 1)).hash).toBeGreaterThanOrEqual(0); // fits the scratch: looked up, found nowhere
    expect(queryHash("é".repeat(SCOPE_BYTES_MAX + KEY_BYTES_MAX), "k").hash).toBe(-1);
  });

  it("twin: a stale scope cache would give another hash at every switch of scope", () => {
    let switches = 0;
    for (let i = 1; i < names.length; i++) {
      const [prevScope] = names[i - 1] as [string, string];
      const [scope, key] = names[i] as [string, string];
      if (prevScope === scope || Buffer.byteLength(prevScope) + Buffer.byteLength(key) > SCOPE_BYTES_MAX + KEY_BYTES_MAX) continue;
      switches++;
      expect(reference(prevScope, key).hash).not.toBe(queryHash(scope, key).hash);
    }
    expect(switches).toBeGreaterThanOrEqual(5);
  });
});

describe("slots built from hints on first use", () => {
  /** The seeded store, closed: overwrites, forgets and undeletes across many small segments. */
  const build = (): Promise<string> => churnedHintStore("hint-slot-build", 5, OPTS, SCOPES, KEYS);

  it("equal the slots of a full scan, field by field, in any lookup order", async () => {
    const dir = await build();
    expect(hintIds(dir).length).toBeGreaterThan(5);
    const scanned = tempDir("hint-slot-build-scan");
    fs.cpSync(dir, scanned, { recursive: true });
    expect(dropHints(scanned)).toBeGreaterThan(5);
    const deferred = await Store.open(dir, OPTS);
    open.push(deferred);
    const full = await Store.open(scanned, OPTS);
    open.push(full);
    expect(deferred.keydir.isDeferred).toBe(true);
    expect(full.keydir.isDeferred).toBe(false);
    const order = SCOPES.flatMap((scope) => KEYS.map((key) => [scope, key] as const));
    const r = rng(9);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [order[i], order[j]] = [order[j] as (typeof order)[number], order[i] as (typeof order)[number]];
    }
    let found = 0;
    for (const [scope, key] of order) {
      const want = fields(full.keydir.get(scope, key));
      expect(fields(deferred.keydir.get(scope, key))).toEqual(want);
      if (want !== undefined) found++;
    }
    expect(found).toBe(order.length);
  });

  it("twin: a name one byte or one character off a stored one finds no slot", async () => {
    const dir = await build();
    const deferred = await Store.open(dir, OPTS);
    open.push(deferred);
    let asked = 0;
    for (const scope of SCOPES) {
      for (const key of KEYS.slice(0, 40)) {
        for (const near of [key.slice(0, -1), `${key}0`, key.replace(/.$/u, (c) => String.fromCodePoint((c.codePointAt(0) as number) + 1)), `${key.slice(0, -1)}é`]) {
          if (KEYS.includes(near)) continue;
          expect(deferred.keydir.get(scope, near)).toBeUndefined();
          asked++;
        }
        expect(deferred.keydir.get(`${scope}x`, key)).toBeUndefined();
        expect(deferred.keydir.get(scope, key)?.key).toBe(key);
      }
    }
    expect(asked).toBeGreaterThan(300);
  });
});
