/**
 * The keydir: for every slot (scope, key) its value location and its retention record, plus the
 * latest scope-erasure record per scope. Everything a read, a probe or the GC needs is here.
 *
 * The apply* functions are the single way state changes from records, used both by recovery
 * (replaying segments, possibly out of order after copy-on-write compaction) and by the commit
 * path (after a group is written): each is guarded by sequence numbers, so order does not matter
 * and replay is idempotent except for the record counts: `physical` counts every PUT seen,
 * `tombRecords`, `clearRecords` and an erasure's `records` every TOMBSTONE, CLEAR and SCOPE_ERASE.
 */
import type { ErasedSlot } from "../segments/erase-list.js";
import { expiredAt, killStands, versionSurvivesKill } from "../rules/gc-rule.js";
import { lineageMax, parentScope, scopeWithin } from "../rules/names.js";
import { ROOT_SCOPE } from "../rules/limits.js";
import { assert, DEBUG_CHECKS, fail } from "../rules/assert.js";
import { CompactRows, ROW_FORWARDED, ROW_HELD, ROW_RESERVED, type RowColumns } from "./compact-slots.js";

/**
 * The fields of a slot that most slots never set: its tombstone, its undelete, its erase-list
 * mention and its reclamation time. Kept apart so that a slot that was only ever written costs
 * one small object (issue 11: heap per key); Slot's accessors read them as 0 while absent.
 */
class SlotRare {
  tombSeq = 0;
  tombGen = 0;
  tombSeg = 0;
  tombOff = 0;
  tombLen = 0;
  clearSeq = 0;
  clearGen = 0;
  clearSeg = 0;
  clearOff = 0;
  clearLen = 0;
  listedSeq = 0;
  reclaimedAt = 0;
  tombRecords = 0;
  clearRecords = 0;

  constructor() {
    // A time (ms since epoch) is no small integer: had the field started as one, the first real
    // time stored would change its representation and make every SlotRare made before migrate on
    // its next touch (~2.7 µs each: 68 ms of a 25k-key compaction publish, compact-5's profile).
    // Storing a fraction first makes it a double field from the start.
    this.reclaimedAt = 0.5;
    this.reclaimedAt = 0;
  }
}

/**
 * What the hot-value cache hangs on a slot (engine/value-cache.ts CachedValue, which imports this
 * file; declared here so that the import goes one way): the value read for the slot from the
 * record at (seg, off) under the segment generation `generation`, and the bytes it is counted as.
 */
export interface CachedOnSlot {
  readonly slot: Slot;
  readonly value: string | Uint8Array;
  readonly seg: number;
  readonly off: number;
  readonly generation: number;
  readonly bytes: number;
}

/**
 * One slot: its latest PUT (possibly dead) and its retention record. The fields every slot has
 * are plain; the rest live in a SlotRare made on the first non-zero write (writing 0 to an absent
 * one is a no-op, so reading and writing them reads exactly as if they were plain fields).
 */
export class Slot {
  readonly scope: string;
  readonly key: string;
  /** Latest PUT: sequence (= version), generation, location (seg 0 = no record), expiry. */
  putSeq = 0;
  putGen = 0;
  seg = 0;
  off = 0;
  len = 0;
  expiresAt = 0;
  /** The slot's current generation: the highest of its PUT and CLEAR generations. */
  generation = 0;
  /** PUT records of this slot still physically present in segment files (any generation). */
  physical = 0;
  /** Its value in the store's hot-value cache (engine/value-cache.ts owns it), or null. */
  cached: CachedOnSlot | null = null;
  private rare: SlotRare | null = null;

  constructor(scope: string, key: string) {
    this.scope = scope;
    this.key = key;
  }

  /** The rare fields, made on first use. */
  private more(): SlotRare {
    return (this.rare ??= new SlotRare());
  }

  /** Latest TOMBSTONE: sequence, generation it killed, location. */
  get tombSeq(): number { return this.rare === null ? 0 : this.rare.tombSeq; }
  set tombSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().tombSeq = v; }
  get tombGen(): number { return this.rare === null ? 0 : this.rare.tombGen; }
  set tombGen(v: number) { if (v !== 0 || this.rare !== null) this.more().tombGen = v; }
  get tombSeg(): number { return this.rare === null ? 0 : this.rare.tombSeg; }
  set tombSeg(v: number) { if (v !== 0 || this.rare !== null) this.more().tombSeg = v; }
  get tombOff(): number { return this.rare === null ? 0 : this.rare.tombOff; }
  set tombOff(v: number) { if (v !== 0 || this.rare !== null) this.more().tombOff = v; }
  get tombLen(): number { return this.rare === null ? 0 : this.rare.tombLen; }
  set tombLen(v: number) { if (v !== 0 || this.rare !== null) this.more().tombLen = v; }
  /** Latest CLEAR (undelete): sequence, the generation it moved the slot to, and location. */
  get clearSeq(): number { return this.rare === null ? 0 : this.rare.clearSeq; }
  set clearSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().clearSeq = v; }
  get clearGen(): number { return this.rare === null ? 0 : this.rare.clearGen; }
  set clearGen(v: number) { if (v !== 0 || this.rare !== null) this.more().clearGen = v; }
  get clearSeg(): number { return this.rare === null ? 0 : this.rare.clearSeg; }
  set clearSeg(v: number) { if (v !== 0 || this.rare !== null) this.more().clearSeg = v; }
  get clearOff(): number { return this.rare === null ? 0 : this.rare.clearOff; }
  set clearOff(v: number) { if (v !== 0 || this.rare !== null) this.more().clearOff = v; }
  get clearLen(): number { return this.rare === null ? 0 : this.rare.clearLen; }
  set clearLen(v: number) { if (v !== 0 || this.rare !== null) this.more().clearLen = v; }
  /**
   * Highest sequence of a SCOPE_ERASE whose erase list names this slot (committed or replayed);
   * 0 when none does. Only such a slot must outlive its own records while a covering erasure is
   * retained: a restart would rebuild it from that list (issue 9 defect 6).
   */
  get listedSeq(): number { return this.rare === null ? 0 : this.rare.listedSeq; }
  set listedSeq(v: number) { if (v !== 0 || this.rare !== null) this.more().listedSeq = v; }
  /** When `physical` last reached zero (ms, engine clock); 0 while records remain. */
  get reclaimedAt(): number { return this.rare === null ? 0 : this.rare.reclaimedAt; }
  set reclaimedAt(v: number) { if (v !== 0 || this.rare !== null) this.more().reclaimedAt = v; }
  /**
   * TOMBSTONE and CLEAR records of this slot still physically in segment files — the latest ones
   * the fields above point at and any older ones — counted as `physical` counts PUTs: one more per
   * record applied, one fewer per record a compaction drops. More records than the latest on disk
   * hold the latest (engine/gc-policy.ts olderKillOnDisk): a restart must find it, not an older one.
   */
  get tombRecords(): number { return this.rare === null ? 0 : this.rare.tombRecords; }
  set tombRecords(v: number) { if (v !== 0 || this.rare !== null) this.more().tombRecords = v; }
  get clearRecords(): number { return this.rare === null ? 0 : this.rare.clearRecords; }
  set clearRecords(v: number) { if (v !== 0 || this.rare !== null) this.more().clearRecords = v; }
}

