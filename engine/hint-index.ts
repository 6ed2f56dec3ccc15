/**
 * The deferred half of an open from hint files: instead of building a Slot for every entry of
 * every valid hint (most of an eager open's time and heap), recovery indexes each hint's keyed
 * entries (PUT, TOMBSTONE, CLEAR) by a hash of their scope and key bytes — typed arrays beside the
 * hint's bytes, off the JS heap — and the keydir asks this index before it answers for a slot it
 * does not hold (keydir.ts DeferredSlots). A slot's entries are applied all at once, through the
 * same apply* functions and with the open's clock for the reclaim rule, so the slot is exactly
 * what an eager open would have built; any pass over all slots (GC, compaction, stats, listing)
 * applies everything first. SCOPE_ERASE entries are applied at open by recovery (erasures must be
 * known to every read); the hint's sequence range and its PUT scopes are noted on its segment.
 */
import * as C from "../segments/constants.js";
import { formatOf } from "../segments/header.js";
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX } from "../rules/limits.js";
import { buildIndex, entryPresent, entryUsable, ENTRY_FIXED_BYTES, HintBuilder, sameBytes, slotHash, unlinkHint, type LoadedHint } from "../segments/hint.js";
import { scanRecords, walkSealed } from "../segments/scan.js";
import { readFileRange, readWholeFile } from "../segments/whole-file.js";
import { CorruptionError } from "../rules/errors.js";
import { assert, elementAt, fail } from "../rules/assert.js";
import { applyClear, applyPut, applyTombstone, type DeferredSlots, type Keydir, type Location, type Slot } from "./keydir.js";
import type { Segment } from "./segment.js";
import type { ReclaimClock } from "./reclaim-clock.js";

/**
 * The keyed entries of one hint, as its index says (segments/hint.ts HintIndex: views of a
 * version-2 file, read block by block on first use, or computed from a version-1 one or from a
 * scan), and which of them are applied. Every accessor makes its bytes present first and answers
 * -1 (or false) when they cannot be read or fail their block checksum.
 */
class HintTable {
  readonly segmentId: number;
  readonly hint: LoadedHint;
  readonly body: Buffer;
  readonly entryAt: Uint32Array;
  readonly hashes: Uint32Array;
  readonly table: Int32Array;
  /** Cells of the table (a power of two in versions 1 and 2, 2K in version 3): probes start at hash mod cells. */
  readonly cells: number;
  readonly count: number;
  /** True once every byte is present and every entry not applied then was checked usable (HintSlots.checkEveryEntry). */
  checked = false;
  /** True once every entry not applied then was checked to hold its name's slot hash (HintSlots.checkHashes: a gradual load's). */
  hashesChecked = false;
  /** Per keyed entry: 1 once applied. Allocated at first use (an open allocates nothing per entry). */
  private doneBytes: Uint8Array | null = null;
  /**
   * True once every byte of the hint is present and checked (a hint in memory, or every block
   * loaded): the accessors then read the views directly, without asking HintBytes per access.
   * It only ever turns true (blocks are never unloaded).
   */
  private wholeNow: boolean;

  constructor(hint: LoadedHint) {
    this.segmentId = hint.segmentId;
    this.hint = hint;
    this.body = hint.body;
    this.entryAt = hint.index.entryAt;
    this.hashes = hint.index.hashes;
    this.table = hint.index.table;
    this.cells = this.table.length;
    this.count = hint.index.keyed;
    this.wholeNow = hint.bytes === null || hint.bytes.complete;
    assert(this.entryAt.length === this.count && this.hashes.length === this.count, "one offset and one hash per keyed entry");
    assert(this.table.length >= 2 * this.count && this.table.length >= 16, "a table at most half full");
  }

  /** True once every byte is present and checked (then the views may be read directly). */
  get whole(): boolean {
    if (!this.wholeNow && this.hint.bytes !== null && this.hint.bytes.complete) this.wholeNow = true;
    return this.wholeNow;
  }

  /** The applied flags (allocated on first call). */
  get done(): Uint8Array {
    this.doneBytes ??= new Uint8Array(this.count);
    return this.doneBytes;
  }

  /** Element `i` of a u32 view of the file (its bytes made present first), or -1. */
  private u32(view: Uint32Array | Int32Array, i: number): number {
    const bytes = this.hint.bytes;
    if (bytes !== null && !this.wholeNow) {
      const at = view.byteOffset - bytes.buf.byteOffset + 4 * i;
      if (!bytes.ensure(at, at + 4)) return -1;
      if (bytes.complete) this.wholeNow = true;
    }
    return view[i] as number; // in bounds: callers pass i below the view's length
  }

  /** Table cell `p` (0: empty, else an entry number plus one), or -1. */
  cell(p: number): number {
    return this.u32(this.table, p);
  }

  /** The slot hash of keyed entry `i`, or -1. */
  hash(i: number): number {
    return this.u32(this.hashes, i);
  }

  /** The body offset of keyed entry `i` with the entry's bytes present, or -1. */
  entry(i: number): number {
    const at = this.u32(this.entryAt, i);
    if (this.hint.bytes === null) return at; // in memory: entryPresent is always true
    // Every block loaded: entryPresent's answer without its ensure calls (only an offset past the body is absent).
    if (this.wholeNow) return at <= this.body.length ? at : -1;
    return at >= 0 && entryPresent(this.hint, at) ? at : -1;
  }

  /** The record offset of an applied entry (its bytes are present: they were when it was applied). */
  recordOffset(i: number): number {
    return this.body.readUInt32LE(elementAt(this.entryAt, i, "an entry offset per indexed entry"));
  }
}

