/**
 * Deciding mutations: one path for a single write or forget and for every op of a batch. A plan
 * decides each op against the state the earlier ops of the same plan leave — each decided op is
 * recorded at once as its slot's intent (intents.ts), which the plan's later ops read like any
 * queued state, and which the plan retracts should it not be queued — encodes its record, and
 * collects what the store must apply once the group commits. Nothing here touches the keydir,
 * the log or the sequence: the store commits a plan (append, advance the sequence by exactly the
 * plan's records) and applies it through the callback it passes to applyRun.
 */
import * as C from "../segments/constants.js";
import { assert, elementAt } from "../rules/assert.js";
import { InvalidArgumentError, TombstonedSlotError, VersionConflictError } from "../rules/errors.js";
import { BATCH_BYTES_MAX } from "../rules/args.js";
import { RecordArena, unsafeArenaForTests, type RecordInput } from "../segments/record.js";
import { writeRecordSums } from "../segments/checksum.js";
import { batchCommitInput } from "../segments/record-kinds.js";
import type { Logical } from "./intents.js";
import { isReserved, type Location, type SlotRef } from "./keydir.js";
import type { ResolvedOptions } from "./options.js";
import { matchScopeRule } from "../rules/scope-rules.js";
import type * as T from "../rules/types.js";

/** What a plan reads from the store. */
export interface BatchHost {
  readonly options: Pick<ResolvedOptions, "tombstoneWrites" | "scopeRules" | "ttlMs">;
  /**
   * The state a mutation of (scope, key) is decided against: queued intents over the keydir. With
   * `reserve`, a name the keydir does not hold may get a reserved slot (Keydir.reserveFor), which
   * foundSlot() then answers and the plan applies or takes back (unreserve).
   */
  logical(scope: string, key: string, now: number, reserve?: boolean): Logical;
  /** Records `state` as the intent of (scope, key) (Intents.replace); returns the one it replaced. */
  intend(scope: string, key: string, state: Logical): Logical | undefined;
  /** intend() for a name the last logical() call found no intent for (Intents.add): replaces none. */
  intendNew(scope: string, key: string, state: Logical): undefined;
  /** Undoes intend(scope, key, state), which returned `replaced` (Intents.restore). */
  unintend(scope: string, key: string, replaced: Logical | undefined, state: Logical): void;
  /** What the last logical() call found in the keydir: the slot, undefined (absent), null (not asked). */
  foundSlot(): SlotRef | undefined | null;
  /** Takes back a slot or row reserved for (scope, key) by this plan's decision (Keydir.unreserve): the plan will not be applied. */
  unreserve(slot: SlotRef, scope: string, key: string): void;
  /** The keydir's count of slots made or dropped (Keydir.changes). */
  keydirChanges(): number;
  /** Encodes one record (the store's value limit, and its round-trip check under tests), into `arena` when given. */
  encode(r: RecordInput, arena?: RecordArena): Buffer;
  /** encode() for a PUT or TOMBSTONE whose scope and key rules/args.ts already checked (segments/record.ts encodeNamedRecord). */
  encodeNamed(type: C.RecordTypeValue, flags: number, seq: number, generation: number, expiresAt: number, scope: string, key: string, value: string | Uint8Array | undefined, arena?: RecordArena): Buffer;
  /** encodeNamed() into a batch's deferring arena with no Buffer per record (segments/record.ts encodeNamedInto): returns the record's length. */
  encodeNamedInto(arena: RecordArena, type: C.RecordTypeValue, flags: number, seq: number, generation: number, expiresAt: number, scope: string, key: string, value: string | Uint8Array | undefined): number;
}

/**
 * One decided PUT or TOMBSTONE, as the store applies it once committed; it is also the state the
 * op leaves its slot in, as later mutations see it (its Logical fields: one object per op, not two).
 * `seq` is the op's record's sequence and `generation` the slot's (PUT: the generation written,
 * TOMBSTONE: the generation killed) in both roles.
 */
export interface PlannedOp extends Logical {
  readonly kind: "put" | "forget";
  readonly scope: string;
  readonly key: string;
  /** PUT: the expiry (ms, 0 = never). TOMBSTONE: the version it kills. */
  readonly expiresAt: number;
  /**
   * The keydir's slot its decision found (undefined: the name was absent there; a reserved slot
   * or row: absent, the one made for it at the decision; a held compact row's number: the name's
   * row, which the apply overwrites in place), valid while the keydir's `changes` equal the plan's
   * `keydirMark`; null when the decision did not ask the keydir.
   */
  readonly slot: SlotRef | undefined | null;
}

