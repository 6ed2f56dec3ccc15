/**
 * The kill campaign's shared vocabulary (test/kill-campaign.test.ts and its child,
 * test/helpers/campaign-child.ts): configuration, scopes, keys, operations and store options.
 */

/** What the parent hands the child. */
export interface CampaignConfig {
  dir: string;
  mode: "copy-on-write" | "in-place";
  requireClear: boolean;
  seed: number;
  run: number;
}

/** The scopes the campaign uses: user:a/s:1 is inside user:a, so erasing user:a erases both. */
export const SCOPES = ["global", "user:a", "user:a/s:1", "user:b"] as const;
/** Keys per scope. */
export const KEYS = 12;

/** A campaign operation as announced. */
export type CampaignOp =
  | { op: "write"; scope: string; key: string; value: string; clear: boolean }
  | { op: "forget"; scope: string; key: string }
  | { op: "undelete"; scope: string; key: string }
  | { op: "forgetScope"; scope: string; eager: boolean }
  | { op: "gc" }
  | { op: "read"; scope: string; key: string };

/** Options both the child and the parent's checker open the store with. */
export function campaignOptions(c: CampaignConfig, child: boolean) {
  return {
    segmentBytes: 4096,
    durability: "sync" as const,
    retention: { tombstoneRetentionMs: 0 },
    tombstoneWrites: c.requireClear ? ("require-clear" as const) : ("auto-clear" as const),
    compaction: { mode: c.mode, workers: child ? 1 : 0, auto: child, garbageRatio: 0.3 },
    ...(child ? { faults: { pauseAt: ["read:after-authorize" as const] } } : {}),
  };
}

