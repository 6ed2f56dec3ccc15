/**
 * What the keydir's layout costs a bulk load and a read-all, measured apart from the rest of the
 * engine (issue 11: "a struct-of-arrays keydir is the usual way down"). Each layout runs in a
 * child process of its own, fresh, as a store's first load does:
 *
 * - `slots`: engram's own Keydir (dist/engine/keydir.js): ensureSlot + applyPut per key, one
 *   `Slot` object per key in a Map per scope: what the engine does today.
 * - `columns`: a sketch of the alternative, not engine code: one Map from key to a slot number,
 *   and every numeric field in typed-array columns grown by doubling (Float64Array for sequence,
 *   generation, expiry; Uint32Array for segment, offset, length; Int32Array for the record count).
 *
 * Both insert N names in a seeded random order with the same fields (seq i+1, generation 1,
 * segment 1, offset and length of a 286 B record), then look every name up in key order and read
 * its fields (W5's read-all order). Printed per layout, median of the rounds: µs per insert and per
 * lookup (wall), minor page faults of each phase, and the JS heap and ArrayBuffer bytes per key
 * after the inserts.
 *
 *   node --import tsx bench/keydir-layout.ts [--n 200000] [--rounds 5]
 *
 * The child runs `node bench/keydir-layout.ts --child LAYOUT N` on the built dist/ (npm run build).
 */
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { keyOf, permutation } from "./common.js";

type Layout = "slots" | "columns";

/** One child's figures. */
interface Figures {
  layout: Layout;
  insertUs: number;
  lookupUs: number;
  insertFaults: number;
  lookupFaults: number;
  heapPerKey: number;
  /** ArrayBuffer bytes per key after the inserts (the columns live there, off the JS heap). */
  bufferPerKey: number;
}

/** The fields every inserted name gets, the same for both layouts. */
const RECORD_BYTES = 286;

/** Keys to insert, in a seeded random order (as W3's load), and to look up, in key order (as W5's read-all). */
function namesOf(n: number): { inserts: string[]; lookups: string[] } {
  const perm = permutation(n, 51);
  return { inserts: Array.from(perm, (i) => keyOf(i)), lookups: Array.from({ length: n }, (_, i) => keyOf(i)) };
}

/** The column layout: a Map to slot numbers and typed-array columns. */
class Columns {
  private readonly index = new Map<string, number>();
  private count = 0;
  putSeq = new Float64Array(1024);
  generation = new Float64Array(1024);
  expiresAt = new Float64Array(1024);
  seg = new Uint32Array(1024);
  off = new Uint32Array(1024);
  len = new Uint32Array(1024);
  physical = new Int32Array(1024);

  /** The slot number of `key`, made when absent. */
  ensure(key: string): number {
    const at = this.index.get(key);
    if (at !== undefined) return at;
    if (this.count === this.putSeq.length) this.grow();
    const made = this.count++;
    this.index.set(key, made);
    return made;
  }

  get(key: string): number | undefined {
    return this.index.get(key);
  }

  /** Doubles every column. */
  private grow(): void {
    const twice = <T extends Float64Array | Uint32Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(a.length * 2);
      b.set(a);
      return b;
    };
    this.putSeq = twice(this.putSeq, (n) => new Float64Array(n));
    this.generation = twice(this.generation, (n) => new Float64Array(n));
    this.expiresAt = twice(this.expiresAt, (n) => new Float64Array(n));
    this.seg = twice(this.seg, (n) => new Uint32Array(n));
    this.off = twice(this.off, (n) => new Uint32Array(n));
    this.len = twice(this.len, (n) => new Uint32Array(n));
    this.physical = twice(this.physical, (n) => new Int32Array(n));
  }
}

/** Minor page faults of this process so far. */
const faults = (): number => process.resourceUsage().minorPageFault;

/** Runs `step(i)` for i in [0, n): its wall time in ns and the page faults it took. */
function timed(n: number, step: (i: number) => void): { ns: number; faults: number } {
  const f0 = faults();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) step(i);
  return { ns: Number(process.hrtime.bigint() - t0), faults: faults() - f0 };
}

/** The layout under test: insert name i (its fields set as the engine's apply sets them), and read a name's fields back (a sum; -1 when absent). */
interface Subject {
  insert(i: number): void;
  lookup(key: string): number;
}