/**
 * What a batch's decision found for a name: its slot, or the number of its compact row
 * (engine/compact-slots.ts): one reserved for it by this decision, its only holder, or one held
 * (Keydir.heldRow tells which; the state a decision reads of a held row is intents.ts fromRow's).
 */
export type SlotRef = Slot | number;

/**
 * True for a slot a batch's decision reserved (Keydir.reserveFor) and no apply has made real yet:
 * it sits in its scope's map but is "absent" to every reader, pass and count. Marked by
 * `physical` -1, so that no field is added per slot. A row number may be a reservation as its
 * decision holds it: a plan that will not be applied hands it back (Keydir.unreserve takes back
 * only a row still reserved, never a held one).
 */
export function isReserved(slot: SlotRef): boolean {
  return typeof slot === "number" || slot.physical < 0;
}

/** True when `keys` holds a slot that is not reserved, or a held row (a scope that exists for listings and stats). */
function holdsSlot(keys: ReadonlyMap<string, Slot | number>, keydir: Keydir): boolean {
  for (const ref of keys.values()) if (keydir.holdsRecord(ref)) return true;
  return false;
}

/**
 * Test twins of compact rows only (test/keydir-compact.test.ts): `skipRows` makes every pass over
 * all slots leave held rows unseen — makeAllSlots makes no Slot of them and a compaction plan's
 * walk (compaction-plan.ts) files none of their records — so that the pass does not see those
 * names: the mistake makeAllSlots and the walk's rows prevent; `keepStep` makes a held row made a
 * Slot not count as a change, so
 * that a queued plan still applies to the row's number after it was freed and reused — the
 * mistake slotOfRow's count prevents; `noForward` frees a held row made a Slot while a compaction
 * pass is pinned (pinRows) instead of forwarding it, so the pass's publication moves neither the
 * row (freed) nor the Slot it became — the mistake forwarding prevents: that Slot keeps pointing
 * at its record's place before the pass.
 */
export const unsafeCompactForTests = { skipRows: false, keepStep: false, noForward: false };

/**
 * Test twin of reads of compact rows (test/row-reads.test.ts): `ignoreErase` makes rowReadable
 * forget the erasures covering the row's scope, so a read in key order returns a value its
 * scope's erasure killed — the check rowReadable shares with isReadable.
 */
export const unsafeRowReadsForTests = { ignoreErase: false };

/** Whether keydirs made from now on reserve compact rows (engine/compact-slots.ts); tests and bench/ turn them off to compare. */
export const compactRows = { enabled: true };

/** The latest SCOPE_ERASE record of one scope. */
export interface EraseRecord {
  seq: number;
  /** When the erasure was committed (ms, engine clock): its retention window runs from here. */
  committedAt: number;
  seg: number;
  off: number;
  len: number;
  /** The other records of a chunked erasure (same sequence, same batch), if any. */
  more?: Location[];
  /**
   * SCOPE_ERASE records of this scope still physically in segment files: this erasure's chunks and
   * those of older erasures of the same scope, which no pointer names. More than this erasure's own
   * hold it (engine/gc-policy.ts eraseRecordLive): a restart must find it, not an older list.
   */
  records: number;
}

/** Where a record lies. */
export interface Location {
  seg: number;
  off: number;
  len: number;
}

/**
 * Retention records not applied yet (engine/hint-index.ts: the entries of valid hint files, looked
 * up by slot). The keydir asks it before it answers for a slot it does not hold, and has it apply
 * everything before any pass over all slots, so every answer is the one an eager open would give.
 */
export interface DeferredSlots {
  /**
   * Applies every entry of (scope, key) not applied yet, through `keydir.ensureApplied`, or through
   * `keydir.holdApplied` when its one entry is a PUT a compact row can stand for.
   */
  load(keydir: Keydir, scope: string, key: string): void;
  /** Applies every entry not applied yet. The keydir forgets the source afterwards. */
  loadAll(keydir: Keydir): void;
  /**
   * Applies every entry not applied yet whose scope is one of `roots` or, with `subtree`, lies
   * below one (scopeWithin), the rest left deferred: each name of those scopes then has all its
   * entries applied, since every entry of a name names its scope. The keydir keeps the source.
   */
  loadWithin(keydir: Keydir, roots: readonly string[], subtree: boolean): void;
  /**
   * One step of a gradual load: applies some entries not applied yet, each name it touches whole
   * (every entry of it), the rest left deferred; true once every entry is applied (the keydir then
   * forgets the source, as after loadAll). A caller runs the steps in separate turns of the event
   * loop, so that reads and writes run between them.
   */
  loadStep(keydir: Keydir): boolean;
}

/**
 * Slots by scope then key, and erasures by scope. Invariant (with a deferred source): a slot held
 * in the maps has every deferred entry of its (scope, key) applied, because nothing creates or
 * returns one without asking the source first; `erases` is always complete (applied at open).
 */
export class Keydir {
  /** Slots by scope then key; a number is a compact row (engine/compact-slots.ts), never seen outside this class. */
  private readonly byScope = new Map<string, Map<string, Slot | number>>();
  /** The compact rows the maps' numbers index. */
  private readonly rows = new CompactRows();
  readonly erases = new Map<string, EraseRecord>();
  private count = 0;
  private deferred: DeferredSlots | null = null;
  /**
   * While a source is deferred: the scopes whose entries it has all applied (loadScopes), and the
   * roots whose whole subtree it has (applyDeferredWithin with `subtree`). A walk of such a scope's
   * map sees what it would after applyDeferred, and asks the source nothing.
   */
  private readonly scopesLoaded = new Set<string>();
  private readonly subtreesLoaded = new Set<string>();
  /**
   * Counts every slot made or dropped (and release()): while it is unchanged, a slot found
   * earlier is still the one held for its name, and a name found absent is still absent — what
   * lets a committed plan apply to the slots its decisions found (engine/store.ts slotForOp).
   */
  private moved = 0;
  /**
   * Compaction passes running now (pinRows): while any is, a held row made a Slot is forwarded —
   * kept out of use, with the Slot it became in `forwarded` — instead of freed, because the
   * pass's plans may name the row and its publication must move that Slot's pointer.
   */
  private pins = 0;
  private readonly forwarded = new Map<number, Slot>();

