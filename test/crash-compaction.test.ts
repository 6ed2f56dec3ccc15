/**
 * Crash test of compaction with real processes and SIGKILL (issue 4; invariants I1, I2, I6, I9 of
 * DESIGN.md): a crash at any step of either compaction mode loses nothing live and resurrects
 * nothing forgotten.
 *
 * How it works: for each mode a child process (test/helpers/crash-child.ts, "prepare") builds a
 * store with known content in a real temp directory — 7 scopes with inheritance x 20 keys, a
 * quarter of the slots overwritten, a quarter forgotten (singly and in batches), two scopes erased
 * with forgetScope ("user:a/session:2"; "user:b" with its child "user:b/session:1", then new writes
 * to "user:b/session:1" after the erasure), then compacts every sealed segment but the oldest and
 * adds more garbage — and closes cleanly. tombstoneRetentionMs is 0, so a tombstone or erase record
 * may be dropped as soon as no older value of its slot remains anywhere: a compaction that drops one
 * too early resurrects that value after a restart (I6). The parent checks the prepared directory
 * and copies it once per crash point. For each point of the mode (in-place: after-journal,
 * mid-rewrite, after-rewrite; copy-on-write: before-swap, after-output-rename, after-rename, before-unlink) a second
 * child opens a copy with `faults.crashAt` and runs `compact()` on a piscina worker; the engine
 * SIGKILLs the whole process at the point. The parent checks that the child died by SIGKILL inside
 * compact(), that the files show the crash happened at that step (journal present and the segment
 * untouched / first record rewritten / fully rewritten, at most its new hint as a .tmp beside
 * it; .tmp present / output renamed beside its still-present source), then reopens: every live key has its exact value and version, every
 * forgotten key and erased scope reads NOT_FOUND (inherited reads and list() agree), verify() is
 * clean, no .journal or .tmp remains, the journal was replayed (in-place) or the replaced source
 * removed (copy-on-write); a further compact() plus reopen still holds all of it. In place, each
 * point is also crashed at its second arrival (`faults.crashAfter` 1, since the forty-eighth
 * session): in a later job of the pass, while the job before it is published or in flight, with
 * the same reopen checks (a copy-on-write pass merges the template's segments into one output,
 * which meets each of its points once).
 *
 * Then, per mode, a random run: a child writes, forgets, batches and erases scopes in two loops
 * while a third runs compact() back to back and a fourth reads (any value read must name its own
 * scope and key, or the read must fail closed with ScopeErasedDuringRead). The parent SIGKILLs it
 * at a random moment of its compact() pass, or a random 0-3 ms after the child saw (fs.watch)
 * one of its compactions create a journal or .tmp, reopens, and checks the directory against every
 * acknowledged operation exactly as test/crash-writes.test.ts does (test/helpers/crash-model.ts),
 * until it has at least ENGRAM_CRASH_COMPACTION_KILLS kills (default 4) of which one or more left
 * a crashed compaction's files (journal, .tmp, or a renamed output beside its source) on disk.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import type { FaultPoint, OpenOptions } from "../src/index.js";
import { checksum64, initChecksum } from "../segments/checksum.js";
import { DATA_START } from "../segments/constants.js";
import { chooseHeader, type SegmentHeader } from "../segments/header.js";
import type { OpsConfig, PrepareConfig } from "./helpers/crash-child.js";
import { CrashModel, isCompactionFile, leftovers } from "./helpers/crash-model.js";
import { between, rng, runSeed } from "./helpers/crash-proc.js";
import { ChildPool, reopenAndCheck, runRound, type KillTrigger } from "./helpers/crash-rounds.js";
import { tempDir as freshDir } from "./helpers/tmp.js";
import { recordLengthAt } from "../segments/record.js";

type Mode = "in-place" | "copy-on-write";

const POINTS: Record<Mode, FaultPoint[]> = {
  "in-place": ["compaction:after-journal", "compaction:mid-rewrite", "compaction:after-rewrite"],
  "copy-on-write": ["compaction:before-swap", "compaction:after-output-rename", "compaction:after-rename", "compaction:before-unlink"],
};
const MODES: Mode[] = ["in-place", "copy-on-write"];
const SCOPES = ["global", "user:a", "user:a/session:1", "user:a/session:2", "user:b", "user:b/session:1", "team:x"];
const KEYS = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, "0")}`);
const LOOP_SCOPES = ["global", "user:a", "user:a/session:1", "user:b"];
// Many keys, so that most segments keep some live records: compacting them takes a journal / .tmp.
const LOOP_KEYS = Array.from({ length: 40 }, (_, i) => `k${String(i).padStart(2, "0")}`);
const LOOP_KILLS = Math.max(4, Number(process.env["ENGRAM_CRASH_COMPACTION_KILLS"] ?? 0) || 0);

function openOptions(mode: Mode, segmentBytes: number): OpenOptions {
  return { durability: "sync", segmentBytes, compaction: { mode, workers: 1, auto: false }, retention: { tombstoneRetentionMs: 0 } };
}

/** The same options with compaction run inline (the parent's own compactions are not under test). */
function inline(o: OpenOptions): OpenOptions {
  return { ...o, compaction: { ...o.compaction, workers: 0 } };
}

