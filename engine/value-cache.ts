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
let copyPool = new ArrayBuffer(COPY_POOL_BYTES);
let copyPoolUsed = 0;

/** A fresh copy of `src` that shares no bytes with it or with any earlier copy. */
export function copyOf(src: Uint8Array): Uint8Array {
  const n = src.byteLength;
  if (n > POOLED_COPY_BYTES_MAX) return new Uint8Array(src);
  if (copyPoolUsed + n > COPY_POOL_BYTES) {
    copyPool = new ArrayBuffer(COPY_POOL_BYTES);
    copyPoolUsed = 0;
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
  constructor(
    readonly slot: Slot,
    readonly value: string | Uint8Array,
    readonly seg: number,
    readonly off: number,
    readonly generation: number,
    readonly bytes: number,
  ) {}
}

/**
 * The mark of a slot read once and not cached (the second-touch rule): a CachedValue at no
 * location (segment -1), so a hit's location check misses on it with no branch of its own, and of
 * the same class as every entry, so `Slot.cached` keeps one shape. It holds no bytes.
 */
const TOUCHED = new CachedValue(null as unknown as Slot, "", -1, -1, -1, 0);

/** Every this many first misses one is marked and watched, whatever the mode (the sample). */
const SAMPLE_EVERY = 16;
/** Watched marks held: each is judged when its place is taken, SAMPLE_EVERY × this first misses later. */
const WATCHED = 2048;
/** Judgements per decision of the mode. */
const WINDOW = 256;
/** Below one retouched mark in this many judged, the reads are a stream: first misses only mark. */
const STREAM_RATIO = 16;

/**
 * The second-touch rule, adaptive: it decides, for a slot's first miss, whether its value is
 * cached now or the slot is only marked (TOUCHED) and cached on its next miss. While reads come
 * back to the keys they read (hot sets: W4), a first miss caches, as a cache without the rule
 * does; once a sample shows that marked slots are almost never read again within the last
 * 32,768 first misses (a pass that reads every key once: W5's read-all, a first touch of a large
 * store), first misses only mark, so the pass copies, allocates and evicts nothing. The sample
 * keeps being judged in either mode, so a stream that turns into re-reads switches back.
 */
class Admission {
  private readonly watched: Array<Slot | undefined> = new Array<Slot | undefined>(WATCHED);
  private misses = 0;
  private judged = 0;
  private retouched = 0;
  /** True while the reads look like a stream (first misses only mark). */
  streaming = false;

  /** For a slot's first miss: true to cache its value now, false to mark it (the caller marks). */
  admitFirst(slot: Slot): boolean {
    const n = this.misses++;
    if (n % SAMPLE_EVERY !== 0) return !this.streaming;
    const at = (n / SAMPLE_EVERY) % WATCHED;
    const prev = this.watched[at];
    if (prev !== undefined) this.judge(prev);
    this.watched[at] = slot;
    return false;
  }

  /** A watched mark judged: read again since (its value cached, or moved on) or not. */
  private judge(slot: Slot): void {
    this.judged++;
    if (slot.cached !== TOUCHED) this.retouched++;
    if (this.judged < WINDOW) return;
    this.streaming = this.retouched * STREAM_RATIO < this.judged;
    this.judged = 0;
    this.retouched = 0;
  }
}

/** Hot values on their slots, bounded by `bytesMax`. */
export class ValueCache {
  /** Insertion order for eviction; may hold stale entries (replaced on their slot, or evicted). */
  private order: CachedValue[] = [];
  private head = 0;
  private bytes = 0;

  /**
   * `checkLocation` is false only in this cache's own test twin: a hit then ignores where the slot
   * points now, which serves a value its slot has left (overwritten, or moved by compaction).
   * With `secondTouch` (the store's cache) the Admission rule above decides whether a slot's
   * first miss caches its value or only marks the slot; an evicted slot keeps the mark, so a
   * value read again after its eviction is cached again on that read.
   */
  constructor(
    readonly bytesMax: number,
    private readonly checkLocation = true,
    secondTouch = false,
  ) {
    this.admission = secondTouch ? new Admission() : null;
  }

  /** The second-touch rule; null caches on every first miss (this cache's unit tests). */
  private readonly admission: Admission | null;

  /** True while the second-touch rule takes the reads for a stream (tests). */
  get streaming(): boolean {
    return this.admission?.streaming ?? false;
  }

  /** Bytes held now (tests). */
  get bytesHeld(): number {
    return this.bytes;
  }

  /** The cached value of `slot` if it was read at the slot's current location and `generation`. */
  get(slot: Slot, generation: number): string | Uint8Array | undefined {
    const e = slot.cached;
    if (e === null) return undefined;
    if ((e.seg !== slot.seg || e.off !== slot.off || e.generation !== generation) && this.checkLocation) return undefined;
    return typeof e.value === "string" ? e.value : copyOf(e.value);
  }

  /**
   * Remembers the value read for `slot` from the record at (seg, off) under `generation`: the
   * location the read was authorized for, which the slot may have left since.
   */
  put(slot: Slot, value: string | Uint8Array, seg: number, off: number, generation: number): void {
    const bytes = (typeof value === "string" ? value.length : value.byteLength) + 64;
    if (this.bytesMax === 0 || bytes > this.bytesMax / 16) return;
    const old = slot.cached;
    if (old === null && this.admission !== null && !this.admission.admitFirst(slot)) {
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
      e.slot.cached = this.admission !== null ? TOUCHED : null;
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
