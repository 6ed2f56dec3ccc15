/**
 * `safeRewrite`: the client-side guard of a write-after-forget from seed note 000, translated to
 * the camelCase API. It works over any object with `read`, `probe` and `write` of the API shapes.
 */
import { HalfReclaimedSlotError } from "../rules/errors.js";
import type { ProbeResult, ReadOptions, ReadResult, ScopeOption, Value, WriteOptions, WriteResult } from "./types.js";

/** What safeRewrite needs from a memory: the three calls of the seed note, in API shapes. */
export interface SafeRewriteMemory {
  /** Engram.read: the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, opts?: ReadOptions): Promise<ReadResult>;
  /** Engram.probe: the value record and the retention record of `key` in exactly `scope`, reported separately. */
  probe(key: string, opts?: ScopeOption): Promise<ProbeResult>;
  /** Engram.write: writes `value` under `key`, resolving with its version and generation once committed. */
  write(key: string, value: Value, opts?: WriteOptions): Promise<WriteResult>;
}

/** Options of safeRewrite: supersede a surviving tombstone explicitly, and the scope of the key. */
export interface SafeRewriteOptions {
  /** Write over a forgotten or half-reclaimed slot, clearing its tombstone (default false: such a slot throws HalfReclaimedSlotError). */
  clearTombstone?: boolean;
  /** The scope of the key (default "global"). */
  scope?: string;
}

/**
 * Writes `value` to `key` unless the slot has a retention record but no value (forgotten or
 * half-reclaimed) and `clearTombstone` is not set, in which case it throws HalfReclaimedSlotError.
 * Every write it makes is a compare-and-set on what the probe saw (its live version, or none).
 */
export async function safeRewrite(
  memory: SafeRewriteMemory,
  key: string,
  value: Value,
  options: SafeRewriteOptions = {},
): Promise<WriteResult> {
  const clearTombstone = options.clearTombstone === true;
  const scoped = options.scope === undefined ? {} : { scope: options.scope };
  const probe = await memory.probe(key, scoped);
  if (probe.valuePresent) {
    // Normal overwrite path; no tombstone involved.
    return memory.write(key, value, { ...scoped, clearTombstone: false, expectedVersion: probe.version });
  }
  // Only a killed value (forgotten, or reclaimed with its retention record surviving) is refused:
  // after an explicit undelete ("absent") or a mere expiry ("expired") no kill governs the slot,
  // so a plain compare-and-set write on "no live value" is safe (issue 9, defect 14).
  const killed = probe.retentionPresent && (probe.state === "tombstoned" || probe.state === "reclaimed");
  if (killed && !clearTombstone) {
    // Value gone, retention record (version / tombstone) survives: a plain re-write could be swept
    // by the next GC pass that the old tombstone still governs.
    throw new HalfReclaimedSlotError(key, probe.version, probe.tombstoneSeq);
  }
  if (killed) {
    // Explicit undelete: bump the generation above the tombstone in the same write. The seed
    // passes the probed version as its CAS token; in this API `expectedVersion` is compared with
    // the slot's *live* version, which a forgotten slot does not have, so the translation of
    // "the slot is still as probed" is `null` ("still no live value"): a writer that slipped in
    // between the probe and this write turns it into VERSION_CONFLICT instead of being clobbered.
    return memory.write(key, value, { ...scoped, clearTombstone: true, expectedVersion: null });
  }
  // Fully absent: both records gone, a fresh write.
  return memory.write(key, value, { ...scoped, clearTombstone: false, expectedVersion: null });
}
