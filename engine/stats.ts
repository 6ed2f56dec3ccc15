/**
 * stats(): per-segment and store totals from one pass over the keydir (the compaction plan's
 * tally, compaction-plan.ts) and one over the slots. Reads only; changes nothing.
 */
import * as C from "../segments/constants.js";
import { tallySegments, type PlanHost } from "./compaction-plan.js";
import type { GenerationTable } from "./generations.js";
import { isReserved, type Keydir } from "./keydir.js";
import type { Segment } from "./segment.js";
import type * as T from "../rules/types.js";

/** What stats() reads from the store. */
export interface StatsHost extends PlanHost {
  readonly options: PlanHost["options"] & { readonly clock: () => number };
  readonly segments: ReadonlyMap<number, Segment>;
  readonly gens: GenerationTable;
}

/** What the compactor reports into stats(). */
export interface CompactionCounts {
  /** Sealed segments over their garbage ratio, waiting for a pass. */
  pendingGcSegments: number;
  /** Compactions completed since open. */
  compactions: number;
}

/** The store's stats at `sequence` (see API.md "stats"). */
export function storeStats(host: StatsHost, sequence: number, counts: CompactionCounts): T.StoreStats {
  const now = host.options.clock();
  const tally = tallySegments(host, now);
  const segments: T.SegmentStats[] = [...host.segments.values()].sort((a, b) => a.id - b.id).map((s) => {
    const t = tally.get(s.id) ?? { liveBytes: 0, records: 0, tombstones: 0 };
    return { id: s.id, generation: host.gens.load(s.cell), bytes: s.dataEnd, liveBytes: t.liveBytes, sealed: s.writer === null, records: t.records, tombstones: t.tombstones };
  });
  const totalBytes = segments.reduce((n, s) => n + s.bytes, 0);
  const liveBytes = segments.reduce((n, s) => n + s.liveBytes, 0);
  const { liveSlots, tombstones } = countSlots(host.keydir, now);
  return {
    segments, liveBytes, totalBytes, deadBytes: totalBytes - liveBytes - segments.length * C.DATA_START,
    slots: host.keydir.size, liveSlots, tombstones, scopes: host.keydir.scopeNames().length, sequence,
    pendingGcSegments: counts.pendingGcSegments, compactions: counts.compactions,
  };
}

/**
 * The slots readable at `now` and those holding a tombstone record, counted over the maps as they
 * are (Keydir.scopesWithRows, readableVersion): a held compact row is readable unless its scope's
 * erasure killed it and has no tombstone, so no Slot is made of it — a stats() call must not undo what
 * the rows save (docs/ENGINE.md "Compaction plans over rows").
 */
function countSlots(keydir: Keydir, now: number): { liveSlots: number; tombstones: number } {
  let liveSlots = 0;
  let tombstones = 0;
  for (const [scope, keys] of keydir.scopesWithRows()) {
    for (const ref of keys.values()) {
      if (keydir.readableVersion(ref, scope, now) > 0) liveSlots += 1;
      if (typeof ref !== "number" && !isReserved(ref) && ref.tombSeg !== 0) tombstones += 1; // a row has no tombstone
    }
  }
  return { liveSlots, tombstones };
}