/** A hint's bytes could not be read or failed a block checksum: the lookup is redone after a rescan. */
class HintUnreadable extends Error {
  constructor(readonly table: number) {
    super(`hint table ${table} is unreadable`);
  }
}

/** Scratch for a looked-up slot's scope and key bytes. */
const QUERY = Buffer.allocUnsafe(SCOPE_BYTES_MAX + KEY_BYTES_MAX);
/**
 * The scope whose UTF-8 bytes QUERY starts with (null: none), their length, and the slot hash's
 * state after them and the separator (slotHash's prefix): consecutive lookups mostly share a
 * scope, so it is encoded and hashed once, not per lookup.
 */
let queryScope: string | null = null;
let queryScopeLen = 0;
let queryScopeHash = 0;
/** Bytes of the key that follows the scope in QUERY (set by writeQuery). */
let queryKeyLen = 0;

/**
 * Puts the UTF-8 bytes of `scope` then `key` in QUERY (lengths in queryScopeLen, queryKeyLen) and
 * returns their slotHash; -1 when they do not fit (longer than any stored name). An ASCII key is
 * copied and hashed in one pass; any other goes through Buffer.write and slotHash. Either way the
 * bytes and the hash are those of slotHash over the UTF-8 encoding (test/hint-slot-build.test.ts).
 */
function writeQuery(scope: string, key: string): number {
  if (scope !== queryScope) {
    queryScope = null; // QUERY is rewritten: no scope is cached until this one is whole
    const n = QUERY.write(scope, 0, "utf8");
    if (Buffer.byteLength(scope, "utf8") !== n) return -1;
    queryScopeLen = n;
    queryScopeHash = slotHash(QUERY, 0, n, n, 0); // FNV over the scope and the separator: the key's bytes continue it
    queryScope = scope;
  }
  const scopeLen = queryScopeLen;
  let h = queryScopeHash;
  const keyChars = key.length;
  if (scopeLen + keyChars <= QUERY.length) {
    let i = 0;
    for (; i < keyChars; i++) {
      const c = key.charCodeAt(i);
      if (c >= 0x80) break;
      QUERY[scopeLen + i] = c;
      h = Math.imul(h ^ c, 0x01000193);
    }
    if (i === keyChars) {
      queryKeyLen = keyChars;
      return h >>> 0;
    }
  }
  const keyLen = QUERY.write(key, scopeLen, "utf8");
  if (Buffer.byteLength(key, "utf8") !== keyLen) return -1;
  queryKeyLen = keyLen;
  return slotHash(QUERY, 0, scopeLen, scopeLen, keyLen);
}

/**
 * When a HintSlots merges its tables into one index (MergedIndex). The default is the engine's;
 * tests and bench/ change it through setHintMerge, and each HintSlots reads it when made.
 */
export interface HintMergePolicy {
  /**
   * The index is built once the lookups since open reach this fraction of the keyed entries of
   * every table (0: at the first lookup, whatever the tables; Infinity: never), if the tables are
   * worth merging (HintSlots.worthMerging). Building it reads every hint whole — what lookups
   * spread over the keys soon read anyway — and indexes every entry once.
   */
  after: number;
  /**
   * The most keyed entries (all tables together) an index is built for. The build runs inside one
   * lookup — a readSync blocks the event loop for it — and reads and decodes every hint whole: at
   * 2M entries that one call took 1.1 s (a 2M-key store's 100k random reads after reopen, load 5.6;
   * without the merge the longest call was 0.1 s). Above this bound the tables are probed one by
   * one, as before the merged index, and each first lookup's cost stays spread over the lookups.
   */
  entriesMax: number;
  /** Test twin only: the merged probe stops at the first entry of the name (a broken index that keeps one entry per name). */
  firstOnly: boolean;
}

/**
 * The engine's policy: merge after lookups of 1/64 of the entries (bench/hint-merge-ab.mjs), for
 * at most 2^18 entries (a build of ~0.1 s, the longest first-touch read without it).
 */
export const HINT_MERGE_DEFAULT: Readonly<HintMergePolicy> = { after: 1 / 64, entriesMax: 1 << 18, firstOnly: false };
const mergePolicy: HintMergePolicy = { ...HINT_MERGE_DEFAULT };

/** Sets the merge policy of HintSlots made from now on (tests, bench/); returns the one it replaced. */
export function setHintMerge(policy: Partial<HintMergePolicy>): HintMergePolicy {
  const old = { ...mergePolicy };
  Object.assign(mergePolicy, policy);
  return old;
}

/**
 * One open-addressing table over the keyed entries of every hint table, so that a lookup probes
 * once instead of once per hint (each probe of a hint's table is a cache miss or two). Made, once
 * every table's bytes are present and checked, from what each table's cells name: exactly the
 * entries its own probe can reach (a cell emptied or doubled finds the same as there). Cell c
 * holds at 2c an entry's slot hash and at 2c + 1 its number among all entries plus one (0:
 * empty), so a probe step reads one cache line; entry g is entry g - base[t] of table t. Entries
 * of one name share a hash, so they lie along its probe sequence in insertion order: by table.
 */
class MergedIndex {
  readonly cells: Uint32Array;
  readonly mask: number;
  /** base[t]: the number of table t's first entry (prefix sums of the counts; base[tables] = the total). */
  readonly base: Uint32Array;