/** A write's arguments, already checked (rules/args.ts). */
export interface WriteOp {
  scope: string;
  key: string;
  value: string | Uint8Array;
  expected: number | null | undefined;
  clearTombstone: boolean;
  ttlMs: number | null | undefined;
}

/**
 * The generation a write of `key` will carry, decided against its logical state `before`; throws
 * VersionConflictError on a failed compare-and-set and TombstonedSlotError when a tombstone must
 * be cleared explicitly (`tombstoneWrites: "require-clear"`).
 */
export function decideWrite(tombstoneWrites: ResolvedOptions["tombstoneWrites"], key: string, before: Logical, expected: number | null | undefined, clear: boolean): number {
  if (expected !== undefined && expected !== before.version) throw new VersionConflictError(expected, before.version, key);
  if (!before.tombstoned) return Math.max(before.generation, 1);
  if (tombstoneWrites === "require-clear" && !clear) throw new TombstonedSlotError(key, before.killSeq);
  return before.generation + 1;
}

/** The expiry of a write in `scope` at `now` (0 = never): its own ttl, else its scope rule's, else the store's. */
export function expiryFor(options: BatchHost["options"], scope: string, ttlMs: number | null | undefined, now: number): number {
  let ttl = ttlMs;
  if (ttl === undefined) {
    const rule = matchScopeRule(options.scopeRules, scope);
    ttl = rule?.ttlMs !== undefined ? rule.ttlMs : options.ttlMs;
  }
  return ttl === null ? 0 : now + ttl;
}

/**
 * Each host's last sealed batch, in record bytes: the next batch's arena starts with a chunk that
 * size, so a batch like the one before takes one chunk (one run to hash, note and write) instead
 * of doubling through seven. Only the chunking follows from it, never a byte of any record.
 */
const lastBatchBytes = new WeakMap<BatchHost, number>();

/** Makes the next batch of `host` start its arena at the smallest chunk, as every batch did before bulk-9 (test/bulk-arena.test.ts compares the two). */
export function forgetBatchBytes(host: BatchHost): void {
  lastBatchBytes.delete(host);
}

/** The arrays of a plan with no op yet: shared, never written (push replaces each one before it grows). */
const EMPTY = Object.freeze([]) as unknown as never[];

/** Decides ops in order, encodes their records, and (for a batch) seals them with a BATCH_COMMIT. */
export class BatchPlan {
  /**
   * The plan's records as pieces laid back to back: a lone op's one record; once a batch is
   * sealed, its arena's runs (each holding several whole records, no Buffer per record).
   */
  records: Buffer[] = EMPTY;
  /**
   * Each record's length, in order (ops, then a batch's BATCH_COMMIT): where each lies in `records`.
   * This array and the next three are made by the first op at its size (push): the first push
   * into an empty array reserves 17 slots, ~150 bytes each, which a lone write never uses.
   */
  lengths: number[] = EMPTY;
  seqs: number[] = EMPTY;
  ops: PlannedOp[] = EMPTY;
  /**
   * The intent each op replaced when it was recorded (push), by op index: what retract() restores.
   * The intents are the plan's overlay: no map of its own per batch, and no second pass to queue them.
   */
  private replaced: Array<Logical | undefined> = EMPTY;
  /** The plan's intents were retracted: it is not queued and takes no more ops. */
  private retracted = false;
  private readonly flags: number;
  /** A batch's records are carved from one arena (contiguous: hashed and written as a few runs); a lone op's record is allocated alone. */
  private readonly arena: RecordArena | undefined;
  private bytes = 0;
  private sealed = false;
  /** The last sequence the plan took (the store's sequence before it, until the first op). */
  seq: number;
  /**
   * The keydir's `changes` when the ops' slots were found (after the last decision; the store
   * moves it by the slots it makes for them while applying): while the keydir still says this,
   * each op's `slot` is what the keydir holds for its name.
   */
  keydirMark = -1;
  /** The slot the last state() found in the keydir (see PlannedOp.slot). */
  private found: SlotRef | undefined | null = null;
  /** The name the last state() was asked for (what `found` is for). */
  private foundScope = "";
  private foundKey = "";

  /**
   * A plan whose first record takes sequence `first` (the store's nextSeq()). `inBatch` marks its
   * records RF_IN_BATCH, bounds their bytes by BATCH_BYTES_MAX and wants seal() before commit.
   */
  constructor(private readonly host: BatchHost, first: number, private readonly now: number, readonly inBatch: boolean) {
    this.seq = first - 1;
    this.flags = inBatch ? C.RF_IN_BATCH : 0;
    this.arena = inBatch ? new RecordArena(true, lastBatchBytes.get(host)) : undefined; // sums written by seal(), in one pass
  }

