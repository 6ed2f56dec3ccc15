/**
 * A bounded cache of hot values, keyed by slot and checked against the record location and the
 * segment generation it was read at. A record at (segment, offset) never changes while the
 * segment's generation stays the same, so a hit under the same (segment, offset, generation) is
 * exactly the bytes a pread would return — the read protocol's checks still run around it.
 * Eviction is first-in first-out by bytes; a value larger than 1/16 of the budget is not cached.
 */
import type { Slot } from "./keydir.js";

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

interface Entry {
  slot: Slot;
  value: string | Uint8Array;
  seg: number;
  off: number;
  generation: number;
  bytes: number;
}

/** Hot values by slot, bounded by `bytesMax`. */
export class ValueCache {
  private readonly entries = new Map<Slot, Entry>();
  /** Insertion order for eviction; may hold stale entries (already replaced or evicted). */
  private order: Entry[] = [];
  private head = 0;
  private bytes = 0;

  constructor(readonly bytesMax: number) {}

  /** The cached value of `slot` if it was read at the slot's current location and `generation`. */
  get(slot: Slot, generation: number): string | Uint8Array | undefined {
    const e = this.entries.get(slot);
    if (e === undefined || e.seg !== slot.seg || e.off !== slot.off || e.generation !== generation) return undefined;
    return typeof e.value === "string" ? e.value : copyOf(e.value);
  }

  /**
   * Remembers the value read for `slot` from the record at (seg, off) under `generation`: the
   * location the read was authorized for, which the slot may have left since.
   */
  put(slot: Slot, value: string | Uint8Array, seg: number, off: number, generation: number): void {
    const bytes = (typeof value === "string" ? value.length : value.byteLength) + 64;
    if (this.bytesMax === 0 || bytes > this.bytesMax / 16) return;
    const old = this.entries.get(slot);
    if (old !== undefined) {
      this.bytes -= old.bytes;
      this.entries.delete(slot);
    }
    // The cache's own copy (pooled like a hit's): the caller keeps `value` and may change it.
    const entry: Entry = { slot, value: typeof value === "string" ? value : copyOf(value), seg, off, generation, bytes };
    this.entries.set(slot, entry);
    this.order.push(entry);
    this.bytes += bytes;
    while (this.bytes > this.bytesMax && this.head < this.order.length) {
      const e = this.order[this.head++] as Entry;
      if (this.entries.get(e.slot) !== e) continue;
      this.entries.delete(e.slot);
      this.bytes -= e.bytes;
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }

  /** Drops everything (close). */
  clear(): void {
    this.entries.clear();
    this.order = [];
    this.head = 0;
    this.bytes = 0;
  }
}