  /** The count of slots made or dropped so far (see `moved`). */
  get changes(): number {
    return this.moved;
  }
  /** The scope keysOf answered last and its keys (undefined: none held); null when forgotten. */
  private lastScope: string | null = null;
  private lastKeys: Map<string, Slot | number> | undefined = undefined;
  /**
   * True only while readRef asks the deferred source: a name it loads then may be held as a row
   * (holdApplied). Any other caller would make the row a Slot at once — a row's columns made and
   * dropped per name (random reads after a hinted open).
   */
  private rowsLoadable = false;
  /** The slot ensureApplied returned last (loadDeferred's answer); null outside a load. */
  private applied: Slot | null = null;
  /**
   * Slots reserved by decisions (reserveFor), possibly admitted or dropped since: what
   * dropReserved() takes back when the log rejects every queued plan. `reservedOut` counts those
   * still reserved; the list is emptied whenever it reaches 0 and trimmed when it runs long.
   * Reserved compact rows are neither listed nor counted here (CompactRows counts them).
   */
  private reservedList: Slot[] = [];
  private reservedOut = 0;

  /**
   * `checks` is false only in this file's test twin (test/keydir-memo.test.ts): the remembered
   * scope is then never forgotten and a deferred load's last slot is returned without comparing
   * its name, the two mistakes those checks prevent. `compact` false makes every reservation a
   * Slot (no compact rows), the keydir before them (test/keydir-compact.test.ts compares the two).
   */
  constructor(
    private readonly checks = true,
    private readonly compact = compactRows.enabled,
  ) {}

  /** Installs the source of entries not applied yet (recovery, before it applies anything else). */
  defer(source: DeferredSlots): void {
    this.deferred = source;
  }

  /**
   * Drops every slot, erasure and deferred entry (close(): a closed store that its caller still
   * references must not keep its whole index alive on the JS heap).
   */
  release(): void {
    this.byScope.clear();
    this.moved += 1;
    this.forgetLastScope();
    this.applied = null;
    this.erases.clear();
    this.count = 0;
    this.deferred = null;
    this.scopesLoaded.clear();
    this.subtreesLoaded.clear();
    this.reservedList = [];
    this.reservedOut = 0;
    this.forwarded.clear();
    this.rows.reset();
  }

  /** Compact rows in use now, held or reserved (tests, bench/). */
  get rowsInUse(): number {
    return this.rows.held + this.rows.reserved;
  }

  /** Rows forwarded now: made Slots under a pass that has not ended (tests). */
  get rowsForwarded(): number {
    return this.rows.forwarded;
  }

  /** True while some entries are not applied yet. */
  get isDeferred(): boolean {
    return this.deferred !== null;
  }

  /** Applies every deferred entry now and makes every compact row a Slot (before any pass over all slots but a compaction plan's: scopesWithRows). */
  loadAll(): void {
    this.applyDeferred();
    this.makeAllSlots();
  }

  /**
   * One step of a gradual load of the deferred source (DeferredSlots.loadStep): true once nothing
   * is deferred. What loadAll would do at once, in steps a caller runs in separate turns (the
   * compactor, before a walk over every name); a loadAll meanwhile applies whatever is left.
   */
  loadStep(): boolean {
    const source = this.deferred;
    if (source === null) return true;
    if (!source.loadStep(this)) return false; // a source that refuses keeps refusing every lookup (as applyDeferred)
    this.deferred = null;
    this.scopesLoaded.clear();
    this.subtreesLoaded.clear();
    return true;
  }

  /** Has the deferred source, if any, apply every entry (and forgets it). */
  private applyDeferred(): void {
    const source = this.deferred;
    if (source === null) return;
    this.deferred = null;
    try {
      source.loadAll(this);
    } catch (err) {
      this.deferred = source; // a source that refuses (a malformed hint) keeps refusing every lookup
      throw err;
    }
    this.scopesLoaded.clear();
    this.subtreesLoaded.clear();
  }

  /**
   * Has the deferred source, if any, apply every entry of the scopes `roots` (with `subtree`, and
   * of every scope below them), the other scopes' entries left deferred: a listing of one scope or
   * an erasure of one subtree after a hinted open builds those names only (thirty-fifth session:
   * the first list() of a 4,000-name scope in a reopened 200k-key store built all 200k). Each
   * scope or root is loaded once; a subtree of the root scope is everything (applyDeferred).
   */
  private applyDeferredWithin(roots: readonly string[], subtree: boolean): void {
    const source = this.deferred;
    if (source === null) return;
    const todo = roots.filter((s) => !this.loadedWithin(s, subtree));
    if (todo.length === 0) return;
    if (subtree && todo.includes(ROOT_SCOPE)) return this.applyDeferred();
    source.loadWithin(this, todo, subtree); // a refusal throws before it applies anything: nothing is noted loaded
    for (const s of todo) (subtree ? this.subtreesLoaded : this.scopesLoaded).add(s);
  }

  /** True when every deferred entry of `scope` (with `subtree`, of its subtree too) has been applied by applyDeferredWithin. */
  private loadedWithin(scope: string, subtree: boolean): boolean {
    if (!subtree && this.scopesLoaded.has(scope)) return true;
    for (let s: string | null = scope; s !== null; s = parentScope(s)) if (this.subtreesLoaded.has(s)) return true;
    return false;
  }

  /** Applies every deferred entry of the scopes `scopes` (each exactly: not its subtree), the rest left deferred; see applyDeferredWithin. */
  loadScopes(scopes: readonly string[]): void {
    this.applyDeferredWithin(scopes, false);
  }

  /**
   * One scope's names as scopesWithRows holds them (a number is a compact row: heldRow,
   * readableVersion, holdsRecord), with that scope's deferred entries applied and every other
   * scope's left deferred (loadScopes); undefined when the scope holds none.
   */
  scopeKeys(scope: string): ReadonlyMap<string, Slot | number> | undefined {
    this.applyDeferredWithin([scope], false);
    return this.keysOf(scope);
  }