  constructor(tables: readonly HintTable[]) {
    this.base = new Uint32Array(tables.length + 1);
    let total = 0;
    for (let t = 0; t < tables.length; t++) {
      this.base[t] = total;
      total += elementAt(tables, t, "a table per hint").count;
    }
    this.base[tables.length] = total;
    let named = 0;
    for (const t of tables) for (const cell of t.table) if (cell !== 0) named++;
    // At most two thirds full: a probe for an absent name (every new key written) ends within a line or two.
    let cap = 16;
    while (cap < named * 1.5) cap *= 2;
    assert(cap <= 2 ** 30 && total < 2 ** 32 - 1, `a merged index of ${named} cells naming ${total} entries fits one typed array`);
    this.cells = new Uint32Array(2 * cap);
    this.mask = cap - 1;
    for (let t = 0; t < tables.length; t++) {
      const { table, hashes } = elementAt(tables, t, "a table per hint");
      const first = this.base[t] as number;
      for (let p = 0; p < table.length; p++) {
        const cell = table[p] as number; // checked by merge(): 0 or an entry number plus one
        if (cell !== 0) this.insert(hashes[cell - 1] as number, first + cell);
      }
    }
  }

  /** Puts entry number `g1` - 1 with slot hash `h` in the first empty cell of h's probe sequence. */
  private insert(h: number, g1: number): void {
    const cells = this.cells;
    let p = h & this.mask;
    while (cells[2 * p + 1] !== 0) p = (p + 1) & this.mask;
    cells[2 * p] = h;
    cells[2 * p + 1] = g1;
  }

  /** The table holding entry number `g` (the last t with base[t] <= g: a binary search). */
  tableOf(g: number): number {
    const base = this.base;
    let lo = 0;
    let hi = base.length - 2;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if ((base[mid] as number) <= g) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
}

/** Deferred entries of every hinted segment of one open. */
export class HintSlots implements DeferredSlots {
  private readonly tables: HintTable[] = [];
  /** The segment of each table (a table whose hint turns out unreadable is rebuilt from it). */
  private readonly segs: Segment[] = [];
  /** The open's clock: a slot left with no PUT record gets it as reclaimedAt, as at open (or the reclaim clock's time: useClock). */
  private readonly now: number;
  private clock: ReclaimClock | null = null;
  /** The segments directory (a hint found malformed at first use is deleted there). */
  private readonly dir: string;
  private readonly at: Location = { seg: 0, off: 0, len: 0 };
  /** The other fields read() reads of an entry (one object for all entries). */
  private readonly fields = { seq: 0, gen: 0, expiresAt: 0 };
  /** The merge policy read when this was made (setHintMerge). */
  private readonly policy: HintMergePolicy = { ...mergePolicy };
  /** Keyed entries of every table and of the largest, and lookups since open: the merge trigger (policy.after). */
  private entries = 0;
  private largest = 0;
  private asked = 0;
  /** Every table's entries in one index once merged; null before, and again after a rescan replaced a table. */
  private merged: MergedIndex | null = null;
  /** A gradual load's ranges of slot hashes (0 before its first applying step) and the next one to apply (loadStep). */
  private stepRanges = 0;
  private stepNext = 0;

  constructor(now: number, dir: string) {
    this.now = now;
    this.dir = dir;
  }

  /** True while lookups probe the merged index (tests: which path answered). */
  get isMerged(): boolean {
    return this.merged !== null;
  }

  /**
   * Takes a checked hint of `seg`: notes its sequence range and its PUT scopes on `seg` and keeps
   * its index (no work per entry); returns the body offsets of its SCOPE_ERASE entries (recovery
   * applies those at once; checkHint has checked each).
   */
  add(hint: LoadedHint, seg: Segment): number[] {
    assert(hint.segmentId === seg.id, "a hint is added for its own segment");
    for (const scope of hint.index.scopes) seg.scopes.add(scope);
    // The entries' sequence range (checked against every entry that is used): what noting each one gives.
    if (hint.count > 0) {
      seg.noteSeq(hint.minSeq);
      seg.noteSeq(hint.maxSeq);
    }
    assert(this.merged === null, "hints are added at open, before any lookup");
    this.tables.push(new HintTable(hint));
    this.segs.push(seg);
    this.entries += hint.index.keyed;
    this.largest = Math.max(this.largest, hint.index.keyed);
    return Array.from(hint.index.erases);
  }

  /** Set once an entry was found malformed: from then on every lookup throws it. */
  private refused: CorruptionError | null = null;

  /**
   * Fails closed on an entry that its first use finds malformed (entryUsable). The checksum held,
   * so the hint's writer wrote it; answers may already have come from this hint and cannot be
   * taken back, so none is given from any hint of this open any more: the hint file is deleted
   * (the next open scans the segment) and CorruptionError tells to reopen. Callers check every
   * entry a lookup will apply before applying any, so no slot is left half built.
   */
  private refuse(t: HintTable, at: number, what: string): never {
    unlinkHint(this.dir, t.segmentId);
    this.refused = new CorruptionError(t.segmentId, at, `its hint file's entry at ${at} is malformed (${what}); the hint is deleted: close and reopen the store, which then scans the segment`);
    throw this.refused;
  }

  /** The body offset of keyed entry `i` of table `ti`, present and checked for use. */
  private usable(ti: number, i: number): number {
    const t = elementAt(this.tables, ti, "a table per hint");
    const at = t.entry(i);
    if (at < 0) throw new HintUnreadable(ti);
    if (!entryUsable(t.hint, at, true)) this.refuse(t, at, "not a keyed entry inside the hint");
    return at;
  }

