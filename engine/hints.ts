/**
 * When hint files (segments/hint.ts) are written. Every hint describes bytes that are already
 * durable, and a failed hint write is dropped: nothing ever depends on a hint.
 *  - The active segment collects its entries as groups commit (`noteGroup`, from the very record
 *    buffers written; packed into version-3 blocks as they come, segments/hint-v3.ts
 *    RecordPacker), so sealing or closing costs the last block, the index and one small file
 *    write, not a scan or a second pass over the entries.
 *  - At seal (after the sealed header is fdatasynced): the whole segment's hint, encoded in the
 *    sealing turn and made durable on libuv's pool (writeSealedHintAsync).
 *  - At close (after the final fdatasync and sync mark): a prefix hint of the active segment,
 *    which recovery extends by scanning only the bytes after it. A close in `none` durability
 *    syncs nothing: its prefix hint covers bytes that may sit only in the page cache, so it is
 *    stamped with this boot (version 4, segments/hint-stamp.ts) and trusted only under the same
 *    boot id (hintTrusted); after a restart the segment is scanned and its torn tail cut.
 *  - With a compaction output: its hint, built by the worker from the records it copied and
 *    staged before the output is published (engine/compaction-core.ts).
 *  - At open: every sealed segment that had no valid hint and was scanned gets one.
 * A segment's hint is removed with the segment (Segment.retire) and orphans at open.
 */
import * as C from "../segments/constants.js";
import { HintBuilder, writeHintFile, writeHintFileAsync, writeHintFileOverlapped, type HintParts, type LoadedHint } from "../segments/hint.js";
import { bootId } from "../segments/boot-id.js";
import { recordLengthAt as lengthAt } from "../segments/record.js";
import { assert } from "../rules/assert.js";
import type { Segment } from "./segment.js";

/**
 * Adds the records of a committed group to `hint`: `pieces[0]` is the group's frame at segment
 * offset `offset` (not an entry), each later piece one record or a run of whole records (a
 * batch's arena runs, engine/batch-plan.ts), walked by the length each record starts with.
 */
export function noteGroup(hint: HintBuilder, pieces: readonly Buffer[], offset: number): void {
  const frame = pieces[0];
  assert(frame !== undefined, "a committed group has its frame");
  let at = offset + frame.length;
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i] as Buffer; // in bounds: i < length
    for (let pos = 0; pos < piece.length; ) {
      const length = lengthAt(piece, pos);
      assert(length >= C.RECORD_V3_BYTES_MIN && pos + length <= piece.length, "a piece's record lies inside it");
      hint.addRecord(piece, pos, at);
      pos += length;
      at += length;
    }
  }
}

/** Writes the hint of a segment just sealed from the entries it collected, in this turn (recovery's sealed segments); returns whether one was written. */
export function writeSealedHint(dir: string, seg: Segment): boolean {
  const bytes = sealedHintBytes(seg);
  return bytes !== undefined && writeHintFile(dir, seg.id, bytes);
}

/**
 * writeSealedHint for a segment the commit log just sealed: encoded in this turn, its file
 * written and made durable on libuv's pool (segments/hint.ts writeHintFileAsync), so that the
 * commit turn that sealed the segment does not wait for that write and its two fsyncs (the batch
 * that rotates a 64 MiB segment: ~50 → ~33 ms in `sync` mode, forty-third session). Until the
 * promise settles the segment is `hintWriting`: a pass waits for it before taking the segment,
 * flush() and close() wait for it (docs/ENGINE.md "Sealed hints are written off the commit
 * turn"). Resolves whether one was written; never rejects.
 */
export async function writeSealedHintAsync(dir: string, seg: Segment): Promise<boolean> {
  const bytes = sealedHintBytes(seg);
  if (bytes === undefined) return false;
  if (bytes === null || unsafeSealedHintForTests.inTurn) return writeHintFile(dir, seg.id, bytes);
  if (unsafeSealedHintForTests.hold !== null) await unsafeSealedHintForTests.hold; // never set but by a test: no await here otherwise
  return writeHintFileAsync(dir, seg.id, bytes);
}