  /**
   * Makes every compact row in the maps a Slot (a reserved row a reserved Slot), so that the maps
   * hold Slots only until the next batch reserves a row. A pass reads the maps right after, in
   * the same turn: no row appears meanwhile.
   */
  private makeAllSlots(): void {
    if (!this.rows.any || unsafeCompactForTests.skipRows) return;
    for (const [scope, keys] of this.byScope) {
      for (const [key, ref] of keys) if (typeof ref === "number") this.slotOfRow(keys, scope, key, ref, false);
    }
    assert(!this.rows.any, "a pass over all slots finds no compact row left");
  }

  /** The scopes holding at least one slot that is not reserved, in no particular order. */
  scopeNames(): string[] {
    const names: string[] = [];
    for (const [scope, keys] of this.scopesWithRows()) if (holdsSlot(keys, this)) names.push(scope); // no Slot made of a row
    return names;
  }

  /** The slots held now, deferred entries left deferred (size without loading everything: a deferred source counting what it built). */
  get heldNow(): number {
    return this.count;
  }

  /** Number of slots (retention records) held, reserved ones not counted (held compact rows counted: no Slot is made). */
  get size(): number {
    if (this.deferred !== null) this.loadAll();
    return this.count;
  }

  /**
   * The keys of `scope`, or undefined. The last scope asked is remembered (most calls name the
   * same scope as the one before, "global" above all): a string compare instead of a map lookup.
   * Every change of `byScope` forgets it.
   */
  private keysOf(scope: string): Map<string, Slot | number> | undefined {
    if (scope === this.lastScope) return this.lastKeys;
    const keys = this.byScope.get(scope);
    this.lastScope = scope;
    this.lastKeys = keys;
    return keys;
  }

  /** The keys of `scope`: keysOf's map, or a new empty one put in place when the scope holds none yet. */
  private keysMade(scope: string): Map<string, Slot | number> {
    const keys = this.keysOf(scope);
    if (keys !== undefined) return keys;
    const made = new Map<string, Slot | number>();
    this.byScope.set(scope, made);
    this.forgetLastScope(); // the remembered scope may say "no keys" for this one
    return made;
  }

  /** Forgets the remembered scope (byScope changed). */
  private forgetLastScope(): void {
    if (!this.checks) return;
    this.lastScope = null;
    this.lastKeys = undefined;
  }

  /** The slot of (scope, key), or undefined (a reserved slot is not one: its name is absent). */
  get(scope: string, key: string): Slot | undefined {
    const keys = this.keysOf(scope);
    const ref = keys?.get(key);
    if (ref !== undefined) {
      if (typeof ref !== "number") return isReserved(ref) ? undefined : ref;
      return this.rows.state[ref] === ROW_HELD ? this.slotOfRow(keys as Map<string, Slot | number>, scope, key, ref, false) : undefined;
    }
    if (this.deferred === null) return undefined;
    const loaded = this.loadDeferred(scope, key);
    return typeof loaded === "number" ? this.slotOfRow(this.keysOf(scope) as Map<string, Slot | number>, scope, key, loaded, false) : loaded;
  }

  /**
   * get() for a read that can use a held compact row as it is: the row's number, no Slot made
   * (engine/store.ts find, for a pass in key order, where a Slot per name would only be marked
   * by the value cache and kept on the heap). Reserved answers are absent, as get()'s.
   */
  readRef(scope: string, key: string): SlotRef | undefined {
    let ref = this.keysOf(scope)?.get(key);
    if (ref === undefined && this.deferred !== null) {
      this.rowsLoadable = true;
      try {
        ref = this.loadDeferred(scope, key);
      } finally {
        this.rowsLoadable = false;
      }
    }
    if (ref === undefined) return undefined;
    if (typeof ref === "number") return this.rows.state[ref] === ROW_HELD ? ref : undefined;
    return isReserved(ref) ? undefined : ref;
  }

  /**
   * True when a read at any time returns held row `row`'s value (isReadable of the Slot the row
   * stands for: a PUT of generation 1 that never expires, so only an erasure covering `scope`,
   * the row's scope, can kill it).
   */
  rowReadable(row: number, scope: string): boolean {
    const putSeq = this.rowPutSeq(row);
    return versionSurvivesKill(putSeq, unsafeRowReadsForTests.ignoreErase ? 0 : this.eraseSeq(scope));
  }

  /** True once a read took held row `row`'s value as it is (touchRow). */
  rowTouched(row: number): boolean {
    return this.rows.touched[row] === 1;
  }

  /** Marks held row `row` as read once as it is: its next read makes it a Slot, cached (engine/store.ts). */
  touchRow(row: number): void {
    assert(this.rows.state[row] === ROW_HELD, "only a held row is read");
    this.rows.touched[row] = 1;
  }

  /** The segment of held row `row`'s PUT record. */
  rowSeg(row: number): number {
    assert(this.rows.state[row] === ROW_HELD, "only a held row has a record");
    return this.rows.seg[row] as number;
  }

  /** The offset of held row `row`'s PUT record in its segment (rowSeg checked the row is held). */
  rowOff(row: number): number {
    return this.rows.off[row] as number;
  }

  /** The length of held row `row`'s PUT record. */
  rowLen(row: number): number {
    return this.rows.len[row] as number;
  }