  /**
   * Replaces table `ti`, whose hint file can no longer be read or failed a block checksum, with
   * the index of a scan of its segment's bytes that the hint described. What was applied from it
   * came from blocks that passed their checksums — exactly the records the scan finds at those
   * offsets — so those entries stay applied (matched by record offset) and the rest stay deferred.
   */
  private rescan(ti: number): void {
    const t = elementAt(this.tables, ti, "a table per hint");
    const seg = elementAt(this.segs, ti, "a segment per table");
    assert(!seg.isClosed, `segment ${seg.id}: a deferred table's segment stays open until everything is applied`);
    const applied = new Set<number>();
    for (let i = 0; i < t.count; i++) if (t.done[i] !== 0) applied.add(t.recordOffset(i));
    const version = formatOf(seg.header);
    const builder = new HintBuilder(version);
    const end = t.hint.coversEnd;
    if (t.hint.sealed) {
      const bytes = readWholeFile(seg.fd);
      if (bytes.length !== end) throw new CorruptionError(seg.id, bytes.length, `the sealed segment is ${bytes.length} bytes, its hint said ${end}`);
      walkSealed(bytes, seg.id, version, (off) => builder.addRecord(bytes, off, off));
    } else {
      const bytes = readFileRange(seg.fd, Buffer.allocUnsafe(end), 0);
      if (bytes.length !== end) throw new CorruptionError(seg.id, bytes.length, `the segment ends before the ${end} bytes its hint described`);
      const scanned = scanRecords(bytes, seg.id, false, (_r, off) => builder.addRecord(bytes, off, off), false, version, C.DATA_START);
      if (scanned.end !== end || scanned.torn !== null) throw new CorruptionError(seg.id, scanned.end, `the records its hint described end at ${scanned.end}, not ${end}`);
    }
    const body = builder.entriesBody();
    assert(body !== null, "a builder without a loaded prefix always has its entries");
    const fresh = new HintTable({ ...t.hint, body, index: buildIndex(body), bytes: null });
    for (let j = 0; j < fresh.count; j++) if (applied.has(fresh.recordOffset(j))) fresh.done[j] = 1;
    this.tables[ti] = fresh;
    this.merged = null; // it numbers the replaced table's entries: the next lookup merges again
  }

  /**
   * Whether merging can pay: the tables besides the largest hold at least half as many entries as
   * it does. A merged probe saves the probes of every table but one, and a table much smaller than
   * the largest stays in cache; with one hint, or one large and a few small ones (a store reopened
   * after compaction), the index would cost its build and save nothing (bench/hint-merge-ab.mjs);
   * above policy.entriesMax the build would block its one lookup too long. A policy that merges
   * at once (after 0, tests) merges any tables, whatever their size.
   */
  private worthMerging(): boolean {
    if (this.tables.length === 0) return false;
    if (this.policy.after === 0) return true;
    return this.entries <= this.policy.entriesMax && this.entries - this.largest >= this.largest / 2;
  }

  /**
   * Builds the merged index: every table's bytes made present (one that cannot be is rescanned,
   * or refused, as loadAll does) and every table cell checked — each must be empty or name one of
   * its table's entries, the check the per-table probe makes of the cells it visits.
   */
  private merge(): void {
    for (let ti = 0; ti < this.tables.length; ti++) {
      const bytes = elementAt(this.tables, ti, "a table per hint").hint.bytes;
      if (bytes !== null && !bytes.ensureAll()) this.rescanOrRefuse(ti);
    }
    for (const t of this.tables) {
      assert(t.whole, `segment ${t.segmentId}: a merged table has every byte present`);
      const table = t.table;
      for (let p = 0; p < table.length; p++) {
        const cell = table[p] as number;
        if (cell < 0 || cell > t.count) this.refuse(t, p, `table cell ${p} names entry ${cell} of ${t.count}`);
      }
    }
    this.merged = new MergedIndex(this.tables);
  }

  /**
   * Table `ti` could not make its bytes present: a block that failed to read or its checksum is
   * damage (rescan); a version-3 block that passed its checksum but does not decode was written
   * that way, like a malformed entry, and fails closed.
   */
  private rescanOrRefuse(ti: number): void {
    const t = elementAt(this.tables, ti, "a table per hint");
    if (t.hint.bytes !== null && t.hint.bytes.malformed) this.refuse(t, 0, "a packed block whose checksum holds does not decode");
    this.rescan(ti);
  }

  /**
   * Reads the fields of the entry at `at` of `t` into `this.at` (its record's location) and
   * `this.fields`; returns its record type.
   */
  private read(t: HintTable, at: number): number {
    const body = t.body;
    const f = at + 4;
    const loc = this.at;
    const fields = this.fields;
    loc.seg = t.segmentId;
    // Byte reads: the entry passed entryUsable (inside the body, its u64 fields safe integers).
    loc.off = u32At(body, at);
    loc.len = u32At(body, f + C.R_LENGTH);
    fields.seq = u32At(body, f + C.R_SEQ + 4) * 0x1_0000_0000 + u32At(body, f + C.R_SEQ);
    fields.gen = u32At(body, f + C.R_GENERATION + 4) * 0x1_0000_0000 + u32At(body, f + C.R_GENERATION);
    fields.expiresAt = u32At(body, f + C.R_EXPIRES_AT + 4) * 0x1_0000_0000 + u32At(body, f + C.R_EXPIRES_AT);
    return body[f + C.R_TYPE] as number;
  }

  /** Applies the entry at `at` of `t` to `slot` (the apply* of recovery's applyRecord). */
  private apply(t: HintTable, at: number, slot: Slot): void {
    this.applyRead(t, at, this.read(t, at), slot);
  }

