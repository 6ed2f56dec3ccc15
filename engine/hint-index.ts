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
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX } from "../rules/limits.js";
import type { LoadedHint } from "../segments/hint.js";
import { ENTRY_FIXED_BYTES } from "../segments/hint.js";
import { assert, elementAt } from "../rules/assert.js";
import { applyClear, applyPut, applyTombstone, type DeferredSlots, type Keydir, type Location, type Slot } from "./keydir.js";
import type { Segment } from "./segment.js";
import { readU64 } from "../segments/u64.js";

/** FNV-1a over bytes[from, to), continuing from `h`. */
function fnv(bytes: Uint8Array, from: number, to: number, h: number): number {
  for (let i = from; i < to; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193); // in bounds: every caller passes a range inside bytes
  return h >>> 0;
}

/** The hash of a slot: FNV-1a over its scope bytes, a 0xFF separator (never in UTF-8), its key bytes. */
function slotHash(bytes: Uint8Array, scopeAt: number, scopeLen: number, keyAt: number, keyLen: number): number {
  const h = Math.imul(fnv(bytes, scopeAt, scopeAt + scopeLen, 0x811c9dc5) ^ 0xff, 0x01000193);
  return fnv(bytes, keyAt, keyAt + keyLen, h);
}

/** The keyed entries of one hint: where each lies in the body, its hash, whether it is applied, and an open-addressing table. */
class HintTable {
  readonly segmentId: number;
  readonly body: Buffer;
  readonly entryAt: Uint32Array;
  readonly hashes: Uint32Array;
  readonly done: Uint8Array;
  readonly table: Int32Array;
  readonly mask: number;
  count = 0;

  constructor(segmentId: number, body: Buffer, capacity: number) {
    this.segmentId = segmentId;
    this.body = body;
    this.entryAt = new Uint32Array(capacity);
    this.hashes = new Uint32Array(capacity);
    this.done = new Uint8Array(capacity);
    let size = 16;
    while (size < 2 * capacity) size *= 2;
    this.table = new Int32Array(size);
    this.mask = size - 1;
  }

  /** Indexes the entry at body offset `at` with hash `h`. */
  insert(at: number, h: number): void {
    assert(this.count < this.entryAt.length, "a hint table holds at most its capacity");
    const i = this.count++;
    this.entryAt[i] = at;
    this.hashes[i] = h;
    let p = h & this.mask;
    while (this.table[p] !== 0) p = (p + 1) & this.mask;
    this.table[p] = i + 1;
  }
}

/** Scratch for a looked-up slot's scope and key bytes. */
const QUERY = Buffer.allocUnsafe(SCOPE_BYTES_MAX + KEY_BYTES_MAX);

/** Deferred entries of every hinted segment of one open. */
export class HintSlots implements DeferredSlots {
  private readonly tables: HintTable[] = [];
  /** The open's clock: a slot left with no PUT record gets it as reclaimedAt, as at open. */
  private readonly now: number;
  private readonly at: Location = { seg: 0, off: 0, len: 0 };

  constructor(now: number) {
    this.now = now;
  }

  /**
   * Takes a checked hint of `seg`: notes every entry's sequence and every PUT's scope on `seg`,
   * indexes the keyed entries, and returns the body offsets of its SCOPE_ERASE entries (recovery
   * applies those at once).
   */
  add(hint: LoadedHint, seg: Segment): number[] {
    const body = hint.body;
    const table = new HintTable(seg.id, body, hint.count);
    const erases: number[] = [];
    let lastScopeAt = -1;
    let lastScopeLen = -1;
    for (let at = 0; at < body.length; ) {
      const f = at + 4;
      const type = body.readUInt8(f + C.R_TYPE);
      const scopeLen = body.readUInt16LE(f + C.R_SCOPE_LEN);
      const keyLen = body.readUInt16LE(f + C.R_KEY_LEN);
      const scopeAt = f + C.RECORD_FIXED_BYTES;
      if (type === C.RecordType.PUT && !sameBytes(body, lastScopeAt, lastScopeLen, scopeAt, scopeLen)) {
        seg.scopes.add(body.toString("utf8", scopeAt, scopeAt + scopeLen));
        lastScopeAt = scopeAt;
        lastScopeLen = scopeLen;
      }
      if (type === C.RecordType.PUT || type === C.RecordType.TOMBSTONE || type === C.RecordType.CLEAR) {
        table.insert(at, slotHash(body, scopeAt, scopeLen, scopeAt + scopeLen, keyLen));
      } else if (type === C.RecordType.SCOPE_ERASE) erases.push(at);
      const value = type === C.RecordType.SCOPE_ERASE ? body.readUInt32LE(f + C.R_VALUE_LEN) : 0;
      at = scopeAt + scopeLen + keyLen + value;
    }
    // The entries' sequence range, checked against every entry by checkHint: what noting each one gives.
    if (hint.count > 0) {
      seg.noteSeq(hint.minSeq);
      seg.noteSeq(hint.maxSeq);
    }
    this.tables.push(table);
    return erases;
  }