  /**
   * The Slot that compact row `row`, held for (scope, key) in `keys`, stands for: made now, put in
   * the row's place, and the row freed. A reserved row becomes a reserved Slot that takes its
   * place in the reservations (`admit`: an admitted one instead, its op being applied). Counts as
   * a slot made (`changes`): a plan holding the row's number (a reservation, or a held row its
   * decision overwrites) then applies through the map, never to the row — freed, maybe reused for
   * another name. Rows are made Slots by reads and passes, not by a batch that overwrites them, so
   * a bulk load followed by its overwrite keeps its plans in step.
   */
  private slotOfRow(keys: Map<string, Slot | number>, scope: string, key: string, row: number, admit: boolean): Slot {
    const rows = this.rows;
    // Every caller just read `row` from keys.get(key): checked again only under DEBUG (a lookup per promotion).
    if (DEBUG_CHECKS) assert(keys.get(key) === row, "a compact row is made a Slot under its own name");
    const slot = new Slot(scope, key);
    if (rows.state[row] === ROW_HELD) {
      // What applyPut (generation 1, no expiry) made of an empty slot: compact-slots.ts's contract.
      slot.putSeq = rows.putSeq[row] as number;
      slot.putGen = 1;
      slot.seg = rows.seg[row] as number;
      slot.off = rows.off[row] as number;
      slot.len = rows.len[row] as number;
      slot.generation = 1;
      slot.physical = rows.physical[row] as number;
      assert(slot.putSeq > 0 && slot.seg > 0 && slot.physical > 0, "a held row names a PUT record");
    } else {
      assert(rows.state[row] === ROW_RESERVED, "a row in a map is held or reserved");
      slot.physical = -1;
      if (admit) {
        slot.physical = 0;
        this.count += 1;
      } else this.reserved(slot); // the same reservation, now a Slot (counted as one from here)
    }
    if (!(unsafeCompactForTests.keepStep && rows.state[row] === ROW_HELD)) this.moved += 1;
    keys.set(key, slot);
    if (this.pins > 0 && rows.state[row] === ROW_HELD && !unsafeCompactForTests.noForward) {
      rows.forward(row);
      this.forwarded.set(row, slot);
    } else rows.release(row);
    return slot;
  }

  /**
   * Starts a compaction pass's hold on row numbers: until the matching unpinRows, a held row made
   * a Slot is forwarded (forwardedSlot) and its number not reused, so that a plan made meanwhile
   * that names the row (scopesWithRows) still reaches the name's pointer when the pass publishes.
   */
  pinRows(): void {
    this.pins += 1;
  }

  /** Ends one pinRows: with none left, every forwarded row is freed. */
  unpinRows(): void {
    assert(this.pins > 0, "every unpinRows follows a pinRows");
    this.pins -= 1;
    if (this.pins > 0 || this.forwarded.size === 0) return;
    for (const row of this.forwarded.keys()) this.rows.unforward(row);
    this.forwarded.clear();
  }

  /** The Slot that held row `row` was made while rows were pinned, or undefined (the row is held, or reserved, or freed). */
  forwardedSlot(row: number): Slot | undefined {
    if (this.rows.state[row] !== ROW_FORWARDED) return undefined;
    const slot = this.forwarded.get(row);
    assert(slot !== undefined, "a forwarded row names the Slot it became");
    return slot;
  }

  /**
   * Moves held row `row`'s PUT pointer from (source, old) to (target, off) if it still points
   * there (a compaction's publication); a row overwritten since keeps its new place. True when moved.
   */
  moveRow(row: number, source: number, old: number, target: number, off: number): boolean {
    const rows = this.rows;
    if (rows.state[row] !== ROW_HELD || rows.seg[row] !== source || rows.off[row] !== old) return false;
    rows.seg[row] = target;
    rows.off[row] = off;
    assert(rows.seg[row] === target && rows.off[row] === off, "a row's new place is held exactly");
    return true;
  }

  /**
   * The maps as a compaction plan (compaction-plan.ts) or stats() walks them: every deferred entry
   * applied first, compact rows left as they are — a number is a row (rowColumns; heldRow,
   * rowReadable), read while rows are pinned (pinRows) for a plan a pass publishes. Reserved slots
   * and rows have no record yet: a walk skips them.
   */
  scopesWithRows(): ReadonlyMap<string, ReadonlyMap<string, Slot | number>> {
    this.applyDeferred();
    return this.byScope;
  }

  /** The rows' columns, for a plan's walk only (read, never written: moveRow and the row methods change rows). */
  get rowColumns(): RowColumns {
    return this.rows;
  }

  /**
   * The Slot of held row `row` of (scope, key), made now (a plan's walk met a row its rules need
   * a Slot for: a value an erasure killed). Forwarded while rows are pinned.
   */
  slotOfHeldRow(scope: string, key: string, row: number): Slot {
    const keys = this.keysOf(scope);
    assert(keys !== undefined && keys.get(key) === row && this.rows.state[row] === ROW_HELD, "a held row is made a Slot under its own name");
    return this.slotOfRow(keys, scope, key, row, false);
  }

  /**
   * The version a read of `ref` — what scopesWithRows holds for a name of `scope` — returns at
   * `now`, 0 when it returns none (a reserved slot or row, a value killed or expired): a held row's
   * PUT unless its scope's erasure killed it (rowReadable), a Slot's when isReadable. No Slot is
   * made (a listing must not undo what the rows save).
   */
  readableVersion(ref: Slot | number, scope: string, now: number): number {
    if (typeof ref === "number") return this.heldRow(ref) && this.rowReadable(ref, scope) ? this.rowPutSeq(ref) : 0;
    return !isReserved(ref) && isReadable(this, ref, now) ? ref.putSeq : 0;
  }

  /** True when `ref`, what scopesWithRows holds for a name, is a slot or row with a record (not reserved). */
  holdsRecord(ref: Slot | number): boolean {
    return typeof ref === "number" ? this.heldRow(ref) : !isReserved(ref);
  }

  /** True when `ref` is the number of a held compact row (a name reserveFor found held as a row). */
  heldRow(ref: SlotRef): ref is number {
    return typeof ref === "number" && this.rows.state[ref] === ROW_HELD;
  }

  /** The PUT records of held row `row`'s name still in segment files (applyPut's `physical`). */
  rowPhysical(row: number): number {
    assert(this.rows.state[row] === ROW_HELD, "only a held row has records");
    return this.rows.physical[row] as number;
  }

  /** The latest PUT's sequence (version) of held row `row`. */
  rowPutSeq(row: number): number {
    assert(this.rows.state[row] === ROW_HELD, "only a held row has a PUT");
    return this.rows.putSeq[row] as number;
  }

  /**
   * get() for a batch's decision, which owns the name (its plan records the name's intent next):
   * a name absent from a scope that has a map gets a reserved slot there at once, so that the
   * map's bucket the miss just read is written while still in cache, and the apply finds the slot
   * with no map operation (the two cold touches of a big Map per new name become one). The
   * caller reads a reserved answer as absent, and either has it applied (admit, through the
   * apply's ensure or directly) or takes it back (unreserve, dropReserved). Undefined when the
   * scope has no map (the apply makes the slot as before).
   */
  reserveFor(scope: string, key: string): SlotRef | undefined {
    let keys = this.keysOf(scope);
    let found: SlotRef | undefined = keys?.get(key);
    if (found === undefined && this.deferred !== null) {
      found = this.loadDeferred(scope, key);
      keys = this.keysOf(scope);
    }
    if (found !== undefined || keys === undefined) return found; // a reserved slot or row found is absent to the caller too; a held row is the name's
    if (this.compact) {
      const row = this.rows.take();
      if (row >= 0) {
        keys.set(key, row);
        return row;
      }
    }
    const slot = new Slot(scope, key);
    slot.physical = -1;
    keys.set(key, slot);
    this.reserved(slot);
    return slot;
  }

