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
 * Whole blocks live in a few slabs, each one allocation, carved as the cache fills (read-12): a
 * fill that allocated its own 16 KiB made 4,096 ArrayBuffers per 64 MiB, and V8 answers that many
 * new external buffers with extra collections.
 */
import type { GenerationTable } from "./generations.js";
import type { Segment } from "./segment.js";
import { assert } from "../rules/assert.js";
import { longLivedBuffer } from "../segments/long-lived.js";
import { readAt } from "../segments/io.js";

/** Size of one block (aligned in the file). */
export const BLOCK_BYTES = 16 * 1024;
/** Where the byte at file offset `offset` lies in its block (blockOf's bytes). */
export function blockOffset(offset: number): number {
  return offset % BLOCK_BYTES;
}

/** Blocks per segment key: segments are at most 1 GiB (SEGMENT_BYTES_MAX), so an index fits in 16 bits. */
const BLOCKS_PER_SEGMENT = 1 << 16;
/** Whole blocks in the first slab (256 KiB: a reopened store that reads a little holds little). */
const SLAB_BLOCKS_MIN = 16;
/** Whole blocks in a slab at most (8 MiB): each slab doubles the memory carved so far up to this. */
const SLAB_BLOCKS_MAX = 512;

interface Block {
  readonly segment: Segment;
  readonly key: number;
  readonly generation: number;
  /** The file's bytes from the block's start; shorter than BLOCK_BYTES at the segment's end. */
  readonly bytes: Buffer;
  /** The slab's whole block `bytes` lies in, returned to the free list on eviction; null for a block with memory of its own. */
  readonly memory: Buffer | null;
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
  /** Reuse an evicted block's memory (a slab's block) for the next fill (default true; off, every fill allocates its own). */
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
  /** Slab blocks no block holds (never filled, or evicted), taken by the next fills. */
  private free: Buffer[] = [];
  /** Whole blocks carved from slabs so far; at most `slabBlocksMax`. */
  private carved = 0;
  /** The budget's whole blocks and one in flight (a fill precedes the eviction it causes). */
  private readonly slabBlocksMax: number;
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
    this.slabBlocksMax = Math.floor(bytesMax / BLOCK_BYTES) + 1;
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

  /**
   * Reads the block at `start` with one pread (fault point `io:read`); caches it only if the
   * generation held still during the read. A failed read caches nothing and gives its slab memory
   * back; its IoError goes to the read that asked.
   */
  private fill(segment: Segment, gens: GenerationTable, key: number, start: number, generation: number): Block {
    const want = this.boundActive || segment.writer === null ? Math.min(BLOCK_BYTES, segment.dataEnd - start) : BLOCK_BYTES;
    const memory = want === BLOCK_BYTES && this.recycleBuffers ? this.slabBlock() : null;
    const buf = memory ?? Buffer.allocUnsafeSlow(want);
    let n: number;
    try {
      n = readAt(segment.fd, buf, 0, want, start);
    } catch (err) {
      if (memory !== null) this.free.push(memory);
      throw err;
    }
    this.counters.fills++;
    this.counters.fillBytes += n;
    const block: Block = { segment, key, generation, bytes: n === want ? buf : buf.subarray(0, n), memory };
    // A rewrite that began during the pread may have torn these bytes: the caller's own check fails the read closed; never keep them.
    if (gens.load(segment.cell) === generation) this.insert(block);
    else this.recycle(block); // the caller is done with it before the next fill (see recycle)
    return block;
  }

  /**
   * A free slab block for a whole-block fill: an evicted block's memory when one is free, else a
   * block of a new slab. Slabs grow with the cache (each doubles what was carved, 256 KiB to
   * 8 MiB) and stop at the budget: a cache that is full and streaming allocates nothing, and one
   * that never fills holds little. Null (the fill allocates its own) only past that bound.
   */
  private slabBlock(): Buffer | null {
    const free = this.free.pop();
    if (free !== undefined) return free;
    const count = Math.min(SLAB_BLOCKS_MAX, Math.max(SLAB_BLOCKS_MIN, this.carved), this.slabBlocksMax - this.carved);
    if (count <= 0) return null;
    const slab = longLivedBuffer(count * BLOCK_BYTES); // lives with the cache: not V8's external memory (segments/long-lived.ts)
    for (let i = count - 1; i > 0; i--) this.free.push(slab.subarray(i * BLOCK_BYTES, (i + 1) * BLOCK_BYTES));
    this.carved += count;
    return slab.subarray(0, BLOCK_BYTES);
  }

  /**
   * Returns a block's slab memory to the free list once no entry holds it (evicted, replaced, or
   * never cached). Sound because no one holds a block's bytes past the read that asked for them:
   * blockOf hands the block to a caller that decodes and copies in the same synchronous turn
   * (engine/reads.ts finishRead).
   */
  private recycle(victim: Block): void {
    if (victim.memory !== null) this.free.push(victim.memory);
  }

  /** Takes a block in, evicting the oldest until the budget holds. */
  private insert(block: Block): void {
    const old = this.blocks.get(block.key);
    if (old !== undefined) {
      this.bytes -= old.bytes.length;
      this.recycle(old); // its `order` entry is stale now: eviction skips it
    }
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
    this.free = [];
    this.carved = 0;
    this.missed.clear();
    this.order = [];
    this.head = 0;
    this.bytes = 0;
  }
}
