/**
 * The read protocol (I3, I4). A read is authorized against a token — the slot's record location,
 * its scope, key, generation and version, and the generation of the segment holding it — then
 * materialized with one pread. After the bytes arrive the reader loads the segment generation
 * again and checks the record it got against the token. Any drift throws ScopeErasedDuringRead
 * and returns nothing; the library never retries (a retry would re-authorize against the new
 * state and hide the race). A checksum or field mismatch with no drift is CorruptionError.
 *
 * `unsafe.skipReadValidation` skips every check but the checksum: it is the naive design, which
 * returns a different scope's record when an in-place compaction moved bytes under the read.
 */
import * as C from "../segments/constants.js";
import { CorruptionError, ScopeErasedDuringRead, StoreClosedError } from "../rules/errors.js";
import { checkRecordBytes, preadSync, type RecordExpectation } from "../segments/point-read.js";
import { formatOf } from "../segments/header.js";
import { decodeRecord, isRecord } from "../segments/record.js";
import { hitAsync } from "./faults.js";
import type { GenerationTable } from "./generations.js";
import type { Slot } from "./keydir.js";
import type { Segment } from "./segment.js";
import { copyOf, type ValueCache } from "./value-cache.js";
import { blockOffset, type BlockCache } from "./block-cache.js";
import type { ReadResult } from "../rules/types.js";

/**
 * What a read found: the segment holding the value, and the record's location and fields (the
 * slot's, or a held compact row's: engine/store.ts find). `slot` is null for a row read as it is,
 * which the value cache neither serves nor keeps.
 */
export interface ReadFound {
  slot: Slot | null;
  segment: Segment;
  off: number;
  len: number;
  /** The PUT's sequence and generation. */
  version: number;
  generation: number;
  scope: string;
  key: string;
}

/** What a read was authorized to return. */
interface ReadToken {
  segment: Segment;
  offset: number;
  length: number;
  segmentGeneration: number;
  scope: string;
  key: string;
  generation: number;
  version: number;
  /** The value from the hot-value cache, when the slot was cached at this location and generation. */
  cached: string | Uint8Array | undefined;
  /** Null for a compact row read as it is (ReadFound). */
  slot: Slot | null;
}

/** What materialize needs from the store. */
export interface ReadHost {
  readonly segmentsDir: string;
  readonly gens: GenerationTable;
  readonly options: { unsafeSkipReadValidation: boolean };
  /** Null when caching is off (always, under unsafe.skipReadValidation: it reads like the naive design). */
  readonly cache: ValueCache | null;
  /** Segments' blocks; null when off (blockCacheBytes 0, or unsafe.skipReadValidation). */
  readonly blocks: BlockCache | null;
}

/**
 * Test-only hook, never set by the engine: with `aliasBlockValues` a value decoded from a block
 * cache block is returned as a view of the block instead of a copy — the bug that lets a later
 * fill of the same slab memory change a value a caller already holds (test/read-values-stable).
 */
export const unsafeReadsForTests = { aliasBlockValues: false };

/** A token with no read in it (what the synchronous path's shared token starts as). */
function blankToken(): ReadToken {
  return { segment: null as unknown as Segment, slot: null, cached: undefined, offset: 0, length: 0, segmentGeneration: 0, scope: "", key: "", generation: 0, version: 0 };
}

/**
 * The synchronous reads' token, filled again by each: a synchronous read authorizes and finishes
 * in one turn and runs no caller code in between, so no two reads ever hold it at once, and a
 * cold read (W5's read-all: 200,000 of them) makes one object less. An async read, which may
 * pause between the two steps, gets its own.
 */
const syncToken = blankToken();

/** Where finishRead's expected fields go: filled per read, read only within its decode (one object for all reads). */
const expected: RecordExpectation = { type: C.RecordType.PUT, scope: "", key: "", generation: 0, seq: 0 };

/** Fills `token` with what a read is authorized against: the record's location and fields as found, and its segment's generation now. */
function authorize(host: ReadHost, found: ReadFound, token: ReadToken): ReadToken {
  const { slot, segment } = found;
  const segmentGeneration = host.gens.load(segment.cell);
  token.segment = segment;
  token.slot = slot;
  token.cached = slot === null ? undefined : host.cache?.get(slot, segmentGeneration);
  token.offset = found.off;
  token.length = found.len;
  token.segmentGeneration = segmentGeneration;
  token.scope = found.scope;
  token.key = found.key;
  token.generation = found.generation;
  token.version = found.version;
  return token;
}

/**
 * The synchronous read's cache hit, authorized and re-checked in one turn, or null on a miss (the
 * caller then takes the token path). Nothing on the main thread can change the slot between the
 * two generation loads, so no token object is made; a compaction worker can still make the
 * segment's generation drift, which the second load sees exactly as finishRead's check does. The
 * file is not touched, so the reader count is not either. A rewrite in progress (odd generation)
 * is left to the token path, which fails closed.
 */
function cachedNow(host: ReadHost, found: ReadFound): ReadResult | null {
  const cache = host.cache;
  const { slot, segment } = found;
  if (cache === null || slot === null) return null;
  const segmentGeneration = host.gens.load(segment.cell);
  if (segmentGeneration % 2 !== 0) return null;
  const value = cache.get(slot, segmentGeneration);
  if (value === undefined) return null;
  if (segment.isClosed) throw new StoreClosedError();
  const live = host.gens.load(segment.cell);
  if (live !== segmentGeneration) {
    throw new ScopeErasedDuringRead(slot.scope, segmentGeneration, live, "segment generation drifted between authorization and materialization");
  }
  return { status: "OK", value, version: slot.putSeq, generation: slot.putGen, scope: slot.scope };
}