  /** Counts a reserved Slot and lists it (for dropReserved), trimming the list of settled ones when it runs long. Rows are counted by CompactRows. */
  private reserved(slot: Slot): void {
    this.reservedOut += 1;
    if (this.reservedList.length > 2 * this.reservedOut + 4096) this.reservedList = this.reservedList.filter((r) => r.physical === -1); // still reserved
    this.reservedList.push(slot);
  }

  /**
   * Applies a committed PUT to compact row `row`, the one its decision found (the keydir unchanged
   * since): a reserved row is held, a held one overwritten, with no Slot made. When a held row's
   * value is replaced, `diedSeg` and `diedLen` say where the value that died lay (0: none died).
   * False, changing nothing, when the row cannot stand for the result — a generation other than
   * 1, an expiry, a full physical count: the caller then applies through the map (ensureSlot).
   */
  holdRow(row: number, seq: number, generation: number, expiresAt: number, loc: Location): boolean {
    const rows = this.rows;
    this.diedSeg = 0;
    this.diedLen = 0;
    if (generation !== 1 || expiresAt !== 0) return false;
    if (rows.state[row] === ROW_RESERVED) {
      rows.hold(row, seq, loc.seg, loc.off, loc.len);
      this.count += 1;
      return true;
    }
    assert(rows.state[row] === ROW_HELD, "a row a plan applies to is reserved or held (a freed row moved `changes`)");
    const replaced = seq > (rows.putSeq[row] as number);
    const seg = rows.seg[row] as number;
    const len = rows.len[row] as number;
    if (!rows.overwrite(row, seq, loc.seg, loc.off, loc.len)) return false;
    if (replaced) {
      this.diedSeg = seg;
      this.diedLen = len;
    }
    return true;
  }

  /** Where the value a held row's overwrite replaced lay (holdRow); 0 when none died. */
  diedSeg = 0;
  diedLen = 0;

  /** What the map holds for (scope, key) as is — a Slot, a row number or undefined — making nothing (debug checks). */
  refOf(scope: string, key: string): SlotRef | undefined {
    return this.keysOf(scope)?.get(key);
  }

  /** Makes a reserved slot a held one (its op is being applied): counted, and visible to every reader from now on. */
  admit(slot: Slot): void {
    assert(slot.physical === -1, "only a reserved slot is admitted");
    slot.physical = 0;
    this.count += 1;
    this.oneLessReserved();
  }

  /**
   * Takes back a reserved slot or row whose plan will not be applied (refused, or rejected by the
   * log), if it is still reserved and still the one held for its name; otherwise does nothing.
   */
  unreserve(slot: SlotRef, scope: string, key: string): void {
    if (typeof slot === "number") return this.unreserveRow(slot, scope, key);
    if (!isReserved(slot)) return;
    const keys = this.keysOf(slot.scope);
    if (keys?.get(slot.key) !== slot) return;
    keys.delete(slot.key);
    slot.physical = -2; // dropped: still reserved to any reference left, never counted twice
    this.moved += 1;
    this.oneLessReserved();
    if (keys.size === 0) {
      this.byScope.delete(slot.scope);
      this.forgetLastScope();
    }
  }

  /** unreserve() of row `row`, reserved for (scope, key): only while the map still holds it there, reserved. */
  private unreserveRow(row: number, scope: string, key: string): void {
    const keys = this.keysOf(scope);
    if (keys?.get(key) !== row || this.rows.state[row] !== ROW_RESERVED) return;
    this.dropRow(keys, scope, key, row);
  }

  /** Deletes reserved row `row` of (scope, key) from `keys` and frees it (a scope's emptied map goes too). */
  private dropRow(keys: Map<string, Slot | number>, scope: string, key: string, row: number): void {
    keys.delete(key);
    this.rows.release(row);
    this.moved += 1;
    if (keys.size === 0) {
      this.byScope.delete(scope);
      this.forgetLastScope();
    }
  }

  /**
   * Takes back every slot and row still reserved (the log rejected every queued plan: commit.ts
   * failure protocol). Rows are found by a pass over the maps: a failure's path, not a write's.
   */
  dropReserved(): void {
    if (this.rows.reserved !== 0) {
      for (const [scope, keys] of this.byScope) {
        for (const [key, ref] of keys) if (typeof ref === "number" && this.rows.state[ref] === ROW_RESERVED) this.dropRow(keys, scope, key, ref);
      }
      assert(this.rows.reserved === 0, "no row stays reserved once every plan is rejected");
    }
    const list = this.reservedList;
    for (let i = 0; i < list.length; i++) this.unreserve(list[i] as Slot, "", ""); // in bounds; a Slot carries its name
    this.reservedList = [];
    this.reservedOut = 0;
  }

  /** Counts one reservation settled (admitted or taken back); the list is emptied once none is left. */
  private oneLessReserved(): void {
    this.reservedOut -= 1;
    if (this.reservedOut === 0) this.reservedList.length = 0;
  }

  /**
   * What ensure() answers for `ref`, found under (scope, key) in `keys`: a row made a Slot, and a
   * reserved slot or row admitted (an op on its name is being applied).
   */
  private found(keys: Map<string, Slot | number>, scope: string, key: string, ref: Slot | number): Slot {
    if (typeof ref === "number") return this.slotOfRow(keys, scope, key, ref, true);
    if (isReserved(ref)) this.admit(ref);
    return ref;
  }

  /**
   * Has the deferred source apply the entries of a (scope, key) not held, and returns its slot.
   * The source applies them through ensureApplied, which remembers the slot it returned last: when
   * that is this (scope, key)'s, it is the answer without looking it up again (a third lookup per
   * slot built, about a quarter of building one).
   */
  private loadDeferred(scope: string, key: string): SlotRef | undefined {
    this.applied = null;
    (this.deferred as DeferredSlots).load(this, scope, key);
    const applied = this.applied as Slot | null;
    this.applied = null;
    if (applied !== null && ((applied.key === key && applied.scope === scope) || !this.checks)) return applied;
    const ref = this.keysOf(scope)?.get(key);
    // A row here is the source's own (holdApplied): a batch reserves one only after asking the source.
    assert(typeof ref !== "number" || this.rows.state[ref] === ROW_HELD, "a name the source loaded holds a Slot or a held row");
    return ref;
  }

