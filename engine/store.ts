/**
 * The store: one directory, one main thread that owns the keydir and every write, compaction in
 * workers. This file holds the operations of API.md; the commit path is commit.ts, recovery is
 * recovery.ts, deciding mutations is batch-plan.ts, the read protocol is reads.ts, compaction
 * is compactor.ts and stats() is stats.ts.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../segments/constants.js";
import { choiceOf } from "../segments/header.js";
import { formatVersionWritten } from "../segments/version-written.js";
import { assert, DEBUG_CHECKS, elementAt } from "../rules/assert.js";
import { writeManifest } from "./manifest.js";
import { initChecksum, initRecordSums } from "../segments/checksum.js";
import { InvalidArgumentError, IoError, StoreClosedError, LimitExceededError } from "../rules/errors.js";
import { createSegmentFile } from "../segments/create.js";
import { DIR_MODE, segmentFileName } from "../segments/file-names.js";
import { unlinkQuietly } from "../segments/io.js";
import { asIoError, backgroundCloses, makeDir, nextTurn, registerFaultTable } from "../segments/io.js";
import { chunkEraseList, encodeEraseList, type ErasedSlot } from "../segments/erase-list.js";
import { parentScope, scopeLineage, scopeWithin } from "../rules/names.js";
import { valueRecordLive } from "./gc-policy.js";
import { decodeRecord, encodeNamedInto, encodeNamedRecord, encodeRecord, isRecord, type RecordArena, type RecordInput } from "../segments/record.js";
import { SegmentWriter, ZERO_STEP_BYTES } from "../segments/writer.js";
import { batchCommitInput, clearInput, scopeEraseInput } from "../segments/record-kinds.js";
import * as A from "../rules/args.js";
import { BATCH_ROW_NAMES, misspeltName, throwMisspelt } from "../rules/option-names.js";
import { CommitLog } from "./commit.js";
import { Compactor } from "./compactor.js";
import { createFaultBuffer, FaultController } from "./faults.js";
import { GenerationTable } from "./generations.js";
import { Intents, type Logical } from "./intents.js";
import { applyClear, applyErase, applyPut, applyTombstone, isExpired, isReadable, isReserved, isTombstoned, putSurvives, type Keydir, type Location, type Slot, type SlotRef } from "./keydir.js";
import { lockDirectory, type DirLock, type LockNote } from "./lock.js";
import { resolveOptions, type ResolvedOptions } from "./options.js";
import { matchScopeRule } from "../rules/scope-rules.js";
import { materialize, type ReadFound } from "./reads.js";
import { recover, type Recovered } from "./recovery.js";
import { ValueCache } from "./value-cache.js";
import { BlockCache } from "./block-cache.js";
import { backupStore } from "./backup.js";
import { exportEntries } from "./export.js";
import { Segment } from "./segment.js";
import { BatchPlan, type PlannedOp, type WriteOp } from "./batch-plan.js";
import { storeStats } from "./stats.js";
import { verifySegments } from "./verify.js";
import { HINT_VERSION, HintBuilder, hintVersionWritten } from "../segments/hint.js";
import { bootId } from "../segments/boot-id.js";
import { encodeActiveHint, sealedHintsWritten, unsafeActiveHintForTests, unsafeSealedHintForTests, writeEncodedHint, writeSealedHintAsync, writeStampedHint, type EncodedHint } from "./hints.js";
import type * as T from "../rules/types.js";

/** Paired check: what encodeRecord encoded decodes back to the same record. */
function checkEncoded(bytes: Buffer, r: RecordInput): void {
  const back = decodeRecord(bytes, 0, bytes.length);
  assert(isRecord(back), `encoded record decodes (${String(back)})`);
  assert(back.length === bytes.length && back.type === r.type && back.seq === r.seq && back.scope === r.scope && back.key === r.key, "encoded record decodes to its type, seq, scope and key");
}

/** An open engram directory. */
export class Store implements T.Backend {
  readonly dir: string;
  /** An embedded store always holds its directory. */
  readonly role = "owner" as const;
  readonly segmentsDir: string;
  readonly options: ResolvedOptions;
  readonly faults: FaultController;
  readonly keydir: Keydir;
  readonly segments: Map<number, Segment>;
  readonly gens: GenerationTable;
  readonly log: CommitLog;
  readonly compactor: Compactor;
  /** Hot values; null when off (cacheBytes 0, or unsafe.skipReadValidation). */
  readonly cache: ValueCache | null;
  /** Sealed segments' blocks; null when off (blockCacheBytes 0, or unsafe.skipReadValidation). */
  readonly blocks: BlockCache | null;
  private readonly lock: DirLock;
  private readonly intents = new Intents();
  private seq: number;
  /** The highest sequence ever taken by advanceSeq (the paired check of nextSeq). */
  private seqTaken = 0;
  private nextId: number;
  private closing: Promise<void> | null = null;
  /** close() finished: everything is released. */
  private closed = false;
  private syncTimer: NodeJS.Timeout | null = null;
  /**
   * What the open found: segments loaded from hint files out of all, torn tails cut, journals
   * replayed, hinted tails found all zeros (not scanned), boot-stamped hints refused as written
   * under another boot (those segments scanned).
   */
  readonly opened: { hinted: number; segments: number; tornTails: number; journalsReplayed: number; zeroTails: number; bootStampsRefused: number };

