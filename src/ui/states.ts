/**
 * The one-line explanation of each of probe()'s five states, shown by the inspector beside a
 * key's state. They restate API.md's definitions in words a person debugging an agent can use.
 */
import type { SlotState } from "../types.js";

/** What each probe state means, one sentence each. */
export const STATE_EXPLANATIONS: Readonly<Record<SlotState, string>> = {
  live: "A readable value: its value record is on disk and no tombstone covers it.",
  tombstoned:
    "Forgotten: the tombstone is committed and reads return nothing, but the value bytes are still in a segment file until GC or compaction reclaims them.",
  reclaimed:
    "The value bytes are gone from every segment file while the retention record (version, generation, tombstone) survives, so versions are never reused: the seed-000 half-reclaimed slot.",
  expired: "Its TTL has passed: reads return nothing, and the value record stays on disk until GC drops it.",
  absent: "Neither a value nor a retention record exists here: never written in this scope, or its retention window has ended.",
};
