/**
 * stats(): per-segment and store totals from one pass over the keydir (the compaction plan's
 * tally, compaction-plan.ts) and one over the slots. Reads only; changes nothing.
 */
import * as C from "../segments/constants.js";
import { tallySegments, type PlanHost } from "./compaction-plan.js";
import type { GenerationTable } from "./generations.js";
import { isReadable } from "./keydir.js";
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
  let liveSlots = 0;
  let tombstones = 0;
  for (const slot of host.keydir.all()) {
    if (isReadable(host.keydir, slot, now)) liveSlots += 1;
    if (slot.tombSeg !== 0) tombstones += 1;
  }
  return {
    segments, liveBytes, totalBytes, deadBytes: totalBytes - liveBytes - segments.length * C.DATA_START,
    slots: host.keydir.size, liveSlots, tombstones, scopes: host.keydir.scopeNames().length, sequence,
    pendingGcSegments: counts.pendingGcSegments, compactions: counts.compactions,
  };
}
