/**
 * When a slot that has no value left lost its last one, carried from one process to the next
 * (docs/ENGINE.md "Retention across restarts").
 *
 * A slot's retention record is kept `tombstoneRetentionMs` after its value is reclaimed (API.md).
 * The keydir holds that time (Slot.reclaimedAt) in memory only, so until the thirtieth session
 * every open gave every such slot the open's time: a store opened more often than its window (a
 * CLI command each time, an MCP server restarted daily under the 24 h default) kept every
 * retention record for ever. A close now writes, for each segment, the latest reclaim time of the
 * slots whose retention record lies in it (segments/DEADBYTES version 2); the next open gives each
 * such slot its segment's time, never later than the open.
 *
 * Never early: the open applies the times only when the file names exactly the segments it found
 * (ids, header generations, data ends) — no compaction, write or journal replay since the close
 * that wrote it, so no value was reclaimed after the times it holds. Otherwise every slot gets the
 * open's time, as before. A segment's time bounds every slot whose retention record it holds: the
 * close takes the latest over the slots built in its process, and carries the time it applied to
 * the ones never built.
 *
 * The file also carries those retention records' bytes per segment (`retainedBytes`): once their
 * window has ended at the next open, they are garbage the open can count (`droppableAtOpen`), so
 * that a process too short for a time check (a CLI command) pays them as debt (compactor.ts
 * `opened`) — an estimate, like the dead bytes: the plan decides what goes.
 */
import type { DeadBytesFile } from "../segments/dead-bytes.js";
import type { Keydir, Slot } from "./keydir.js";
import type { Segment } from "./segment.js";

/**
 * Test switches, never set by the engine or any option (test/space-retention-reopen.test.ts):
 * `ignoreFile` gives every slot the open's time (the store before this file); `anySegments`
 * applies the times even when the file does not name the open's segments (a stale file).
 */
export const unsafeReclaimClockForTests = { ignoreFile: false, anySegments: false };

/** The segment holding a slot's retention record (its tombstone, else its undelete), 0 for none. */
function retentionSegment(slot: Slot): number {
  return slot.tombSeg !== 0 ? slot.tombSeg : slot.clearSeg;
}

/** A segment's reclaim time and retained bytes, as a close writes them. */
export interface Retained {
  reclaimedBy: number;
  retainedBytes: number;
}

/** The reclaim times of one open. */
export class ReclaimClock {
  /** Whether any slot may hold a reclaim time: one was given at open (`at`) or set since (`reclaimed`). The close walks the keydir only then. */
  private any = false;

  private constructor(
    /** The open's time (the store clock's). */
    readonly openedAt: number,
    /** Per segment, the reclaim time (capped at the open) and retained bytes the last close wrote for it; empty when not applied. */
    private readonly bySegment: ReadonlyMap<number, Readonly<Retained>>,
  ) {}

  /** The clock of an open at `now` that found `segments` and read `file` (the last close's DEADBYTES). */
  static of(file: DeadBytesFile, segments: ReadonlyMap<number, Segment>, now: number): ReclaimClock {
    const applied = new Map<number, Retained>();
    if (!unsafeReclaimClockForTests.ignoreFile && (unsafeReclaimClockForTests.anySegments || namesExactly(file, segments))) {
      for (const e of file.entries) if (e.reclaimedBy > 0) applied.set(e.id, { reclaimedBy: Math.min(e.reclaimedBy, now), retainedBytes: e.retainedBytes });
    }
    return new ReclaimClock(now, applied);
  }

  /** The reclaim time the open gives `slot`, which has no PUT record left: its segment's time, else the open's. */
  at(slot: Slot): number {
    this.any = true;
    return this.bySegment.get(retentionSegment(slot))?.reclaimedBy ?? this.openedAt;
  }

  /** A pass gave a slot a reclaim time (compactor.ts dropRecords). */
  reclaimed(): void {
    this.any = true;
  }

  /** The earliest time `at` can give: the open's when no segment's time applies. */
  earliest(): number {
    let t = this.openedAt;
    for (const r of this.bySegment.values()) t = Math.min(t, r.reclaimedBy);
    return t;
  }

  /**
   * Per segment, the retained bytes whose window (at least `windowMsMin`, the shortest of any
   * scope) had ended by the open: the open adds them to the segment's dead-byte estimate.
   */
  droppableAtOpen(windowMsMin: number): Map<number, number> {
    const out = new Map<number, number>();
    for (const [id, r] of this.bySegment) if (r.retainedBytes > 0 && r.reclaimedBy + windowMsMin <= this.openedAt) out.set(id, r.retainedBytes);
    return out;
  }

  /**
   * At close: per segment, the latest reclaim time of a slot whose retention record lies in it —
   * over the slots built in this process, and, while some were never built (`keydir` still
   * defers entries), the time this open applied to the segment, which those carry. A segment
   * whose time this open did not apply gets none for them: the next open gives them its own
   * time, which is later than their reclaim (they had no value at this open). With it, the bytes
   * of those slots' retention records there: the built slots' sum, or, while some were never
   * built, at least what the open read (an estimate either way). The walk is skipped while no
   * slot was given a reclaim time (a bulk load's close: ~7 ms over 200k keys).
   */
  atClose(keydir: Keydir): Map<number, Retained> {
    const out = new Map<number, Retained>();
    const add = (id: number, at: number, bytes: number): void => {
      if (id === 0) return;
      const r = out.get(id) ?? { reclaimedBy: 0, retainedBytes: 0 };
      r.reclaimedBy = Math.max(r.reclaimedBy, at);
      r.retainedBytes += bytes;
      out.set(id, r);
    };
    if (this.any) keydir.forEachBuilt((slot) => {
      if (slot.physical !== 0 || slot.reclaimedAt === 0) return;
      const id = retentionSegment(slot);
      add(id, slot.reclaimedAt, id === slot.tombSeg ? slot.tombLen : slot.clearLen);
    });
    if (!keydir.isDeferred) return out;
    for (const [id, carried] of this.bySegment) {
      add(id, carried.reclaimedBy, 0);
      const r = out.get(id) as Retained;
      r.retainedBytes = Math.max(r.retainedBytes, carried.retainedBytes);
    }
    return out;
  }
}

/** True when `file` lists every segment of `segments` and nothing else, each with its id, header generation and data end. */
function namesExactly(file: DeadBytesFile, segments: ReadonlyMap<number, Segment>): boolean {
  if (!file.complete || file.entries.length !== segments.size) return false;
  return file.entries.every((e) => {
    const seg = segments.get(e.id);
    return seg !== undefined && seg.header.header.generation === e.generation && seg.dataEnd === e.dataEnd;
  });
}