  /** apply() of the entry at `at` of `t` that read() just read (its `type`; the fields in this.fields and this.at). */
  private applyRead(t: HintTable, at: number, type: number, slot: Slot): void {
    const { seq, gen, expiresAt } = this.fields;
    switch (type) {
      case C.RecordType.PUT:
        applyPut(slot, seq, gen, expiresAt, this.at);
        break;
      case C.RecordType.TOMBSTONE:
        applyTombstone(slot, seq, gen, expiresAt, this.at); // expiresAt holds the killed version
        break;
      case C.RecordType.CLEAR:
        applyClear(slot, seq, gen, this.at);
        break;
      default:
        throw new Error(`segment ${t.segmentId}: hint entry at ${at} of type ${String(type)} is not keyed`);
    }
  }

  /**
   * lookup()'s answer for a name whose one entry, entry `i` of `t`, is a PUT of generation 1 that
   * never expires: held as a compact row (Keydir.holdApplied), no Slot made. False, applying
   * nothing, for any other entry or when the keydir holds no row.
   */
  private holdLone(keydir: Keydir, scope: string, key: string, t: HintTable, i: number): boolean {
    const type = this.read(t, elementAt(t.entryAt, i, "an entry offset per indexed entry"));
    const { seq, gen, expiresAt } = this.fields;
    if (type !== C.RecordType.PUT || gen !== 1 || expiresAt !== 0) return false;
    if (!keydir.holdApplied(scope, key, seq, this.at)) return false;
    t.done[i] = 1;
    return true;
  }

  /** The reclaim rule of the open, for a slot that its entries just built: the clock's time once recovery set it (useClock), else the open's. */
  private settle(slot: Slot): void {
    if (slot.physical === 0) slot.reclaimedAt = this.clock === null ? this.now : this.clock.at(slot);
  }

  /** Recovery's reclaim clock, once every segment's data end is known (engine/reclaim-clock.ts). */
  useClock(clock: ReclaimClock): void {
    this.clock = clock;
  }

  load(keydir: Keydir, scope: string, key: string): void {
    if (this.refused !== null) throw this.refused;
    const h = writeQuery(scope, key);
    if (h < 0) return; // longer than any stored name
    const scopeLen = queryScopeLen;
    const keyLen = queryKeyLen;
    if (this.merged === null && this.worthMerging() && ++this.asked >= this.entries * this.policy.after) {
      this.merge(); // reads hints and segments only: QUERY still holds the name
    }
    // A table found unreadable is rebuilt from a scan (never unreadable again): at most one retry each.
    for (let attempt = 0; ; attempt++) {
      try {
        this.lookup(keydir, scope, key, h, scopeLen, keyLen);
        return;
      } catch (err) {
        if (!(err instanceof HintUnreadable) || attempt > this.tables.length) throw err;
        this.rescanOrRefuse(err.table);
      }
    }
  }

  /** load() for hash `h` of the name in QUERY: finds every unapplied entry of it, then applies them all. */
  private lookup(keydir: Keydir, scope: string, key: string, h: number, scopeLen: number, keyLen: number): void {
    const found = FOUND;
    found.length = 0;
    const merged = this.merged;
    if (merged !== null) this.probeMerged(merged, h, scopeLen, keyLen, found);
    else this.probeEach(h, scopeLen, keyLen, found);
    if (found.length === 0) return;
    // Every entry to apply is present and checked: now apply them all (no slot is left half built).
    if (found.length === 2 && this.holdLone(keydir, scope, key, elementAt(this.tables, elementAt(found, 0, "table number"), "a table per hint"), elementAt(found, 1, "entry number"))) return;
    const slot = keydir.ensureApplied(scope, key);
    for (let k = 0; k < found.length; k += 2) {
      const t = elementAt(this.tables, elementAt(found, k, "table number"), "a table per hint");
      const i = elementAt(found, k + 1, "entry number");
      t.done[i] = 1;
      this.apply(t, elementAt(t.entryAt, i, "an entry offset per indexed entry"), slot);
    }
    this.settle(slot);
  }

  /** lookup()'s probe before the tables are merged: each table's own probe sequence of `h`, in table order. */
  private probeEach(h: number, scopeLen: number, keyLen: number, found: number[]): void {
    for (let ti = 0; ti < this.tables.length; ti++) {
      const t = elementAt(this.tables, ti, "a table per hint");
      if (t.whole) {
        this.probeWhole(t, ti, h, scopeLen, keyLen, found);
        continue;
      }
      // At most every cell once: a damaged table that is full cannot loop.
      const cells = t.cells;
      for (let p = h % cells, n = 0; n < cells; p = p + 1 === cells ? 0 : p + 1, n++) {
        const cell = t.cell(p);
        if (cell < 0) throw new HintUnreadable(ti);
        if (cell === 0) break;
        const i = cell - 1;
        if (i >= t.count) this.refuse(t, p, `table cell ${p} names entry ${cell} of ${t.count}`);
        const hash = t.hash(i);
        if (hash < 0) throw new HintUnreadable(ti);
        if (hash !== h) continue;
        const at = this.usable(ti, i);
        if (t.done[i] !== 0 || !sameName(t.body, at, QUERY, scopeLen, keyLen)) continue;
        found.push(ti, i);
      }
    }
  }