const dirs: string[] = [];
let keepDirs = false;
const seed = runSeed();
const templates = new Map<Mode, { dir: string; model: CrashModel }>();

function tempDir(tag: string): string {
  const d = freshDir(`crash-${tag}`);
  dirs.push(d);
  return d;
}

/** Every file of DIR/segments, by name. */
function snapshot(dir: string): Map<string, Buffer> {
  const segs = path.join(dir, "segments");
  return new Map(fs.readdirSync(segs).map((n) => [n, fs.readFileSync(path.join(segs, n))]));
}

function segName(id: number): string {
  return `${String(id).padStart(8, "0")}.seg`;
}

function headerOf(bytes: Buffer, id: number): SegmentHeader {
  return chooseHeader(bytes.subarray(0, DATA_START), id).header;
}

/**
 * A redo journal: magic, segment id, generation, data length, data, xxh64 (compaction-core.ts);
 * a reused journal file may hold an earlier, longer journal's tail after it.
 */
function parseJournal(bytes: Buffer): { id: number; generation: number; data: Buffer } {
  expect(bytes.length, "journal shorter than its head").toBeGreaterThanOrEqual(40);
  expect(bytes.readUInt32LE(0), "journal magic").toBe(0x4c4e524a);
  const dataBytes = Number(bytes.readBigUInt64LE(16));
  expect(dataBytes, "the declared data lies inside the file").toBeLessThanOrEqual(bytes.length - 40);
  expect(checksum64(bytes, 0, 32 + dataBytes), "journal checksum (a durable, complete journal)").toBe(bytes.readBigUInt64LE(32 + dataBytes));
  return { id: bytes.readUInt32LE(4), generation: Number(bytes.readBigUInt64LE(8)), data: bytes.subarray(32, 32 + dataBytes) };
}

