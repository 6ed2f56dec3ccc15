/**
 * A bounded cache of segments' bytes in aligned blocks (option `blockCacheBytes`), so that
 * a read whose value is not in the value cache costs a memory copy instead of a pread once its
 * block was read. A block is the file's bytes at one segment generation: a sealed segment changes
 * only by an in-place compaction, which moves the generation (odd while rewriting, then a new even
 * one), so a block is served only to a read authorized at the generation it was read at, and is
 * cached only when the generation did not move while it was read (the read protocol's seqlock,
 * engine/reads.ts). A block is tied to its Segment object, not its id, because ids of retired
 * segments are never served again. Of the active segment only whole blocks below its data end are
 * cached: those bytes never change (appends go past the data end, a failed group rewinds the
 * writer to it, and an active segment is sealed before any compaction), while its last block is
 * still filling and its preallocated space ahead of the data end is overwritten by later appends.
 * Eviction is first-in first-out by bytes. Once the budget is full a block is read whole only on
 * its second miss (a first miss leaves the record to the caller's own pread), so a block touched
 * once costs no whole-block read and no eviction; an evicted block's buffer serves the next fill.
 */
import * as fs from "node:fs";
import type { GenerationTable } from "./generations.js";
import type { Segment } from "./segment.js";
import { assert } from "../rules/assert.js";

/** Size of one block (aligned in the file). */
export const BLOCK_BYTES = 16 * 1024;
/** Where the byte at file offset `offset` lies in its block (blockOf's bytes). */
export function blockOffset(offset: number): number {
  return offset % BLOCK_BYTES;
}

/** Blocks per segment key: segments are at most 1 GiB (SEGMENT_BYTES_MAX), so an index fits in 16 bits. */
const BLOCKS_PER_SEGMENT = 1 << 16;
/** Spare buffers kept from evictions: one insert evicts at most a few whole blocks. */
const SPARES_MAX = 4;

interface Block {
  readonly segment: Segment;
  readonly key: number;
  readonly generation: number;
  /** The file's bytes from the block's start; shorter than BLOCK_BYTES at the segment's end. */
  readonly bytes: Buffer;
}

/** What a block cache did since it was made (tests and bench/): reads served, blocks read, bytes read, first misses left to the caller. */
export interface BlockCacheCounters {
  hits: number;
  fills: number;
  fillBytes: number;
  passes: number;
}

/** How the cache fills (test twins turn a rule off; the engine uses the defaults). */
export interface BlockCachePolicy {
  /** Reuse an evicted block's buffer for the next fill (default true). */
  recycle?: boolean;
  /** Once full, read a block whole only on its second miss (default true). */
  secondMiss?: boolean;
}

/** Segments' bytes by (segment, block), bounded by `bytesMax`. */
export class BlockCache {
  /** Counts of what read() did; plain fields, never reset. */
  readonly counters: BlockCacheCounters = { hits: 0, fills: 0, fillBytes: 0, passes: 0 };
  private readonly blocks = new Map<number, Block>();
  /** Insertion order for eviction; may hold stale entries (already replaced or evicted). */
  private order: Block[] = [];
  private head = 0;
  private bytes = 0;
  /** Evicted whole blocks' buffers, reused by the next fills (at most SPARES_MAX). */
  private spares: Buffer[] = [];
  /** Keys of blocks that missed once while the cache was full (the second-miss rule); at most `missedMax`. */
  private readonly missed = new Set<number>();
  private readonly missedMax: number;
  private readonly recycleBuffers: boolean;
  private readonly secondMiss: boolean;

  /**
   * `checkGeneration` and `boundActive` are false only in this cache's own test twins: it then
   * serves a block read at any generation, or fills an active segment's block past its data end
   * (the preallocated bytes later appends overwrite), which are the bugs those bounds prevent.
   */
  constructor(
    readonly bytesMax: number,
    private readonly checkGeneration = true,
    private readonly boundActive = true,
    policy: BlockCachePolicy = {},
  ) {
    assert(Number.isSafeInteger(bytesMax) && bytesMax >= BLOCK_BYTES, "a block cache holds at least one block");
    this.recycleBuffers = policy.recycle ?? true;
    this.secondMiss = policy.secondMiss ?? true;
    this.missedMax = 4 * Math.ceil(bytesMax / BLOCK_BYTES);
  }

  /** Bytes held now (for tests and stats). */
  get bytesHeld(): number {
    return this.bytes;
  }

  /**
   * The `length` bytes at `offset` of `segment` as the file held them at `generation`: blockOf's
   * block, viewed at the range (tests; the read path decodes the block where it lies).
   */
  read(segment: Segment, gens: GenerationTable, offset: number, length: number, generation: number): Uint8Array | null {
    const block = this.blockOf(segment, gens, offset, length, generation);
    const at = blockOffset(offset);
    return block === null ? null : block.subarray(at, at + length);
  }