  /**
   * lookup()'s probe of a table whose bytes are all present and checked: the same steps and
   * checks as the general probe (cell, entry number, hash, offset, entry, done, name), reading the
   * views directly instead of through the accessors that make bytes present.
   */
  private probeWhole(t: HintTable, ti: number, h: number, scopeLen: number, keyLen: number, found: number[]): void {
    const table = t.table;
    const hashes = t.hashes;
    const entryAt = t.entryAt;
    const cells = t.cells;
    const count = t.count;
    const bodyBytes = t.body.length;
    // At most every cell once: a damaged table that is full cannot loop.
    for (let p = h % cells, n = 0; n < cells; p = p + 1 === cells ? 0 : p + 1, n++) {
      const cell = table[p] as number; // in bounds: p < cells = table.length
      if (cell === 0) break;
      const i = cell - 1;
      if (i < 0 || i >= count) this.refuse(t, p, `table cell ${p} names entry ${cell} of ${t.count}`);
      if (hashes[i] !== h) continue; // in bounds: 0 <= i < count = hashes.length
      const at = entryAt[i] as number; // in bounds, as hashes
      if (at > bodyBytes) throw new HintUnreadable(ti); // entry()'s answer for a whole table
      if (!entryUsable(t.hint, at, true)) this.refuse(t, at, "not a keyed entry inside the hint");
      if (t.done[i] !== 0 || !sameName(t.body, at, QUERY, scopeLen, keyLen)) continue;
      found.push(ti, i);
    }
  }

  /**
   * lookup()'s probe of the merged index: the steps and checks of probeWhole (every table is
   * whole once merged) — hash, entry offset, entry, done, name — on the one probe sequence of `h`;
   * the table cells were checked when the index was built.
   */
  private probeMerged(m: MergedIndex, h: number, scopeLen: number, keyLen: number, found: number[]): void {
    const cells = m.cells;
    const mask = m.mask;
    // At most every cell once (the index always has empty cells, so this only bounds the loop).
    for (let p = h & mask, n = 0; n <= mask; p = (p + 1) & mask, n++) {
      const g1 = cells[2 * p + 1] as number; // in bounds: p <= mask, cells has 2 (mask + 1)
      if (g1 === 0) break;
      if (cells[2 * p] !== h) continue;
      const ti = m.tableOf(g1 - 1);
      const t = elementAt(this.tables, ti, "a table per hint");
      const i = g1 - 1 - (m.base[ti] as number);
      const at = t.entryAt[i] as number; // in bounds: 0 <= i < count, by the prefix sums
      if (at > t.body.length) throw new HintUnreadable(ti); // entry()'s answer for a whole table
      if (!entryUsable(t.hint, at, true)) this.refuse(t, at, "not a keyed entry inside the hint");
      if (t.done[i] !== 0 || !sameName(t.body, at, QUERY, scopeLen, keyLen)) continue;
      found.push(ti, i);
      if (this.policy.firstOnly) break; // the twin's broken index
    }
  }

  loadAll(keydir: Keydir): void {
    assert(!keydir.isDeferred, "the keydir drops its source before loading everything");
    if (this.refused !== null) throw this.refused;
    this.checkEveryEntry();
    const built: Slot[] = [];
    for (const t of this.tables) this.applyEntries(keydir, t, null, built, EVERY_HASH);
    for (const slot of built) this.settle(slot);
    this.forgetTables();
  }

  /** Drops every table: everything is applied (loadAll, the last loadStep). */
  private forgetTables(): void {
    this.tables.length = 0;
    this.segs.length = 0;
    this.merged = null;
  }

  /**
   * The first steps check tables (checkSome: checkEveryEntry's work and every slot hash, about
   * STEP_ENTRIES entries a step); then each step applies the entries not applied yet whose slot
   * hash lies in the next of `stepRanges` equal ranges, in every table. A name's entries share its
   * slot hash in every table, so a step applies each name it touches whole — the keydir's
   * invariant between steps: a held name has every entry applied — and a lookup between steps
   * finds an untouched name's entries as before. The range count is fixed at the first applying
   * step, from the entries not applied then (STEP_ENTRIES a step, at most STEP_RANGES_MAX steps).
   */
  loadStep(keydir: Keydir): boolean {
    assert(keydir.isDeferred, "a step of a gradual load leaves the source in place until it answers true");
    if (this.refused !== null) throw this.refused;
    if (this.checkSome()) return false;
    if (this.stepRanges === 0) this.stepRanges = Math.min(STEP_RANGES_MAX, Math.max(1, Math.ceil(this.unapplied() / stepEntries())));
    const range = loadStepForTests.byEntry ? null : hashRange(this.stepNext, this.stepRanges);
    const built: Slot[] = [];
    for (const t of this.tables) {
      if (range !== null) this.applyEntries(keydir, t, null, built, range);
      else this.applyEntries(keydir, t, null, built, EVERY_HASH, entryRange(t.count, this.stepNext, this.stepRanges));
    }
    for (const slot of built) this.settle(slot);
    loadSteps.applies += 1;
    this.stepNext += 1;
    if (this.stepNext < this.stepRanges) return false;
    for (const t of this.tables) for (let i = 0; i < t.count; i++) if (t.done[i] === 0) fail(`segment ${t.segmentId}: entry ${i} is applied by the gradual load's last step`);
    this.forgetTables();
    return true;
  }

