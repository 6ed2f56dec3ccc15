/**
 * Compact slots: the keydir's form for a name a batch wrote that no one has asked about since — a
 * row of typed arrays instead of a Slot object (issue 11: a bulk load's cost was an object per
 * written key, ~120 B that every scavenge copies; a number in the scope's map costs none).
 *
 * A row is RESERVED from a batch's decision for a name the keydir does not hold (Keydir.reserveFor)
 * until its PUT is applied (HELD) or taken back (FREE). A HELD row describes exactly the slot that
 * PUTs of generation 1 with no expiry, applied to an empty slot one after another, make: the
 * latest PUT's sequence and location, generation 1, `physical` records, nothing else. A batch's
 * decision may overwrite a held row (another such PUT); anything else that asks for the name
 * (a read, a forget, a TTL write, a lone write) has the keydir turn the row into a Slot and free
 * it, and so does every pass over all slots first, so no rule ever sees a row (engine/keydir.ts)
 * — but a compaction plan, which walks held rows as they are (compaction-plan.ts KIND_ROW: a
 * live value of generation 1 that never expires needs no rule but its scope's erasure). While a
 * compaction pass runs, a row made a Slot is FORWARDED, not freed: the pass's publication moves
 * the Slot it became, and its number is not reused until the pass ends (Keydir.pinRows). The one exception is a read in a pass in key order (the value cache's
 * streaming mode): it reads a held row's location as it is, no Slot made, and marks the row
 * (`touched`) as the cache would mark the Slot; a second read makes it a Slot. A recovery from
 * hints holds a name whose one hint entry is such a PUT as a row too (Keydir.holdApplied).
 */
import { assert } from "../rules/assert.js";

/** Row states. */
export const ROW_FREE = 0;
export const ROW_RESERVED = 1;
export const ROW_HELD = 2;
/**
 * A held row made a Slot while a compaction pass holds plans that may name it (Keydir.pinRows):
 * out of the maps, not free — its number is not reused — until the pass ends, so that the pass's
 * publication finds the Slot it became (Keydir.forwardedSlot) and moves that Slot's pointer.
 */
export const ROW_FORWARDED = 3;

/** The most PUT records a held row counts; one more is applied to a Slot instead. */
export const PHYSICAL_MAX = 0xffff;

/** The columns a compaction plan's walk reads (Keydir.rowColumns). */
export type RowColumns = Readonly<Pick<CompactRows, "state" | "putSeq" | "seg" | "off" | "len">>;

/** Rows first allocated; the columns double from here. */
const ROWS_INITIAL = 1024;
/**
 * The most rows at once: an index stays a small integer (a Smi in the scope's Map) and the
 * columns stay well under their length limits. A keydir past it makes Slots, as before rows.
 */
export const ROWS_MAX = 1 << 28;

/** The rows, as columns indexed by row number. */
export class CompactRows {
  /** The PUT's sequence (= version): a double, as sequences pass 2^32. */
  putSeq = new Float64Array(0);
  seg = new Uint32Array(0);
  off = new Uint32Array(0);
  len = new Uint32Array(0);
  /** PUT records of the name still in segment files (applyPut's `physical`), at most PHYSICAL_MAX. */
  physical = new Uint16Array(0);
  state = new Uint8Array(0);
  /**
   * 1 once a read took the held row's value as it is (Keydir.touchRow): the value cache's mark of
   * a first miss, which a row has no Slot to hang on. Cleared when the row is held again.
   */
  touched = new Uint8Array(0);
  /** Rows freed, reused first (newest first). */
  private free: number[] = [];
  /** Rows ever used since the last reset (the high-water mark). */
  private used = 0;
  /** Rows RESERVED, HELD and FORWARDED now. */
  reserved = 0;
  held = 0;
  forwarded = 0;

  /** True while some row is HELD or RESERVED (a pass over all slots but a compaction plan's must first turn them into Slots). */
  get any(): boolean {
    return this.reserved + this.held !== 0;
  }

  /** Reserves a row (its name is the map entry that holds its number); -1 when ROWS_MAX rows are in use. */
  take(): number {
    let row = this.free.pop();
    if (row === undefined) {
      if (this.used === ROWS_MAX) return -1;
      row = this.used++;
      if (row === this.state.length) this.grow();
    }
    assert(this.state[row] === ROW_FREE, "a row taken is free");
    this.state[row] = ROW_RESERVED;
    this.reserved += 1;
    return row;
  }