  /** The state (scope, key) is decided against: the store's logical state, which holds this plan's earlier ops as intents. */
  private state(scope: string, key: string): Logical {
    assert(!this.retracted, "a retracted plan decides nothing");
    const state = this.host.logical(scope, key, this.now, this.inBatch); // a batch's new names get reserved slots
    this.found = this.host.foundSlot();
    this.foundScope = scope;
    this.foundKey = key;
    this.keydirMark = this.host.keydirChanges(); // deferred slots built by this decision are counted
    return state;
  }

  /**
   * Encodes a decided op's record: a batch's into its arena (only the length kept), a lone op's
   * alone (its one piece). Returns the record's length.
   */
  private encodeOp(type: C.RecordTypeValue, seq: number, generation: number, expiresAt: number, scope: string, key: string, value: string | Uint8Array | undefined): number {
    if (this.arena !== undefined) return this.host.encodeNamedInto(this.arena, type, this.flags, seq, generation, expiresAt, scope, key, value);
    const record = this.host.encodeNamed(type, this.flags, seq, generation, expiresAt, scope, key, value);
    assert(this.records.length === 0, "a plan outside a batch holds one record");
    this.records = [record]; // at its size, as push() makes the other arrays
    return record.length;
  }

  /** Takes a decided op and its record's length into the plan (a batch's bytes bounded), and its state as the slot's intent, which later ops read. */
  private push(op: PlannedOp, length: number): void {
    assert(!this.sealed, "no op joins a sealed plan");
    assert(this.inBatch || this.ops.length === 0, "a plan outside a batch holds one op");
    this.bytes += length;
    if (this.inBatch && this.bytes > BATCH_BYTES_MAX) throw new InvalidArgumentError(`batch exceeds ${BATCH_BYTES_MAX} bytes; split it`);
    // A planned op is the state it leaves. A decision that asked the keydir found no intent (state(): nothing recorded since), so it replaces none.
    const replaced = op.slot === null ? this.host.intend(op.scope, op.key, op) : this.host.intendNew(op.scope, op.key, op);
    if (this.ops.length === 0) {
      this.lengths = [length];
      this.seqs = [op.seq];
      this.ops = [op];
      this.replaced = [replaced];
    } else {
      this.lengths.push(length);
      this.seqs.push(op.seq);
      this.ops.push(op);
      this.replaced.push(replaced);
    }
    assert(this.replaced.length === this.ops.length, "every op's intent is recorded with it");
  }

  /**
   * Takes back every intent this plan recorded, newest first, leaving the intents as they were
   * before its first op, and every slot its decisions reserved: called when the plan will not be
   * queued (an op of the batch refused, or the log refused the plan). Idempotent.
   */
  retract(): void {
    if (this.retracted) return;
    this.retracted = true;
    this.dropFound(); // a refused decision's own reservation: it took no op
    for (let i = this.ops.length - 1; i >= 0; i--) {
      const op = this.ops[i] as PlannedOp; // in bounds: 0 <= i < ops.length
      this.host.unintend(op.scope, op.key, this.replaced[i], op);
      if (op.slot !== null && op.slot !== undefined && isReserved(op.slot)) this.host.unreserve(op.slot, op.scope, op.key);
    }
  }

  /** Takes back the slot the last decision reserved, if it did: that decision took no op. */
  private dropFound(): void {
    const found = this.found;
    if (found !== null && found !== undefined && isReserved(found)) this.host.unreserve(found, this.foundScope, this.foundKey);
  }

  /** Decides and encodes a write; throws (and the plan takes nothing) when it conflicts. */
  write(w: WriteOp): T.WriteResult {
    return this.writeOf(w.scope, w.key, w.value, w.expected, w.clearTombstone, w.ttlMs);
  }

  /** write() from the checked arguments themselves (a batch's ops: no WriteOp object per op). */
  writeOf(scope: string, key: string, value: string | Uint8Array, expected: number | null | undefined, clearTombstone: boolean, ttlMs: number | null | undefined): T.WriteResult {
    const before = this.state(scope, key);
    const generation = decideWrite(this.host.options.tombstoneWrites, key, before, expected, clearTombstone);
    const expiresAt = expiryFor(this.host.options, scope, ttlMs, this.now);
    const seq = this.seq + 1;
    const length = this.encodeOp(C.RecordType.PUT, seq, generation, expiresAt, scope, key, value);
    this.seq = seq;
    this.push({ kind: "put", scope, key, expiresAt, slot: this.found, seq, live: true, version: seq, lastVersion: seq, generation, tombstoned: false, killSeq: before.killSeq, exists: true }, length);
    return { ok: true, version: seq, generation };
  }

