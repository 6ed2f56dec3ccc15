/**
 * Segment generations in shared memory: a seqlock per segment, shared by the main thread and the
 * compaction workers. Even = stable; odd = an in-place rewrite is moving bytes. A worker makes a
 * segment's generation odd before its first overwrite; the main thread makes it even again (one
 * more bump) in the same turn that it applies the relocation map, so a reader can never pair a
 * new generation with an old keydir location.
 *
 * Readers load the generation when they authorize (the token) and again after their bytes
 * arrive; any difference means the bytes may belong to another record, so the read fails closed.
 */
import { assert } from "../rules/assert.js";

/** Segments that can be open at once (each holds one cell and one file descriptor). */
export const SEGMENTS_OPEN_MAX = 4096;

/** Highest generation a shared Int32 cell holds: the 31-bit bound every bump is checked against. */
export const GENERATION_MAX = 0x7ffffffe;

/** The shared table of segment generations, addressed by cell (not by segment id). */
export class GenerationTable {
  readonly buffer: SharedArrayBuffer;
  private readonly cells: Int32Array;
  private readonly free: number[] = [];

  constructor(buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(SEGMENTS_OPEN_MAX * 4);
    this.cells = new Int32Array(this.buffer);
    if (buffer === undefined) for (let i = SEGMENTS_OPEN_MAX - 1; i >= 0; i--) this.free.push(i);
  }

  /** Takes a free cell and stores `generation` (even) in it; null when all cells are taken. */
  allocate(generation: number): number | null {
    if (generation % 2 !== 0 || generation > GENERATION_MAX) throw new Error(`allocate: generation ${generation} must be even and fit 31 bits`);
    const cell = this.free.pop();
    if (cell === undefined) return null;
    Atomics.store(this.cells, cell, generation);
    return cell;
  }

  /** Returns a cell to the free list. */
  release(cell: number): void {
    this.free.push(cell);
  }

  /** The generation in `cell` now. */
  load(cell: number): number {
    return loadCell(this.cells, cell);
  }

  /** Bumps the generation by one and wakes waiters; returns the new value. */
  bump(cell: number): number {
    return bumpCell(this.cells, cell);
  }

  /** Wakes every waiter on `cell` without changing it: they look again (a segment given up as lost: Segment.lost). */
  wake(cell: number): void {
    Atomics.notify(this.cells, cell);
  }

  /** Resolves once `cell` no longer holds `generation` (used while it is odd). */
  async waitChange(cell: number, generation: number): Promise<void> {
    const waited = Atomics.waitAsync(this.cells, cell, generation);
    if (waited.async) await waited.value;
  }
}

/**
 * The one bump of a generation cell (main thread and workers): add one, check the 31-bit bound,
 * wake every waiter. Parity is the caller's to check (worker even→odd, main thread odd→even).
 */
function bumpCell(cells: Int32Array, cell: number): number {
  const next = Atomics.add(cells, cell, 1) + 1;
  assert(next > 0 && next <= GENERATION_MAX + 1, `generation cell ${cell} stays within 31 bits (now ${next})`);
  Atomics.notify(cells, cell);
  return next;
}

/** The one load of a generation cell. */
function loadCell(cells: Int32Array, cell: number): number {
  return Atomics.load(cells, cell);
}

/** Worker side: bumps the generation of `cell` in a shared table (bumpCell). */
export function bumpShared(buffer: SharedArrayBuffer, cell: number): number {
  return bumpCell(new Int32Array(buffer), cell);
}

/** Worker side: the generation of `cell` in a shared table. */
export function loadShared(buffer: SharedArrayBuffer, cell: number): number {
  return loadCell(new Int32Array(buffer), cell);
}