/** engram's own Keydir, from the built dist/. */
async function slotsSubject(inserts: readonly string[]): Promise<Subject> {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const { Keydir, applyPut } = (await import(pathToFileURL(path.join(here, "..", "dist", "engine", "keydir.js")).href)) as typeof import("../engine/keydir.js");
  const keydir = new Keydir();
  const loc = { seg: 1, off: 0, len: RECORD_BYTES };
  return {
    insert(i: number): void {
      loc.off = 128 + i * RECORD_BYTES;
      applyPut(keydir.ensureSlot("global", inserts[i] as string), i + 1, 1, 0, loc);
    },
    lookup(key: string): number {
      const slot = keydir.get("global", key);
      return slot === undefined ? -1 : slot.off + slot.len + slot.putSeq;
    },
  };
}

/** The column sketch. */
function columnsSubject(inserts: readonly string[]): Subject {
  const cols = new Columns();
  return {
    insert(i: number): void {
      const at = cols.ensure(inserts[i] as string);
      cols.physical[at] = (cols.physical[at] as number) + 1;
      cols.putSeq[at] = i + 1;
      cols.generation[at] = 1;
      cols.seg[at] = 1;
      cols.off[at] = 128 + i * RECORD_BYTES;
      cols.len[at] = RECORD_BYTES;
    },
    lookup(key: string): number {
      const at = cols.get(key);
      return at === undefined ? -1 : (cols.off[at] as number) + (cols.len[at] as number) + (cols.putSeq[at] as number);
    },
  };
}

/** Runs one layout in this process and prints its figures as one JSON line. */
async function child(layout: Layout, n: number): Promise<void> {
  const { inserts, lookups } = namesOf(n);
  const subject = layout === "slots" ? await slotsSubject(inserts) : columnsSubject(inserts);
  const heap0 = process.memoryUsage().heapUsed;
  const buffers0 = process.memoryUsage().arrayBuffers;
  const insert = timed(n, (i) => subject.insert(i));
  const heapPerKey = (process.memoryUsage().heapUsed - heap0) / n;
  const bufferPerKey = (process.memoryUsage().arrayBuffers - buffers0) / n;
  let missing = 0;
  const lookup = timed(n, (i) => {
    if (subject.lookup(lookups[i] as string) < 0) missing += 1;
  });
  if (missing > 0) throw new Error(`${missing} names not found`);
  const figures: Figures = { layout, insertUs: insert.ns / n / 1000, lookupUs: lookup.ns / n / 1000, insertFaults: insert.faults, lookupFaults: lookup.faults, heapPerKey, bufferPerKey };
  console.log(JSON.stringify(figures));
}

/** The median of `xs` (not empty). */
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1] as number;
}

const args = process.argv.slice(2);
if (args[0] === "--child") {
  await child(args[1] as Layout, Number(args[2]));
} else {
  const flag = (name: string, fallback: number): number => {
    const i = args.indexOf(name);
    return i < 0 ? fallback : Number(args[i + 1]);
  };
  const n = flag("--n", 200_000);
  const rounds = flag("--rounds", 5);
  const runs: Figures[] = [];
  const self = fileURLToPath(import.meta.url);
  for (let r = 0; r < rounds; r++) {
    for (const layout of ["slots", "columns"] as const) {
      const out = execFileSync(process.execPath, ["--import", "tsx", self, "--child", layout, String(n)], { encoding: "utf8" });
      runs.push(JSON.parse(out.trim().split("\n").pop() as string) as Figures);
    }
  }
  for (const layout of ["slots", "columns"] as const) {
    const mine = runs.filter((x) => x.layout === layout);
    const m = (f: (x: Figures) => number): string => median(mine.map(f)).toFixed(2);
    console.log(`${layout}: n=${n}, median of ${rounds}: insert ${m((x) => x.insertUs)} µs/key (${m((x) => x.insertFaults)} faults), lookup in key order ${m((x) => x.lookupUs)} µs/key (${m((x) => x.lookupFaults)} faults), JS heap ${m((x) => x.heapPerKey)} B/key, buffers ${m((x) => x.bufferPerKey)} B/key`);
  }
}
