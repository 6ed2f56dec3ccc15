/**
 * The keydir's two shortcuts on the read path (engine/keydir.ts, reads-5): it remembers the last
 * scope's key map (a string compare instead of the outer Map lookup), and a lookup that had the
 * deferred source (hint entries) build a slot returns the slot that source just applied instead
 * of looking it up again. The property: with both, every answer and every pass over all slots is
 * exactly what the plain two-level maps give.
 *
 * How it works: a scripted sequence drives one Keydir through the cases that can go stale —
 * a scope emptied (its map dropped) and filled again, scopes alternating, release() — and compares
 * get(), size and all() with a reference Map after every step; the twin is a Keydir built with its
 * checks off (`new Keydir(false)`: the remembered scope is never forgotten), which must lose a slot
 * from all() (a slot written into a dropped map: compaction and listing would never see it). Then a
 * fake deferred source that applies a neighbour's entry along with the one asked for, or nothing,
 * must still give each name its own slot; the twin returns the neighbour's. Hinted stores are
 * covered end to end by test/hint-slot-build.test.ts (every slot built from hints equals the
 * full scan's).
 */
import { describe, expect, it } from "vitest";
import { applyPut, Keydir, type DeferredSlots, type Slot } from "../engine/keydir.js";

type Step = { op: "put" | "del"; scope: string; key: string };

const STEPS: Step[] = [
  { op: "put", scope: "a", key: "1" },
  { op: "put", scope: "global", key: "1" },
  { op: "del", scope: "a", key: "1" }, // scope "a" empties: its map is dropped
  { op: "put", scope: "a", key: "2" }, // and made again
  { op: "put", scope: "a", key: "3" },
  { op: "put", scope: "b", key: "1" },
  { op: "del", scope: "b", key: "1" },
  { op: "del", scope: "a", key: "2" },
  { op: "put", scope: "b", key: "9" },
  { op: "del", scope: "a", key: "3" },
  { op: "put", scope: "a", key: "4" },
];

/** Runs STEPS on `kd`; returns the first disagreement with a reference map, or null. */
function divergence(kd: Keydir): string | null {
  const ref = new Map<string, Slot>();
  let seq = 0;
  for (const step of STEPS) {
    const name = `${step.scope}\u0000${step.key}`;
    if (step.op === "put") {
      const slot = kd.ensure(step.scope, step.key);
      applyPut(slot, ++seq, 0, 0, { seg: 1, off: 64 * seq, len: 60 });
      ref.set(name, slot);
    } else {
      const slot = kd.get(step.scope, step.key);
      if (slot === undefined) return `${name} missing before its delete`;
      kd.delete(slot);
      ref.delete(name);
    }
    for (const [n, slot] of ref) {
      const [scope, key] = n.split("\u0000") as [string, string];
      if (kd.get(scope, key) !== slot) return `get(${n}) is not its slot after ${step.op} ${name}`;
    }
    const all = new Set(kd.all());
    if (kd.size !== ref.size || all.size !== ref.size) return `${all.size} slots in all(), size ${kd.size}, expected ${ref.size} after ${step.op} ${name}`;
    for (const slot of ref.values()) if (!all.has(slot)) return `all() lacks ${slot.scope}/${slot.key} after ${step.op} ${name}`;
  }
  kd.release();
  if (kd.get("a", "4") !== undefined || kd.size !== 0) return "a released keydir still answers";
  kd.ensure("a", "5");
  if ([...kd.all()].length !== 1) return "a slot made after release() is not in all()";
  return null;
}

describe("keydir: the remembered scope", () => {
  it("answers like the plain maps through scopes emptied, made again, alternated and released", () => {
    expect(divergence(new Keydir())).toBeNull();
  });

  it("twin: a remembered scope that is never forgotten loses slots written after its map was dropped", () => {
    expect(divergence(new Keydir(false))).toMatch(/all\(\)|released|missing|not its slot/);
  });
});

/** A deferred source over fixed entries that, when asked for `key`, also applies `neighbour`'s. */
function leakySource(entries: string[], neighbour: (key: string) => string | null): DeferredSlots {
  const pending = new Set(entries);
  const apply = (kd: Keydir, key: string): void => {
    if (!pending.delete(key)) return;
    applyPut(kd.ensureApplied("global", key), 1, 0, 0, { seg: 1, off: 64, len: 60 });
  };
  return {
    load(kd, _scope, key) {
      apply(kd, key);
      const n = neighbour(key);
      if (n !== null) apply(kd, n); // the source applies another name last
    },
    loadAll(kd) {
      for (const k of [...pending]) apply(kd, k);
    },
    loadWithin(kd, roots) {
      if (roots.includes("global")) for (const k of [...pending]) apply(kd, k); // every entry is in "global"
    },
    loadStep(kd) {
      for (const k of [...pending]) apply(kd, k);
      return true;
    },
  };
}

/** Looks up every name (and some absent ones) through the source; returns names answered with another's slot. */
function wrongSlots(kd: Keydir): string[] {
  const names = ["a", "b", "c", "d"];
  kd.defer(leakySource(names, (k) => (k === "a" ? "b" : k === "c" ? "d" : null)));
  const wrong: string[] = [];
  for (const k of ["a", "b", "zz", "c", "d", "b", "zz"]) {
    const slot = kd.get("global", k);
    if (k === "zz" ? slot !== undefined : slot?.key !== k) wrong.push(k);
  }
  const made = kd.ensure("global", "new");
  if (made.key !== "new") wrong.push("new");
  return wrong;
}

describe("keydir: the slot a deferred load built", () => {
  it("is returned only when it is the asked name's; otherwise the maps answer", () => {
    expect(wrongSlots(new Keydir())).toEqual([]);
  });

  it("twin: returned without comparing its name, a lookup gets the neighbour the source applied last", () => {
    expect(wrongSlots(new Keydir(false)).length).toBeGreaterThan(0);
  });
});