  private constructor(dir: string, options: ResolvedOptions, lock: DirLock, gens: GenerationTable) {
    this.dir = dir;
    this.segmentsDir = path.join(dir, "segments");
    this.options = options;
    this.lock = lock;
    this.gens = gens;
    const faultsOn = options.faultsOn || options.pauseAt.length > 0 || options.crashAt !== null;
    const faultBuffer = faultsOn ? createFaultBuffer(options.pauseAt, options.crashAt, options.failAt, options.crashAfter) : null;
    this.faults = new FaultController(faultBuffer);
    // "adaptive": a pass over the keys in order (a read-all) only marks on first misses, random
    // gets cache as before (engine/value-cache.ts Admission; docs/performance-history.md, reads-8).
    this.cache = options.cacheBytes > 0 && !options.unsafeSkipReadValidation ? new ValueCache(options.cacheBytes, true, "adaptive") : null;
    this.blocks = options.blockCacheBytes > 0 && !options.unsafeSkipReadValidation ? new BlockCache(options.blockCacheBytes) : null;
    registerFaultTable(this.segmentsDir, faultBuffer);
    let rec: ReturnType<typeof recover>;
    try {
      rec = recover(this.segmentsDir, gens, options.clock());
    } catch (err) {
      registerFaultTable(this.segmentsDir, null);
      throw err;
    }
    this.keydir = rec.keydir;
    this.opened = { hinted: rec.hinted, segments: rec.segments.size, tornTails: rec.tornTails, journalsReplayed: rec.journalsReplayed, zeroTails: rec.zeroTails, bootStampsRefused: rec.bootStampsRefused };
    this.segments = rec.segments;
    this.seq = rec.seq;
    this.nextId = rec.maxId + 1;
    let active: Segment;
    try {
      active = rec.active ?? this.createSegment();
      this.listRecovered(rec.manifest);
    } catch (err) {
      // A store that cannot open keeps no descriptor open: neither the segments recovery opened
      // nor the active one (until the twentieth session a failed manifest write leaked them all).
      for (const seg of this.segments.values()) seg.close(gens);
      registerFaultTable(this.segmentsDir, null);
      throw err;
    }
    this.log = new CommitLog(
      {
        durability: options.durability,
        segmentBytes: options.segmentBytes,
        faults: faultBuffer,
        createSegment: () => this.createSegment(),
        onSealed: (seg) => this.writeHintOf(seg),
        onRejected: () => {
          this.intents.clear();
          this.keydir.dropReserved(); // the rejected plans' reserved slots: none of them will be applied
        },
      },
      active,
    );
    this.compactor = new Compactor(this, rec.reclaims);
    this.compactor.loadEstimates(rec.deadBytes);
    if (options.durability === "batch") {
      this.syncTimer = setInterval(() => this.log.backgroundSync(), options.syncIntervalMs);
      this.syncTimer.unref();
    }
  }

  /**
   * After a seal (in the sealing turn): starts the segment's hint's write, best effort (a failed
   * write is dropped), and nudges the compactor once it settles — a pass waits for it before
   * taking the segment (Segment.hintWriting). flush() and close() wait for every such write.
   */
  private writeHintOf(seg: Segment): void {
    const writing = writeSealedHintAsync(this.segmentsDir, seg);
    seg.hintWriting = writing;
    void writing.then(() => {
      seg.hintWriting = null;
      this.compactor.nudge();
    });
  }

  /** At open: rewrites the manifest when it does not name exactly the segments recovery kept (and the next id). */
  private listRecovered(listed: Recovered["manifest"]): void {
    const ids = [...this.segments.keys()].sort((a, b) => a - b);
    if (listed === null || listed.nextId !== this.nextId || listed.ids.length !== ids.length || listed.ids.some((id, i) => id !== ids[i])) this.recordSegments();
  }