  /** The slot of (scope, key), created empty when missing. */
  ensure(scope: string, key: string): Slot {
    const keys = this.keysOf(scope);
    const ref = keys?.get(key);
    if (ref !== undefined) return this.found(keys as Map<string, Slot | number>, scope, key, ref);
    if (this.deferred !== null) {
      const loaded = this.loadDeferred(scope, key);
      if (loaded !== undefined) return this.found(this.keysOf(scope) as Map<string, Slot | number>, scope, key, loaded);
    }
    return this.ensureApplied(scope, key);
  }

  /**
   * ensure() with one map lookup fewer for a slot not held yet (the write path's apply, where
   * most slots of a bulk load are new): the scope's map is looked up once, and a missing key is
   * set without being looked up again. Same answer as ensure(): the deferred source is asked first.
   */
  ensureSlot(scope: string, key: string): Slot {
    let keys = this.keysOf(scope);
    let ref = keys?.get(key);
    if (ref !== undefined) return this.found(keys as Map<string, Slot | number>, scope, key, ref);
    if (this.deferred !== null) {
      this.deferred.load(this, scope, key);
      keys = this.keysOf(scope);
      ref = keys?.get(key);
      if (ref !== undefined) return this.found(keys as Map<string, Slot | number>, scope, key, ref);
    }
    if (keys === undefined) keys = this.keysMade(scope);
    const slot = new Slot(scope, key);
    keys.set(key, slot);
    this.count += 1;
    this.moved += 1;
    return slot;
  }

  /**
   * Makes the slot of a name known to be absent — not held, nothing deferred for it — with no
   * lookup first: the caller found it absent (get) and `changes` has not moved since. Paired
   * check: the map grows by exactly one, so a name that was held after all fails loudly.
   */
  createAbsent(scope: string, key: string): Slot {
    const keys = this.keysMade(scope);
    const before = keys.size;
    const slot = new Slot(scope, key);
    keys.set(key, slot);
    if (keys.size !== before + 1) fail(`a slot made for an absent name (${scope}, ${key}) replaced none`);
    this.count += 1;
    this.moved += 1;
    return slot;
  }

  /**
   * ensure() for a deferred source applying its own entries (it has the slot's entries in hand):
   * never asks the source again.
   */
  ensureApplied(scope: string, key: string): Slot {
    const keys = this.keysMade(scope);
    return this.appliedSlot(keys, keys.get(key), scope, key);
  }

  /**
   * ensureApplied() for a deferred source's loadAll, given the entry it applies next: a name not
   * held whose entry is a PUT a compact row can stand for (`rowable`: generation 1, never expires)
   * is held as a row and null returned — nothing left to apply — else the slot to apply the entry
   * to. A later entry of the same name finds the row and makes it a Slot holding what the row did
   * (slotOfRow), so the name ends as entries applied to a Slot from the start would leave it.
   */
  loadedSlot(scope: string, key: string, rowable: boolean, seq: number, loc: Location): Slot | null {
    const keys = this.keysMade(scope);
    const ref = keys.get(key);
    if (ref === undefined && rowable && this.holdNew(keys, key, seq, loc)) return null;
    return this.appliedSlot(keys, ref, scope, key);
  }

  /** ensureApplied()'s answer for `ref`, what `keys` holds for (scope, key): a new slot for none. */
  private appliedSlot(keys: Map<string, Slot | number>, ref: Slot | number | undefined, scope: string, key: string): Slot {
    let slot: Slot;
    if (ref === undefined) {
      slot = new Slot(scope, key);
      keys.set(key, slot);
      this.count += 1;
      this.moved += 1;
    } else slot = this.found(keys, scope, key, ref);
    this.applied = slot;
    return slot;
  }

  /**
   * For a deferred source whose one entry for (scope, key), a name not held, is a PUT of
   * generation 1 that never expires: holds it as a compact row — what applyPut makes of an empty
   * slot (compact-slots.ts's contract) — instead of a Slot. A read in key order then reads it with
   * no Slot made (readRef); anything else asks get() or ensure(), which make it a Slot. False,
   * holding nothing, outside readRef's ask (rowsLoadable), when rows are off or none is left: the
   * source applies a Slot instead.
   */
  holdApplied(scope: string, key: string, seq: number, loc: Location): boolean {
    if (!this.rowsLoadable) return false;
    return this.holdNew(this.keysMade(scope), key, seq, loc);
  }

  /**
   * Holds `key`, absent from `keys`, as a new compact row of the PUT of sequence `seq` at `loc`
   * (generation 1, no expiry). False, holding nothing, when rows are off or none is left.
   */
  private holdNew(keys: Map<string, Slot | number>, key: string, seq: number, loc: Location): boolean {
    if (!this.compact) return false;
    const row = this.rows.take();
    if (row < 0) return false;
    const before = keys.size;
    this.rows.hold(row, seq, loc.seg, loc.off, loc.len);
    keys.set(key, row);
    if (keys.size !== before + 1) fail(`a row held for a deferred name (${key}) replaced a slot`);
    this.count += 1;
    this.moved += 1;
    return true;
  }

  /** Forgets a slot entirely: its retention record is gone ("absent"). A reserved slot is taken back (unreserve). */
  delete(slot: Slot): void {
    if (isReserved(slot)) return this.unreserve(slot, slot.scope, slot.key);
    const keys = this.keysOf(slot.scope);
    if (keys?.get(slot.key) !== slot) return;
    keys.delete(slot.key);
    this.count -= 1;
    this.moved += 1;
    if (keys.size === 0) {
      this.byScope.delete(slot.scope);
      this.forgetLastScope();
    }
  }

  /** Highest erasure sequence that covers `scope` (its own or an ancestor's), 0 for none. */
  eraseSeq(scope: string): number {
    if (this.erases.size === 0) return 0;
    return lineageMax(scope, (s) => this.erases.get(s)?.seq ?? 0);
  }

  /** Calls `visit` with every slot held now (reserved ones skipped), deferred entries left deferred (recovery's pass at open). */
  forEachHeld(visit: (slot: Slot) => void): void {
    this.makeAllSlots();
    for (const keys of this.byScope.values()) for (const slot of keys.values()) if (!isReserved(slot)) visit(slot as Slot); // no row: made Slots above
  }