/**
 * Resolves once the sealed hint of every segment of `segs` that is being written
 * (Segment.hintWriting) is written or dropped (each write resolves, never rejects); at once when
 * none is. A segment whose hint is pending is never retired (a pass waits for it first), so the
 * store's segments hold every such write.
 */
export async function sealedHintsWritten(segs: Iterable<Segment>): Promise<void> {
  const writing: Promise<boolean>[] = [];
  for (const s of segs) if (s.hintWriting !== null) writing.push(s.hintWriting);
  if (writing.length > 0) await Promise.all(writing);
}

/** The file bytes of a just-sealed segment's hint, taken from the segment (undefined: it kept none; null: its loaded prefix is unreadable). */
function sealedHintBytes(seg: Segment): HintParts | null | undefined {
  const hint = seg.hint;
  seg.hint = null;
  if (hint === null) return undefined;
  assert((seg.header.header.flags & C.FLAG_SEALED) !== 0 && seg.writer === null, `segment ${seg.id}: a sealed hint follows the seal`);
  assert(hint.end <= seg.dataEnd, `segment ${seg.id}: the hint's records end within the sealed data (${hint.end} <= ${seg.dataEnd})`);
  return hint.encodeParts(seg.id, seg.header, seg.dataEnd, true);
}

/**
 * Test switches, never set by the engine or any option (test/sealed-hint-async.test.ts): `inTurn`
 * writes a sealed hint's file in the sealing turn, syncs included, as before the forty-third
 * session; `closeWithoutWait` lets close() release the store while sealed hints are still being
 * written (engine/store.ts), which the next open then finds missing; `hold`, while set, holds
 * every sealed hint's write (after its encoding) until it resolves. With `takePending` a pass
 * takes a segment whose sealed hint is still being written, without waiting (compactor.ts
 * idleSealed); with `skipPending` it does not wait (Compactor.hintsWritten) and leaves the segment
 * out — an eager erasure then resolves while that file still holds the scope's values (I8). With
 * either, flush() does not wait for sealed hints either (the pass flushes).
 */
export const unsafeSealedHintForTests: { inTurn: boolean; closeWithoutWait: boolean; hold: Promise<void> | null; takePending: boolean; skipPending: boolean } = {
  inTurn: false,
  closeWithoutWait: false,
  hold: null,
  takePending: false,
  skipPending: false,
};

/**
 * Bench switch, never set by the engine or any option (bench/bulk-cpu.ts's `DIST#nohint`,
 * test/active-hint-switch.test.ts): `none` gives every segment the write path creates while it is
 * set no hint builder, so that no entry is collected as its groups commit and no hint is written
 * for it at seal or close; the next open scans it, as it scans any segment without a hint. What
 * keeping the active segment's hint current costs a load (docs/PERFORMANCE.md, bulk load).
 */
export const unsafeActiveHintForTests = { none: false };

/**
 * A segment's prefix hint encoded before the syncs that make the bytes it covers durable, so that
 * its CPU runs beside them (store close: the final fdatasync and the sync mark). Written only by
 * writeEncodedHint, and only once those bytes are durable.
 */
export interface EncodedHint {
  readonly seg: Segment;
  /** The data end the hint covers: the segment's data end once the syncs and the mark are written. */
  readonly coversEnd: number;
  /** The file's bytes (in parts); null when the builder's loaded prefix cannot be read (writeHintFile then removes the hint). */
  readonly bytes: HintParts | null;
}

/**
 * Store close, before the final sync: the prefix hint of segment `seg` (one with a writer) as it
 * will cover `coversEnd`, the data end the syncs and the sync mark leave (commit.ts endAfterMark).
 * CPU only; null when there is nothing to write (no entries kept, or the hint on disk already
 * covers that end).
 */
