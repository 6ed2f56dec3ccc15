/**
 * Compaction scheduling and publication, on the main thread. The main thread decides which
 * records of the sealed segments survive (from the keydir and gc-policy.ts), groups copy-on-write
 * sources into merged outputs, hands their locations to a piscina worker (compaction-core.ts), and
 * applies each returned relocation map in one synchronous turn — only to keydir entries still
 * pointing at the old location — then publishes: in-place, by bumping the shared generation to
 * even; copy-on-write, by one manifest write that lists the output in place of its sources, whose
 * files are then unlinked (a reader still holding one keeps its descriptor until it leaves).
 *
 * Passes run one at a time (a promise chain); within a pass the worker may hold two copy-on-write
 * groups (one copied while the other's output is written and synced or published); the main
 * thread keeps serving meanwhile.
 * What survives is decided by compaction-plan.ts; the store is reached only through
 * CompactorHost (no import of store.ts: the two files form no cycle).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Piscina } from "piscina";
import * as C from "../segments/constants.js";
import { EngramError, InvalidArgumentError, IoError, StoreClosedError } from "../rules/errors.js";
import { assert, elementAt, fail } from "../rules/assert.js";
import { journalFileName, segmentFileName, tmpFileName } from "../segments/file-names.js";
import { hintFileName, unlinkHint } from "../segments/hint.js";
import { readHeader } from "../segments/header-io.js";
import { rewrittenVersion } from "../segments/header.js";
import { fsyncDir, openRead, unlinkQuietly } from "../segments/io.js";
import { scopeWithin } from "../rules/names.js";
import { MERGE_SOURCES_MAX, runCompaction, type CompactionResult, type CompactionTask, type PassesSeen, type SourceResult } from "./compaction-core.js";
import { emptyPlan, lowestSeq, KIND_CLEAR, KIND_ERASE, KIND_PUT, KIND_ROW, KIND_TOMB, planSegments, tallySegments, type LiveTally, type PlanHost, type RecordList, type SegmentPlan, type Soonest } from "./compaction-plan.js";
import { hitAsync, hitCrashOnly, type FaultController } from "./faults.js";
import type { GenerationTable } from "./generations.js";
import * as P from "./gc-policy.js";
import type { Keydir, Slot } from "./keydir.js";
import type { ResolvedOptions } from "./options.js";
import { Segment } from "./segment.js";
import { loadEstimates, saveEstimates } from "./dead-estimates.js";
import { sealedHintsWritten, unsafeSealedHintForTests } from "./hints.js";
import type { ReclaimClock } from "./reclaim-clock.js";
import type { DeadBytesFile } from "../segments/dead-bytes.js";
import { TimeChecks } from "./time-checks.js";
import { isFailedTask, reviveError, type FailedTask } from "./worker-errors.js";
import type { ValueCache } from "./value-cache.js";
import type * as T from "../rules/types.js";

type Mode = "copy-on-write" | "in-place";

/** The automatic pass seals a mostly-garbage active segment only from this size on (or half a segment). */
const ACTIVE_SEAL_BYTES_MIN = 4 * 1024 * 1024;

/**
 * A merged copy-on-write output holds up to this many surviving bytes (or segmentBytes, if
 * larger): merging pays one data sync, one manifest write and one directory fsync per output; the
 * worker holds the output and one source in memory.
 */
const MERGE_OUTPUT_BYTES_MIN = 16 * 1024 * 1024;

/**
 * Copy-on-write jobs a pass keeps in flight with a worker (done but unpublished ones included):
 * the next output's walk and copy overlap this one's fdatasync and publication in the worker,
 * which takes as many tasks at once (getPool). group()'s free-space bound assumes at most two.
 */
const COPIES_IN_FLIGHT = 2;

/**
 * In-place jobs a pass keeps in flight with one worker thread (done but unpublished ones
 * included): the next rewrite waits in the worker (compaction-core.ts rewriteTurns) and starts
 * there as this one ends, while the main thread publishes this one. No more than the worker takes
 * at once (getPool). With more threads the pool could hand the next rewrite to another one, where
 * it would run beside this one: there a pass keeps one in flight.
 */
const REWRITES_IN_FLIGHT = 2;

/**
 * Test switch, never set by the engine or any option (test/space-time.test.ts): with `off`, a time
 * check walks and schedules the next one as usual (its count and deadSeen tell a test when one ran
 * that found garbage) but sets no dead bytes and asks for no pass — the store before the checks
 * existed, where expired values and ended retention windows stayed on disk until something else
 * started a pass. With `ignoreKillDrops`, a compaction that drops an older kill record arms no
 * check (killRecordsGone): the latest record it held, droppable from then on, is garbage no estimate
 * counts, and in a store left alone its segment was never compacted again (fifty-sixth session).
 * With `ignoreSupersedingDrops`, a PUT drop that leaves its slot's tombstone superseded arms none
 * either (deathAfterDrop, supersedesTombstone; test/space-kill-release.test.ts).
 */
export const unsafeTimeCheckForTests = { off: false, ignoreKillDrops: false, ignoreSupersedingDrops: false };

/**
 * Test switches, never set by the engine or any option (test/gradual-load.test.ts): `atOnce`
 * skips the gradual load, so that the walk after it applies every deferred entry in one turn, as
 * before the forty-second session; `afterStep` runs after each step's yield (reads and writes
 * there meet a keydir partly loaded).
 */
export const gradualLoadForTests: { atOnce: boolean; afterStep: (() => Promise<void> | void) | null } = { atOnce: false, afterStep: null };

/** One compaction of a pass: the sources, the mode, and the output id (in-place: the source's). */
interface Job {
  group: Segment[];
  mode: Mode;
  targetId: number;
}

/** Where a pass's jobs stand: the next to start, whether the seal ran, and the segment it seals (null: none). */
interface JobCursor {
  next: number;
  sealed: boolean;
  sealing: Segment | null;
}

/** A job whose worker task has started. */
interface Running {
  job: Job;
  task: CompactionTask;
  done: Promise<CompactionResult>;
  started: number;
}

/** The commit log's part in compaction: the active segment, and sealing it. */
export interface SealingLog {
  readonly activeSegment: Segment;
  /** Seals the active segment and starts a new one; returns the sealed one. */
  rotate(): Segment;
  /** Resolves once `seg`'s seal (header rewrite and fsync) is durable. */
  whenSealed(seg: Segment): Promise<void>;
}

/**
 * What the compactor needs from the store (the store passes itself): its files, keydir and
 * segments, which it changes only in the one synchronous turn that publishes a compaction.
 */
export interface CompactorHost extends PlanHost {
  readonly options: Pick<ResolvedOptions, "compaction" | "segmentBytes" | "clock" | "scopeRules" | "tombstoneRetentionMs" | "unsafeGcBySeq">;
  readonly segmentsDir: string;
  readonly keydir: Keydir;
  readonly segments: Map<number, Segment>;
  readonly gens: GenerationTable;
  /** The hot-value cache (null when off): a value read from a record moved by a pass moves with it. */
  readonly cache: ValueCache | null;
  readonly faults: Pick<FaultController, "buffer">;
  readonly log: SealingLog;
  /** The highest sequence committed or queued (the unsafe tombstone-sequence GC's watermark). */
  readonly sequence: number;
  /** A fresh segment id (for a copy-on-write output). */
  allocateId(): number;
  /** Rewrites segments/MANIFEST to name exactly the segments in `segments`. */
  recordSegments(): void;
  /** Makes everything written so far durable (a plan is made after one). */
  flush(): Promise<void>;
}

/** Schedules compactions and applies their results. */
export class Compactor {
  private readonly host: CompactorHost;
  /**
   * The worker pool, made by the first task (getPool); piscina's module loads only then, not at
   * open (16–90 ms of every process that opens a store: a CLI command, an MCP server's start).
   */
  private pool: Promise<Piscina> | null = null;
  /**
   * The pool once made, so that run() posts a task in the caller's own turn: a pass's first job
   * then reaches the worker before the seal's synchronous work that follows it (sealDuring: the
   * new segment's creation and manifest, the old one's sync, header and hint), not after it.
   */
  private poolMade: Piscina | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private autoTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Compactions completed since open. */
  completed = 0;
  /**
   * When a value last died (performance.now()); the store-wide space rule waits for quiet. None
   * yet at the open: -Infinity, not 0, which is the process's start — a CLI command opens its store
   * within STORE_QUIET_MS of it, and its open's pass (opened) would skip the store-wide rule.
   */
  private lastDeathAt = -Infinity;
  private quietTimer: NodeJS.Timeout | null = null;
  /**
   * Slots of the publication under way whose CLEAR was live before a PUT record of theirs dropped:
   * the drop may supersede it (gc-policy.ts clearSuperseded), and countReleasedClears then counts
   * its bytes dead where it lies — no estimate counted them, the walks having found it live.
   */
  private clearsBeforeDrop: Slot[] = [];
  /** Sources unlinked in this pass whose unlink no directory fsync has followed yet. */
  private readonly unsynced: Segment[] = [];
  /** Segments of this pass whose in-place rewrite left its complete journal for the next one (CompactionResult.journalKept). */
  private readonly keptJournals: number[] = [];
  /** Each source's dead bytes when the running pass planned (what died since is the output's garbage). */
  private readonly deadAtPlan = new Map<number, number>();
  /** Retired segments whose descriptor a read still held when they were retired. */
  private readonly held = new Set<Segment>();
  /** The time checks' timer and rate bound (time-checks.ts). */
  private readonly checks: TimeChecks;
  /** The shortest retention window of any scope: a slot reclaimed now keeps its record at least this long. */
  private readonly retentionMsMin: number;
  /** The reclaim times of the open (recovery's), which the close's estimates carry on. */
  private readonly reclaims: ReclaimClock;
  /** True while the pass the open started for the estimates' debt runs (opened): a close lets it start every job. */
  private payingDebt = false;
  /** The estimates file as the open found it (its entries' JSON: close skips writing it unchanged). */
  private estimatesRead = "[]";
  /** When the store opened (performance.now()): the first count of dead bytes waits STORE_QUIET_MS after it. */
  private readonly openedAt = performance.now();
  /**
   * False until dead bytes have been counted from the keydir since open: recovery does not count
   * them (the open stays O(segments) with hints), so garbage that existed before the open is
   * unknown until the first full pass (a recount, compact(), gc()).
   */
  private deadCounted = false;
  /**
   * Cell 0: compactions of this store running now — anything on the `serial` chain, a backup's
   * copy (exclusive) included: 0 or 1 — shared with the pool's threads (workerData `passes`). A worker starts no warm-up step while it is above 0, so that
   * no step lands between two jobs of a pass or during its plan (compaction-worker.ts).
   */
  private readonly passes = new Int32Array(new SharedArrayBuffer(4));
  /** Whether checkPassesSeen warned already (once per store). */
  private passesWarned = false;

  constructor(host: CompactorHost, reclaims: ReclaimClock) {
    this.host = host;
    this.reclaims = reclaims;
    const rules = host.options.scopeRules.map((r) => r.tombstoneRetentionMs ?? Infinity);
    this.retentionMsMin = Math.min(host.options.tombstoneRetentionMs, ...rules);
    this.checks = new TimeChecks({
      clock: () => host.options.clock(),
      enabled: () => host.options.compaction.auto && !this.closed,
      run: () => this.inBackground(() => this.timeCheck()),
    });
    // Recovery gave every slot it found without a value record the open's time as its reclaim
    // time, or the one the last close wrote for its segment (reclaim-clock.ts): their windows end
    // one retention window after the earliest of those at the soonest.
    this.noteDeathAt(Math.min(host.options.clock(), reclaims.earliest()) + this.retentionMsMin);
  }