  /** Decides and encodes a forget; one with nothing live takes no record and answers null. */
  forget(scope: string, key: string): T.ForgetResult {
    const before = this.state(scope, key);
    if (!before.live) {
      this.dropFound(); // no record: a slot reserved for an absent name goes back at once
      return { ok: true, tombstoneSeq: null, generation: before.exists ? before.generation : null };
    }
    const seq = this.seq + 1;
    const killed = before.version as number;
    // A TOMBSTONE's fields: the killed generation in `generation`, the killed version in `expires at` (record-kinds.ts tombstoneInput).
    const length = this.encodeOp(C.RecordType.TOMBSTONE, seq, before.generation, killed, scope, key, undefined);
    this.seq = seq;
    this.push({ kind: "forget", scope, key, expiresAt: killed, slot: this.found, seq, live: false, version: null, lastVersion: before.lastVersion, generation: before.generation, tombstoned: true, killSeq: seq, exists: true }, length);
    return { ok: true, tombstoneSeq: seq, generation: before.generation };
  }

  /**
   * Appends the BATCH_COMMIT record that makes a batch count at recovery, and writes every
   * record's checksum (the arena defers them: one copy into the hash module per run of records
   * instead of one per record). Only a sealed plan commits, so no record leaves without its sum.
   */
  seal(): void {
    assert(this.inBatch && !this.sealed && this.ops.length > 0, "only a batch with ops is sealed, once");
    assert(this.records.length === 0, "a batch's records are its arena's runs, taken at seal");
    this.seq += 1;
    this.lengths.push(this.host.encode(batchCommitInput({ seq: this.seq, opCount: this.ops.length }), this.arena).length);
    this.seqs.push(this.seq);
    const runs = (this.arena as RecordArena).runs(); // every record lies in the arena (inBatch), in order
    let bytes = 0;
    for (const run of runs) {
      writeRecordSums(run);
      bytes += run.length;
    }
    assert(bytes === this.bytes + (this.lengths[this.lengths.length - 1] as number), "a batch's runs hold exactly its records");
    lastBatchBytes.set(this.host, bytes + (bytes >>> 3)); // an eighth over: the next batch's records may be a little longer (their sequences)
    this.records = runs;
    this.sealed = true;
    if (unsafeArenaForTests.recycleAtSeal) this.arena?.recycle(); // the twin: its records, still queued, in chunks the pool hands out
  }

  /**
   * The log is done with this plan's records (written and applied: engine/commit.ts
   * LogOp.release): a batch's arena chunks go back to the pool for later batches to fill. The
   * plan's `records` are dropped with them; nothing reads them after this.
   */
  release(): void {
    if (this.arena === undefined || this.arena.isRecycled) return; // a lone op's record, or the twin's early release
    this.records = EMPTY;
    this.arena.recycle();
  }

  /**
   * applyAll() for a plan committed from `offset` of segment `seg`: each op's location follows from
   * its record's length (the records lie back to back, the BATCH_COMMIT last and not applied).
   * One Location object serves every op: `apply` copies its fields and keeps no reference to it.
   */
  applyRun(seg: number, offset: number, apply: (op: PlannedOp, loc: Location) => void): void {
    assert(this.inBatch === this.sealed, "a batch is sealed before it commits");
    assert(this.lengths.length === this.ops.length + (this.sealed ? 1 : 0), "a plan has one record per op, plus a batch's BATCH_COMMIT");
    const loc: Location = { seg, off: offset, len: 0 };
    for (let i = 0; i < this.ops.length; i++) {
      loc.len = this.lengths[i] as number; // in bounds: i < ops.length < lengths.length
      apply(this.ops[i] as PlannedOp, loc);
      loc.off += loc.len;
    }
  }

  /** Applies every committed op in record order, op i at `locs[i]` (the BATCH_COMMIT's location is not applied). */
  applyAll(locs: Location[], apply: (op: PlannedOp, loc: Location) => void): void {
    assert(this.inBatch === this.sealed, "a batch is sealed before it commits");
    assert(locs.length === this.ops.length + (this.sealed ? 1 : 0), "a plan commits one location per op, plus a batch's BATCH_COMMIT");
    for (let i = 0; i < this.ops.length; i++) apply(elementAt(this.ops, i, "an op per index"), elementAt(locs, i, "a location per op"));
  }
}
