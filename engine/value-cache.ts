/**
 * A bounded cache of hot values, keyed by slot and checked against the record location and the
 * segment generation it was read at. A record at (segment, offset) never changes while the
 * segment's generation stays the same, so a hit under the same (segment, offset, generation) is
 * exactly the bytes a pread would return — the read protocol's checks still run around it.
 * Eviction is first-in first-out by bytes; a value larger than 1/16 of the budget is not cached.
 * An entry hangs on its slot (no map): a slot is one store's, so it is in at most one cache.
 */
import type { CachedOnSlot, Slot } from "./keydir.js";
import { assert } from "../rules/assert.js";

/**
 * A hit on a binary value returns a copy (a caller's mutation must never reach the cache or
 * another reader). Copies of values up to this size are views into a shared pool ArrayBuffer, as
 * Node's Buffer.allocUnsafe does: one small object instead of a fresh ArrayBuffer per hit (about a
 * quarter of the cost here). Each hit gets its own bytes; only `.buffer` is shared, as with Buffer.
 */
export const POOLED_COPY_BYTES_MAX = 4096;
/** Size of one copy pool; a new one starts when the current one is full. */
const COPY_POOL_BYTES = 64 * 1024;
/** The page size the pools are touched at (Linux's base page). */
const PAGE_BYTES = 4096;
/** What the copy pools did since the process started (tests and bench/): pools made, how many of them were a spare made between turns, and the setImmediates queued to make one. */
export const copyPoolCounters = { made: 0, spares: 0, queued: 0 };
let copyPool = touchedPool();
let copyPoolUsed = 0;
/** The next pool, made between turns once the current one is half used (makeSpare); null until then. */
let spare: ArrayBuffer | null = null;
/** True from the setImmediate that makes the spare until it ran: at most one is queued, however many pools a turn fills. */
let spareQueued = false;

/**
 * A new pool with every page written once. A pool's pages are fresh memory more often than not
 * (the allocator's heap grows by it; between two collections nothing returns the last pools);
 * on this machine kind a first touch costs ~10 µs a page (docs/PERFORMANCE.md, the limits table),
 * and left to the copies it lands on every ~15th hit, inside a read. Touched here, a pool's
 * faults are paid at once, between reads when the spare is ready (makeSpare).
 */
function touchedPool(): ArrayBuffer {
  const pool = new ArrayBuffer(COPY_POOL_BYTES);
  copyPoolCounters.made++;
  const bytes = new Uint8Array(pool);
  for (let at = 0; at < COPY_POOL_BYTES; at += PAGE_BYTES) bytes[at] = 0; // zero already: a write that faults the page in, changing nothing
  return pool;
}

/** Makes the spare pool, if none is waiting: a setImmediate callback, so no read pays for it. */
function makeSpare(): void {
  spareQueued = false;
  if (spare === null) spare = touchedPool();
}

/** A fresh copy of `src` that shares no bytes with it or with any earlier copy. */
export function copyOf(src: Uint8Array): Uint8Array {
  const n = src.byteLength;
  if (n > POOLED_COPY_BYTES_MAX) return new Uint8Array(src);
  if (copyPoolUsed + n > COPY_POOL_BYTES) {
    if (spare !== null) copyPoolCounters.spares++;
    copyPool = spare ?? touchedPool(); // no spare when no turn ended since the ask (a loop of readSyncs): made here
    spare = null;
    copyPoolUsed = 0;
    assert(copyPool.byteLength === COPY_POOL_BYTES, "a copy pool is whole when copies start in it");
  } else if (spare === null && !spareQueued && copyPoolUsed * 2 > COPY_POOL_BYTES) {
    spareQueued = true; // the next pool is made after this turn
    copyPoolCounters.queued++;
    setImmediate(makeSpare);
  }
  const out = new Uint8Array(copyPool, copyPoolUsed, n);
  copyPoolUsed += (n + 7) & ~7; // 8-byte aligned, so no two copies share a byte
  out.set(src);
  return out;
}

/**
 * One cached value: the bytes read for a slot from the record at (seg, off) under `generation`.
 * It hangs on the slot itself (`Slot.cached`), so a hit costs no map lookup; the cache owns it and
 * drops it from the slot on eviction.
 */
export class CachedValue implements CachedOnSlot {
  /**
   * The location and generation change only when compaction moves the record the value was read
   * from, bytes unchanged (ValueCache.moveWith); the value never changes.
   */
  constructor(
    readonly slot: Slot,
    readonly value: string | Uint8Array,
    public seg: number,
    public off: number,
    public generation: number,
    readonly bytes: number,
  ) {}
}