  /**
   * The whole cached block holding the `length` bytes at `offset` of `segment` as the file held
   * them at `generation` (the generation the read was authorized at), the range starting at
   * `blockOffset(offset)` in it: from the cache, or from one pread of the whole block, cached when
   * the generation did not move meanwhile. Null when the range cannot come from a block (the
   * active segment's last, still filling block, a range across a block boundary or past the data
   * end), or on a full cache's first miss of the block (the second-miss rule): the caller preads
   * it itself. The bytes are the cache's, valid only in the caller's synchronous turn (an evicted
   * block's buffer serves a later fill): the caller copies what it keeps.
   */
  blockOf(segment: Segment, gens: GenerationTable, offset: number, length: number, generation: number): Buffer | null {
    if (offset + length > segment.dataEnd) return null;
    const index = Math.floor(offset / BLOCK_BYTES);
    const start = index * BLOCK_BYTES;
    if (offset + length > start + BLOCK_BYTES) return null;
    if (segment.writer !== null && start + BLOCK_BYTES > segment.dataEnd && this.boundActive) return null;
    const key = segment.id * BLOCKS_PER_SEGMENT + index;
    let block = this.blocks.get(key);
    if (block !== undefined && (block.segment !== segment || (this.checkGeneration && block.generation !== generation))) block = undefined;
    if (block === undefined) {
      if (!this.admit(key)) return null;
      block = this.fill(segment, gens, key, start, generation);
    } else this.counters.hits++;
    if (offset + length > start + block.bytes.length) return null;
    return block.bytes;
  }

  /**
   * Whether a missed block is read whole now. Always while the budget has room for it; once full
   * (a fill evicts), only on the block's second miss since the cache was last full of other
   * blocks: a block touched once — a scan, the first touch of a large store — costs one pread of
   * the record alone instead of a whole block and an eviction. The set of once-missed blocks is
   * bounded: it starts over when it reaches four times the cache's blocks.
   */
  private admit(key: number): boolean {
    if (!this.secondMiss || this.bytes + BLOCK_BYTES <= this.bytesMax) return true;
    if (this.missed.delete(key)) return true;
    if (this.missed.size >= this.missedMax) this.missed.clear();
    this.missed.add(key);
    this.counters.passes++;
    return false;
  }

  /** Reads the block at `start` with one pread; caches it only if the generation held still during the read. */
  private fill(segment: Segment, gens: GenerationTable, key: number, start: number, generation: number): Block {
    const want = this.boundActive || segment.writer === null ? Math.min(BLOCK_BYTES, segment.dataEnd - start) : BLOCK_BYTES;
    const buf = this.bufferOf(want);
    const n = fs.readSync(segment.fd, buf, 0, want, start);
    this.counters.fills++;
    this.counters.fillBytes += n;
    const block: Block = { segment, key, generation, bytes: n === want ? buf : buf.subarray(0, n) };
    // A rewrite that began during the pread may have torn these bytes: the caller's own check fails the read closed; never keep them.
    if (gens.load(segment.cell) === generation) this.insert(block);
    return block;
  }

  /**
   * Memory for a fill of `want` bytes: a whole block reuses an evicted block's buffer when one is
   * spare (a cache that is full and streaming would otherwise allocate 64 KiB per fill, and that
   * external memory churn drives V8's full collections over the whole heap). Anything shorter
   * gets its own memory, so the budget counts exactly what is held.
   */
  private bufferOf(want: number): Buffer {
    const spare = want === BLOCK_BYTES ? this.spares.pop() : undefined;
    if (spare !== undefined) return spare;
    return Buffer.allocUnsafeSlow(want);
  }

  /**
   * Keeps an evicted block's memory for the next fill. Sound because no one holds a block's bytes
   * past the read that asked for them: read() hands out a view the caller decodes and copies in
   * the same synchronous turn (engine/reads.ts finishRead).
   */
  private recycle(victim: Block): void {
    if (this.recycleBuffers && victim.bytes.length === BLOCK_BYTES && this.spares.length < SPARES_MAX) this.spares.push(victim.bytes);
  }

  /** Takes a block in, evicting the oldest until the budget holds. */
  private insert(block: Block): void {
    const old = this.blocks.get(block.key);
    if (old !== undefined) this.bytes -= old.bytes.length;
    this.blocks.set(block.key, block);
    this.order.push(block);
    this.bytes += block.bytes.length;
    while (this.bytes > this.bytesMax && this.head < this.order.length) {
      const victim = this.order[this.head++] as Block;
      if (this.blocks.get(victim.key) !== victim) continue;
      this.blocks.delete(victim.key);
      this.bytes -= victim.bytes.length;
      this.recycle(victim);
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    assert(this.bytes >= 0 && this.bytes <= Math.max(this.bytesMax, block.bytes.length), "the block cache stays within its budget");
  }

  /** Drops everything (close). */
  clear(): void {
    this.blocks.clear();
    this.spares = [];
    this.missed.clear();
    this.order = [];
    this.head = 0;
    this.bytes = 0;
  }
}
