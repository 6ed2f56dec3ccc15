/**
 * The logical state of a slot: what the next write must be decided against. It is the visible
 * keydir state plus every mutation queued but not yet committed (in `sync` mode a write becomes
 * visible only once durable, but versions, generations and compare-and-set are decided when it is
 * queued, so queued writes must see each other).
 */
import { lineageMax } from "../rules/names.js";
import { killStands, versionSurvivesKill } from "../rules/gc-rule.js";
import { assert, fail } from "../rules/assert.js";
import { isReadable, isReserved, isTombstoned, killSeq, type Keydir, type Slot, type SlotRef } from "./keydir.js";

/** A slot's state as the next mutation sees it. */
export interface Logical {
  /** Sequence of the last mutation this state reflects (0 for none). */
  seq: number;
  /** A readable value exists. */
  live: boolean;
  /** The live value's version, null when none. */
  version: number | null;
  /** The version of the slot's latest value, live or killed (0 for none): its retention record's. */
  lastVersion: number;
  generation: number;
  /** Killed and not undeleted since: a write must clear the tombstone. */
  tombstoned: boolean;
  /** Sequence of the kill (tombstone or erasure), 0 for none. */
  killSeq: number;
  /** A retention record exists. */
  exists: boolean;
}

const ABSENT: Logical = { seq: 0, live: false, version: null, lastVersion: 0, generation: 0, tombstoned: false, killSeq: 0, exists: false };

/**
 * The logical state of a held compact row of `scope` (engine/compact-slots.ts): fromSlot's answer
 * for the Slot the row stands for — a PUT of generation 1 that never expires, no tombstone, no
 * undelete — so only a covering erasure can kill it (test/keydir-compact.test.ts compares them).
 */
function fromRow(keydir: Keydir, row: number, scope: string): Logical {
  const putSeq = keydir.rowPutSeq(row);
  const kill = keydir.eraseSeq(scope);
  const live = versionSurvivesKill(putSeq, kill);
  return { seq: Math.max(putSeq, kill), live, version: live ? putSeq : null, lastVersion: putSeq, generation: 1, tombstoned: killStands(kill, putSeq, 0), killSeq: kill, exists: true };
}

/** The logical state of a committed slot (ABSENT when there is none, or only a reserved one) at `now`. */
function fromSlot(keydir: Keydir, ref: SlotRef | undefined, now: number): Logical {
  if (ref === undefined || isReserved(ref)) return ABSENT;
  const slot = ref as Slot; // isReserved is true of every row number
  const kill = killSeq(keydir, slot);
  const live = isReadable(keydir, slot, now);
  return {
    seq: Math.max(slot.putSeq, kill, slot.clearSeq),
    live,
    version: live ? slot.putSeq : null,
    lastVersion: slot.putSeq,
    generation: slot.generation,
    tombstoned: isTombstoned(keydir, slot),
    killSeq: kill,
    exists: true,
  };
}

/**
 * Scopes whose emptied map is kept (while there are at most this many maps): a lone writer's
 * scope then does not make and drop a Map, and rehash the outer one, on every write.
 */
const SCOPE_MAPS_KEPT = 16;

/** Queued, uncommitted state by slot, and queued erasures by scope. */
export class Intents {
  private readonly slots = new Map<string, Map<string, Logical>>();
  private readonly erases = new Map<string, number>();
  /**
   * The scope keysOf answered last and its map (undefined: none), or null: most calls name the
   * scope of the call before ("global" above all), so a string compare replaces a map lookup.
   * Every change of `slots` that adds or drops a scope's map forgets it.
   */
  private lastScope: string | null = null;
  private lastKeys: Map<string, Logical> | undefined = undefined;

  /**
   * What the last logical() call found in the keydir: its slot (possibly one reserved for the
   * caller: Keydir.reserveFor), undefined when the name was absent there, null when a queued state
   * answered and the keydir was not asked (read by a plan right after its decision,
   * engine/batch-plan.ts; no object per call).
   */
  lastSlot: SlotRef | undefined | null = null;

  /**
   * The logical state of (scope, key) at `now`. With `reserve` (a batch's decision, which records
   * the name's intent next), a name the keydir does not hold gets a reserved slot (Keydir.reserveFor).
   */
  logical(keydir: Keydir, scope: string, key: string, now: number, reserve = false): Logical {
    let base = this.keysOf(scope)?.get(key);
    if (base !== undefined) this.lastSlot = null;
    else {
      const slot = reserve ? keydir.reserveFor(scope, key) : keydir.get(scope, key);
      this.lastSlot = slot;
      base = slot !== undefined && keydir.heldRow(slot) ? fromRow(keydir, slot, scope) : fromSlot(keydir, slot, now);
    }
    const erased = this.pendingEraseSeq(scope);
    // The same rule as keydir.isTombstoned once the erasure is applied: it kills every slot of the
    // subtree that has a retention record, live or not (cleared, expired, reclaimed).
    if (erased > base.seq && base.exists) {
      return { ...base, seq: erased, live: false, version: null, tombstoned: true, killSeq: erased };
    }
    return base;
  }