/**
 * The mark of a slot read once and not cached (the second-touch rule): a CachedValue at no
 * location (segment -1), so a hit's location check misses on it with no branch of its own, and of
 * the same class as every entry, so `Slot.cached` keeps one shape. It holds no bytes.
 */
const TOUCHED = new CachedValue(null as unknown as Slot, "", -1, -1, -1, 0);

/** First misses per decision of the mode. */
const WINDOW = 256;
/** A window is a pass in key order when under one first miss in this many turned against it. */
const TURN_RATIO = 16;

/**
 * What a slot's first miss does: "off" caches it (a plain cache: this cache's unit tests),
 * "adaptive" decides by the order of the reads (the Admission rule below: the store's cache),
 * "always" only marks it, so that every value is cached on its second miss (a test's twin).
 */
export type AdmissionMode = "off" | "adaptive" | "always";

/**
 * The second-touch rule, adaptive: it decides, for a slot's first miss, whether its value is
 * cached now or the slot is only marked (TOUCHED) and cached on its next miss. While first misses
 * come in no key order (hot sets, random gets: W4), a first miss caches, as a cache without the
 * rule does; once a window of 256 first misses walked the (scope, key) order one way — up or
 * down, with under 1 in 16 against it: a read-all, an export, W5's read-all — first misses only
 * mark, so the pass copies, allocates and evicts nothing. Why the order and not a sample of
 * re-reads (reads-7's rule): a sample can only tell "never read again" from "read again later"
 * once its horizon has passed, and a hot set re-read after more first misses than the horizon
 * (W4's 65,536 gets over 2M keys) looks like a stream to it; an ordered pass is known at once.
 * A marked slot read again is cached on that read in either mode, so a pass that is repeated is
 * cached from its second time on; reads out of order switch the mode back within one window.
 */
class Admission {
  private lastScope = "";
  private lastKey = "";
  private misses = 0;
  private ups = 0;
  private downs = 0;
  /** True while the first misses walk the key order (first misses only mark). */
  streaming = false;

  /** For the first miss of (scope, key): true to cache its value now, false to mark it (the caller marks). */
  admitFirst(scope: string, key: string): boolean {
    const up = scope === this.lastScope ? key > this.lastKey : scope > this.lastScope;
    if (up) this.ups++;
    else this.downs++;
    this.lastScope = scope;
    this.lastKey = key;
    if (++this.misses === WINDOW) {
      this.streaming = Math.min(this.ups, this.downs) * TURN_RATIO < WINDOW;
      assert(this.ups + this.downs === WINDOW, "every first miss of a window went up or down");
      this.misses = 0;
      this.ups = 0;
      this.downs = 0;
    }
    return !this.streaming;
  }
}

/**
 * Test switch, never set by the engine or any option (test/compaction-keeps-cache.test.ts):
 * `moveUnchecked` makes moveWith move whatever entry hangs on the slot to the record's new place,
 * without checking that it was read from the place the record left — the check that keeps an
 * older value of the slot (cached before an overwrite) from being served for the record moved.
 */
export const unsafeValueCacheForTests = { moveUnchecked: false };

/** What a value cache did since it was made (tests and bench/): hits, misses (a held entry included), entries moved by compaction. */
export interface ValueCacheCounters {
  hits: number;
  misses: number;
  moved: number;
}

/** Hot values on their slots, bounded by `bytesMax`. */
export class ValueCache {
  /** Counts of what get() and moveWith() did; plain fields, never reset. */
  readonly counters: ValueCacheCounters = { hits: 0, misses: 0, moved: 0 };
  /** Insertion order for eviction; may hold stale entries (replaced on their slot, or evicted). */
  private order: CachedValue[] = [];
  private head = 0;
  private bytes = 0;

  /**
   * `checkLocation` is false only in this cache's own test twin: a hit then ignores where the slot
   * points now, which serves a value its slot has left (overwritten, or moved by compaction).
   * `admission` says what a slot's first miss does (AdmissionMode); under "adaptive" and
   * "always" an evicted slot keeps the mark, so a value read again after its eviction is cached
   * again on that read.
   */
  constructor(
    readonly bytesMax: number,
    private readonly checkLocation = true,
    admission: AdmissionMode = "off",
  ) {
    this.marks = admission !== "off";
    this.admission = admission === "adaptive" ? new Admission() : null;
  }

  /** True when slots are marked (on a first miss the rule does not cache, and on eviction). */
  private readonly marks: boolean;
  /** The adaptive rule; null under "off" (every first miss caches) and "always" (none does). */
  private readonly admission: Admission | null;

  /** True while first misses only mark: the adaptive rule takes the reads for a pass, or "always" (tests). */
  get streaming(): boolean {
    return this.marks && (this.admission?.streaming ?? true);
  }

