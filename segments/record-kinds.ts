/**
 * The record fields whose meaning depends on the type, named for what they hold (docs/FORMAT.md
 * "Record types"). The codec (record.ts) has one fixed layout with a `generation` and an
 * `expires at` field; three types store something else there:
 *
 * - TOMBSTONE: `generation` = the generation it kills, `expires at` = the version it kills;
 * - CLEAR and SCOPE_ERASE: `expires at` = the commit time (ms since the epoch);
 * - BATCH_COMMIT: `generation` = how many RF_IN_BATCH records it commits.
 *
 * Code that builds or reads those records goes through the builders and readers here, so that it
 * never reads `expiresAt` as a version or `generation` as a count by accident. The bytes on disk
 * are exactly what the codec writes from the plain fields.
 */
import { assert, fail } from "../rules/assert.js";
import * as C from "./constants.js";
import type { DecodedRecord, RecordInput } from "./record.js";

/** A TOMBSTONE of (scope, key) that kills version `killedVersion` of generation `killedGeneration`. */
export function tombstoneInput(f: { flags?: number; seq: number; killedGeneration: number; killedVersion: number; scope: string; key: string }): RecordInput {
  return { type: C.RecordType.TOMBSTONE, flags: f.flags ?? 0, seq: f.seq, generation: f.killedGeneration, expiresAt: f.killedVersion, scope: f.scope, key: f.key };
}

/** A CLEAR (undelete) of (scope, key) moving it to `generation`, committed at `committedAt`. */
export function clearInput(f: { seq: number; generation: number; committedAt: number; scope: string; key: string }): RecordInput {
  return { type: C.RecordType.CLEAR, seq: f.seq, generation: f.generation, expiresAt: f.committedAt, scope: f.scope, key: f.key };
}

/** A SCOPE_ERASE of `scope` committed at `committedAt`; `list` is an encoded erase list (erase-list.ts). */
export function scopeEraseInput(f: { flags?: number; seq: number; committedAt: number; scope: string; list: Uint8Array }): RecordInput {
  return { type: C.RecordType.SCOPE_ERASE, flags: f.flags ?? 0, seq: f.seq, generation: 0, expiresAt: f.committedAt, scope: f.scope, key: "", value: f.list };
}

/** The BATCH_COMMIT that commits the `opCount` RF_IN_BATCH records before it. */
export function batchCommitInput(f: { seq: number; opCount: number }): RecordInput {
  assert(Number.isSafeInteger(f.opCount) && f.opCount > 0, `a batch commit counts at least one record (${f.opCount})`);
  return { type: C.RecordType.BATCH_COMMIT, seq: f.seq, generation: f.opCount, scope: C.ROOT_SCOPE, key: "" };
}

/** A TOMBSTONE's killed version (its `expires at` field). */
export function killedVersionOf(r: Pick<DecodedRecord, "type" | "expiresAt">): number {
  if (r.type !== C.RecordType.TOMBSTONE) fail(`only a TOMBSTONE kills a version (type ${r.type})`);
  return r.expiresAt;
}

/** A CLEAR's or SCOPE_ERASE's commit time (its `expires at` field). */
export function committedAtOf(r: Pick<DecodedRecord, "type" | "expiresAt">): number {
  if (r.type !== C.RecordType.CLEAR && r.type !== C.RecordType.SCOPE_ERASE) fail(`only CLEAR and SCOPE_ERASE carry a commit time (type ${r.type})`);
  return r.expiresAt;
}

/** A BATCH_COMMIT's count of the records it commits (its `generation` field). */
export function batchOpCountOf(r: DecodedRecord): number {
  if (r.type !== C.RecordType.BATCH_COMMIT) fail(`only a BATCH_COMMIT counts records (type ${r.type})`);
  return r.generation;
}