  /**
   * Calls `visit` with every Slot made so far (reserved ones skipped), making none: compact rows and
   * deferred entries stay as they are (a close's walk: engine/reclaim-clock.ts).
   */
  forEachBuilt(visit: (slot: Slot) => void): void {
    for (const keys of this.byScope.values()) for (const ref of keys.values()) if (!isReserved(ref)) visit(ref as Slot); // isReserved skips rows (numbers)
  }

  /** Calls `visit` with every slot, in no particular order. */
  forEach(visit: (slot: Slot) => void): void {
    this.loadAll();
    this.forEachHeld(visit);
  }

  /** Every slot (reserved ones skipped), in no particular order. */
  *all(): Generator<Slot> {
    this.loadAll();
    for (const keys of this.byScope.values()) for (const slot of keys.values()) if (!isReserved(slot)) yield slot as Slot; // no row: loadAll made Slots
  }

  /**
   * True when `test` holds for some name of `root` and its descendant scopes that has a record: a
   * Slot as it is, a held compact row as its number (heldRow; rowPhysical, rowSeg, rowPutSeq), no
   * Slot made. Reserved slots and rows are skipped; the subtree's deferred entries are applied
   * first, the other scopes' left deferred (applyDeferredWithin). Stops at the first true. Only
   * the subtree's scopes are walked: until the thirty-fourth session every subtree visit (each
   * scope erasure, export) made a Slot of every row of the whole keydir.
   * `test` may make Slots of the names it is given (Keydir.get), but adds no name to the maps.
   */
  anyInSubtree(root: string, test: (ref: Slot | number, scope: string, key: string) => boolean): boolean {
    this.applyDeferredWithin([root], true); // the subtree's names only: the rest stay deferred
    for (const [scope, keys] of this.byScope) {
      if (!scopeWithin(scope, root)) continue;
      for (const [key, ref] of keys) if (this.holdsRecord(ref) && test(ref, scope, key)) return true;
    }
    return false;
  }
}

/** Applies a PUT record. */
export function applyPut(slot: Slot, seq: number, gen: number, expiresAt: number, loc: Location): void {
  slot.physical += 1;
  slot.reclaimedAt = 0;
  // Equal sequence with no location: a tombstone replayed first already named this version.
  if (seq > slot.putSeq || (seq === slot.putSeq && slot.seg === 0)) {
    slot.putSeq = seq;
    slot.putGen = gen;
    slot.seg = loc.seg;
    slot.off = loc.off;
    slot.len = loc.len;
    slot.expiresAt = expiresAt;
  }
  if (gen > slot.generation) slot.generation = gen;
}

/**
 * Applies a TOMBSTONE record that killed generation `gen` and version `version`. The version is
 * kept even after the PUT record it killed is reclaimed: it is part of the retention record, and
 * versions must survive restarts.
 */
export function applyTombstone(slot: Slot, seq: number, gen: number, version: number, loc: Location): void {
  slot.tombRecords += 1; // every record counts, the latest or an older one replayed after it
  if (version > slot.putSeq) {
    slot.putSeq = version;
    slot.putGen = gen;
    slot.seg = 0;
  }
  if (seq <= slot.tombSeq) return;
  slot.tombSeq = seq;
  slot.tombGen = gen;
  slot.tombSeg = loc.seg;
  slot.tombOff = loc.off;
  slot.tombLen = loc.len;
  if (gen > slot.generation) slot.generation = gen;
}

/** Applies a CLEAR (undelete) record that moved the slot to generation `gen`. */
export function applyClear(slot: Slot, seq: number, gen: number, loc: Location): void {
  slot.clearRecords += 1; // every record counts, the latest or an older one replayed after it
  if (gen > slot.generation) slot.generation = gen;
  if (seq <= slot.clearSeq) return;
  slot.clearSeq = seq;
  slot.clearGen = gen;
  slot.clearSeg = loc.seg;
  slot.clearOff = loc.off;
  slot.clearLen = loc.len;
}

/** Applies a SCOPE_ERASE record of `scope`, with the retention records of the slots it killed. */
export function applyErase(keydir: Keydir, scope: string, seq: number, committedAt: number, loc: Location, killed: readonly ErasedSlot[]): void {
  for (const k of killed) {
    const slot = keydir.ensure(k.scope, k.key);
    if (seq > slot.listedSeq) slot.listedSeq = seq;
    if (k.version > slot.putSeq) {
      slot.putSeq = k.version;
      slot.putGen = k.generation;
      slot.seg = 0;
    }
    if (k.generation > slot.generation) slot.generation = k.generation;
  }
  const old = keydir.erases.get(scope);
  if (old !== undefined && old.seq === seq) {
    // Another chunk of the same erasure (segments/erase-list.ts): keep its location too.
    if (old.seg !== loc.seg || old.off !== loc.off) {
      (old.more ??= []).push({ seg: loc.seg, off: loc.off, len: loc.len });
      old.records += 1;
    }
    return;
  }
  if (old !== undefined && old.seq > seq) {
    old.records += 1; // an older erasure's record: no pointer names it, the count holds the latest
    return;
  }
  keydir.erases.set(scope, { seq, committedAt, seg: loc.seg, off: loc.off, len: loc.len, records: (old?.records ?? 0) + 1 });
}

/** The sequence of the latest kill (tombstone or erasure) of a slot, 0 for none. */
export function killSeq(keydir: Keydir, slot: Slot): number {
  const erased = keydir.eraseSeq(slot.scope);
  return erased > slot.tombSeq ? erased : slot.tombSeq;
}

/** True when the slot's latest PUT is not killed: it has a value unless it expired. */
export function putSurvives(keydir: Keydir, slot: Slot): boolean {
  return versionSurvivesKill(slot.putSeq, killSeq(keydir, slot));
}

/** True when the slot is killed and not undeleted since: a write must clear the tombstone. */
export function isTombstoned(keydir: Keydir, slot: Slot): boolean {
  return killStands(killSeq(keydir, slot), slot.putSeq, slot.clearSeq);
}

/** True when the value expired at `now`. */
export function isExpired(slot: Slot, now: number): boolean {
  return expiredAt(slot.expiresAt, now);
}

/** True when a read at `now` returns the slot's value. */
export function isReadable(keydir: Keydir, slot: Slot, now: number): boolean {
  return slot.seg !== 0 && putSurvives(keydir, slot) && !isExpired(slot, now);
}