  /** Applies the entry at `at` of `t` to `slot` (the apply* of recovery's applyRecord). */
  private apply(t: HintTable, at: number, slot: Slot): void {
    const body = t.body;
    const f = at + 4;
    const loc = this.at;
    loc.seg = t.segmentId;
    loc.off = body.readUInt32LE(at);
    loc.len = body.readUInt32LE(f + C.R_LENGTH);
    const seq = readU64(body, f + C.R_SEQ);
    const gen = readU64(body, f + C.R_GENERATION);
    const expiresAt = readU64(body, f + C.R_EXPIRES_AT);
    switch (body[f + C.R_TYPE]) {
      case C.RecordType.PUT:
        applyPut(slot, seq, gen, expiresAt, loc);
        break;
      case C.RecordType.TOMBSTONE:
        applyTombstone(slot, seq, gen, expiresAt, loc); // expiresAt holds the killed version
        break;
      case C.RecordType.CLEAR:
        applyClear(slot, seq, gen, loc);
        break;
      default:
        throw new Error(`segment ${t.segmentId}: hint entry at ${at} of type ${String(body[f + C.R_TYPE])} is not keyed`);
    }
  }

  /** The reclaim rule of the open, for a slot that its entries just built. */
  private settle(slot: Slot): void {
    if (slot.physical === 0) slot.reclaimedAt = this.now;
  }

  load(keydir: Keydir, scope: string, key: string): void {
    const scopeLen = QUERY.write(scope, 0, "utf8");
    const keyLen = QUERY.write(key, scopeLen, "utf8");
    if (Buffer.byteLength(scope, "utf8") !== scopeLen || Buffer.byteLength(key, "utf8") !== keyLen) return; // longer than any stored name
    const h = slotHash(QUERY, 0, scopeLen, scopeLen, keyLen);
    let slot: Slot | null = null;
    for (const t of this.tables) {
      for (let p = h & t.mask; t.table[p] !== 0; p = (p + 1) & t.mask) {
        const i = elementAt(t.table, p, "the probed cell is in the table") - 1;
        if (t.hashes[i] !== h || t.done[i] !== 0) continue;
        const at = elementAt(t.entryAt, i, "an entry offset per indexed entry");
        if (!sameName(t.body, at, QUERY, scopeLen, keyLen)) continue;
        t.done[i] = 1;
        slot ??= keydir.ensureApplied(scope, key);
        this.apply(t, at, slot);
      }
    }
    if (slot !== null) this.settle(slot);
  }

  loadAll(keydir: Keydir): void {
    assert(!keydir.isDeferred, "the keydir drops its source before loading everything");
    const built: Slot[] = [];
    for (const t of this.tables) {
      let lastScopeAt = -1;
      let lastScopeLen = -1;
      let scope = "";
      for (let i = 0; i < t.count; i++) {
        if (t.done[i] !== 0) continue;
        t.done[i] = 1;
        const at = elementAt(t.entryAt, i, "an entry offset per indexed entry");
        const f = at + 4;
        const scopeLen = t.body.readUInt16LE(f + C.R_SCOPE_LEN);
        const keyLen = t.body.readUInt16LE(f + C.R_KEY_LEN);
        const scopeAt = f + C.RECORD_FIXED_BYTES;
        if (!sameBytes(t.body, lastScopeAt, lastScopeLen, scopeAt, scopeLen)) scope = t.body.toString("utf8", scopeAt, scopeAt + scopeLen);
        lastScopeAt = scopeAt;
        lastScopeLen = scopeLen;
        const key = t.body.toString("utf8", scopeAt + scopeLen, scopeAt + scopeLen + keyLen);
        // Not held yet (keydir invariant: a held slot has all its entries applied), unless an
        // earlier entry of this pass built it.
        let slot = keydir.get(scope, key);
        if (slot === undefined) {
          slot = keydir.ensureApplied(scope, key);
          built.push(slot);
        }
        this.apply(t, at, slot);
      }
    }
    for (const slot of built) this.settle(slot);
    this.tables.length = 0;
  }
}

/** True when body[a, a+aLen) equals body[b, b+bLen) (names are short: a byte loop). */
function sameBytes(body: Uint8Array, a: number, aLen: number, b: number, bLen: number): boolean {
  if (a < 0 || aLen !== bLen) return false;
  for (let i = 0; i < bLen; i++) if (body[a + i] !== body[b + i]) return false;
  return true;
}

/** True when the entry at `at` names the scope and key in query[0, scopeLen + keyLen). */
function sameName(body: Buffer, at: number, query: Buffer, scopeLen: number, keyLen: number): boolean {
  const f = at + 4;
  if (body.readUInt16LE(f + C.R_SCOPE_LEN) !== scopeLen || body.readUInt16LE(f + C.R_KEY_LEN) !== keyLen) return false;
  const from = at + ENTRY_FIXED_BYTES;
  for (let i = 0; i < scopeLen + keyLen; i++) if (body[from + i] !== query[i]) return false;
  return true;
}