  /**
   * Opens (creating if missing) the store in `dir`; throws StoreLockedError when it is open
   * elsewhere. `lockNote` is what DIR/LOCK tells other openers (a sharing owner passes its socket).
   */
  static async open(dir: unknown, options?: T.OpenOptions, lockNote?: LockNote): Promise<Store> {
    if (typeof dir !== "string" || dir.length === 0) throw new InvalidArgumentError("dir must be a non-empty path string");
    const resolved = resolveOptions(options);
    await initChecksum();
    await initRecordSums(); // a batch's sums are written in runs (segments/checksum.ts writeRecordSums)
    makeStoreDir(dir);
    const lock = lockOf(dir, lockNote);
    try {
      const store = new Store(dir, resolved, lock, new GenerationTable());
      store.compactor.opened();
      return store;
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  /**
   * The sequence the next mutation will carry (I7: versions are the store-wide sequence, so they
   * only grow and are never reused). It is taken with advanceSeq once the record is encoded; a
   * mutation refused before that leaves the number unused and the next one gets it.
   */
  private nextSeq(): number {
    const next = this.seq + 1;
    assert(next <= C.SEQ_MAX, "I7: the sequence stays below 2^53"); // constant messages: a template string per call was garbage on every put
    assert(next > this.seqTaken, "I7: the sequence never goes back");
    return next;
  }

  /** Takes every sequence up to `to` (`count` of them, one per record): the only place the sequence moves. */
  private advanceSeq(to: number, count = 1): void {
    // I7: versions are the store-wide sequence, which moves only here and only up.
    assert(to === this.seq + count, "I7: the sequence grows by exactly the records queued");
    assert(to > this.seqTaken && to <= C.SEQ_MAX, "I7: the sequence only grows");
    this.seq = to;
    this.seqTaken = to;
  }

  /** The highest sequence number committed or queued. */
  get sequence(): number {
    return this.seq;
  }

  /**
   * Creates the next segment file and registers it. Throws — leaving no fd, no file and no
   * generation cell behind — when the open-segment limit is reached or the file cannot be made.
   */
  createSegment(): Segment {
    const cell = this.gens.allocate(0);
    if (cell === null) throw new LimitExceededError("too many open segments; run compact() to merge half-dead segments into fewer (copy-on-write mode) and gc() to retire the ones that hold only garbage, or open with a larger segmentBytes so that fewer are made");
    const id = this.allocateId();
    const header = { segmentId: id, generation: 0, headerSeq: 0, flags: 0, createdSeq: this.seq, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 };
    const prealloc = Math.min(this.options.segmentBytes, 8 * 1024 * 1024);
    // sync mode: the first zero step is written at creation (its fdatasync allocates it), not by the first durable put.
    const zeroBytes = this.options.durability === "sync" ? Math.min(ZERO_STEP_BYTES, prealloc - C.DATA_START) : 0;
    let fd: number;
    try {
      fd = createSegmentFile(this.segmentsDir, header, prealloc, zeroBytes);
    } catch (err) {
      this.gens.release(cell);
      throw err;
    }
    const version = formatVersionWritten(); // createSegmentFile wrote its header in it
    const seg = new Segment(id, fd, cell, choiceOf(header, 0, version), C.DATA_START, new SegmentWriter(id, fd, C.DATA_START, prealloc, C.DATA_START + zeroBytes));
    seg.hint = unsafeActiveHintForTests.none ? null : new HintBuilder(version);
    this.segments.set(id, seg);
    try {
      this.recordSegments();
    } catch (err) {
      this.withdrawSegment(seg);
      throw err;
    }
    return seg;
  }

  /**
   * Takes back a segment whose listing failed: unregistered and closed at once; its file (headers
   * only) is unlinked only after a manifest without it is durable, because the failed write may
   * already have named it — a listed file that is missing is corruption at open. If that manifest
   * cannot be written either, the file stays: open adopts it (listed, or id ≥ nextId) as an empty
   * segment, or deletes it once a later manifest's nextId passes it.
   */
  private withdrawSegment(seg: Segment): void {
    this.segments.delete(seg.id);
    seg.close(this.gens);
    try {
      this.recordSegments();
    } catch {
      return; // the first failure is the one the caller reports
    }
    unlinkQuietly(path.join(this.segmentsDir, segmentFileName(seg.id)));
  }

  /**
   * Makes segments/MANIFEST name exactly the segments open now (engine/manifest.ts): after a new
   * segment's file is durable, and before a retired segment's file is unlinked.
   */
  recordSegments(): void {
    writeManifest(this.segmentsDir, { ids: [...this.segments.keys()], nextId: this.nextId });
  }

  /** A fresh segment id. */
  allocateId(): number {
    return this.nextId++;
  }

  /** Throws StoreClosedError once close() began. */
  assertOpen(): void {
    if (this.closing !== null) throw new StoreClosedError();
  }

  /** Retention window of tombstones in `scope`. */
  retentionMsFor(scope: string): number {
    return matchScopeRule(this.options.scopeRules, scope)?.tombstoneRetentionMs ?? this.options.tombstoneRetentionMs;
  }

  /** Encodes one record with the store's value limit (checked by decoding it back under tests). */
  encode(r: RecordInput, arena?: RecordArena): Buffer {
    const bytes = encodeRecord(r, this.options.valueBytesMax, arena);
    if (DEBUG_CHECKS && arena?.defersSums !== true) checkEncoded(bytes, r); // a deferred sum: checked after seal()
    return bytes;
  }

  /**
   * encode() for a plan's PUT or TOMBSTONE whose scope and key rules/args.ts already checked
   * (segments/record.ts encodeNamedRecord); the same round-trip check under tests.
   */
  encodeNamed(type: C.RecordTypeValue, flags: number, seq: number, generation: number, expiresAt: number, scope: string, key: string, value: string | Uint8Array | undefined, arena?: RecordArena): Buffer {
    const bytes = encodeNamedRecord(type, flags, seq, generation, expiresAt, scope, key, value, this.options.valueBytesMax, arena);
    if (DEBUG_CHECKS && arena?.defersSums !== true) checkEncoded(bytes, { type, flags, seq, generation, expiresAt, scope, key, value }); // a deferred sum: checked after seal()
    return bytes;
  }

  /** encodeNamed() into a batch's deferring arena, no Buffer per record (segments/record.ts encodeNamedInto); its sum and decode are checked after seal(). */
  encodeNamedInto(arena: RecordArena, type: C.RecordTypeValue, flags: number, seq: number, generation: number, expiresAt: number, scope: string, key: string, value: string | Uint8Array | undefined): number {
    return encodeNamedInto(arena, type, flags, seq, generation, expiresAt, scope, key, value, this.options.valueBytesMax);
  }

  /**
   * write(): see API.md. Not an async function: with room in the queue the call decides, encodes
   * and queues in the caller's turn and returns the log's own promise, which resolves with the
   * result (no promise layer per call frame); a thrown check becomes a rejection, as before.
   */
  write(key: unknown, value: unknown, options?: unknown): Promise<T.WriteResult> {
    try {
      this.assertOpen();
      const o = A.optsOf(options, "write");
      const w: WriteOp = { scope: A.scopeOf(o), key: A.keyOf(key), value: A.valueOf(value), expected: A.expectedVersionOf(o), clearTombstone: A.boolOf(o, "clearTombstone", false), ttlMs: A.ttlOf(o) };
      const room = this.admitted();
      if (room !== null) return room.then(() => this.queueWrite(w)); // only when the queue is full: decisions stay in the caller's turn
      return this.queueWrite(w);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Decides and queues a checked write; resolves with its result once committed. Throws (queuing nothing) on a conflict. */
  private queueWrite(w: WriteOp): Promise<T.WriteResult> {
    const plan = new BatchPlan(this, this.nextSeq(), this.options.clock(), false);
    const result = plan.write(w);
    return this.queuePlan(plan, result);
  }

  /**
   * Commits a decided plan as one group. State is set only once the log took it (append throws,
   * queuing nothing, when it cannot); the sequence moves by exactly the plan's records (I7); each
   * op's state becomes the intent later mutations are decided against. Resolves once durable.
   */
  private commitPlan(plan: BatchPlan): Promise<void> {
    return this.queuePlan(plan, undefined);
  }

  /** commitPlan, resolving with `value` once the plan is committed. */
  private queuePlan<R>(plan: BatchPlan, value: R): Promise<R> {
    let done: Promise<R>;
    try {
      done = this.log.appendWith({ records: plan.records, lengths: plan.lengths, seqs: plan.seqs, apply: (locs) => plan.applyAll(locs, this.applyOp), applyRun: (seg, offset) => plan.applyRun(seg, offset, (op, loc) => this.applyPlanned(plan, op, loc)), release: () => plan.release() }, value);
    } catch (err) {
      plan.retract(); // the log took nothing: the intents its decisions recorded go too
      throw err;
    }
    this.advanceSeq(plan.seq, plan.seqs.length);
    return done; // each op's intent was recorded as it was decided (BatchPlan.push)
  }

  /** Applies one committed PUT or TOMBSTONE of a plan at its location. */
  private readonly applyOp = (op: PlannedOp, loc: Location): void => {
    const slot = this.keydir.ensureSlot(op.scope, op.key);
    if (op.kind === "put") this.applyPut(slot, op.seq, op.generation, op.expiresAt, loc);
    else this.applyTombstone(slot, op.seq, op.generation, op.expiresAt, loc);
  };

  /** applyOp for an op of `plan`, on the slot its decision found when the keydir has not moved since (slotForOp). */
  private applyPlanned(plan: BatchPlan, op: PlannedOp, loc: Location): void {
    if (typeof op.slot === "number" && this.keydir.changes === plan.keydirMark && this.applyPutToRow(op, op.slot, loc)) return;
    const slot = this.slotForOp(plan, op);
    if (op.kind === "put") this.applyPut(slot, op.seq, op.generation, op.expiresAt, loc);
    else this.applyTombstone(slot, op.seq, op.generation, op.expiresAt, loc);
  }

  /**
   * applyPut for a PUT whose decision found compact row `row` (engine/compact-slots.ts), the
   * keydir unchanged since: a reserved row is held, a held one overwritten, and no Slot is made
   * (a bulk load's new names, and a later batch overwriting them). The value an overwrite
   * replaces counts as dead, as applyPut's does. False, changing nothing, when the row cannot hold
   * the result (Keydir.holdRow).
   */
  private applyPutToRow(op: PlannedOp, row: number, loc: Location): boolean {
    if (DEBUG_CHECKS) assert(this.keydir.refOf(op.scope, op.key) === row, "a row applied to is the one the keydir holds for its name");
    if (op.kind !== "put" || !this.keydir.holdRow(row, op.seq, op.generation, op.expiresAt, loc)) return false;
    if (this.keydir.diedSeg !== 0) this.valueDiedAt(this.keydir.diedSeg, this.keydir.diedLen);
    this.segments.get(loc.seg)?.scopes.add(op.scope);
    this.intents.settle(op.scope, op.key, op.seq);
    return true;
  }

  /**
   * The keydir's slot for a committed op of `plan`. While the keydir has made or dropped no slot
   * since the plan's decisions (its `changes` equal the plan's mark), the slot a decision found is
   * still the one held, and a name found absent is still absent (nothing deferred for it either:
   * the decision's lookup asked the source): no lookup, or a creation without one. Otherwise, or
   * when the decision did not ask the keydir, ensureSlot. The slots made here move the mark along.
   */
  private slotForOp(plan: BatchPlan, op: PlannedOp): Slot {
    const inStep = this.keydir.changes === plan.keydirMark;
    let slot: Slot;
    if (inStep && op.slot !== null && op.slot !== undefined && typeof op.slot !== "number") {
      slot = op.slot;
      if (isReserved(slot)) this.keydir.admit(slot); // reserved by the decision: made real with no map operation
    } else {
      slot = inStep && op.slot === undefined ? this.keydir.createAbsent(op.scope, op.key) : this.keydir.ensureSlot(op.scope, op.key);
      if (inStep) plan.keydirMark = this.keydir.changes; // only this op's own name moved
    }
    if (DEBUG_CHECKS) assert(this.keydir.get(op.scope, op.key) === slot, "an op applies to the slot the keydir holds for its name");
    return slot;
  }

  /** null when the commit queue has room; otherwise resolves once it has (backpressure), rejecting after close(). */
  private admitted(): Promise<void> | null {
    const wait = this.log.admission();
    if (wait === null) return null;
    return wait.then(() => this.assertOpen());
  }

  /**
   * Just before the erasure of `scope` applies: counts as dead, in their segments, the value
   * records it kills — those of its kill list `killed` that the GC rule holds live now (a value
   * already killed, or expired past its window, was counted when it died). True when that is the
   * erasure's whole effect on the dead bytes; false, counting nothing, when it supersedes an
   * erasure record of `scope` or of a descendant: that record and what its kill kept alive may
   * die too, which only a recount of every segment finds (Compactor.recount). Until the
   * thirty-fourth session every erasure recounted: a walk of every name (~7 ms at 200k keys,
   * 30–80 ms at 2M) for an erasure of a few names (test/plan-tally.test.ts).
   */
  private erasedValuesDie(scope: string, killed: readonly ErasedSlot[], now: number): boolean {
    for (const erased of this.keydir.erases.keys()) if (scopeWithin(erased, scope)) return false;
    for (const k of killed) {
      const slot = this.keydir.get(k.scope, k.key); // a name of the subtree: its row made a Slot, as slotsIn's decision did
      if (slot !== undefined && valueRecordLive(this.keydir, slot, now, this.retentionMsFor(slot.scope))) this.valueDied(slot);
    }
    return true;
  }

  /** Counts the bytes of a slot's current value record as dead in its segment. */
  private valueDied(slot: Slot): void {
    if (slot.seg !== 0) this.valueDiedAt(slot.seg, slot.len);
  }

  /** Counts a value record of `len` bytes in segment `segId` as dead. */
  private valueDiedAt(segId: number, len: number): void {
    const seg = this.segments.get(segId);
    if (seg === undefined) return;
    seg.deadBytes += len;
    this.compactor.noteGarbage(seg);
  }

  /**
   * Applies a committed PUT: the value it replaces counts as dead, its scope is noted on its
   * segment, its intent settles. A value that expires may die by time alone, which nothing else
   * reports: the compactor notes when (Compactor.noteExpiry).
   */
  private applyPut(slot: Slot, seq: number, generation: number, expiresAt: number, loc: Location): void {
    if (seq > slot.putSeq) this.valueDied(slot);
    applyPut(slot, seq, generation, expiresAt, loc);
    if (expiresAt !== 0) this.compactor.noteExpiry(expiresAt);
    this.segments.get(loc.seg)?.scopes.add(slot.scope);
    this.intents.settle(slot.scope, slot.key, seq);
  }

  /** forget(): tombstones the live value of (scope, key); null tombstoneSeq when nothing was live. */
  async forget(key: unknown, options?: unknown): Promise<T.ForgetResult> {
    this.assertOpen();
    const o = A.optsOf(options, "forget");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const room = this.admitted();
    if (room !== null) await room; // only when the queue is full: decisions stay in the caller's turn
    const plan = new BatchPlan(this, this.nextSeq(), this.options.clock(), false);
    const result = plan.forget(scope, k);
    // "Nothing to forget" may rest on a queued, not yet durable mutation: answer once it is.
    if (plan.ops.length === 0) await this.log.barrier();
    else await this.commitPlan(plan);
    return result;
  }

  /** Applies a committed TOMBSTONE: the value it kills counts as dead, its intent settles. */
  private applyTombstone(slot: Slot, seq: number, generation: number, version: number, loc: Location): void {
    if (seq > slot.tombSeq && slot.putSeq < seq) this.valueDied(slot);
    applyTombstone(slot, seq, generation, version, loc);
    this.intents.settle(slot.scope, slot.key, seq);
  }

  /** undelete(): clears a tombstone by moving the slot to a higher generation; no-op otherwise. */
  async undelete(key: unknown, options?: unknown): Promise<T.UndeleteResult> {
    this.assertOpen();
    const o = A.optsOf(options, "undelete");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const room = this.admitted();
    if (room !== null) await room; // only when the queue is full: decisions stay in the caller's turn
    const before = this.intents.logical(this.keydir, scope, k, this.options.clock());
    if (!before.tombstoned) {
      await this.log.barrier(); // the answer may rest on a queued mutation: answer once it is durable
      return { ok: true, generation: before.generation };
    }
    const seq = this.nextSeq();
    const generation = before.generation + 1;
    const record = this.encode(clearInput({ seq, generation, committedAt: this.options.clock(), scope, key: k }));
    const done = this.log.append({
      records: [record],
      seqs: [seq],
      apply: (locs) => {
        applyClear(this.keydir.ensure(scope, k), seq, generation, elementAt(locs, 0, "an undelete commits one record"));
        this.intents.settle(scope, k, seq);
      },
    });
    this.advanceSeq(seq);
    this.intents.set(scope, k, { seq, live: false, version: null, lastVersion: before.lastVersion, generation, tombstoned: false, killSeq: before.killSeq, exists: true });
    await done;
    return { ok: true, generation };
  }

  /** The slots of `root`'s subtree with a retention record now (visible or queued), and how many are live. */
  private slotsIn(root: string, now: number): { live: number; killed: ErasedSlot[] } {
    const seen = new Set<string>();
    const killed: ErasedSlot[] = [];
    let live = 0;
    const visit = (scope: string, key: string): void => {
      const id = `${scope}\u0000${key}`;
      if (seen.has(id)) return;
      seen.add(id);
      const state = this.intents.logical(this.keydir, scope, key, now);
      if (!state.exists) return;
      if (state.live) live += 1;
      killed.push({ scope, key, version: state.lastVersion, generation: state.generation });
    };
    // Only the subtree's rows are made Slots (logical's get); the rest of the keydir is not walked.
    this.keydir.anyInSubtree(root, (_ref, scope, key) => {
      visit(scope, key);
      return false;
    });
    for (const q of this.intents.queuedSlots()) if (scopeWithin(q.scope, root)) visit(q.scope, q.key);
    return { live, killed };
  }

  /**
   * The records of an erasure of `scope` at `seq`: one SCOPE_ERASE when its erase list fits one
   * chunk (ERASE_LIST_CHUNK_BYTES); otherwise one SCOPE_ERASE per chunk, all of sequence `seq` and
   * flagged RF_IN_BATCH, then a BATCH_COMMIT at seq + 1 — one commit group, all or nothing across
   * a crash — so an erasure of a million slots never nears the 256 MiB record limit.
   */
  private eraseRecords(scope: string, seq: number, now: number, killed: ErasedSlot[]): { records: Buffer[]; seqs: number[]; chunks: ErasedSlot[][] } {
    const chunks = chunkEraseList(killed);
    const flags = chunks.length > 1 ? C.RF_IN_BATCH : 0;
    const records = chunks.map((c) => this.encode(scopeEraseInput({ flags, seq, committedAt: now, scope, list: encodeEraseList(c) })));
    const seqs = chunks.map(() => seq);
    if (chunks.length > 1) {
      records.push(this.encode(batchCommitInput({ seq: seq + 1, opCount: chunks.length })));
      seqs.push(seq + 1);
    }
    assert(records.length === (chunks.length > 1 ? chunks.length + 1 : 1), "an erasure is one record, or its chunks and a commit");
    return { records, seqs, chunks };
  }

  /** forgetScope(): erases a scope and its descendants with one SCOPE_ERASE record (or a batch of chunks). */
  async forgetScope(scope: unknown, options?: unknown): Promise<T.ForgetScopeResult> {
    this.assertOpen();
    const o = A.optsOf(options, "forgetScope");
    const s = A.erasedScopeOf(scope);
    const reclaim = A.reclaimOf(o);
    const room = this.admitted();
    if (room !== null) await room; // only when the queue is full: decisions stay in the caller's turn
    const now = this.options.clock();
    const { live: slots, killed } = this.slotsIn(s, now);
    const seq = this.nextSeq();
    const { records, seqs, chunks } = this.eraseRecords(s, seq, now, killed);
    const done = this.log.append({
      records,
      seqs,
      apply: (locs) => {
        const counted = this.erasedValuesDie(s, killed, now);
        chunks.forEach((chunk, i) => applyErase(this.keydir, s, seq, now, elementAt(locs, i, "a location per erase chunk"), chunk));
        this.intents.settleErase(s, seq);
        if (counted) this.compactor.noteExpiry(now); // the erasure's record may die one window after its commit
        else this.compactor.recount();
      },
    });
    const last = elementAt(seqs, seqs.length - 1, "an erasure has a record");
    this.advanceSeq(last, last === seq ? 1 : 2);
    this.intents.setErase(s, seq);
    await done;
    if (reclaim === "lazy") return { ok: true, tombstoneSeq: seq, slots };
    const reclaimedBytes = await this.compactor.eraseEager(s);
    return { ok: true, tombstoneSeq: seq, slots, reclaimedBytes };
  }

  /** batch(): all ops or none, decided in order, committed as one group with a BATCH_COMMIT record. */
  async batch(ops: unknown): Promise<T.BatchResult[]> {
    this.assertOpen();
    if (!Array.isArray(ops)) throw new InvalidArgumentError("batch takes an array of operations");
    if (ops.length > A.BATCH_OPS_MAX) throw new InvalidArgumentError(`batch has ${ops.length} operations; at most ${A.BATCH_OPS_MAX}`);
    const room = this.admitted();
    if (room !== null) await room; // only when the queue is full: decisions stay in the caller's turn
    const plan = new BatchPlan(this, this.nextSeq(), this.options.clock(), true);
    let results: T.BatchResult[];
    try {
      results = ops.map((op, i) => addOp(plan, op, i));
      if (plan.ops.length > 0) plan.seal();
      if (DEBUG_CHECKS && plan.ops.length > 0) checkSealed(plan);
    } catch (err) {
      plan.retract(); // all or nothing: the intents of the ops decided before the refusal go too
      throw err;
    }
    if (plan.ops.length === 0) {
      await this.log.barrier(); // all no-ops: answer once the state they rest on is durable
      return results;
    }
    await this.commitPlan(plan);
    return results;
  }

  /** The state a mutation of (scope, key) is decided against; with `reserve`, a new name may get a reserved slot (BatchHost.logical). */
  logical(scope: string, key: string, now: number, reserve?: boolean): Logical {
    return this.intents.logical(this.keydir, scope, key, now, reserve);
  }

  /** Takes back a slot a plan's decision reserved (Keydir.unreserve). */
  unreserve(slot: SlotRef, scope: string, key: string): void {
    this.keydir.unreserve(slot, scope, key);
  }

  /** Records a decided op's state as its slot's intent; returns the one it replaced (Intents.replace). */
  intend(scope: string, key: string, state: Logical): Logical | undefined {
    return this.intents.replace(scope, key, state);
  }

  /** intend() for a name its decision found no intent for (Intents.add). */
  intendNew(scope: string, key: string, state: Logical): undefined {
    return this.intents.add(scope, key, state);
  }

  /** Takes back an intent recorded by intend() (Intents.restore). */
  unintend(scope: string, key: string, replaced: Logical | undefined, state: Logical): void {
    this.intents.restore(scope, key, replaced, state);
  }

  /** What the last logical() call found in the keydir (Intents.lastSlot). */
  foundSlot(): SlotRef | undefined | null {
    return this.intents.lastSlot;
  }

  /** The keydir's count of slots made or dropped (Keydir.changes). */
  keydirChanges(): number {
    return this.keydir.changes;
  }

  /** Finds the nearest readable slot for a read. */
  private find(key: unknown, options: unknown, call: string): ReadFound | null {
    this.assertOpen();
    const o = A.optsOf(options, call);
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const inherit = A.boolOf(o, "inherit", true);
    // A read that may take a held row as it is looks it up as one (a name loaded from a hint then
    // may become a row); any other read makes a row a Slot at once, as before rows were read.
    const rowsAsIs = this.cache === null || this.cache.takesRowsAsIs();
    // The lineage is walked in place (no array per call): the scope, then each parent up to "global".
    for (let s: string | null = scope; s !== null; s = inherit ? parentScope(s) : null) {
      let ref: SlotRef | undefined = rowsAsIs ? this.keydir.readRef(s, k) : this.keydir.get(s, k);
      if (typeof ref === "number") {
        if (!this.keydir.rowReadable(ref, s)) continue;
        if (this.readsRowAsIs(ref, s, k)) return this.foundRow(ref, s, k);
        ref = this.slotForRead(ref, s, k);
      }
      // The clock is asked only for a value that can expire (expiresAt 0 never does, whatever now is).
      if (ref !== undefined && isReadable(this.keydir, ref, ref.expiresAt === 0 ? 0 : this.options.clock())) {
        const seg = this.segmentOf(ref.seg);
        return { slot: ref, segment: seg, off: ref.off, len: ref.len, version: ref.putSeq, generation: ref.putGen, scope: ref.scope, key: ref.key };
      }
    }
    return null;
  }

  /**
   * True when a read of held compact row `row` of (scope, key) reads it as it is, no Slot made:
   * with no value cache, or on its first read while the cache takes the reads for a pass in key
   * order (ValueCache.readsRowAsIs), where a Slot would only be marked and kept on the heap; the
   * row is then marked instead (touchRow). Otherwise the row is made a Slot, to be cached.
   */
  private readsRowAsIs(row: number, scope: string, key: string): boolean {
    const cache = this.cache;
    if (cache === null) return true;
    if (this.keydir.rowTouched(row) || !cache.readsRowAsIs(scope, key)) return false;
    this.keydir.touchRow(row);
    return true;
  }

  /** Makes held row `row` of (scope, key) the Slot a read hangs its value on, carrying the row's mark (a row read once: this miss caches). */
  private slotForRead(row: number, scope: string, key: string): Slot {
    const touched = this.keydir.rowTouched(row);
    const slot = this.keydir.get(scope, key);
    assert(slot !== undefined, "a held row read is made a Slot");
    if (touched) this.cache?.markRead(slot);
    return slot;
  }

  /** What a read of held row `row` of (scope, key) is authorized against: the fields of the Slot it stands for, with no Slot made. */
  private foundRow(row: number, scope: string, key: string): ReadFound {
    const seg = this.segmentOf(this.keydir.rowSeg(row));
    return { slot: null, segment: seg, off: this.keydir.rowOff(row), len: this.keydir.rowLen(row), version: this.keydir.rowPutSeq(row), generation: 1, scope, key };
  }

  /** The open segment numbered `id`, which a held slot or row points at. */
  private segmentOf(id: number): Segment {
    const seg = this.segments.get(id);
    if (seg === undefined) throw new Error(`keydir points at missing segment ${id}`);
    return seg;
  }

  /** readSync(): authorization and materialization in one synchronous turn. */
  readSync(key: unknown, options?: unknown): T.ReadResult {
    const found = this.find(key, options, "readSync");
    if (found === null) return { status: "NOT_FOUND" };
    return materialize(this, found, null);
  }

  /** read(): like readSync, but waits out an in-place rewrite before authorizing. */
  async read(key: unknown, options?: unknown): Promise<T.ReadResult> {
    for (;;) {
      const found = this.find(key, options, "read");
      if (found === null) return { status: "NOT_FOUND" };
      const generation = this.gens.load(found.segment.cell);
      if (generation % 2 !== 0 && !this.options.unsafeSkipReadValidation) {
        if (found.segment.lost !== null) throw found.segment.lost; // no one will make it even before a reopen
        await this.gens.waitChange(found.segment.cell, generation);
        continue;
      }
      return materialize(this, found, this.faults.buffer);
    }
  }

  /** probe(): value-record and retention-record presence of (scope, key), separately. */
  async probe(key: unknown, options?: unknown): Promise<T.ProbeResult> {
    this.assertOpen();
    const o = A.optsOf(options, "probe");
    const scope = A.scopeOf(o);
    const k = A.keyOf(key);
    const slot = this.keydir.get(scope, k);
    if (slot === undefined) {
      return { state: "absent", valuePresent: false, retentionPresent: false, physicalRecords: 0, version: null, generation: null, tombstoneSeq: null, expiresAt: null };
    }
    const now = this.options.clock();
    const readable = isReadable(this.keydir, slot, now);
    return {
      state: this.stateOf(slot, readable, now),
      valuePresent: readable,
      retentionPresent: true,
      physicalRecords: slot.physical,
      version: slot.putSeq > 0 ? slot.putSeq : null,
      generation: slot.generation,
      tombstoneSeq: Math.max(slot.tombSeq, this.keydir.eraseSeq(scope)) || null,
      expiresAt: slot.expiresAt === 0 || slot.seg === 0 ? null : slot.expiresAt,
    };
  }

  /** probe()'s state of a slot that exists: live, expired, tombstoned, reclaimed or absent. */
  private stateOf(slot: NonNullable<ReturnType<Keydir["get"]>>, readable: boolean, now: number): T.SlotState {
    if (readable) return "live";
    if (putSurvives(this.keydir, slot)) {
      // Not killed: either expired with its record still on disk, or its record was reclaimed
      // without a kill (only the unsafe tombstone-sequence GC does that).
      return slot.seg !== 0 && isExpired(slot, now) ? "expired" : "reclaimed";
    }
    if (isTombstoned(this.keydir, slot)) return slot.physical > 0 ? "tombstoned" : "reclaimed";
    return "absent";
  }

  /** list(): live keys in key order, nearest scope first when inheriting. */
  list(options?: unknown): AsyncIterable<T.ListEntry> {
    try {
      return this.listNow(options);
    } catch (err) {
      // Errors surface where the caller awaits (the first next()), never synchronously.
      return (async function* (): AsyncGenerator<T.ListEntry> {
        throw err;
      })();
    }
  }

  /** list() decided now, in the caller's turn: the entries are fixed before the first next(). */
  private listNow(options: unknown): AsyncIterable<T.ListEntry> {
    this.assertOpen();
    const o = A.optsOf(options, "list");
    const scope = A.scopeOf(o);
    const prefix = A.prefixOf(o);
    const limit = A.limitOf(o);
    const inherit = A.boolOf(o, "inherit", true);
    const now = this.options.clock();
    const found = new Map<string, T.ListEntry>();
    const scopes = inherit ? scopeLineage(scope) : [scope];
    this.keydir.loadScopes(scopes); // these scopes' names only: after a hinted open the rest stay in their hints
    for (const s of scopes) {
      for (const [key, ref] of this.keydir.scopeKeys(s) ?? []) {
        if (found.has(key) || !key.startsWith(prefix)) continue;
        const version = this.keydir.readableVersion(ref, s, now); // no Slot made of a row
        if (version > 0) found.set(key, { key, scope: s, version });
      }
    }
    const entries = [...found.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).slice(0, limit);
    return (async function* () {
      yield* entries;
    })();
  }

  /** Scopes holding at least one slot (any state), sorted; read-only, for inspectors (`engram ui`). */
  async listScopes(): Promise<string[]> {
    this.assertOpen();
    return this.keydir.scopeNames().sort();
  }

  /** Keys of every slot in exactly `scope` (any state; probe tells which), sorted, at most `limit`. */
  async listSlots(scope: string, limit: number): Promise<string[]> {
    this.assertOpen();
    const o = { scope, limit }; // checked here too: a shared owner serves this call from other processes
    const keys: string[] = [];
    for (const [key, ref] of this.keydir.scopeKeys(A.scopeOf(o)) ?? []) if (this.keydir.holdsRecord(ref)) keys.push(key);
    return keys.sort().slice(0, A.limitOf(o));
  }

  /** compact(): see compactor.ts. */
  async compact(options?: unknown): Promise<T.CompactionReport> {
    this.assertOpen();
    const o = A.optsOf(options, "compact");
    const ids = o["segments"];
    // One segment named twice is compacted once (a second pass would find it already rewritten).
    return this.compactor.compact(Array.isArray(ids) ? { ...o, segments: [...new Set(ids)] } : o);
  }

  /** gc(): reclaim by policy now. */
  async gc(): Promise<T.GcReport> {
    this.assertOpen();
    return this.compactor.gc();
  }

  /** stats(): see stats.ts. */
  stats(): T.StoreStats {
    this.assertOpen();
    return storeStats(this, this.seq, { pendingGcSegments: this.compactor.pendingSegments(), compactions: this.compactor.completed });
  }

  /** verify(): reads every header and record checksum. */
  async verify(onProgress?: T.ProgressFn): Promise<T.VerifyReport> {
    this.assertOpen();
    return verifySegments(this.segmentsDir, onProgress);
  }

  /** backup(): an online, consistent copy of the store in a new directory (backup.ts). */
  backup(targetDir: unknown): Promise<T.BackupReport> {
    this.assertOpen();
    return backupStore({ dir: this.dir, segmentsDir: this.segmentsDir, segments: this.segments, exclusive: (job) => this.compactor.exclusive(job), faultTable: this.faults.buffer }, targetDir);
  }

  /** exportEntries(): every slot of a subtree, live values and retention records (export.ts). */
  exportEntries(options?: unknown): AsyncIterable<T.ExportEntry> {
    return exportEntries(this, options as T.ScopeOption | undefined);
  }

  /**
   * Raises the commit sequence to at least `floor`, durably, so that later versions are above it
   * (import). The new active segment's header records it as its created sequence, which recovery
   * reads back (recover(): seq = max of every header's createdSeq and every record's sequence).
   */
  async raiseSequence(floor: unknown): Promise<number> {
    this.assertOpen();
    if (typeof floor !== "number" || !Number.isSafeInteger(floor) || floor < 0) throw new InvalidArgumentError(`sequence floor must be a safe integer >= 0, got ${String(floor)}`);
    if (floor <= this.seq) return this.seq;
    this.advanceSeq(floor, floor - this.seq); // one jump: the sequence only grows (I7)
    this.log.rotate();
    await this.flush();
    return this.seq;
  }

  /**
   * Makes everything written before the call durable now (any durability mode), and waits for the
   * hints of the segments sealed before it (written or dropped: engine/hints.ts writeSealedHintAsync).
   */
  async flush(): Promise<void> {
    if (this.closed) throw new StoreClosedError();
    await this.log.barrier();
    await this.log.syncAll();
    if (!unsafeSealedHintForTests.takePending && !unsafeSealedHintForTests.skipPending) await sealedHintsWritten(this.segments.values());
    this.log.takeSyncError();
  }

  /**
   * close(): waits for queued writes and compactions, syncs (in `none` durability it writes a
   * boot-stamped prefix hint instead: nothing is made durable that flush() did not), closes files,
   * releases the lock.
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  /** Adds to `out` the prefix hint of every segment with a writer, encoded for the end the final sync and sync mark will leave. */
  private encodeActiveHints(out: EncodedHint[]): void {
    for (const seg of this.segments.values()) {
      if (seg.writer === null) continue;
      const encoded = encodeActiveHint(this.segmentsDir, seg, this.log.endAfterMark(seg));
      if (encoded !== null) out.push(encoded);
    }
  }

  /**
   * Close's final sync, sync mark and prefix hints. The hints are encoded while the final
   * fdatasync runs on the thread pool (its calls are issued by the turn awaited first), and
   * written only after it and the sync mark, when the bytes they cover are durable
   * (engine/hints.ts writeEncodedHint checks the end); none when `withHints` is false (an earlier
   * step of close failed). Every step runs; then the first failure is thrown: a caller never
   * believes unsynced data durable.
   */
  private async syncForClose(withHints: boolean): Promise<void> {
    let first: unknown = null;
    const step = (f: () => unknown): void => {
      try {
        f();
      } catch (err) {
        first ??= err;
      }
    };
    const synced = this.log.syncAll().catch((err: unknown) => {
      first ??= err;
    });
    await nextTurn();
    const hints: EncodedHint[] = [];
    if (withHints) step(() => this.encodeActiveHints(hints));
    await synced;
    step(() => this.log.takeSyncError());
    step(() => this.log.markDurable());
    if (first !== null) throw first;
    for (const h of hints) writeEncodedHint(this.segmentsDir, h); // everything is durable now
  }

  /**
   * A syncing close, before its final sync: seals the active segment (the log's own rotation:
   * fdatasync, sealed header, whole hint once; a new, empty active segment) when it holds
   * SEAL_AT_CLOSE_BYTES of data or more and the hint on disk does not cover what the close would
   * leave. Unsealed, the close would rewrite that segment's whole prefix hint for the few records
   * a short process appended: `engram put` on a store of 200k keys spent ~60 ms of its ~360 doing
   * that at every call (thirty-sixth session); sealed, the next processes append to a small
   * segment whose hint costs little. A `none`-mode close (stamped hints, no sync) is left as it was.
   */
  private async sealLargeActive(): Promise<void> {
    const active = this.log.activeSegment;
    if (active.writer === null || active.dataEnd - C.DATA_START < SEAL_AT_CLOSE_BYTES) return;
    if (active.hintOnDiskEnd === this.log.endAfterMark(active) || unsafeSealAtCloseForTests.never) return;
    const old = this.log.rotate();
    assert(old === active, "the segment sealed at close is the active one");
    await this.log.whenSealed(old);
  }

  /**
   * The boot id a close stamps its prefix hints with instead of syncing, or null when it syncs:
   * only in `none` durability (which promises nothing durable until flush()), with some segment
   * written past its durable end, on a machine that tells its boot id, writing hint version 3.
   */
  private unsyncedCloseBoot(): Buffer | null {
    if (this.options.durability !== "none" || hintVersionWritten() !== HINT_VERSION) return null;
    for (const seg of this.segments.values()) if (seg.writer !== null && seg.syncedEnd < seg.dataEnd) return bootId();
    return null;
  }

  /** Close in `none` durability: every written segment's prefix hint, boot-stamped, with no sync (engine/hints.ts writeStampedHint). */
  private async writeStampedHints(boot: Buffer): Promise<void> {
    for (const seg of [...this.segments.values()]) if (seg.writer !== null) await writeStampedHint(this.segmentsDir, seg, boot);
  }

  /**
   * Every step runs even when an earlier one failed: the files are closed, the fault table
   * unregistered and the lock released in every case; then the first failure (an IoError of the
   * final sync, say) is thrown, so that a caller never believes unsynced data durable.
   */
  private async doClose(): Promise<void> {
    if (this.syncTimer !== null) clearInterval(this.syncTimer);
    let first: unknown = null;
    const step = async (f: () => unknown): Promise<void> => {
      try {
        await f();
      } catch (err) {
        first ??= err;
      }
    };
    await step(() => this.log.idle());
    await step(() => this.compactor.close());
    await step(() => this.log.repair());
    const boot = this.unsyncedCloseBoot();
    if (boot === null && first === null) await step(() => this.sealLargeActive());
    if (boot !== null && first === null) await step(() => this.writeStampedHints(boot));
    else await step(() => this.syncForClose(first === null));
    if (first === null) await step(() => this.compactor.saveEstimates()); // every data end final; its write is best effort
    if (!unsafeSealedHintForTests.closeWithoutWait) await sealedHintsWritten(this.segments.values()); // no write in the directory outlives the lock
    for (const seg of this.segments.values()) seg.close(this.gens);
    this.compactor.closeRetired();
    await step(() => backgroundCloses()); // no descriptor of this store outlives its close
    this.cache?.clear();
    this.blocks?.clear();
    registerFaultTable(this.segmentsDir, null);
    this.closed = true;
    this.keydir.release();
    this.lock.release();
    if (first !== null) throw first;
  }
}

/**
 * Bytes of data from which a syncing close seals the active segment instead of rewriting its
 * prefix hint (Store.sealLargeActive): below it, the rewrite costs a few ms at most.
 */
export const SEAL_AT_CLOSE_BYTES = 8 * 1024 * 1024;

/**
 * Test switch, never set by the engine or any option (test/seal-at-close.test.ts): `never` makes a
 * close leave a large active segment unsealed and rewrite its prefix hint, as before.
 */
export const unsafeSealAtCloseForTests = { never: false };

/**
 * lockDirectory, with a failed system call (a read-only file system: EROFS) as an IoError that
 * keeps its errno, never a bare Node error; StoreLockedError passes through.
 */
function lockOf(dir: string, lockNote: LockNote | undefined): DirLock {
  try {
    return lockDirectory(dir, lockNote);
  } catch (err) {
    throw asIoError(err, "open LOCK", path.join(dir, "LOCK"));
  }
}

/** The errnos of a store path that cannot hold a directory (not a failing device): bad input. */
const PATH_REFUSED: ReadonlySet<string> = new Set(["ENOTDIR", "ENOENT", "EACCES", "EPERM", "EROFS", "ENAMETOOLONG", "ELOOP", "EEXIST"]);

/**
 * Makes the store's directory (and missing parents) or says why it cannot: InvalidArgumentError
 * for a path that cannot hold one (a file on the way, a read-only or pseudo file system, no
 * permission), IoError for a failing device. Until the twentieth session open passed node's
 * error through bare, and a path under /proc hung the process (segments/io.ts makeDir).
 */
export function makeStoreDir(dir: string): void {
  try {
    makeDir("io:create", dir, DIR_MODE);
  } catch (err) {
    if (err instanceof IoError && PATH_REFUSED.has(err.errno)) throw new InvalidArgumentError(`cannot make the store directory ${dir} (${err.errno}); choose a path where this process can create a directory`);
    throw err;
  }
  if (!fs.statSync(dir).isDirectory()) throw new InvalidArgumentError(`the store path ${dir} is a file, not a directory; choose a directory path`);
}

/** Under tests: every record of a sealed batch decodes where its length says it lies in the plan's pieces (their deferred sums written). */
function checkSealed(plan: BatchPlan): void {
  let i = 0;
  for (const piece of plan.records) {
    for (let at = 0; at < piece.length; i++) {
      const length = plan.lengths[i];
      const got = length === undefined ? null : decodeRecord(piece, at, at + length, false);
      assert(got !== null && isRecord(got) && got.length === length, "a sealed batch's records decode (their deferred sums written)");
      at += length;
    }
  }
  assert(i === plan.lengths.length, "a sealed batch's pieces hold exactly its records");
}

/** Checks batch op `i` and adds it to `plan`; throws (and nothing is written) when it is invalid or conflicts. */
function addOp(plan: BatchPlan, raw: unknown, i: number): T.BatchResult {
  // The call's name is built only for the error (a template string per op cost ~5% of a bulk load).
  const o = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : A.optsOf(raw, `batch[${i}]`, BATCH_ROW_NAMES);
  const misspelt = misspeltName(o, BATCH_ROW_NAMES);
  if (misspelt !== null) throwMisspelt(misspelt, BATCH_ROW_NAMES, `batch[${i}]`);
  const scope = A.scopeOf(o);
  const key = A.keyOf(o["key"]);
  if (o["op"] === "write") {
    const value = A.valueOf(o["value"]);
    return plan.writeOf(scope, key, value, A.expectedVersionOf(o), A.boolOf(o, "clearTombstone", false), A.ttlOf(o));
  }
  if (o["op"] === "forget") return plan.forget(scope, key);
  throw new InvalidArgumentError(`batch[${i}].op must be "write" or "forget", got ${String(o["op"])}`);
}