export function encodeActiveHint(dir: string, seg: Segment, coversEnd: number): EncodedHint | null {
  const hint = seg.hint;
  if (hint === null || seg.writer === null || seg.isClosed || seg.hintOnDiskEnd === coversEnd) return null;
  assert(hint.end <= seg.dataEnd && seg.dataEnd <= coversEnd, `segment ${seg.id}: the hint's records end within the data it covers (${hint.end} <= ${seg.dataEnd} <= ${coversEnd})`);
  const bytes = hint.encodeParts(seg.id, seg.header, coversEnd, false);
  if (unsafeCloseHintForTests.writeBeforeSync) writeHintFile(dir, seg.id, bytes);
  return { seg, coversEnd, bytes };
}

/**
 * Test switch, never set by the engine or any option (test/close-hint-order.test.ts):
 * `writeBeforeSync` writes a close's encoded hint at once, before the syncs of the bytes it covers.
 */
export const unsafeCloseHintForTests = { writeBeforeSync: false };

/**
 * Store close, after the final sync and the sync mark: writes `encoded` when the segment's data is
 * durable and ends exactly where the hint says it covers (a mark that was not written leaves no
 * hint: the next open scans from where the hint on disk ends). Returns whether one was written.
 */
export function writeEncodedHint(dir: string, encoded: EncodedHint): boolean {
  const seg = encoded.seg;
  if (seg.hint === null || seg.writer === null || seg.isClosed) return false;
  if (seg.syncedEnd !== seg.dataEnd || seg.dataEnd !== encoded.coversEnd) return false;
  assert(seg.hint.end <= encoded.coversEnd, `segment ${seg.id}: no entry was added after the hint was encoded`);
  const written = writeHintFile(dir, seg.id, encoded.bytes);
  if (written) seg.hintOnDiskEnd = encoded.coversEnd;
  return written;
}

/**
 * Store close in `none` durability, in place of the final sync: writes the prefix hint of segment
 * `seg` (one with a writer) over its data as it is now, stamped with `boot` and with what is
 * durable (its syncedEnd and coveredEnd), and syncs nothing — neither the bytes it covers nor the
 * hint file. Its entries go to the kernel while the index is built (writeHintFileOverlapped).
 * Resolves whether one was written (none when a hint on disk already covers that end).
 */
export async function writeStampedHint(dir: string, seg: Segment, boot: Buffer): Promise<boolean> {
  const hint = seg.hint;
  if (hint === null || seg.writer === null || seg.isClosed || seg.hintOnDiskEnd === seg.dataEnd) return false;
  assert(hint.end <= seg.dataEnd && seg.syncedEnd <= seg.dataEnd, `segment ${seg.id}: the hint's records and the durable prefix end within the data (${hint.end}, ${seg.syncedEnd} <= ${seg.dataEnd})`);
  const stamp = { boot, syncedEnd: seg.syncedEnd, coveredEnd: Math.min(seg.coveredEnd, seg.syncedEnd) };
  const written = await writeHintFileOverlapped(dir, seg.id, hint.encodeSplit(seg.id, seg.header, seg.dataEnd, false, stamp));
  if (written) seg.hintOnDiskEnd = seg.dataEnd;
  return written;
}

/**
 * Test switches, never set by the engine or any option (test/boot-stamp.test.ts): `anyBoot` trusts
 * a stamped hint under any boot id — the hint then describes bytes a power cut may have taken;
 * `claimCoversEnd` opens from a stamped hint as from a plain one — the new frames then claim
 * durable the bytes that hint covers, which no sync made durable (engine/recovery.ts readyActive).
 */
export const unsafeBootStampForTests = { anyBoot: false, claimCoversEnd: false };

/**
 * Whether an open may use `hint`: every hint but a stamped one (version 4) that was written under
 * another boot, or read on a machine that tells no boot id — its bytes may be gone with the page cache.
 */
export function hintTrusted(hint: Pick<LoadedHint, "stamp">): boolean {
  if (hint.stamp === null || unsafeBootStampForTests.anyBoot) return true;
  const boot = bootId();
  return boot !== null && boot.equals(hint.stamp.boot);
}