  /** Makes reserved `row` the slot a PUT of sequence `seq` at (seg, off, len) made. */
  hold(row: number, seq: number, seg: number, off: number, len: number): void {
    assert(this.state[row] === ROW_RESERVED, "only a reserved row is held");
    assert(seq > 0 && seg > 0, "a held row names a PUT record");
    this.state[row] = ROW_HELD;
    this.putSeq[row] = seq;
    this.seg[row] = seg;
    this.off[row] = off;
    this.len[row] = len;
    this.physical[row] = 1;
    this.touched[row] = 0;
    this.reserved -= 1;
    this.held += 1;
  }

  /**
   * Applies another PUT (generation 1, no expiry) of sequence `seq` at (seg, off, len) to held
   * `row`, as applyPut does: one more physical record, and the location when it is newer. False,
   * changing nothing, when the row already counts PHYSICAL_MAX records.
   */
  overwrite(row: number, seq: number, seg: number, off: number, len: number): boolean {
    assert(this.state[row] === ROW_HELD && seg > 0, "only a held row is overwritten, by a PUT record");
    const physical = this.physical[row] as number;
    if (physical >= PHYSICAL_MAX) return false;
    this.physical[row] = physical + 1;
    if (seq > (this.putSeq[row] as number)) {
      this.putSeq[row] = seq;
      this.seg[row] = seg;
      this.off[row] = off;
      this.len[row] = len;
    }
    return true;
  }

  /** Frees `row` (made a Slot, or taken back); the columns shrink back once no row is in use. */
  release(row: number): void {
    const state = this.state[row];
    assert(state === ROW_RESERVED || state === ROW_HELD, "a row released is in use");
    if (state === ROW_HELD) this.held -= 1;
    else this.reserved -= 1;
    this.freed(row);
  }

  /** Marks held `row` FORWARDED: made a Slot under a pass's pin, its number kept out of use until unforward(). */
  forward(row: number): void {
    assert(this.state[row] === ROW_HELD, "only a held row is forwarded");
    this.state[row] = ROW_FORWARDED;
    this.held -= 1;
    this.forwarded += 1;
  }

  /** Frees forwarded `row` (the pass that pinned it ended). */
  unforward(row: number): void {
    assert(this.state[row] === ROW_FORWARDED, "only a forwarded row is unforwarded");
    this.forwarded -= 1;
    this.freed(row);
  }

  /** Marks `row` FREE: reused first, or every column dropped once no row is in use or forwarded. */
  private freed(row: number): void {
    this.state[row] = ROW_FREE;
    if (this.any || this.forwarded !== 0) this.free.push(row);
    else this.reset();
  }

  /** Drops every row (Keydir.release, or the last row freed). */
  reset(): void {
    this.putSeq = new Float64Array(0);
    this.seg = new Uint32Array(0);
    this.off = new Uint32Array(0);
    this.len = new Uint32Array(0);
    this.physical = new Uint16Array(0);
    this.state = new Uint8Array(0);
    this.touched = new Uint8Array(0);
    this.free = [];
    this.used = 0;
    this.reserved = 0;
    this.held = 0;
    this.forwarded = 0;
  }

  /** Doubles the columns (their contents kept). */
  private grow(): void {
    const rows = Math.min(ROWS_MAX, Math.max(ROWS_INITIAL, 2 * this.state.length));
    this.putSeq = widened(this.putSeq, new Float64Array(rows));
    this.seg = widened(this.seg, new Uint32Array(rows));
    this.off = widened(this.off, new Uint32Array(rows));
    this.len = widened(this.len, new Uint32Array(rows));
    this.physical = widened(this.physical, new Uint16Array(rows));
    this.state = widened(this.state, new Uint8Array(rows));
    this.touched = widened(this.touched, new Uint8Array(rows));
  }
}

/** `wider` (a column of the same element type) with `column`'s contents at its start, byte for byte. */
function widened<A extends ArrayBufferView<ArrayBuffer>>(column: A, wider: A): A {
  assert(wider.byteLength >= column.byteLength, "a column only widens");
  new Uint8Array(wider.buffer, wider.byteOffset, column.byteLength).set(new Uint8Array(column.buffer, column.byteOffset, column.byteLength));
  return wider;
}