  /** True while a read may take a held row as it is (readsRowAsIs may answer true): the adaptive rule takes the reads for a pass. */
  takesRowsAsIs(): boolean {
    return this.admission !== null && this.admission.streaming;
  }

  /**
   * For a read of a held compact row (engine/store.ts find), which has no Slot to mark: true to
   * read it as it is — while the adaptive rule takes the reads for a pass in key order, where a
   * first miss only marks; the read counts as a first miss of (scope, key), so reads out of
   * order end the pass as before. False otherwise (not streaming, or another rule): the row is
   * made a Slot, whose miss the rule then counts as any.
   */
  readsRowAsIs(scope: string, key: string): boolean {
    if (this.admission === null || !this.admission.streaming) return false;
    this.admission.admitFirst(scope, key);
    return true;
  }

  /**
   * Marks `slot`, just made of a row read once as it is (readsRowAsIs), as a first miss marks a
   * slot: its next miss caches its value, as a marked slot's does.
   */
  markRead(slot: Slot): void {
    if (this.marks && slot.cached === null) slot.cached = TOUCHED;
  }

  /** Bytes held now (tests). */
  get bytesHeld(): number {
    return this.bytes;
  }

  /** The cached value of `slot` if it was read at the slot's current location and `generation`. */
  get(slot: Slot, generation: number): string | Uint8Array | undefined {
    const e = slot.cached;
    if (e === null || ((e.seg !== slot.seg || e.off !== slot.off || e.generation !== generation) && this.checkLocation)) {
      this.counters.misses++;
      return undefined;
    }
    this.counters.hits++;
    return typeof e.value === "string" ? e.value : copyOf(e.value);
  }

  /**
   * Compaction copied `slot`'s record, byte for byte, from (seg, off) at segment generation
   * `generation` to (toSeg, toOff) at `toGeneration`: a value cached from exactly that place and
   * generation is exactly what a read of the new place returns, so it moves with the record. Any
   * other entry (an older value of the slot, a read at another generation, a mark) stays where it
   * was read and misses as before. Without this every value a pass moves is read from its file
   * again — what a compaction running beside reads made them wait for (bench: readSync p99).
   */
  moveWith(slot: Slot, seg: number, off: number, generation: number, toSeg: number, toOff: number, toGeneration: number): void {
    const e = slot.cached as CachedValue | null;
    if (e === null || e === TOUCHED) return;
    if (!unsafeValueCacheForTests.moveUnchecked && (e.seg !== seg || e.off !== off || e.generation !== generation)) return;
    assert(e.slot === slot && toSeg > 0 && toGeneration % 2 === 0, "a value moves on its own slot, to a record of a published generation");
    e.seg = toSeg;
    e.off = toOff;
    e.generation = toGeneration;
    this.counters.moved++;
  }

  /**
   * Remembers the value read for `slot` from the record at (seg, off) under `generation`: the
   * location the read was authorized for, which the slot may have left since.
   */
  put(slot: Slot, value: string | Uint8Array, seg: number, off: number, generation: number): void {
    const bytes = (typeof value === "string" ? value.length : value.byteLength) + 64;
    if (this.bytesMax === 0 || bytes > this.bytesMax / 16) return;
    const old = slot.cached;
    if (old === null && this.marks && (this.admission === null || !this.admission.admitFirst(slot.scope, slot.key))) {
      slot.cached = TOUCHED; // the first miss: remembered, not cached
      return;
    }
    if (old !== null) this.bytes -= old.bytes; // stays in `order` as a stale entry: not on its slot any more (TOUCHED counts 0)
    // The cache's own copy (pooled like a hit's): the caller keeps `value` and may change it.
    const entry = new CachedValue(slot, typeof value === "string" ? value : copyOf(value), seg, off, generation, bytes);
    slot.cached = entry;
    this.order.push(entry);
    this.bytes += bytes;
    while (this.bytes > this.bytesMax && this.head < this.order.length) {
      const e = this.order[this.head++] as CachedValue;
      if (e.slot.cached !== e) continue;
      e.slot.cached = this.marks ? TOUCHED : null;
      this.bytes -= e.bytes;
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    assert(this.bytes >= 0 && this.bytes <= this.bytesMax, "the value cache stays within its budget");
  }

  /** Drops everything (close): every slot it still hangs on lets go of its value. */
  clear(): void {
    for (let i = this.head; i < this.order.length; i++) {
      const e = this.order[i] as CachedValue;
      if (e.slot.cached === e) e.slot.cached = null;
    }
    this.order = [];
    this.head = 0;
    this.bytes = 0;
  }
}