/** What the crash left on disk, checked against the step it names; returns what reopen must finish. */
function checkCrashState(point: FaultPoint, before: Map<string, Buffer>, after: Map<string, Buffer>): { journal?: ReturnType<typeof parseJournal>; source?: number; output?: number } {
  const journals = [...after.keys()].filter((n) => n.endsWith(".journal"));
  const tmps = [...after.keys()].filter((n) => n.endsWith(".tmp") && isCompactionFile(n)); // not a sealed segment's hint in flight (the pass may seal the active segment beside its first job)
  if (point === "compaction:after-journal" || point === "compaction:mid-rewrite" || point === "compaction:after-rewrite") {
    expect(journals.length, `a crash at ${point} leaves exactly one redo journal`).toBe(1);
    const j = parseJournal(after.get(journals[0] as string) as Buffer);
    const name = segName(j.id);
    // Its new hint is written as a .tmp while the journal and the rewrite are made durable, and
    // renamed only after: at most that .tmp, never a segment's.
    expect(tmps.every((n) => n === `${String(j.id).padStart(8, "0")}.hint.tmp`), `an in-place compaction leaves no .tmp but its segment's hint in flight: ${tmps.join(", ")}`).toBe(true);
    expect(journals[0]).toBe(`${String(j.id).padStart(8, "0")}.journal`);
    const old = before.get(name);
    const now = after.get(name);
    expect(old, `journal of segment ${j.id}, which existed before compact()`).toBeDefined();
    expect(now, `segment ${j.id} still exists`).toBeDefined();
    const o = old as Buffer;
    const f = now as Buffer;
    const firstLen = recordLengthAt(j.data, 0); // the store's own record frame (format 3: a varint length)
    const h = headerOf(f, j.id);
    if (point === "compaction:after-rewrite") {
      // Rewritten, truncated, new generation in the header; only the journal's deletion is missing.
      expect(f.length).toBe(DATA_START + j.data.length);
      expect(f.subarray(DATA_START).equals(j.data), "segment holds exactly the journal's data").toBe(true);
      expect(h.generation).toBe(j.generation);
    } else {
      // Not truncated yet, old generation in the header.
      expect(f.length, "segment not truncated yet").toBeGreaterThan(DATA_START + j.data.length);
      expect(h.generation).toBe(j.generation - 2);
      if (point === "compaction:after-journal") {
        // Every record byte as it was before compact() (sealing may only have cut preallocated zeros).
        expect(f.subarray(DATA_START).equals(o.subarray(DATA_START, f.length)), "segment untouched after the journal").toBe(true);
      } else {
        // mid-rewrite: the first surviving record was written at the front, the rest not yet.
        expect(j.data.subarray(0, firstLen).equals(o.subarray(DATA_START, DATA_START + firstLen)), "the segment's first record is garbage, so the rewrite moves bytes there").toBe(false);
        expect(f.subarray(DATA_START, DATA_START + firstLen).equals(j.data.subarray(0, firstLen)), "first record rewritten").toBe(true);
        expect(f.subarray(DATA_START + firstLen).equals(o.subarray(DATA_START + firstLen, f.length)), "bytes after the first record untouched").toBe(true);
      }
    }
    return { journal: j };
  }
  expect(journals, "a copy-on-write compaction leaves no journal").toEqual([]);
  if (point === "compaction:before-swap") {
    expect(tmps.length, "a crash at before-swap leaves exactly one .tmp").toBe(1);
    const tmp = tmps[0] as string;
    const outId = Number(tmp.slice(0, 8));
    expect(tmp).toBe(`${segName(outId)}.tmp`);
    expect(after.has(segName(outId)), "output not renamed yet").toBe(false);
    const h = headerOf(after.get(tmp) as Buffer, outId);
    expect(h.replacesId, "the .tmp replaces a segment that existed before").toBeGreaterThan(0);
    expect(before.has(segName(h.replacesId))).toBe(true);
    expect(after.has(segName(h.replacesId)), "source still in place").toBe(true);
    return { source: h.replacesId, output: outId };
  }
  // after-output-rename (renamed by the worker, not yet listed) / after-rename / before-unlink
  // (listed by the main thread's manifest write): the output is a .seg beside its source, which is still there.
  expect(tmps, `no .tmp left at ${point}`).toEqual([]);
  const outputs = [...after.entries()]
    .filter(([n]) => n.endsWith(".seg") && !before.has(n))
    .map(([n, b]) => ({ id: Number(n.slice(0, 8)), h: headerOf(b, Number(n.slice(0, 8))) }))
    .filter((x) => x.h.replacesId !== 0 && after.has(segName(x.h.replacesId)));
  expect(outputs.length, `a crash at ${point} leaves one renamed output beside its source`).toBe(1);
  const out = outputs[0] as { id: number; h: SegmentHeader };
  return { source: out.h.replacesId, output: out.id };
}