/**
 * Authorizes and materializes a found slot. With `faults` (async reads only) it may pause at
 * read:after-authorize, which is what lets a test put a compaction between the two steps.
 */
export function materialize(host: ReadHost, found: ReadFound, faults: null): ReadResult;
export function materialize(host: ReadHost, found: ReadFound, faults: SharedArrayBuffer | null): ReadResult | Promise<ReadResult>;
export function materialize(host: ReadHost, found: ReadFound, faults: SharedArrayBuffer | null): ReadResult | Promise<ReadResult> {
  // I4: a read racing a forget or a compaction returns the value valid at its authorization or throws ScopeErasedDuringRead.
  if (faults === null) {
    const hit = cachedNow(host, found);
    if (hit !== null) return hit;
    try {
      return finishRead(host, startRead(host, authorize(host, found, syncToken)));
    } finally {
      release(syncToken);
    }
  }
  const token = startRead(host, authorize(host, found, blankToken()));
  return hitAsync(faults, "read:after-authorize").then(
    () => finishRead(host, token),
    (err: unknown) => {
      token.segment.leave(host.segmentsDir, host.gens);
      throw err;
    },
  );
}

/**
 * Enters an authorized token's segment (the reader count finishRead leaves), or throws
 * ScopeErasedDuringRead when the segment is being rewritten in place (odd generation).
 */
function startRead(host: ReadHost, token: ReadToken): ReadToken {
  if (token.segmentGeneration % 2 !== 0 && !host.options.unsafeSkipReadValidation) {
    if (token.segment.lost !== null) throw token.segment.lost; // its rewrite was cut short: unreadable until a reopen
    throw new ScopeErasedDuringRead(token.scope, token.segmentGeneration, token.segmentGeneration, "segment is being rewritten in place");
  }
  token.segment.enter();
  return token;
}

/** Lets go of what the shared token points at once its read is over, so that it keeps no segment, slot or value alive. */
function release(token: ReadToken): void {
  token.segment = null as unknown as Segment;
  token.slot = null;
  token.cached = undefined;
}

/**
 * Materializes an authorized read: one pread (or the cached value), then the segment generation
 * and the record's type, scope, key, generation and version are compared with the token. Returns
 * the value only when all match; drift is ScopeErasedDuringRead, a mismatch without drift is
 * CorruptionError, a pread or block fill that fails (fault point `io:read`) the IoError it threw.
 * Leaves the segment (reader count) in every case.
 */
function finishRead(host: ReadHost, token: ReadToken): ReadResult {
  // I3: no bytes of another slot, scope or generation than the token authorized are returned.
  let bytes: Uint8Array | null = null;
  let owned = true;
  let at = 0;
  try {
    // close() closed the descriptor of a segment this read held (its number may be reused): fail closed.
    if (token.segment.isClosed) throw new StoreClosedError();
    if (token.cached === undefined) {
      // A block is the file's bytes at the authorized generation (or a pread made now): the same checks follow either way.
      // The record is decoded where it lies in the block: no view of it is made first.
      const block = host.blocks === null ? null : host.blocks.blockOf(token.segment, host.gens, token.offset, token.length, token.segmentGeneration);
      owned = block === null;
      if (block !== null) at = blockOffset(token.offset);
      bytes = block ?? preadSync(token.segment.fd, token.offset, token.length);
    }
  } finally {
    token.segment.leave(host.segmentsDir, host.gens);
  }
  if (host.options.unsafeSkipReadValidation) return unvalidated(token, bytes as Uint8Array);
  const live = host.gens.load(token.segment.cell);
  if (live !== token.segmentGeneration) {
    throw new ScopeErasedDuringRead(token.scope, token.segmentGeneration, live, "segment generation drifted between authorization and materialization");
  }
  if (bytes === null) {
    return { status: "OK", value: token.cached as string | Uint8Array, version: token.version, generation: token.generation, scope: token.scope };
  }
  expected.scope = token.scope;
  expected.key = token.key;
  expected.generation = token.generation;
  expected.seq = token.version;
  const got = checkRecordBytes(bytes, token.length, expected, true, formatOf(token.segment.header), at); // the segment's own record frame (format 2 or 3)
  if (typeof got === "string") throw new CorruptionError(token.segment.id, token.offset, `point read failed its ${got} check`);
  // The value is a view of `bytes`. A block's bytes are the cache's: the caller gets a pooled copy
  // (one small object; a fresh 256-byte ArrayBuffer per read cost more than the decode itself).
  const view = got.value as string | Uint8Array;
  const value = owned || typeof view === "string" || unsafeReadsForTests.aliasBlockValues ? view : copyOf(view);
  if (token.slot !== null) host.cache?.put(token.slot, value, token.segment.id, token.offset, token.segmentGeneration);
  return { status: "OK", value, version: token.version, generation: token.generation, scope: token.scope };
}

/** The naive read: trusts whatever valid record lies at the offset. */
function unvalidated(token: ReadToken, bytes: Uint8Array): ReadResult {
  const got = decodeRecord(bytes, 0, bytes.length, true, undefined, formatOf(token.segment.header));
  if (!isRecord(got) || got.value === null) throw new CorruptionError(token.segment.id, token.offset, `unvalidated read found ${isRecord(got) ? "a non-PUT record" : got}`);
  return { status: "OK", value: got.value, version: got.seq, generation: got.generation, scope: got.scope };
}