  /** Time checks run since open, and the dead bytes the last one's walk found (tests). */
  get timeChecks(): { readonly fired: number; readonly deadSeen: number } {
    return this.checks.seen;
  }

  /** Something may die by time alone at `at` (store clock ms): a time check then (time-checks.ts). */
  private noteDeathAt(at: number): void {
    this.checks.note(at);
  }

  /**
   * A value was written that expires at `expiresAt` (or an erasure was committed at that time,
   * whose record the same rule keeps: Store erasedValuesDie): it may die by time alone one
   * retention window later. The shortest window of any scope, not its own (no scope-rule lookup on the write path):
   * a check due early only walks, and its walk notes the exact time (planSegments' soonest).
   */
  noteExpiry(expiresAt: number): void {
    this.checks.note(expiresAt + this.retentionMsMin);
  }

  /**
   * A time check: recounts every segment's dead bytes at the store clock's now, asks for an
   * automatic pass (the store-wide share too, which countDead does not look at) and schedules the
   * next check at the soonest later death the walk saw. Runs inside serial(), so never during a
   * pass. With a deferred keydir the walk builds every slot, as any pass's plan does.
   */
  private async timeCheck(): Promise<void> {
    if (this.closed) return;
    await this.loadDeferred();
    const now = this.host.options.clock();
    this.checks.begin(now);
    const started = performance.now();
    const soonest: Soonest = { at: Infinity };
    const tally = tallySegments(this.host, now, soonest);
    this.checks.end(performance.now() - started, this.deadIn(tally));
    if (!unsafeTimeCheckForTests.off) {
      this.countDead(tally);
      this.nudge();
    }
    this.noteDeathAt(soonest.at);
  }

  /** Dead bytes of every segment by `tally` (what countDead sets them to). */
  private deadIn(tally: ReadonlyMap<number, LiveTally>): number {
    let dead = 0;
    for (const seg of this.host.segments.values()) dead += deadBytesBy(seg, tally);
    return dead;
  }

  /** The worker pool, made on first use; null when compaction runs inline (`compaction.workers` 0). */
  private getPool(): Promise<Piscina> | null {
    const workers = this.host.options.compaction.workers;
    if (workers === 0) return null;
    this.pool ??= import("piscina").then(({ Piscina }) => (this.poolMade = this.makePool(Piscina, workers)));
    return this.pool;
  }

  /** A pool of `workers` compaction threads (piscina's class handed in: its module is loaded on first use). */
  private makePool(PiscinaClass: typeof Piscina, workers: number): Piscina {
    const entry = workerEntry();
    const pool = new PiscinaClass({
      filename: entry.filename,
      ...(entry.execArgv === undefined ? {} : { execArgv: entry.execArgv }),
      workerData: { niceness: this.host.options.compaction.niceness, ...(unsafeWorkerDataForTests.withoutPasses ? {} : { passes: this.passes }), ...(entry.tsWorker === undefined ? {} : { tsWorker: entry.tsWorker }) },
      minThreads: workers,
      maxThreads: workers,
      idleTimeout: 30_000,
      // A pass keeps up to COPIES_IN_FLIGHT copy-on-write jobs in one worker (runJobs): one copies
      // while another awaits its output's fdatasync on libuv's pool; or REWRITES_IN_FLIGHT in-place
      // ones: one rewrites while the next waits for its turn.
      concurrentTasksPerWorker: Math.max(COPIES_IN_FLIGHT, REWRITES_IN_FLIGHT),
      // An idle worker waits for tasks without blocking its event loop (piscina's default blocks
      // it in Atomics.wait), so that its warm-up rounds (compaction-worker.ts) run between tasks.
      atomics: "async",
    });
    pool.on("error", (err: unknown) => process.emitWarning(`engram compaction worker error: ${String(err)}`));
    return pool;
  }

  /**
   * Runs a task in a worker (or inline); a worker's failure comes back as the same EngramError
   * class. Once the pool is made the task is posted before this returns (poolMade): until the
   * thirty-seventh session an `await` of the made pool's promise posted it a microtask later,
   * after the synchronous rest of the caller's turn — for a pass's first job, the seal's ~15 ms.
   */
  private run(task: CompactionTask): Promise<CompactionResult> {
    const made = this.poolMade;
    if (made !== null && !postLateForTests.always) return this.answerOf(task, this.post(made, task));
    const pool = this.getPool();
    if (pool === null) return runCompaction(task, hitAsync);
    return pool.then((p) => this.answerOf(task, this.post(p, task)));
  }