afterAll(() => {
  if (!keepDirs) for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

beforeAll(async () => {
  await initChecksum();
  // Both templates at once: each is one child process.
  const pool = new ChildPool(false);
  try {
    await Promise.all(
      MODES.map(async (mode) => {
        const dir = tempDir(`template-${mode}`);
        const model = new CrashModel(SCOPES, KEYS);
        const open = openOptions(mode, 16 * 1024);
        const config: PrepareConfig = { mode: "prepare", dir, open, seed, scopes: SCOPES, keys: KEYS };
        const label = `seed ${seed} prepare ${mode} dir ${dir}`;
        await runRound(pool, model, config, null, label, true);
        const report = await reopenAndCheck(dir, open, model, label);
        expect(report.acked).toBe(report.units);
        templates.set(mode, { dir, model });
      }),
    );
  } catch (err) {
    keepDirs = true;
    throw err;
  }
}, 120_000);

/**
 * One scripted crash: a copy of the mode's template, compact() in a child that the engine kills at
 * `point` after `crashAfter` arrivals there (0: in the pass's first job that reaches it; 1: in a
 * later one, the jobs before it published or in flight), then a reopen that must hold exactly the
 * prepared content, and a further inline compaction and reopen. With `checkFiles` (the first
 * arrival) the files the crash left are checked against the step it names, and what recovery
 * made of them (the journal replayed, the unpublished output dropped, the published one kept).
 */
async function crashCompaction(mode: Mode, point: FaultPoint, crashAfter: number, checkFiles: boolean): Promise<void> {
  const template = templates.get(mode);
  if (template === undefined) throw new Error("template not prepared");
  const dir = tempDir(point.replace(":", "-"));
  fs.cpSync(template.dir, dir, { recursive: true });
  const model = template.model.clone();
  const open = openOptions(mode, 16 * 1024);
  const label = `seed ${seed} ${mode} ${point} after ${crashAfter} dir ${dir}`;
  try {
    const before = snapshot(dir);
    const res = await runRound(new ChildPool(false), model, { mode: "compact-crash", dir, open, crashAt: point, crashAfter }, null, label);
    expect(res.killedByParent, `${label}: the parent had to kill it`).toBe(false);
    expect(res.exit.signal).toBe("SIGKILL");
    expect(res.cstarts, "compact() was called").toBe(1);
    expect(res.cdones, "compact() never returned").toBe(0);
    const pending = checkFiles ? checkCrashState(point, before, snapshot(dir)) : null;
    if (crashAfter > 0) expect(rewrittenSegments(before, snapshot(dir)), `${label}: a job before the crash rewrote its segment`).toBeGreaterThan(0);

    // Reopen: recovery finishes or undoes the compaction; the content is exactly the prepared one.
    const report = await reopenAndCheck(dir, open, model, `${label} (reopen after crash)`);
    expect(report.units).toBe(0);
    expect(leftovers(dir)).toEqual([]);
    if (pending !== null) checkRecovered(point, pending, snapshot(dir));

    // A further compaction (inline, in this process) and restart keep every live value and every forgetting.
    const store = await Engram.open(dir, inline(open));
    try {
      const c = await store.compact();
      expect(c.segments.length, "the garbage is still there to compact").toBeGreaterThan(0);
    } finally {
      await store.close();
    }
    await reopenAndCheck(dir, open, model, `${label} (after a further compact)`);
    expect(leftovers(dir)).toEqual([]);
  } catch (err) {
    keepDirs = true;
    throw err;
  }
}

/** Segments present before and after whose header generation changed between (rewritten in place and published on disk), those with a journal beside them excepted. */
function rewrittenSegments(before: Map<string, Buffer>, after: Map<string, Buffer>): number {
  let n = 0;
  for (const [name, old] of before) {
    const now = after.get(name);
    if (!name.endsWith(".seg") || now === undefined || after.has(name.replace(".seg", ".journal"))) continue;
    const id = Number(name.slice(0, 8));
    if (headerOf(now, id).generation !== headerOf(old, id).generation) n += 1;
  }
  return n;
}

/** What recovery made of the crash's files: the journal replayed, the unpublished output dropped, the published one kept. */
function checkRecovered(point: FaultPoint, pending: ReturnType<typeof checkCrashState>, settled: Map<string, Buffer>): void {
  if (pending.journal !== undefined) {
    // The redo journal was replayed: the segment is the journal's image, at its generation.
    const j = pending.journal;
    const f = settled.get(segName(j.id));
    expect(f, `segment ${j.id} after recovery`).toBeDefined();
    expect((f as Buffer).subarray(DATA_START).equals(j.data), "journal replayed onto the segment").toBe(true);
    expect(headerOf(f as Buffer, j.id).generation).toBe(j.generation);
  } else if (point === "compaction:before-swap" || point === "compaction:after-output-rename") {
    expect(settled.has(segName(pending.source as number)), "unpublished output dropped, source kept").toBe(true);
    expect(settled.has(segName(pending.output as number))).toBe(false);
  } else {
    expect(settled.has(segName(pending.source as number)), "published output replaced its source").toBe(false);
    expect(settled.has(segName(pending.output as number))).toBe(true);
  }
}

describe.concurrent.each(MODES)("crash: %s compaction", (mode) => {
  for (const point of POINTS[mode]) {
    it(`SIGKILL at ${point} loses nothing live and resurrects nothing`, { timeout: 120_000 }, async () => {
      await crashCompaction(mode, point, 0, true);
    });
    // A copy-on-write pass merges the template's sealed segments into one output: no second arrival.
    if (mode !== "in-place") continue;
    it(`SIGKILL at ${point} in a later job of the pass (crashAfter 1) loses nothing live and resurrects nothing`, { timeout: 120_000 }, async () => {
      await crashCompaction(mode, point, 1, false);
    });
  }

  it(`random SIGKILLs during a compaction loop (${LOOP_KILLS}+ kills)`, { timeout: 300_000 }, async () => {
    const r = rng((seed ^ (mode === "in-place" ? 0x1234567 : 0x7654321)) >>> 0);
    const dir = tempDir(`loop-${mode}`);
    const open = openOptions(mode, 8192);
    const model = new CrashModel(LOOP_SCOPES, LOOP_KEYS);
    const pool = new ChildPool();
    const tally = { kills: 0, inCompaction: 0, onDisk: 0, compactions: 0, acked: 0, inFlight: 0 };
    const started = performance.now();
    try {
      for (let round = 0; tally.kills < LOOP_KILLS || (tally.onDisk === 0 && round < 5 * LOOP_KILLS); round++) {
        const label = `seed ${seed} ${mode} loop round ${round} dir ${dir}`;
        const config: OpsConfig = {
          mode: "ops",
          dir,
          open,
          seed: (seed + round * 104729 + (mode === "in-place" ? 1 : 2)) >>> 0,
          lanes: 2,
          scopes: LOOP_SCOPES,
          keys: LOOP_KEYS,
          eraseScopes: ["user:a/session:1", "user:b"],
          mix: { write: 60, forget: 15, batch: 23, erase: 2 },
          padMax: 500,
          compactLoop: true,
          readers: 1,
          watchFiles: true,
          maxUnits: 50_000,
        };
        // Even rounds: a random moment 0.2-2.5 s into the child's first compact() pass (its worker
        // loads, then it works through every segment with garbage). Odd rounds: a random 0-3 ms
        // after the child saw a random one of its compactions create a journal / .tmp, so that kills
        // also land inside the worker's few-ms file protocol, which a random moment of the pass
        // hits rarely (the pass mostly waits for the write queue to go idle).
        const kill: KillTrigger =
          round % 2 === 0 ? { on: "cstart", count: 1, delayMs: between(r, 200, 2500) } : { on: "fsevent", count: between(r, 1, 6), delayMs: between(r, 0, 3) };
        const res = await runRound(pool, model, config, kill, label);
        expect(res.killedByParent, label).toBe(true);
        tally.kills += 1;
        tally.compactions += res.cdones;
        if (res.inCompaction) tally.inCompaction += 1;
        const files = fs.readdirSync(path.join(dir, "segments"));
        const replacedSource = files
          .filter((n) => n.endsWith(".seg"))
          .some((n) => {
            const h = headerOf(fs.readFileSync(path.join(dir, "segments", n)).subarray(0, DATA_START), Number(n.slice(0, 8)));
            return h.replacesId !== 0 && files.includes(segName(h.replacesId));
          });
        if (leftovers(dir).some(isCompactionFile) || replacedSource) tally.onDisk += 1; // a seal's hint being written is not a compaction's
        const report = await reopenAndCheck(dir, open, model, label);
        tally.acked += report.acked;
        tally.inFlight += report.inFlight;
      }
      // A last compaction in this process and a restart.
      const store = await Engram.open(dir, inline(open));
      try {
        await store.compact();
      } finally {
        await store.close();
      }
      await reopenAndCheck(dir, open, model, `seed ${seed} ${mode} loop final dir ${dir}`);
    } catch (err) {
      keepDirs = true;
      throw err;
    } finally {
      await pool.close();
    }
    console.info(
      `[crash-compaction] ${mode} seed ${seed}: ${tally.kills} random SIGKILLs survived in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
        `${tally.inCompaction} landed inside compact(), ${tally.onDisk} left a crashed compaction's files on disk; ` +
        `${tally.compactions} compactions completed, ${tally.acked} acked units checked, ${tally.inFlight} in flight at kills`,
    );
    expect(tally.kills).toBeGreaterThanOrEqual(LOOP_KILLS);
    expect(tally.inCompaction, "kills that landed while compact() ran").toBeGreaterThan(0);
    expect(tally.onDisk, "kills that left a journal, a .tmp or a replaced source on disk").toBeGreaterThan(0);
  });
});