  /**
   * Before any step applies anything: every entry of `t` not applied yet has its name's slot hash,
   * else the hint is refused. A step that trusted a wrong hash would apply that entry in another
   * step than its name's other entries, and between them the keydir would hold the name with an
   * entry (a tombstone, say) not applied: a forgotten value read back.
   */
  private checkHashes(t: HintTable): void {
    const body = t.body;
    for (let i = 0; i < t.count; i++) {
      if (t.done[i] !== 0) continue;
      const hash = t.hashes[i] as number; // in bounds: i < count = hashes.length; present (checked)
      const at = t.entryAt[i] as number; // in bounds, as hashes
      const scopeAt = at + 4 + C.RECORD_FIXED_BYTES;
      const scopeLen = body.readUInt16LE(at + 4 + C.R_SCOPE_LEN);
      const keyLen = body.readUInt16LE(at + 4 + C.R_KEY_LEN);
      if (slotHash(body, scopeAt, scopeLen, scopeAt + scopeLen, keyLen) !== hash) this.refuse(t, at, "its slot hash is not its name's");
    }
    t.hashesChecked = true;
  }

  /**
   * A step's checks: tables whose entries or slot hashes are not checked yet, in order, until
   * STEP_ENTRIES entries are (or none is left); false when none was.
   */
  private checkSome(): boolean {
    let entries = 0;
    for (let ti = 0; ti < this.tables.length && entries < stepEntries(); ti++) {
      if (elementAt(this.tables, ti, "a table per hint").hashesChecked) continue;
      if (!elementAt(this.tables, ti, "a table per hint").checked) this.checkTable(ti);
      const t = elementAt(this.tables, ti, "a table per hint"); // checkTable may have rescanned it: a new table
      if (!loadStepForTests.trustHashes) this.checkHashes(t);
      else t.hashesChecked = true;
      entries += t.count;
    }
    if (entries > 0) loadSteps.checks += 1;
    return entries > 0;
  }

  /** Entries of every table not applied yet. */
  private unapplied(): number {
    let n = 0;
    for (const t of this.tables) for (let i = 0; i < t.count; i++) if (t.done[i] === 0) n++;
    return n;
  }

  loadWithin(keydir: Keydir, roots: readonly string[], subtree: boolean): void {
    assert(keydir.isDeferred, "a load of some scopes leaves the source in place");
    if (this.refused !== null) throw this.refused;
    this.checkEveryEntry();
    const within = scopeTest(roots, subtree);
    const built: Slot[] = [];
    for (const t of this.tables) this.applyEntries(keydir, t, within, built, EVERY_HASH);
    for (const slot of built) this.settle(slot);
  }

  /**
   * Makes every hint's bytes present (one that cannot be is rescanned, or refused) and checks
   * every entry not applied yet, before a load of many entries applies any: a malformed one then
   * leaves nothing half built. A table checked whole is not checked again (its entries only ever
   * turn applied; a rescan replaces it with a table not checked yet).
   */
  private checkEveryEntry(): void {
    for (let ti = 0; ti < this.tables.length; ti++) if (!elementAt(this.tables, ti, "a table per hint").checked) this.checkTable(ti);
  }

  /** checkEveryEntry's work for table `ti`: its bytes made present (or the table rescanned, or refused), its entries not applied yet checked. */
  private checkTable(ti: number): void {
    const bytes = elementAt(this.tables, ti, "a table per hint").hint.bytes;
    if (bytes !== null && !bytes.ensureAll()) this.rescanOrRefuse(ti);
    const t = elementAt(this.tables, ti, "a table per hint");
    const done = t.done;
    // Every byte is present now (ensureAll, or a table in memory): the entries are checked directly.
    for (let i = 0; i < t.count; i++) {
      if (done[i] !== 0) continue;
      const at = t.entryAt[i] as number; // in bounds: i < count = entryAt.length
      if (!entryUsable(t.hint, at, true)) this.refuse(t, at, "not a keyed entry inside the hint");
    }
    t.checked = true;
  }