  /**
   * Hands `task` to the pool's worker (piscina posts it in this call), counted in workerTasks. A
   * synchronous throw (a task the structured clone refuses) comes back as a rejection, as it did
   * when run() was an async function: start()'s caller awaits its failure like any other.
   */
  private post(pool: Piscina, task: CompactionTask): Promise<unknown> {
    workerTasks.posted += 1;
    try {
      return pool.run(task);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * A worker's answer to `task`: its result, or its failure thrown as the same EngramError class.
   * A task the pool failed with no answer from the worker — its thread stopped: killed, out of
   * memory, crashed — rejects with the typed error workerStopped makes (until the fifty-fourth
   * session, the pool's plain Error reached the caller of compact()).
   */
  private async answerOf(task: CompactionTask, running: Promise<unknown>): Promise<CompactionResult> {
    let answer: (CompactionResult & PassesSeen) | FailedTask;
    try {
      answer = (await running) as (CompactionResult & PassesSeen) | FailedTask;
    } catch (err) {
      throw err instanceof EngramError ? err : workerStopped(task, err);
    }
    if (isFailedTask(answer)) throw reviveError(answer.failed);
    this.checkPassesSeen(answer.passesSeen);
    return answer;
  }

  /**
   * The paired check of the count the pool's threads read (`passes`, handed over in workerData):
   * a task runs only inside `serial`, so the thread saw at least 1. A thread without the count
   * (-1) or reading another cell (0) would run its warm-up steps between a pass's jobs: that costs
   * speed, not data, so it is counted (workerPasses, read by tests) and warned once, never thrown.
   */
  private checkPassesSeen(seen: number): void {
    if (seen >= 1) {
      workerPasses.seen += 1;
      return;
    }
    workerPasses.missed += 1;
    if (this.passesWarned) return;
    this.passesWarned = true;
    process.emitWarning(`engram compaction worker read the store's compaction count as ${seen} during a task (expected at least 1): its warm-up may run during passes`);
  }

  /** The pool's worker threads now (none before the first pass with workers): tests stop one to stand in for a thread that died. */
  workerThreadsForTests(): ReadonlyArray<{ terminate(): Promise<number> }> {
    return this.poolMade?.threads ?? [];
  }

  /**
   * True when the background will start nothing without a call (tests): no pass running, no
   * automatic check or time check scheduled, and no segment the space rule would choose now.
   */
  quiescentForTests(): boolean {
    return this.passesRunning() === 0 && this.autoTimer === null && this.quietTimer === null && !this.checks.pending && this.chosenForSpace().length === 0;
  }

  /** Compactions of this store running now (0 or 1), as its pool's threads read it (`passes`; tests). */
  passesRunning(): number {
    return Atomics.load(this.passes, 0);
  }

  /** Runs `job` after every compaction queued before it, counted in `passes` while it runs. */
  private serial<R>(job: () => Promise<R>): Promise<R> {
    const counted = async (): Promise<R> => {
      Atomics.add(this.passes, 0, 1);
      // Every plan a pass publishes is made inside it: rows it names stay reachable (Keydir.pinRows).
      this.host.keydir.pinRows();
      try {
        return await job();
      } finally {
        this.host.keydir.unpinRows();
        Atomics.sub(this.passes, 0, 1);
      }
    };
    const next = this.chain.then(counted, counted);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Runs `job` with no compaction running or starting until it settles (backup.ts). */
  exclusive<R>(job: () => Promise<R>): Promise<R> {
    return this.serial(job);
  }

  /**
   * Right after the open: when the estimates the last close left (loadEstimates) already put
   * segments over the space rule, the automatic pass starts now, in the chain a close waits for,
   * and a close lets it finish its jobs (payingDebt) — so that a process living a few milliseconds
   * (a CLI command) pays the debt its predecessors left, where a debounced check would be
   * cancelled by its close and a pass would start no job once close began. Otherwise a debounced
   * check.
   */
  opened(): void {
    if (!this.host.options.compaction.auto || this.closed) return;
    if (this.chosenForSpace().length === 0) return this.nudge();
    const pay = async (): Promise<void> => {
      this.payingDebt = true;
      try {
        await this.autoPass();
      } finally {
        this.payingDebt = false;
      }
    };
    this.inBackground(pay);
  }

  /**
   * Applies the keydir's deferred entries (a store opened from hint files) in steps, each in a turn
   * of its own, before a walk over every name: applied at once by the walk (scopesWithRows), they
   * held the main thread ~0.75 s at 1M names after a reopen, every read, write and worker message
   * waiting behind them (forty-second session). Stops early once close began, but for the open's
   * own pass (the walk then applies the rest at once).
   */
  private async loadDeferred(): Promise<void> {
    if (gradualLoadForTests.atOnce) return;
    const keydir = this.host.keydir;
    while (!keydir.loadStep()) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (gradualLoadForTests.afterStep !== null) await gradualLoadForTests.afterStep();
      if (this.closed && !this.payingDebt) return;
    }
  }

  /** Runs `job` in the chain of passes, its failure a process warning: the automatic pass's, a time check's. */
  private inBackground(job: () => Promise<void>): void {
    void this.serial(job).catch((err: unknown) => process.emitWarning(`engram auto compaction failed: ${String(err)}`));
  }

  /** Asks for an automatic compaction check soon (debounced; no-op unless compaction.auto). */
  nudge(): void {
    if (!this.host.options.compaction.auto || this.closed || this.autoTimer !== null) return;
    this.autoTimer = setTimeout(() => {
      this.autoTimer = null;
      this.inBackground(() => this.autoPass());
    }, 20);
    this.autoTimer.unref();
  }

  /** A value in `seg` died: maybe the segment passed its garbage ratio. */
  noteGarbage(_seg: Segment): void {
    this.lastDeathAt = performance.now();
    this.nudge();
  }

  /** Runs the automatic check again once values have stopped dying for STORE_QUIET_MS. */
  private nudgeWhenQuiet(): void {
    if (!this.host.options.compaction.auto || this.closed || this.quietTimer !== null) return;
    this.quietTimer = setTimeout(() => {
      this.quietTimer = null;
      this.nudge();
    }, P.STORE_QUIET_MS);
    this.quietTimer.unref();
  }

  /**
   * The active segment is never compacted while it takes appends; once it is large (and the space
   * rule picks it: over its ratio, or most-dead in a store past the store-wide share), the
   * automatic pass seals it so that it can be.
   */
  private activeLarge(s: Segment): boolean {
    const size = s.dataEnd - C.DATA_START;
    return s.writer !== null && !s.compacting && size >= Math.min(ACTIVE_SEAL_BYTES_MIN, this.host.options.segmentBytes / 2);
  }

  /**
   * Once per open, STORE_QUIET_MS after it, counts every segment's dead bytes from the keydir
   * (recovery does not): otherwise garbage that existed before the open is never reclaimed. Not
   * while the keydir holds deferred slots (hint files): the count would build every slot, the
   * heap the deferral saves; such a store learns its dead bytes at its first pass (a pass over
   * chosen segments counts the others in its own walk: compactMany).
   */
  private countAfterOpen(): void {
    if (this.deadCounted || this.host.keydir.isDeferred) return;
    if (performance.now() - this.openedAt < P.STORE_QUIET_MS) {
      this.nudgeWhenQuiet();
      return;
    }
    this.recount();
  }

  /** True when sealed segment `s` (idle: idleSealed) is over its garbage ratio. */
  private overRatio(s: Segment): boolean {
    const ratio = this.host.options.compaction.garbageRatio;
    return idleSealed(s) && s.deadBytes > ratio * Math.max(1, s.dataEnd - C.DATA_START);
  }

  /** At open: the segments' dead bytes from the estimates the last close left (`file`, as recovery read it: dead-estimates.ts). */
  loadEstimates(file: DeadBytesFile): void {
    this.estimatesRead = loadEstimates(file, this.host.segments, this.reclaims.droppableAtOpen(this.retentionMsMin));
  }

  /** At close, once every segment's data end is final: the estimates and reclaim times for the next open (best effort). */
  saveEstimates(): void {
    saveEstimates(this.host.segmentsDir, this.host.segments, this.estimatesRead, this.reclaims.atClose(this.host.keydir));
  }

  /** Recomputes every segment's dead bytes from the keydir (after erasures and expiry, and once after open). */
  recount(): void {
    const soonest: Soonest = { at: Infinity };
    this.countDead(tallySegments(this.host, this.host.options.clock(), soonest));
    this.noteDeathAt(soonest.at);
  }

  /** Sets every segment's dead bytes from a tally of what survives (`tally`: planSegments or tallySegments). */
  private countDead(tally: ReadonlyMap<number, { liveBytes: number } | SegmentPlan>): void {
    for (const seg of this.host.segments.values()) seg.deadBytes = deadBytesBy(seg, tally);
    this.deadCounted = true;
    if (this.segmentsOverRatio().length > 0) this.nudge();
  }

  /** The sealed segments over their garbage ratio now. */
  private segmentsOverRatio(): Segment[] {
    return [...this.host.segments.values()].filter((s) => this.overRatio(s));
  }

  /**
   * One automatic pass: counts dead bytes once after open (when that costs no deferred slot),
   * seals the active segment when the space rule picks it, then compacts what the rule picks.
   */
  private async autoPass(): Promise<void> {
    if (this.closed) return;
    this.countAfterOpen();
    const active = this.host.log.activeSegment;
    const chosen = this.chosenForSpace();
    if (chosen.includes(active)) await this.host.log.whenSealed(this.host.log.rotate());
    const report = await this.compactMany(chosen, this.host.options.compaction.mode);
    // Values that died while the pass ran may have put the store over the rule again, and no
    // later death may come to nudge: look once more after a pass that reclaimed something.
    if (report.bytesAfter < report.bytesBefore) this.nudge();
  }

  /**
   * The sealed segments the space rule picks now (gc-policy.ts, chooseForSpace), from the
   * dead-byte estimates: the per-segment ratio at once, the store-wide share once values stopped
   * dying for STORE_QUIET_MS (a timer comes back for it).
   */
  private chosenForSpace(): Segment[] {
    const sealed = [...this.host.segments.values()].filter(idleSealed);
    // The active segment is a candidate once it is large (the automatic pass seals it first): with
    // the default 64 MiB segments, a whole store's garbage may sit in it.
    const active = this.host.log.activeSegment;
    if (this.activeLarge(active)) sealed.push(active);
    const candidates = sealed.map((s) => ({ id: s.id, bytes: s.dataEnd - C.DATA_START, deadBytes: s.deadBytes }));
    const ratio = this.host.options.compaction.garbageRatio;
    const quiet = performance.now() - this.lastDeathAt >= P.STORE_QUIET_MS;
    const ids = P.chooseForSpace(candidates, ratio, quiet);
    if (!quiet && P.chooseForSpace(candidates, ratio, true).length > ids.length) this.nudgeWhenQuiet();
    const byId = new Map(sealed.map((s) => [s.id, s]));
    return ids.map((id) => {
      const seg = byId.get(id);
      assert(seg !== undefined, `the space rule chose segment ${id}, which was a candidate`);
      return seg;
    });
  }

  /**
   * Resolves once every sealed hint of `which` ("garbage": of every segment) that was being
   * written is written or dropped, so that the pass finds those segments compactable: a segment
   * sealed just before a pass — by the pass itself (whenSealed does not wait for the hint), an
   * explicit compact(), gc() or an eager erasure (I8) — is compacted by it, not skipped. Called
   * after the deferred names' load, whose steps the write mostly overlaps. Resolves at once when
   * none is being written.
   */
  private async hintsWritten(which: readonly Segment[] | "garbage"): Promise<void> {
    if (unsafeSealedHintForTests.takePending || unsafeSealedHintForTests.skipPending) return;
    await sealedHintsWritten(which === "garbage" ? this.host.segments.values() : which);
  }

  /** True while `seg` may be compacted now: sealed with its hint written (idleSealed), published. */
  private compactable(seg: Segment): boolean {
    return idleSealed(seg) && this.host.segments.has(seg.id) && seg.lost === null;
  }

  /**
   * Groups the copy-on-write sources of one pass, in the order given, into outputs of at most
   * max(segmentBytes, MERGE_OUTPUT_BYTES_MIN) surviving bytes (and a quarter of the free disk
   * space) and MERGE_SOURCES_MAX sources: several small or half-dead
   * segments become one file, so that the pass pays one data sync, one hint, one manifest write and
   * one directory fsync per output instead of per source.
   */
  private group(segs: readonly Segment[], plans: ReadonlyMap<number, SegmentPlan>): Segment[][] {
    // A merged output exists beside all its sources until it is published: on a nearly full disk
    // merge only into what a quarter of the free space holds (two outputs may be in flight), and
    // with no room one source per output, as an unmerged pass needs.
    const room = Math.min(Math.max(this.host.options.segmentBytes, MERGE_OUTPUT_BYTES_MIN), freeBytes(this.host.segmentsDir) / 4) - C.DATA_START;
    const groups: Segment[][] = [];
    let current: Segment[] = [];
    let bytes = 0;
    for (const seg of segs) {
      const live = liveBytesOf(plans.get(seg.id));
      // Records are copied verbatim: one output holds one record frame (format 2 or 3, never both).
      const otherFrame = current.length > 0 && rewrittenVersion((current[0] as Segment).header) !== rewrittenVersion(seg.header);
      if (current.length > 0 && (bytes + live > room || current.length >= MERGE_SOURCES_MAX || otherFrame)) {
        groups.push(current);
        current = [];
        bytes = 0;
      }
      current.push(seg);
      bytes += live;
    }
    if (current.length > 0) groups.push(current);
    return groups;
  }

  /** The worker task of one group: copy-on-write into `targetId`, or in-place of its one segment. */
  private taskOf(group: readonly Segment[], mode: Mode, targetId: number, plans: ReadonlyMap<number, SegmentPlan>): CompactionTask {
    const sources = group.map((seg) => {
      const plan = plans.get(seg.id) ?? emptyPlan();
      const live = plan.survivors.pairs();
      const known = plan.deadPuts.offsets().sort();
      return { segmentId: seg.id, live, known, cell: seg.cell, minSeq: lowestSeq(plan.survivors, this.host.keydir) };
    });
    assert(mode === "copy-on-write" || (group.length === 1 && targetId === elementAt(group, 0, "one segment").id), "in-place rewrites one segment onto itself");
    return { mode, segmentsDir: this.host.segmentsDir, sources, targetId, gens: this.host.gens.buffer, faults: this.host.faults.buffer };
  }

  /** Starts a group's compaction (its sources marked compacting until it settles). */
  private start(job: Job, plans: ReadonlyMap<number, SegmentPlan>): Running {
    const task = this.taskOf(job.group, job.mode, job.targetId, plans);
    for (const seg of job.group) seg.compacting = true;
    const started = performance.now();
    const done = this.run(task).finally(() => {
      for (const seg of job.group) seg.compacting = false;
    });
    done.catch(() => undefined); // awaited by the pass; never an unhandled rejection meanwhile
    return { job, task, done, started };
  }

  /**
   * Applies a finished compaction in one synchronous turn. Replaced (copy-on-write) or emptied
   * sources are retired first — the manifest lists the output in their place, durably, then their
   * files are unlinked behind one directory fsync — and only then are their dropped records
   * counted gone: GC's counts never run ahead of the retirement (I6, issue 9 defect 1), so a later
   * gc can drop a tombstone only once no file recovery reads holds the value it kills.
   */
  private publish(run: Running, result: CompactionResult, plans: ReadonlyMap<number, SegmentPlan>, now: number): T.CompactionReport {
    const { job, task } = run;
    const segs = job.group;
    this.clearsBeforeDrop = [];
    const inPlace = task.mode === "in-place" && !result.empty;
    const keptScopes = new Set<string>();
    for (const seg of segs) addScopesOfPuts(plans.get(seg.id), keptScopes);
    const target = result.empty ? null : inPlace ? elementAt(segs, 0, "one segment") : this.openOutput(task.targetId, result, keptScopes);
    // The generations values were cached at, read before replace() retires the sources (in place:
    // the even one before the rewrite, whose odd successor the cell holds until publishInPlace).
    const cachedAt = segs.map((seg) => (inPlace ? result.generation - 2 : this.host.gens.load(seg.cell)));
    const failure = inPlace ? null : this.replace(segs, target);
    let diedDuring = 0;
    segs.forEach((seg, i) => {
      const part = elementAt(result.sources, i, "a result per source");
      assert(part.segmentId === seg.id, `result ${i} is of segment ${seg.id}`);
      const plan = plans.get(seg.id) ?? emptyPlan();
      // Dropped records first: their offsets are old offsets, which in-place relocation reuses.
      const touched = this.dropRecords(seg, part, plan.deadPuts, now);
      if (target !== null) {
        const carry = this.host.cache === null ? null : { cache: this.host.cache, generation: elementAt(cachedAt, i, "a generation per source"), toGeneration: inPlace ? result.generation : this.host.gens.load(target.cell) };
        relocateAll(this.host.keydir, plan.survivors, seg.id, target.id, part.newOffsets, carry);
      }
      this.clearDroppable(seg, plan.droppable, touched);
      // Values that died while the worker ran were counted on the source (their slots pointed
      // there); they sit in the output now: its garbage from the start.
      diedDuring += Math.max(0, seg.deadBytes - (this.deadAtPlan.get(seg.id) ?? seg.deadBytes));
    });
    if (inPlace) this.publishInPlace(elementAt(segs, 0, "one segment"), result, keptScopes);
    else if (target !== null) target.deadBytes += diedDuring;
    this.countReleasedClears(now);
    this.completed += segs.length;
    if (failure !== null) throw failure;
    return {
      segments: segs.map((x) => x.id), mode: task.mode, bytesBefore: result.bytesBefore, bytesAfter: result.empty ? 0 : result.bytesAfter,
      recordsKept: result.recordsKept, recordsDropped: result.recordsDropped, durationMs: performance.now() - run.started,
    };
  }

  /** in-place: the rewritten segment's new header, size and scopes; the generation goes even in this turn. */
  private publishInPlace(seg: Segment, result: CompactionResult, keptScopes: ReadonlySet<string>): void {
    seg.header = readHeader(seg.fd, seg.id);
    seg.dataEnd = result.bytesAfter;
    seg.deadBytes = 0;
    seg.scopes.clear();
    for (const sc of keptScopes) seg.scopes.add(sc);
    const published = this.host.gens.bump(seg.cell);
    assert(published % 2 === 0, `segment ${seg.id}: the main thread bumps odd to even, got ${published}`);
    if (published !== result.generation || published !== seg.header.header.generation) {
      throw new Error(`segment ${seg.id}: published generation ${published}, header ${seg.header.header.generation}, worker ${result.generation}`);
    }
  }

  /**
   * Retires `segs`, replaced by `target` (or emptied: null). The manifest is rewritten once — the
   * output listed, the sources not — before any source file is unlinked, so a crash in between
   * deletes the sources at open instead of reading them (I6); then every source is unlinked, and
   * one directory fsync follows (the next output's manifest write, or the pass's end: syncUnlinks).
   * When the manifest write or the first unlink fails, the sources stay
   * published and the output is withdrawn (the manifest rewritten without it before its file
   * goes, so it never names a missing file) and the IoError propagates. A failure after the first
   * unlink leaves the merge committed (the manifest no longer lists the sources: a file that stayed
   * is deleted at the next open): it is returned, to be thrown once the keydir has moved.
   */
  private replace(segs: readonly Segment[], target: Segment | null): unknown {
    for (const seg of segs) this.host.segments.delete(seg.id);
    let unlinked = 0;
    try {
      this.host.recordSegments(); // listed no more before the unlink: a crash between deletes them at open
      this.unlinksSynced(); // its directory fsync came after the previous output's unlinks
      if (target !== null) hitCrashOnly(this.host.faults.buffer, "compaction:after-rename"); // the output is published by this manifest
      hitCrashOnly(this.host.faults.buffer, "compaction:before-unlink");
      for (const seg of segs) {
        seg.unlinkFile(this.host.segmentsDir);
        unlinked += 1;
      }
    } catch (err) {
      if (unlinked === 0) {
        for (const seg of segs) this.host.segments.set(seg.id, seg);
        if (target !== null) this.withdrawOutput(target);
        throw err;
      }
      return this.retireAll(segs, unlinked, err);
    }
    return this.retireAll(segs, unlinked, null);
  }

  /**
   * Marks every source retired; the first `unlinked` wait for a directory fsync to be gone — the
   * next output's manifest write makes it (its directory fsync follows these unlinks), or
   * syncUnlinks at the end of the pass. Returns `failure`.
   */
  private retireAll(segs: readonly Segment[], unlinked: number, failure: unknown): unknown {
    for (const h of this.held) if (h.isClosed) this.held.delete(h); // bounded: only segments a read still holds
    segs.forEach((seg, i) => {
      seg.markRetired(this.host.gens);
      if (i < unlinked) this.unsynced.push(seg);
      if (!seg.isClosed) this.held.add(seg);
    });
    return failure;
  }

  /** A directory fsync just followed every unlink so far (a manifest write, or syncUnlinks): those sources are gone. */
  private unlinksSynced(): void {
    for (const seg of this.unsynced) seg.markGone();
    this.unsynced.length = 0;
  }

  /**
   * Removes the journals the pass's in-place rewrites left for reuse (compaction-core.ts
   * writeJournal), then fsyncs the directory once. A kept journal is complete and its rewrite
   * durable, so one that stays (a failed unlink, a crash before) only costs the next open an
   * idempotent replay; it is removed so that the open does not pay it and the disk does not keep
   * it. One already renamed by a later rewrite is that rewrite's: kept in turn (removed here under
   * its new name), or the one good copy of a segment whose rewrite failed (left for recovery).
   */
  private removeKeptJournals(): void {
    let removed = 0;
    for (const id of this.keptJournals) {
      const file = path.join(this.host.segmentsDir, journalFileName(id));
      if (!fs.existsSync(file)) continue;
      unlinkQuietly(file);
      removed += 1;
    }
    this.keptJournals.length = 0;
    if (removed === 0) return;
    try {
      fsyncDir(this.host.segmentsDir);
    } catch {
      // the journals may come back after a crash: replayed idempotently, or dropped as stale
    }
  }

  /**
   * Makes the pass's remaining unlinks durable with one directory fsync (tried twice). The manifest
   * already retired those files durably (an unlisted file below nextId is deleted at open, before
   * anything is read), so this sync is for I8 — the bytes of an eager erasure are gone from the
   * directory when forgetScope resolves — and runs before the pass returns.
   */
  private syncUnlinks(): void {
    if (this.unsynced.length === 0) return;
    try {
      fsyncDir(this.host.segmentsDir);
    } catch {
      fsyncDir(this.host.segmentsDir);
    }
    this.unlinksSynced();
  }

  /**
   * Takes back an unpublished copy-on-write output: unregistered, then the manifest rewritten
   * without it, and only then closed and its file removed (if the manifest cannot be written, the
   * file stays: the manifest on disk may still name it, and it holds only what the old one does).
   */
  private withdrawOutput(out: Segment): void {
    this.host.segments.delete(out.id);
    try {
      this.host.recordSegments();
    } finally {
      out.close(this.host.gens);
    }
    unlinkQuietly(path.join(this.host.segmentsDir, segmentFileName(out.id)));
    unlinkHint(this.host.segmentsDir, out.id); // written by the worker with the output
  }

  /** Store close: closes the descriptors of retired (already unlinked) segments a read still holds. */
  closeRetired(): void {
    for (const seg of this.held) seg.close(this.host.gens);
    this.held.clear();
  }

  /** Opens and registers a published copy-on-write output `id` (read-only; a new generation cell at 0). */
  private openOutput(id: number, result: CompactionResult, keptScopes: ReadonlySet<string>): Segment {
    const fd = openRead(path.join(this.host.segmentsDir, segmentFileName(id)));
    const header = readHeader(fd, id);
    const cell = this.host.gens.allocate(0);
    if (cell === null) throw new Error("no generation cell for a compaction output");
    const out = new Segment(id, fd, cell, header, result.bytesAfter, null);
    out.minSeq = header.header.minSeq;
    out.maxSeq = header.header.maxSeq;
    for (const s of keptScopes) out.scopes.add(s);
    this.host.segments.set(id, out);
    return out;
  }

  /**
   * Accounts for the PUT records the compaction dropped — the dead current values the plan named
   * (`deadPuts`, each verified by the worker to be a PUT record there) and the rest, which the
   * worker named — and returns the slots it touched, a slot more than once where it lost more
   * than one record (a list, not a Set: clearDroppable's check and keydir.delete are idempotent,
   * and a Set of every dead record's slot cost ~0.2 µs per record of the pass's publication).
   */
  private dropRecords(seg: Segment, result: SourceResult, deadPuts: RecordList, now: number): Slot[] {
    const keydir = this.host.keydir;
    const touched: Slot[] = [];
    let dies = Infinity; // the soonest death by time these drops make possible (deathAfterDrop), noted once
    for (let i = 0; i < deadPuts.length; i++) {
      assert(deadPuts.kindAt(i) === KIND_PUT, "a dead current value is a PUT record");
      const slot = deadPuts.slotAt(i);
      if (slot.physical <= 0) fail(`physical record count of ${slot.scope}/${slot.key} never goes below zero`);
      this.noteClearBeforeDrop(slot, now);
      slot.physical -= 1;
      if (slot.physical === 0) slot.reclaimedAt = now;
      if (slot.seg === seg.id && slot.off === deadPuts.offAt(i)) slot.seg = 0;
      dies = Math.min(dies, this.deathAfterDrop(slot, now));
      touched.push(slot);
    }
    for (let i = 0; i < result.droppedKeys.length; i++) {
      const slot = keydir.get(elementAt(result.droppedScopes, i, "a scope per dropped record"), elementAt(result.droppedKeys, i, "a key per dropped record"));
      if (slot === undefined) throw new Error(`dropped record of unknown slot ${result.droppedScopes[i]}/${result.droppedKeys[i]}`);
      if (slot.physical <= 0) fail(`physical record count of ${slot.scope}/${slot.key} never goes below zero`);
      this.noteClearBeforeDrop(slot, now);
      slot.physical -= 1;
      if (slot.physical === 0) slot.reclaimedAt = now;
      if (slot.seg === seg.id && slot.off === result.droppedOffsets[i]) slot.seg = 0;
      dies = Math.min(dies, this.deathAfterDrop(slot, now));
      touched.push(slot);
    }
    if (this.killRecordsGone(result)) dies = now;
    if (touched.length > 0) this.reclaims.reclaimed();
    this.noteDeathAt(dies);
    return touched;
  }

  /** Before a PUT record of `slot` drops: remembers the slot when its CLEAR is live now (countReleasedClears). */
  private noteClearBeforeDrop(slot: Slot, now: number): void {
    if (slot.clearSeg !== 0 && P.clearRecordLive(slot, now, this.host.retentionMsFor(slot.scope), this.host.keydir)) this.clearsBeforeDrop.push(slot);
  }

  /**
   * After a publication: a CLEAR that was live before a PUT record of its slot dropped and is no
   * longer (a later value now supersedes it: fifty-sixth session) is garbage of the segment it lies
   * in — the pass's output, or a segment the pass did not touch, whose estimate counted it live.
   */
  private countReleasedClears(now: number): void {
    const seen = new Set<Slot>();
    for (const slot of this.clearsBeforeDrop) {
      if (seen.has(slot) || slot.clearSeg === 0) continue;
      seen.add(slot);
      if (P.clearRecordLive(slot, now, this.host.retentionMsFor(slot.scope), this.host.keydir)) continue;
      const seg = this.host.segments.get(slot.clearSeg);
      if (seg !== undefined) seg.deadBytes += slot.clearLen;
    }
    this.clearsBeforeDrop = [];
  }

  /**
   * Counts the TOMBSTONE, CLEAR and SCOPE_ERASE records the compaction dropped gone (the worker
   * names every one): the latest record of a slot or scope is held while an older one is on disk
   * (gc-policy.ts olderKillOnDisk), and goes at a pass after this one. A slot no longer held (a
   * test twin's old rule dropped it first) has nothing to count: skipped, as a scope with no
   * erasure left. Returns true when a drop may have released a record it held (killReleases): that
   * record, droppable from now on, lies in a segment whose dead-byte estimate does not count it and
   * which nothing else may ever compact in a store left alone, so the caller arms a time check for
   * now — its recount counts it, and the automatic pass follows by the space rule.
   */
  private killRecordsGone(result: SourceResult): boolean {
    const keydir = this.host.keydir;
    let released = false;
    for (let i = 0; i < result.killTypes.length; i++) {
      const type = result.killTypes[i];
      const scope = elementAt(result.killScopes, i, "a scope per dropped kill record");
      if (type === C.RecordType.SCOPE_ERASE) {
        const e = keydir.erases.get(scope);
        if (e !== undefined && e.records > 0) e.records -= 1;
        released ||= keydir.erases.size > (e === undefined ? 0 : 1) || (e !== undefined && e.records === 1 + (e.more?.length ?? 0));
        continue;
      }
      const slot = keydir.get(scope, elementAt(result.killKeys, i, "a key per dropped kill record"));
      if (slot === undefined) continue;
      if (type === C.RecordType.TOMBSTONE && slot.tombRecords > 0) slot.tombRecords -= 1;
      if (type === C.RecordType.CLEAR && slot.clearRecords > 0) slot.clearRecords -= 1;
      released ||= killReleases(keydir, slot, type);
    }
    return released && !unsafeTimeCheckForTests.ignoreKillDrops;
  }

  /**
   * A record of `slot` was dropped at `now`: with none left, its retention window starts; with only
   * its current value left, an expired one is no longer held by an older record. Either may die by
   * time alone later, which no pass will report: returns when (Infinity: neither), for a time check.
   * A drop that leaves the slot's TOMBSTONE superseded (supersedesTombstone) returns `now`.
   */
  private deathAfterDrop(slot: Slot, now: number): number {
    if (supersedesTombstone(slot)) return now;
    if (slot.physical === 0) return now + this.retentionMsMin;
    if (slot.physical === 1 && slot.expiresAt !== 0) return Math.max(now, slot.expiresAt + this.retentionMsMin);
    return Infinity;
  }

  /** Clears the pointers to the retention records the compaction dropped, then drops empty slots (`touched` may name one twice). */
  private clearDroppable(seg: Segment, droppable: RecordList, touched: Slot[]): void {
    const keydir = this.host.keydir;
    for (let i = 0; i < droppable.length; i++) {
      const kind = droppable.kindAt(i);
      const off = droppable.offAt(i);
      if (kind === KIND_ERASE) {
        const scope = droppable.refAt(i) as string;
        const e = keydir.erases.get(scope);
        if (e === undefined) continue;
        const chunk = e.more?.findIndex((x) => x.seg === seg.id && x.off === off) ?? -1;
        if (chunk >= 0) e.more?.splice(chunk, 1);
        if (e.seg !== seg.id || e.off !== off) continue;
        keydir.erases.delete(scope);
        // Their retention may have ended with it. A held row holds its PUT (never empty): skipped, no Slot made.
        keydir.anyInSubtree(scope, (ref) => {
          if (typeof ref !== "number") touched.push(ref);
          return false;
        });
        continue;
      }
      const slot = droppable.slotAt(i);
      if (kind === KIND_TOMB && slot.tombSeg === seg.id && slot.tombOff === off) P.tombstoneDropped(slot);
      if (kind === KIND_CLEAR && slot.clearSeg === seg.id && slot.clearOff === off) slot.clearSeg = 0;
      touched.push(slot);
    }
    for (let i = 0; i < touched.length; i++) {
      const slot = touched[i] as Slot; // in bounds: i < length
      if (P.slotEmpty(keydir, slot)) keydir.delete(slot); // a slot already dropped is no longer held: delete() does nothing
      else if (!P.unsafeTombstoneForTests.keepUnnamed) P.forgetUnnamedKill(keydir, slot);
    }
  }

  /** The sealed, unretired segments holding any dead bytes. */
  private sealedWithGarbage(): Segment[] {
    return [...this.host.segments.values()].filter((s) => s.writer === null && !s.retired && s.deadBytes > 0);
  }

  /** Seals the active segment when it holds garbage, so that GC can reach it. */
  private async sealActiveIfDirty(): Promise<void> {
    const active = this.host.log.activeSegment;
    if (active.deadBytes === 0 || active.dataEnd === C.DATA_START) return;
    const old = this.host.log.rotate();
    await this.host.log.whenSealed(old);
  }

  /**
   * compact() without ids: every segment with garbage, the active one sealed first when it holds
   * some — by the write path's estimate, or, when that says none, by expiry since, which the
   * pass's own plan tells. One keydir walk plans the whole pass before the seal; the pass keeps
   * that plan when nothing was committed, queued or appended meanwhile (the same sequence, the
   * sealed segment ending where it ended at the plan: PlannedPass), else it plans again. Before,
   * a recount of the active segment walked every slot and the pass walked them all again.
   */
  private async compactGarbage(mode: Mode): Promise<T.CompactionReport> {
    await this.loadDeferred();
    await this.hintsWritten("garbage");
    const early = await this.flushUnderPlan(mode);
    try {
      return await this.planAndCompact(mode, early);
    } finally {
      // Its failure is the pass's even when no job waited for it (nothing to compact): the flush
      // may have taken a failed background sync's error, which must reach a caller (commit.ts).
      if (early !== null) await early.done;
    }
  }

  /** compactGarbage's plan and pass, with the flush started under the plan (null: none). */
  private async planAndCompact(mode: Mode, early: PlannedPass["flushed"]): Promise<T.CompactionReport> {
    // No other flush first (the recount this walk replaces had none): a group applied after the
    // plan moves a segment's data end or the sequence, and stillPlanned then refuses the plan.
    const active = this.host.log.activeSegment;
    const estimated = active.deadBytes;
    const planned: PlannedPass = { now: this.host.options.clock(), sequence: this.host.sequence, sealedId: active.id, sealedEnd: active.dataEnd, plans: new Map(), flushed: early };
    const soonest: Soonest = { at: Infinity };
    planned.plans = planSegments(this.host, planned.now, null, undefined, soonest);
    this.noteDeathAt(soonest.at);
    this.countDead(planned.plans); // the active segment's count too: what recountActive computed
    if (unsafePlanReuseForTests.afterPlan !== null) await unsafePlanReuseForTests.afterPlan(); // never set but by a test: no await here otherwise
    const sealIt = (estimated > 0 || active.deadBytes > 0) && active.dataEnd !== C.DATA_START;
    if (sealIt && this.startsBeforeSeal() && this.stillPlanned(planned)) return this.compactMany("garbage", mode, planned, active);
    if (sealIt) {
      const old = this.host.log.rotate();
      assert(old === active, "the segment sealed is the one planned as active");
      await this.host.log.whenSealed(old);
    }
    return this.compactMany("garbage", mode, planned);
  }

  /**
   * For an in-place pass that may start its first job before the seal (startsBeforeSeal): a flush
   * started before the plan, whose fdatasync runs on libuv's pool while the main thread walks the
   * keydir, and the sequence it covers (every write committed or queued at its call). It stands
   * for the flush the pass made after the plan only while nothing was committed or queued since
   * (flushFor): then it covers every record the plan has die. Resolves once the flush's steps
   * ran up to its fdatasync (one turn of the event loop). Null otherwise. The flush after the
   * plan had cost an in-place pass of 8 segments ~13 ms before its first job (thirty-first session).
   */
  private async flushUnderPlan(mode: Mode): Promise<PlannedPass["flushed"]> {
    if (mode !== "in-place" || !this.startsBeforeSeal() || earlyStartForTests.inPlaceUnflushed) return null;
    const sequence = this.host.sequence;
    const done = this.host.flush();
    done.catch(() => undefined); // awaited by the pass, or superseded by its own flush; never unhandled
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (earlyStartForTests.underPlan !== null) await earlyStartForTests.underPlan(); // never set but by a test
    return { done, sequence };
  }

  /**
   * True when a pass may start its first job before it seals the active segment (sealDuring):
   * with a worker, so that the seal's work on the main thread (the new segment's creation and
   * manifest, the old one's sync, header and hint) runs while the worker compacts. A copy-on-write
   * job changes nothing on disk that a reader or recovery sees until the main thread publishes it,
   * so it starts before the flush too. An in-place job rewrites its segment in the worker, dropping
   * records for good: it starts after a flush (compactMany: every record that killed one is
   * durable first), still before the seal (eighteenth session; the seal had cost an in-place pass
   * 25–30 ms before its first job).
   */
  private startsBeforeSeal(): boolean {
    return this.host.options.compaction.workers > 0;
  }

  /**
   * Seals `seg`, the segment active at the plan, while the pass's first job runs, then flushes:
   * runJobs publishes nothing before both (a dropped record's killer is durable before its
   * sources go). If a group reached `seg` after the plan (stillPlanned fails: it was queued
   * before the seal), `seg`'s plan is made again before its job starts — the other sources keep
   * theirs (records only die since; publication moves only pointers still naming the planned place).
   * Its output was sized by the first plan: it may exceed group()'s bound by what reached `seg` late.
   */
  private async sealDuring(seg: Segment, planned: PlannedPass): Promise<void> {
    if (earlyStartForTests.beforeSeal !== null) await earlyStartForTests.beforeSeal(); // never set but by a test
    if (this.host.log.activeSegment === seg) this.host.log.rotate();
    await this.host.log.whenSealed(seg);
    await this.host.flush();
    if (this.stillPlanned(planned)) return;
    planReuse.sealedReplanned += 1;
    planned.plans.set(seg.id, planSegments(this.host, planned.now, new Set([seg.id])).get(seg.id) ?? emptyPlan());
  }

  /**
   * Compacts `segs` from one flush and one plan (`planned`'s, when it still holds: see
   * compactGarbage; else a plan made now). "garbage": every sealed segment holding dead
   * bytes, as counted by that same plan (one keydir walk both recounts the dead bytes and plans).
   * copy-on-write merges them into outputs (group), whose ids one manifest write reserves first
   * (nextId past them: an output the manifest does not list yet is deleted at open, never read);
   * in-place rewrites one segment after the other (a segment hard-linked into a backup is merged
   * by copy instead: backup.ts). With `sealing` (the segment active at `planned`, which is kept:
   * startsBeforeSeal), it joins the last output, and the pass seals it and flushes while the first
   * job runs (sealDuring) instead of flushing first.
   */
  private async compactMany(which: Segment[] | "garbage", mode: Mode, planned?: PlannedPass, sealing?: Segment): Promise<T.CompactionReport> {
    const report: T.CompactionReport = { segments: [], mode, bytesBefore: 0, bytesAfter: 0, recordsKept: 0, recordsDropped: 0, durationMs: 0 };
    const started = performance.now();
    if (which !== "garbage" && which.length === 0) return report;
    if (planned === undefined) await this.loadDeferred(); // a plan made earlier walked every name
    if (planned === undefined) await this.hintsWritten(which); // after the load's steps, which it mostly overlaps; compactGarbage waited before its plan
    if (sealing === undefined) await this.flushFor(planned);
    // From here to the jobs' start nothing awaits (but an in-place pass's flush below, which the
    // plan survives): a plan kept is checked in the turn that uses it.
    const kept = planned !== undefined && which === "garbage" && this.stillPlanned(planned);
    if (planned !== undefined) planReuse[kept ? "kept" : "replanned"] += 1;
    assert(sealing === undefined || (kept && planned !== undefined), "a pass seals during its first job only with the plan it kept");
    const now = kept ? planned.now : this.host.options.clock();
    // A pass over chosen segments walks every slot anyway: while the dead bytes were never
    // counted since the open, the walk counts every other segment too (a recount's walk saved).
    const tally = which !== "garbage" && !kept && !this.deadCounted ? new Map<number, LiveTally>() : null;
    const plans = kept ? planned.plans : planSegments(this.host, now, which === "garbage" ? null : new Set(which.map((x) => x.id)), tally ?? undefined);
    if (which === "garbage" && !kept) this.countDead(plans);
    else if (tally !== null) this.countDead(new Map<number, LiveTally | SegmentPlan>([...tally, ...plans]));
    const ready = (which === "garbage" ? this.sealedWithGarbage() : which).filter((s) => this.compactable(s));
    if (sealing !== undefined && sealing.deadBytes > 0) ready.push(sealing); // last: in the last output, started once sealed
    this.deadAtPlan.clear();
    for (const seg of ready) this.deadAtPlan.set(seg.id, seg.deadBytes);
    const jobs = this.jobsOf(ready, mode, plans);
    if (jobs.length === 0) return report;
    if (jobs.some((j) => j.mode === "copy-on-write")) this.host.recordSegments(); // reserves the output ids
    // An in-place job that starts before the seal starts after a flush (startsBeforeSeal). A write
    // queued meanwhile only makes records die (a sealed segment's are kept: conservative) or lands
    // in the segment being sealed, whose plan sealDuring then makes again.
    if (sealing !== undefined && jobs.some((j) => j.mode === "in-place") && !earlyStartForTests.inPlaceUnflushed) await this.flushFor(planned);
    if (sealing !== undefined && earlyStartForTests.beforeJobs !== null) await earlyStartForTests.beforeJobs(); // never set but by a test
    try {
      await this.runJobs(jobs, plans, now, report, sealing === undefined || planned === undefined ? null : { segment: sealing, run: () => this.sealDuring(sealing, planned) });
    } finally {
      this.removeKeptJournals();
      this.syncUnlinks();
    }
    report.durationMs = performance.now() - started;
    return report;
  }

  /**
   * Makes every write committed or queued so far durable: awaits the flush started under
   * `planned`'s plan (flushUnderPlan; its failure is the pass's), and flushes again unless that one
   * covers the sequence now — when nothing was committed or queued since it was called, in which
   * case the plan, or one made in this turn, has nothing die by a record it left out.
   */
  private async flushFor(planned: PlannedPass | undefined): Promise<void> {
    const early = planned?.flushed ?? null;
    if (early !== null) await early.done;
    if (early === null || (early.sequence !== this.host.sequence && !earlyStartForTests.trustUnderPlan)) await this.host.flush();
  }

  /**
   * True when `planned` still says what a plan made now would, but for expiry since (which only
   * makes more records dead: the pass then keeps some that a later one drops): no write was
   * committed or queued since (the sequence), and the segment that was active then holds exactly
   * the bytes it held (sealed or not), so every record of every planned segment was planned.
   */
  private stillPlanned(planned: PlannedPass): boolean {
    if (unsafePlanReuseForTests.always) return true;
    const seg = this.host.segments.get(planned.sealedId);
    return planned.sequence === this.host.sequence && seg !== undefined && seg.dataEnd === planned.sealedEnd;
  }

  /** The pass's jobs: merged copy-on-write groups (ids allocated now), then in-place segments one by one. */
  private jobsOf(ready: readonly Segment[], mode: Mode, plans: ReadonlyMap<number, SegmentPlan>): Job[] {
    // A segment hard-linked into a backup must never be rewritten in place (backup.ts).
    const copied = mode === "copy-on-write" ? ready : ready.filter((s) => fs.fstatSync(s.fd).nlink > 1);
    const jobs: Job[] = this.group(copied, plans).map((group) => ({ group, mode: "copy-on-write" as const, targetId: this.host.allocateId() }));
    if (mode === "in-place") for (const s of ready) if (!copied.includes(s)) jobs.push({ group: [s], mode, targetId: s.id });
    return jobs;
  }

  /**
   * Runs the jobs, publishing them in order. With a worker, up to COPIES_IN_FLIGHT copy-on-write
   * jobs run at once in it (the next output is walked and copied while this one's data is written
   * and fdatasynced on libuv's pool), and a copy runs while the main thread publishes the job before
   * it; a job done but not yet published counts as in flight, so at most that many unpublished
   * outputs exist at any time (group()'s free-space bound). The groups are disjoint and every plan
   * was made before any of them ran, and publication moves a keydir pointer only if it still names
   * the planned place, so the overlap changes no decision. Up to REWRITES_IN_FLIGHT in-place jobs
   * are handed to the worker, which rewrites them strictly one after the other: the next one starts
   * there while the main thread publishes this one. Publication is in memory (the relocation and
   * the generation's bump to even); on disk the rewrites follow each other as before, so no
   * recovery sees anything new. After a failure, every job still in flight is
   * awaited (discardAll). `seal` (sealDuring, of `seal.segment`) runs after the first jobs started —
   * none that holds a segment not sealed yet, nor `seal.segment` — and before anything is
   * published: an in-place pass's first rewrite may complete while the seal or its flush fails.
   */
  private async runJobs(jobs: readonly Job[], plans: ReadonlyMap<number, SegmentPlan>, now: number, report: T.CompactionReport, seal: { segment: Segment; run: () => Promise<void> } | null): Promise<void> {
    const inFlight: Running[] = [];
    const cursor: JobCursor = { next: 0, sealed: seal === null || earlyStartForTests.sealAfterPublish, sealing: seal?.segment ?? null };
    try {
      this.topUp(jobs, cursor, inFlight, plans);
      if (seal !== null && !earlyStartForTests.sealAfterPublish) {
        if (inFlight.length > 0) planReuse.earlyStarts += 1;
        await seal.run();
        cursor.sealed = true;
        this.topUp(jobs, cursor, inFlight, plans);
      }
      while (inFlight.length > 0) {
        const current = elementAt(inFlight, 0, "a running job");
        const result = await current.done;
        if (result.journalKept) this.keptJournals.push(current.task.targetId);
        this.topUp(jobs, cursor, inFlight, plans); // `current` still counts: a copy overlaps its publication only if one is free
        inFlight.shift();
        addReport(report, this.publish(current, result, plans, now));
        this.topUp(jobs, cursor, inFlight, plans);
      }
      if (seal !== null && earlyStartForTests.sealAfterPublish) await seal.run(); // the twin's wrong order
    } catch (err) {
      // A worker that died mid-rewrite in place left a segment unreadable until a reopen: the pass
      // reports that segment's error, which says to reopen, before its own (answerOf: typed).
      throw (await this.discardAll(inFlight, plans, now)) ?? err;
    }
  }

  /**
   * Starts jobs from `cursor.next` while they may run beside `inFlight`: only beside jobs of their
   * own mode, at most COPIES_IN_FLIGHT copies with a worker, REWRITES_IN_FLIGHT rewrites with one
   * worker thread (one inline, and one rewrite with several threads), and, before the seal, none
   * holding a segment still being written or the segment the pass seals. Jobs whose segments are
   * no longer compactable are skipped. None once close began, but in the pass the open started
   * (opened).
   */
  private topUp(jobs: readonly Job[], cursor: JobCursor, inFlight: Running[], plans: ReadonlyMap<number, SegmentPlan>): void {
    while (cursor.next < jobs.length && (!this.closed || this.payingDebt)) {
      const job = elementAt(jobs, cursor.next, "a job");
      const beside = inFlight.length === 0 || (inFlight.length < this.inFlightMax(job.mode) && inFlight.every((r) => r.job.mode === job.mode));
      if (!beside || (!cursor.sealed && job.group.some((s) => this.unsealedAtPlan(s, cursor)))) return;
      cursor.next += 1;
      if (!job.group.every((s) => this.compactable(s))) continue;
      inFlight.push(this.start(job, plans));
      inFlightSeen.max = Math.max(inFlightSeen.max, inFlight.length);
    }
  }

  /**
   * True while `seg` may still take records the pass's plan does not know: it is being written, or
   * it is the segment the pass seals (sealDuring plans it again once sealed). The write path may
   * rotate that one itself while an in-place pass awaits its flush: its writer is gone then, yet
   * it holds records written after the plan, which a job started on that plan would drop as dead
   * (until the forty-seventh session, acknowledged writes lost: test/compaction-early-start.test.ts,
   * whose twin is `earlyStartForTests.sealingByWriter`).
   */
  private unsealedAtPlan(seg: Segment, cursor: JobCursor): boolean {
    return seg.writer !== null || (seg === cursor.sealing && !earlyStartForTests.sealingByWriter);
  }

  /** Jobs of `mode` a pass keeps in flight: one inline; with a worker COPIES_IN_FLIGHT copies, and REWRITES_IN_FLIGHT rewrites with one thread only (topUp). */
  private inFlightMax(mode: Mode): number {
    const workers = this.host.options.compaction.workers;
    if (workers === 0) return 1;
    if (mode === "copy-on-write") return COPIES_IN_FLIGHT;
    return workers === 1 ? REWRITES_IN_FLIGHT : 1;
  }

  /**
   * After a failure: every job still in flight is awaited, in order; a copy's unpublished output is
   * removed (the test twin `leaveOnFailure` leaves them) and an in-place rewrite that completed is
   * published (discard).
   */
  /** discard() of every job in flight, in order; resolves to the error of a segment one of them left given up (giveUpIfCutShort), or null. */
  private async discardAll(inFlight: readonly Running[], plans: ReadonlyMap<number, SegmentPlan>, now: number): Promise<IoError | null> {
    if (unsafeInFlightForTests.leaveOnFailure) {
      unsafeInFlightForTests.left.push(...inFlight.map((r) => r.done.then(() => undefined, () => undefined)));
      return null;
    }
    let lost: IoError | null = null;
    for (const run of inFlight) lost = (await this.discard(run, plans, now)) ?? lost;
    return lost;
  }

  /**
   * Waits for a started job of a pass that failed. A copy-on-write job's output files are removed,
   * whether it completed or failed (removeUnpublished: its worker thread may have died). An
   * in-place job that rewrote its segment is published all the same: the rewrite is durable, and
   * the segment's generation stays odd — every read of it waiting — until the main thread
   * publishes it. Until the nineteenth session such a job was discarded like a copy, which
   * unlinked the segment itself (an in-place pass's first job runs while the active segment is
   * sealed and flushed: a failure there reached it). A job that failed put back what it wrote.
   */
  private async discard(run: Running, plans: ReadonlyMap<number, SegmentPlan>, now: number): Promise<IoError | null> {
    let result: CompactionResult;
    try {
      result = await run.done;
    } catch {
      // Its own failure removed what it wrote (in place: the original bytes are back), unless its
      // thread died; the pass reports the first failure.
      if (run.task.mode === "copy-on-write") this.removeUnpublished(run.task.targetId);
      return this.giveUpIfCutShort(run);
    }
    if (result.empty) return null;
    if (run.task.mode === "in-place" && !unsafeInPlaceDiscardForTests.asCopy) {
      if (result.journalKept) this.keptJournals.push(run.task.targetId);
      this.publish(run, result, plans, now);
      return null;
    }
    unlinkQuietly(path.join(this.host.segmentsDir, segmentFileName(run.task.targetId)));
    unlinkHint(this.host.segmentsDir, run.task.targetId);
    return null;
  }

  /**
   * After copy-on-write output `id`'s job failed: removes whatever of it is still on disk — its
   * .seg.tmp, or the .seg it was renamed to, its hint and the hint's .tmp. A job's own failure
   * removed them already (nothing is found here, nothing unlinked); a worker thread that died
   * mid-job removed nothing, and until the fifty-fourth session they stayed until the next open.
   * Always safe: the id is fresh, reserved by the manifest's nextId only (no manifest lists it, so
   * no reader or recovery ever takes it, and the next open would delete it), and the output is
   * published only by publish(), after a job that answered. Without a directory fsync: a removal
   * lost to a crash is the open's to finish, as before.
   */
  private removeUnpublished(id: number): void {
    if (unsafeWorkerDeathForTests.leaveOutput) return;
    const hint = hintFileName(id);
    for (const name of [tmpFileName(id), segmentFileName(id), hint, `${hint}.tmp`]) {
      const file = path.join(this.host.segmentsDir, name);
      if (fs.existsSync(file)) unlinkQuietly(file); // only what is there: an armed unlink failure is not spent on an absent file
    }
  }

  /**
   * After an in-place job failed: when its segment's generation is still odd, no one put the
   * original bytes back — the worker thread died mid-rewrite (a job's own failure restores them
   * and makes the generation even) — and its bytes stay unknown until the next open replays the
   * rewrite's journal. The segment is given up (Segment.lost) and its waiting reads are woken to
   * throw that error; before the fifty-third session they waited for ever, and every later pass
   * failed on it as corruption. Returns that error, or null when the job's segment is not given up.
   */
  private giveUpIfCutShort(run: Running): IoError | null {
    if (run.task.mode !== "in-place" || unsafeCutShortForTests.keepWaiting) return null;
    const seg = this.host.segments.get(elementAt(run.task.sources, 0, "an in-place job's segment").segmentId);
    if (seg === undefined || this.host.gens.load(seg.cell) % 2 === 0 || seg.lost !== null) return null;
    const lost = IoError.explained(
      "EIO",
      `segment ${seg.id} cannot be read until the store is opened again: its in-place rewrite was cut short (the compaction worker thread stopped), ` +
        `and the next open restores its bytes from the rewrite's journal. Nothing was lost: close the store and open it again`,
    );
    seg.lost = lost;
    this.host.gens.wake(seg.cell);
    return lost;
  }

  /** compact(): the given segments, or every segment holding garbage (sealing the active one). */
  compact(options: unknown): Promise<T.CompactionReport> {
    const o = (options ?? {}) as Record<string, unknown>;
    const mode = (o["mode"] ?? this.host.options.compaction.mode) as Mode;
    if (mode !== "copy-on-write" && mode !== "in-place") throw new InvalidArgumentError(`mode must be "copy-on-write" or "in-place", got ${String(mode)}`);
    const ids = o["segments"];
    if (ids !== undefined && (!Array.isArray(ids) || !ids.every((x) => Number.isSafeInteger(x)))) {
      throw new InvalidArgumentError("segments must be an array of segment ids (see stats().segments)");
    }
    return this.serial(async () => {
      if (ids === undefined) return this.compactGarbage(mode);
      const segs = (ids as number[]).map((id) => this.host.segments.get(id)).filter((s): s is Segment => s !== undefined);
      return this.compactMany(segs, mode);
    });
  }

  /** gc(): reclaim by policy now (generation-keyed; by tombstone sequence under the unsafe option). */
  gc(): Promise<T.GcReport> {
    return this.serial(async () => {
      await this.loadDeferred();
      const before = this.host.keydir.size;
      if (this.host.options.unsafeGcBySeq) P.unsafeSweep(this.host.keydir, this.host.sequence);
      this.recount();
      await this.sealActiveIfDirty();
      const report = await this.compactMany("garbage", this.host.options.compaction.mode);
      return { ...report, retentionRecordsDropped: Math.max(0, before - this.host.keydir.size) };
    });
  }

  /** Compacts every segment holding PUT records of `root`'s subtree; resolves once their files are rewritten or gone. */
  eraseEager(root: string): Promise<number> {
    // I8: resolves only once every file that held the subtree's PUT records is rewritten without them or unlinked.
    return this.serial(async () => {
      const holds = (s: Segment): boolean => [...s.scopes].some((scope) => scopeWithin(scope, root));
      const active = this.host.log.activeSegment;
      if (holds(active) && active.dataEnd > C.DATA_START) {
        const old = this.host.log.rotate();
        await this.host.log.whenSealed(old);
      }
      const segs = [...this.host.segments.values()].filter((s) => s.writer === null && holds(s));
      const report = await this.compactMany(segs, this.host.options.compaction.mode);
      for (const seg of segs) if (seg.retired) await seg.gone;
      this.assertErased(root, segs, report);
      return report.bytesBefore - report.bytesAfter;
    });
  }

  /**
   * I8's check after an eager erasure's pass: every one of `segs` was rewritten (in `report`) or
   * retired. A close() that began meanwhile starts no more jobs (topUp), and no pass takes a
   * segment given up (Segment.lost), so the pass can end with some untouched: the erasure is
   * committed, but its bytes are not gone, and the call rejects — with the given-up segment's
   * error, or a StoreClosedError (until the fifty-third session it resolved with reclaimedBytes 0
   * and the bytes on disk).
   */
  private assertErased(root: string, segs: readonly Segment[], report: T.CompactionReport): void {
    const rewritten = new Set(report.segments);
    const left = segs.filter((s) => !s.retired && !rewritten.has(s.id));
    // Under the hint-wait twin (hints.ts skipPending) the pass leaves out a segment whose hint is
    // pending, and that twin must show the I8 damage it stands for, not this check's report of it.
    if (left.length === 0 || unsafeEagerEraseForTests.trustPass || unsafeSealedHintForTests.skipPending) return;
    for (const s of left) if (s.lost !== null) throw s.lost; // given up (giveUpIfCutShort): no pass takes it before a reopen
    assert(this.closed, `only close() or a segment given up leaves an eager erasure's segments untouched (segments ${left.map((s) => s.id).join(", ")})`);
    throw new StoreClosedError(
      `the store closed before forgetScope(${JSON.stringify(root)}, { reclaim: "eager" }) had rewritten ${left.length} segment file(s) still holding the scope's values; ` +
        `the erasure is committed (reads find nothing), but to remove those bytes open the store again and call forgetScope with reclaim "eager" again (or compact())`,
    );
  }

  /** Sealed segments over their garbage ratio, waiting for a pass (for stats()). */
  pendingSegments(): number {
    return this.segmentsOverRatio().length;
  }

  /** Stops scheduling, waits for the running compaction, and shuts the worker pool down. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.autoTimer !== null) clearTimeout(this.autoTimer);
    if (this.quietTimer !== null) clearTimeout(this.quietTimer);
    this.checks.stop();
    await this.chain;
    if (this.pool !== null) await (await this.pool).destroy(); // a pool still loading is made, then destroyed
  }
}

/**
 * True when a PUT drop left `slot`'s TOMBSTONE superseded — a later value is the slot's only value
 * record left, or none is (gc-policy.ts tombstoneRecordLive): droppable from now whatever its
 * window, and counted dead by no estimate, since the walks found it live while the older value was
 * on disk. Without a check, a tombstone alone in its segment stayed there for ever in a store left
 * alone (fifty-sixth session; `ignoreSupersedingDrops`: the engine before).
 */
function supersedesTombstone(slot: Slot): boolean {
  return slot.tombSeg !== 0 && !unsafeTimeCheckForTests.ignoreSupersedingDrops && P.tombstoneSuperseded(slot);
}

/**
 * True when the drop of `slot`'s kill record of `type` (its counts already lowered) may have made
 * another record droppable that no estimate counts (gc-policy.ts): the slot's latest TOMBSTONE or
 * CLEAR, held while an older one of its kind was on disk (olderKillOnDisk), now alone; or, the
 * tombstone gone, the undelete it held (clearRecordHeld) or an erasure over the slot that it held
 * (tombstoneBefore). Most drops are none of these: a plain forget's tombstone past its window.
 */
function killReleases(keydir: Keydir, slot: Slot, type: number | undefined): boolean {
  if (type === C.RecordType.CLEAR) return slot.clearRecords === 1 && slot.clearSeg !== 0;
  if (slot.tombRecords === 1 && slot.tombSeg !== 0) return true;
  return slot.tombRecords === 0 && (slot.clearSeg !== 0 || (keydir.erases.size > 0 && keydir.eraseSeq(slot.scope) !== 0));
}

/**
 * True when `s` may be chosen by a pass: sealed, its sealed hint written (an in-place rewrite's
 * hint must not be replaced by that older one landing after it: engine/hints.ts writeSealedHintAsync),
 * not retired, not being compacted (the test switch `takePending` takes one whose hint is pending).
 */
function idleSealed(s: Segment): boolean {
  return s.writer === null && (s.hintWriting === null || unsafeSealedHintForTests.takePending) && !s.retired && !s.compacting;
}

/** The dead bytes of `seg` by a tally or plan of what survives (none listed: all of its data). */
function deadBytesBy(seg: Segment, tally: ReadonlyMap<number, { liveBytes: number } | SegmentPlan>): number {
  const t = tally.get(seg.id);
  const liveBytes = t === undefined ? 0 : "liveBytes" in t ? t.liveBytes : t.survivors.bytes();
  return seg.dataEnd - C.DATA_START - liveBytes;
}

/** Free bytes of the file system holding `dir` for an unprivileged writer (0 when it cannot be asked). */
function freeBytes(dir: string): number {
  try {
    const st = fs.statfsSync(dir);
    return st.bavail * st.bsize;
  } catch {
    return 0;
  }
}

/** Bytes that survive by `plan` (none without one). */
function liveBytesOf(plan: SegmentPlan | undefined): number {
  return plan === undefined ? 0 : plan.survivors.bytes();
}

/** Adds one compaction's report to the pass's. */
function addReport(report: T.CompactionReport, r: T.CompactionReport): void {
  report.segments.push(...r.segments);
  report.bytesBefore += r.bytesBefore;
  report.bytesAfter += r.bytesAfter;
  report.recordsKept += r.recordsKept;
  report.recordsDropped += r.recordsDropped;
}

/** Adds the scopes of the PUT records among `plan`'s survivors to `out` (a segment's `scopes`, for eager erasure). */
function addScopesOfPuts(plan: SegmentPlan | undefined, out: Set<string>): void {
  if (plan === undefined) return;
  for (const scope of plan.rowScopes) out.add(scope);
  const survivors = plan.survivors;
  let last: string | null = null; // consecutive records mostly share a scope: one Set insertion per run
  for (let i = 0; i < survivors.length; i++) {
    if (survivors.kindAt(i) !== KIND_PUT) continue;
    const scope = survivors.slotAt(i).scope;
    if (scope === last) continue;
    out.add(scope);
    last = scope;
  }
}

/**
 * Moves each survivor's keydir pointer from (source, its old offset) to (target, newOffsets[i])
 * — only where it still points at the old place (a value that changed or died since the plan
 * keeps its new state). `newOffsets` comes from the worker, one per survivor in plan order.
 */
function relocateAll(keydir: Keydir, survivors: RecordList, source: number, target: number, newOffsets: Uint32Array, carry: CacheCarry | null): void {
  assert(newOffsets.length === survivors.length, `the worker returns a new offset per kept record (${newOffsets.length} for ${survivors.length})`);
  for (let i = 0; i < survivors.length; i++) relocate(keydir, survivors, i, source, target, newOffsets[i] as number, carry);
}

/** What relocate() needs to move cached values with their records: the cache, and the source's and the target's generations. */
interface CacheCarry {
  cache: ValueCache;
  generation: number;
  toGeneration: number;
}

/**
 * Test switch, never set by the engine or any option: with `relocateUnchecked`, publication moves
 * every planned record's pointer onto its new place without checking that it still names the
 * planned place — the check that keeps a value overwritten or forgotten while the pass ran (its
 * group planned before, copied or published after) from being moved back to its old bytes. Only
 * test/compaction-overlap-unsafe.test.ts sets it, to show that the check is what protects.
 */
export const unsafeCompactionForTests = { relocateUnchecked: false };

/** A plan of a whole compact() pass made before its seal of the active segment (compactGarbage). */
interface PlannedPass {
  now: number;
  /** host.sequence when it was made. */
  sequence: number;
  /** The segment active then, and its data end then. */
  sealedId: number;
  sealedEnd: number;
  plans: Map<number, SegmentPlan>;
  /** A flush started just before the plan, covering every write up to its `sequence` (flushUnderPlan); null: none. */
  flushed: { done: Promise<void>; sequence: number } | null;
}

/**
 * Test switch, never set by the engine or any option (test/compaction-warm-gate.test.ts):
 * `withoutPasses` makes the pool without the store's compaction count in its workerData — the
 * broken link that checkPassesSeen counts in `workerPasses.missed`.
 */
export const unsafeWorkerDataForTests = { withoutPasses: false };

/**
 * Test switch, never set by the engine or any option: when engram runs from its TypeScript
 * sources (the tests), `use` starts the compaction worker from its compiled twin in dist/ instead
 * of compiling the worker's modules through tsx (ts-boot.mjs). Only the start is faster: ~95 ms
 * against 330–400 ms a pool here, paid by every store that compacts (fifty-eighth session). The
 * worker is its own isolate, so it shares no module, and so no test switch, with the thread that
 * starts it either way: what it runs comes in its task and its workerData. The tests set it
 * (test/helpers/built-worker.ts) only while every source file is older than its compiled twin,
 * so the worker runs the sources as they are; test/worker-entry.test.ts runs both entries.
 */
export const workerFromBuildForTests = { use: false };

/**
 * How a compaction thread starts: from this module's compiled sibling when
 * engram runs built (the process's flags inherited, as a Worker's are); from sources, through tsx
 * (ts-boot.mjs, which loads `tsWorker`), or from the compiled twin in dist/ under
 * workerFromBuildForTests — with no flags, since those that load the sources (`--import tsx`)
 * would send each of the compiled worker's imports through tsx's hooks (a child under tsx: a
 * first pass 160–180 ms with none, ~380–400 inherited, 530–690 through tsx).
 */
function workerEntry(): { filename: string; tsWorker?: string; execArgv?: string[] } {
  if (!import.meta.url.endsWith(".ts")) return { filename: new URL("./compaction-worker.js", import.meta.url).href };
  if (workerFromBuildForTests.use) return { filename: new URL(BUILT_WORKER, import.meta.url).href, execArgv: [] };
  return { filename: new URL("./ts-boot.mjs", import.meta.url).href, tsWorker: new URL("./compaction-worker.ts", import.meta.url).href };
}

/**
 * The compiled worker in dist/, from this source file (workerEntry). A constant, not a literal in
 * the URL: test/import-graph.test.ts reads `new URL("…", import.meta.url)` as an import, and dist/
 * is no layer of the sources.
 */
const BUILT_WORKER = "../dist/engine/compaction-worker.js";

/** Worker answers whose thread saw the store's compaction count during the task, and those that did not (checkPassesSeen; read by tests). */
export const workerPasses = { seen: 0, missed: 0 };

/**
 * Test switches, never set by the engine or any option (test/compaction-plan-reuse.test.ts):
 * `afterPlan` runs between compact()'s plan and the seal of the active segment (a write there
 * lands in the segment being sealed, after the plan); `always` keeps that plan without checking
 * that nothing changed since — the check that makes the pass plan again, without which such a
 * write's record is dropped by the copy as if it were dead.
 */
export const unsafePlanReuseForTests: { always: boolean; afterPlan: (() => Promise<void>) | null } = { always: false, afterPlan: null };

/**
 * compact() passes that kept their plan made before the seal, and those that planned again; those
 * that sealed while their first job ran, and of those, the ones whose sealed segment was planned
 * again (for tests: which path ran).
 */
export const planReuse = { kept: 0, replanned: 0, earlyStarts: 0, sealedReplanned: 0 };

/**
 * Test hooks, never set by the engine or any option (test/compaction-early-start.test.ts):
 * `beforeSeal` runs after a pass started its first job and before it seals the segment that was
 * active at its plan (a write there lands in that segment after the plan); `sealAfterPublish`
 * seals and flushes only after the jobs of sealed segments were published — the wrong order,
 * whose source unlinks precede the syncs of the records that killed what they held;
 * `inPlaceUnflushed` starts an in-place pass's first job before the seal without the flush — the
 * wrong order, whose rewrite drops records while what killed them is not durable; `underPlan`
 * runs once the flush an in-place pass starts before its plan reached its fdatasync, before the
 * plan (a write there is planned but not covered by that flush); `trustUnderPlan` takes that
 * flush as covering the plan regardless — the wrong rule, under which such a write is not durable
 * when the first rewrite runs; `beforeJobs` runs after a pass that seals while its first job runs
 * made its jobs, before it starts them (where an in-place pass awaits its flush: writes there may
 * fill the segment being sealed, which the write path then rotates itself); `sealingByWriter`
 * lets that segment's job start before the seal once its writer is gone — the wrong rule, whose
 * job, on the plan made before those writes, drops them as dead.
 */
export const earlyStartForTests: {
  beforeSeal: (() => Promise<void>) | null;
  sealAfterPublish: boolean;
  inPlaceUnflushed: boolean;
  underPlan: (() => Promise<void>) | null;
  trustUnderPlan: boolean;
  beforeJobs: (() => Promise<void>) | null;
  sealingByWriter: boolean;
} = {
  beforeSeal: null,
  sealAfterPublish: false,
  inPlaceUnflushed: false,
  underPlan: null,
  trustUnderPlan: false,
  beforeJobs: null,
  sealingByWriter: false,
};

/**
 * Test switches, never set by the engine or any option (test/compaction-in-flight.test.ts):
 * `leaveOnFailure` makes a failed pass reject without awaiting the copies still in flight or
 * removing their outputs (pushed to `left`, for the test to await) — the protection whose absence
 * leaves an unpublished output beside the published store.
 */
export const unsafeInFlightForTests: { leaveOnFailure: boolean; left: Promise<void>[] } = { leaveOnFailure: false, left: [] };

/**
 * Test switch, never set by the engine or any option (test/compaction-inplace-discard.test.ts):
 * `asCopy` discards an in-place job of a failed pass that completed as if it were a copy — its
 * "output", the segment itself, unlinked and nothing published (the rule before the nineteenth
 * session): the segment's reads then wait on its odd generation for ever, and a reopen misses it.
 */
export const unsafeInPlaceDiscardForTests = { asCopy: false };

/**
 * Test switch, never set by the engine or any option (test/compaction-early-start.test.ts):
 * `always` posts every task a microtask after run() was called, as before the thirty-seventh
 * session, so that a pass's first job reaches the worker only after the seal's synchronous work.
 * It costs time, not data: the twin of the test that the first job is posted before the seal.
 */
export const postLateForTests = { always: false };

/** Tasks handed to the worker pool since load (for tests: which steps of a pass came before a job's post). */
export const workerTasks = { posted: 0 };

/** The most jobs a pass has had in flight at once since load (for tests: that copies overlapped). */
export const inFlightSeen = { max: 0 };

/** Moves survivor i's keydir pointer from (source, its old offset) to (target, off) if it still points there. */
function relocate(keydir: Keydir, list: RecordList, i: number, source: number, target: number, off: number, carry: CacheCarry | null): void {
  const kind = list.kindAt(i);
  const old = list.offAt(i);
  if (kind === KIND_ERASE) {
    const e = keydir.erases.get(list.refAt(i) as string);
    if (e === undefined) return;
    const at = e.seg === source && e.off === old ? e : e.more?.find((x) => x.seg === source && x.off === old);
    if (at === undefined) return;
    at.seg = target;
    at.off = off;
    return;
  }
  if (kind === KIND_ROW) return relocateRow(keydir, list.rowAt(i), source, old, target, off, carry);
  relocateSlot(list.slotAt(i), kind, source, old, target, off, carry);
}

/**
 * relocate() of a held row's PUT: the row's pointer, or — the row made a Slot since the plan
 * (forwarded while the pass pinned rows) — the Slot's, by the same rule.
 */
function relocateRow(keydir: Keydir, row: number, source: number, old: number, target: number, off: number, carry: CacheCarry | null): void {
  const slot = keydir.forwardedSlot(row);
  if (slot !== undefined) relocateSlot(slot, KIND_PUT, source, old, target, off, carry);
  else keydir.moveRow(row, source, old, target, off);
}

/** relocate() of a record of kind `kind` that Slot `s` points at. */
function relocateSlot(s: Slot, kind: number, source: number, old: number, target: number, off: number, carry: CacheCarry | null): void {
  if (unsafeCompactionForTests.relocateUnchecked && kind === KIND_PUT) {
    s.seg = target;
    s.off = off;
  } else if (kind === KIND_PUT && s.seg === source && s.off === old) {
    s.seg = target;
    s.off = off;
    carry?.cache.moveWith(s, source, old, carry.generation, target, off, carry.toGeneration);
  } else if (kind === KIND_TOMB && s.tombSeg === source && s.tombOff === old) {
    s.tombSeg = target;
    s.tombOff = off;
  } else if (kind === KIND_CLEAR && s.clearSeg === source && s.clearOff === old) {
    s.clearSeg = target;
    s.clearOff = off;
  }
}

/**
 * Test switch, never set by the engine or any option (test/eager-erase-close.test.ts):
 * `trustPass` skips the check that an eager erasure's pass rewrote or retired every segment that
 * held the scope (the rule before the fifty-third session): a close() begun meanwhile then lets
 * forgetScope resolve with the erased values' bytes still in a segment file.
 */
export const unsafeEagerEraseForTests = { trustPass: false };

/**
 * Test switch, never set by the engine or any option (test/compaction-worker-death.test.ts):
 * `keepWaiting` leaves a segment whose in-place rewrite a dead worker cut short as it was before
 * the fifty-third session: odd, not given up, its async reads waiting for ever.
 */
export const unsafeCutShortForTests = { keepWaiting: false };

/**
 * Test switch, never set by the engine or any option (test/compaction-worker-death-cow.test.ts):
 * `leaveOutput` leaves the files of a copy-on-write job that failed as its worker left them (the
 * rule before the fifty-fourth session): a worker thread that died mid-copy left its .seg.tmp
 * (or its renamed .seg and hint) in the store's directory until the next open.
 */
export const unsafeWorkerDeathForTests = { leaveOutput: false };

/**
 * The typed error of `task`, which the thread pool failed without an answer from the worker
 * (`cause`, the pool's plain Error: its thread stopped). Nothing of the task was published: a
 * copy-on-write output is removed (removeUnpublished), and an in-place segment cut short is given
 * up with its own error (giveUpIfCutShort), which the pass reports instead. Its message is its
 * own (IoError.explained): a stopped thread is no device's fault, so "free space or fix the
 * device" would mislead; what helps is to run compact() again.
 */
function workerStopped(task: CompactionTask, cause: unknown): IoError {
  const sources = task.sources.map((src) => src.segmentId).join(", ");
  const what = task.mode === "copy-on-write" ? `copy-on-write compaction of segment(s) ${sources} into segment ${task.targetId}` : `in-place compaction of segment ${sources}`;
  const why = cause instanceof Error ? cause.message : String(cause);
  return IoError.explained(
    "EIO",
    `${what} did not finish: the compaction worker thread stopped before it answered (${why}), as a killed or out-of-memory thread does. ` +
      `Nothing was lost: nothing of this job was published, and every value reads as before. ` +
      `Run compact() again (a new worker thread takes it); if worker threads keep stopping, check the process's memory limits or compact inline (compaction.workers: 0)`,
  );
}