  /** Records the state a queued mutation leaves behind (the object is kept, not copied). */
  set(scope: string, key: string, state: Logical): void {
    this.keysFor(scope).set(key, state);
  }

  /** The intents of `scope`, or undefined (remembered: see lastScope). */
  private keysOf(scope: string): Map<string, Logical> | undefined {
    if (scope === this.lastScope) return this.lastKeys;
    const keys = this.slots.get(scope);
    this.lastScope = scope;
    this.lastKeys = keys;
    return keys;
  }

  /** The intents of `scope`, its map made when missing. */
  private keysFor(scope: string): Map<string, Logical> {
    let keys = this.keysOf(scope);
    if (keys === undefined) {
      keys = new Map();
      this.slots.set(scope, keys);
      this.lastKeys = keys; // keysOf just remembered `scope` as having none
    }
    return keys;
  }

  /** Drops the emptied map of `scope` when more than SCOPE_MAPS_KEPT are held. */
  private dropIfEmpty(scope: string, keys: Map<string, Logical>): void {
    if (keys.size !== 0 || this.slots.size <= SCOPE_MAPS_KEPT) return;
    this.slots.delete(scope);
    this.lastScope = null;
    this.lastKeys = undefined;
  }

  /**
   * set(), returning the state it replaced (undefined: none): a plan records each op's intent as
   * it decides it, so that its later ops and nothing else see it before it is queued, and keeps
   * what it replaced to restore should the plan not be queued after all (restore()).
   */
  replace(scope: string, key: string, state: Logical): Logical | undefined {
    const keys = this.keysFor(scope);
    const replaced = keys.get(key);
    keys.set(key, state);
    return replaced;
  }

  /**
   * replace() for a name the last logical() call found no intent for (lastSlot not null) with no
   * intent recorded since: nothing to look up, it replaces none (a plan's op on a name new to the
   * plan and the queue, most ops of a bulk load). Paired check: the map grows by exactly one, so a
   * name that held an intent after all fails loudly (its restore would lose that intent).
   */
  add(scope: string, key: string, state: Logical): undefined {
    const keys = this.keysFor(scope);
    const before = keys.size;
    keys.set(key, state);
    if (keys.size !== before + 1) fail(`an intent added for (${scope}, ${key}) replaced one`);
    return undefined;
  }

  /**
   * Undoes replace(scope, key, state), which returned `replaced`: the intent is `replaced` again
   * (none when undefined). Undone in the reverse order of the replaces, so `state` is still the
   * intent held (paired check).
   */
  restore(scope: string, key: string, replaced: Logical | undefined, state: Logical): void {
    const keys = this.keysOf(scope);
    assert(keys?.get(key) === state, "an intent is restored while it is still the one its plan set");
    if (replaced !== undefined) keys.set(key, replaced);
    else {
      keys.delete(key);
      this.dropIfEmpty(scope, keys);
    }
  }

  /** Forgets the queued state once the mutation with `seq` is applied (unless a later one is queued). */
  settle(scope: string, key: string, seq: number): void {
    const keys = this.keysOf(scope);
    if (keys?.get(key)?.seq !== seq) return;
    keys.delete(key);
    this.dropIfEmpty(scope, keys);
  }

  /** Drops every queued state: the log rejected every queued mutation (commit.ts failure protocol). */
  clear(): void {
    this.slots.clear();
    this.lastScope = null;
    this.lastKeys = undefined;
    this.erases.clear();
  }

  /** Records a queued erasure of `scope`. */
  setErase(scope: string, seq: number): void {
    this.erases.set(scope, seq);
  }

  /** Forgets a queued erasure once applied. */
  settleErase(scope: string, seq: number): void {
    if (this.erases.get(scope) === seq) this.erases.delete(scope);
  }

  /** Every queued slot as (scope, key). */
  *queuedSlots(): Generator<{ scope: string; key: string }> {
    for (const [scope, keys] of this.slots) for (const key of keys.keys()) yield { scope, key };
  }

  /** Highest queued erasure covering `scope` (its own or an ancestor's), 0 for none. */
  private pendingEraseSeq(scope: string): number {
    if (this.erases.size === 0) return 0;
    return lineageMax(scope, (s) => this.erases.get(s) ?? 0);
  }
}