  /**
   * Applies every entry of `t` not applied yet whose scope passes `within` (null: every entry)
   * and whose slot hash lies in `hashes` (EVERY_HASH: any), among entries [entries.from,
   * entries.to) (the test twin's split only: every entry otherwise), in entry order, pushing each
   * slot it makes onto `built` (settled by the caller once every table's entries are applied).
   * Every entry is present and checked (checkEveryEntry; a step by hash also checkHashes).
   */
  private applyEntries(keydir: Keydir, t: HintTable, within: ScopeTest | null, built: Slot[], hashes: Span, entries: Span = { from: 0, to: t.count }): void {
    assert(t.checked, `segment ${t.segmentId}: a table's entries are checked before any is applied`);
    let lastScopeAt = -1;
    let lastScopeLen = -1;
    let scope = "";
    let inside = within === null;
    const done = t.done;
    const body = t.body;
    for (let i = entries.from; i < entries.to; i++) {
      if (done[i] !== 0) continue;
      const hash = t.hashes[i] as number; // in bounds: i < count = hashes.length; present (checked)
      if (hash < hashes.from || hash >= hashes.to) continue;
      const at = t.entryAt[i] as number; // in bounds: i < count = entryAt.length
      const f = at + 4;
      const scopeLen = body.readUInt16LE(f + C.R_SCOPE_LEN);
      const scopeAt = f + C.RECORD_FIXED_BYTES;
      if (!sameBytes(body, lastScopeAt, lastScopeLen, scopeAt, scopeLen)) {
        inside = within === null || within(body, scopeAt, scopeLen);
        scope = inside ? body.toString("utf8", scopeAt, scopeAt + scopeLen) : ""; // a scope outside is never decoded
      }
      lastScopeAt = scopeAt;
      lastScopeLen = scopeLen;
      if (!inside) continue;
      done[i] = 1;
      const keyLen = body.readUInt16LE(f + C.R_KEY_LEN);
      const key = body.toString("utf8", scopeAt + scopeLen, scopeAt + scopeLen + keyLen);
      // Every slot this pass touches is built by it (keydir invariant: a held slot has all its
      // entries applied, so none of its entries is left here); one lookup, not get + ensure. A
      // name's first entry that a compact row can stand for is held as one (a plan walks rows:
      // no Slot per name after a compaction pass).
      const type = this.read(t, at);
      const entry = this.fields;
      const rowable = type === C.RecordType.PUT && entry.gen === 1 && entry.expiresAt === 0;
      const before = keydir.heldNow;
      const slot = keydir.loadedSlot(scope, key, rowable, entry.seq, this.at);
      if (slot === null) continue; // held as a row: physical 1, nothing to settle
      if (keydir.heldNow !== before) built.push(slot);
      this.applyRead(t, at, type, slot);
    }
  }
}

/** True when the scope whose UTF-8 bytes are body[at, at + len) is one a load asked for. */
type ScopeTest = (body: Buffer, at: number, len: number) => boolean;

/**
 * The test for scopes that are one of `roots`, or (`subtree`) lie below one: bytes equal to a
 * root's, or starting with them and then "/" — scopeWithin's answer, since a root's UTF-8 bytes
 * end on a character and "/" is one byte that no other character's encoding contains.
 */
function scopeTest(roots: readonly string[], subtree: boolean): ScopeTest {
  const rootBytes = roots.map((r) => Buffer.from(r, "utf8"));
  return (body, at, len) => {
    for (const r of rootBytes) {
      const n = r.length;
      if (len !== n && !(subtree && len > n && body[at + n] === 0x2f)) continue;
      let i = 0;
      while (i < n && body[at + i] === r[i]) i++;
      if (i === n) return true;
    }
    return false;
  };
}

/** A half-open span [from, to): of slot hashes (hashRange), or of a table's entry numbers (entryRange). */
interface Span {
  readonly from: number;
  readonly to: number;
}
/** One past the largest slot hash (a u32). */
const HASH_END = 2 ** 32;
/** Every slot hash. */
const EVERY_HASH: Span = { from: 0, to: HASH_END };
/**
 * Entries a step of a gradual load applies, about (HintSlots.loadStep): ~1 µs each on this
 * machine kind, so a step holds the main thread some 16 ms; at most STEP_RANGES_MAX steps, each
 * of which reads every table's applied flags and hashes once (~1 ns an entry).
 */
const STEP_ENTRIES = 16_384;
const STEP_RANGES_MAX = 64;

/** STEP_ENTRIES, or the test's stand-in. */
function stepEntries(): number {
  return loadStepForTests.entries > 0 ? loadStepForTests.entries : STEP_ENTRIES;
}

/** Range `k` of `n` equal ranges of slot hashes. */
function hashRange(k: number, n: number): Span {
  return { from: Math.floor((k * HASH_END) / n), to: k + 1 === n ? HASH_END : Math.floor(((k + 1) * HASH_END) / n) };
}

/** Range `k` of `n` equal ranges of a table's `count` entry numbers (the test twin's split). */
function entryRange(count: number, k: number, n: number): Span {
  return { from: Math.floor((k * count) / n), to: k + 1 === n ? count : Math.floor(((k + 1) * count) / n) };
}

/**
 * Test switches, never set by the engine or any option (test/gradual-load.test.ts): `byEntry`
 * makes each step of a gradual load apply a range of each table's entry numbers instead of a
 * range of slot hashes, so that a name's entries may be applied in different steps; `entries`,
 * when not 0, stands for STEP_ENTRIES (a small store loaded in many steps); `trustHashes` skips
 * the check that every entry holds its name's slot hash (HintSlots.checkHashes).
 */
export const loadStepForTests = { byEntry: false, entries: 0, trustHashes: false };

/** The steps of gradual loads so far (tests): those that checked tables, those that applied entries. */
export const loadSteps = { checks: 0, applies: 0 };

/** Scratch of load: pairs (table number, entry number) of the entries to apply. */
const FOUND: number[] = [];

/**
 * The slot hash that load() probes with for (scope, key), and the UTF-8 bytes it compares
 * entries with (a copy); hash -1 when the name is longer than any stored one. For tests: it is
 * what must equal slotHash over the name's UTF-8 bytes, whatever scope came before.
 */
export function queryHash(scope: string, key: string): { hash: number; bytes: Buffer } {
  const hash = writeQuery(scope, key);
  return { hash, bytes: hash < 0 ? Buffer.alloc(0) : Buffer.from(QUERY.subarray(0, queryScopeLen + queryKeyLen)) };
}

/** The u32 LE at b[at] (inside b: callers read fields of an entry that passed entryUsable). */
function u32At(b: Buffer, at: number): number {
  return ((b[at] as number) | ((b[at + 1] as number) << 8) | ((b[at + 2] as number) << 16)) + (b[at + 3] as number) * 0x100_0000;
}

/** True when the entry at `at` names the scope and key in query[0, scopeLen + keyLen). */
function sameName(body: Buffer, at: number, query: Buffer, scopeLen: number, keyLen: number): boolean {
  const f = at + 4;
  const s = (body[f + C.R_SCOPE_LEN] as number) | ((body[f + C.R_SCOPE_LEN + 1] as number) << 8);
  const k = (body[f + C.R_KEY_LEN] as number) | ((body[f + C.R_KEY_LEN + 1] as number) << 8);
  if (s !== scopeLen || k !== keyLen) return false;
  const from = at + ENTRY_FIXED_BYTES;
  for (let i = 0; i < scopeLen + keyLen; i++) if (body[from + i] !== query[i]) return false;
  return true;
}
