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

/** Hot values on their slots, bounded by `bytesMax`. */
export class ValueCache {
  /** Insertion order for eviction; may hold stale entries (replaced on their slot, or evicted). */
  private order: CachedValue[] = [];
  private head = 0;
  private bytes = 0;

  /**
   * `checkLocation` is false only in this cache's own test twin: a hit then ignores where the slot
   * points now, which serves a value its slot has left (overwritten, or moved by compaction).
   */
  constructor(readonly bytesMax: number, private readonly checkLocation = true) {}

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
    if (old !== null) this.bytes -= old.bytes; // stays in `order` as a stale entry: not on its slot any more
    // The cache's own copy (pooled like a hit's): the caller keeps `value` and may change it.
    const entry = new CachedValue(slot, typeof value === "string" ? value : copyOf(value), seg, off, generation, bytes);
    slot.cached = entry;
    this.order.push(entry);
    this.bytes += bytes;
    while (this.bytes > this.bytesMax && this.head < this.order.length) {
      const e = this.order[this.head++] as CachedValue;
      if (e.slot.cached !== e) continue;
      e.slot.cached = null;
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
