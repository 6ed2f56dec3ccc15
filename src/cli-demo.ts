/**
 * `engram demo`: replays the two failures of the seed notes on fresh stores in a temp directory,
 * first under the `unsafe` options (which reproduce them), then with the safe defaults.
 */
import { formatVersionWritten, groupFrameBytes } from "../segments/version-written.js";
import { recordLengthOf } from "../segments/record.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EngramError, ScopeErasedDuringRead } from "../rules/errors.js";
import { Engram } from "./engram.js";
import type { OpenOptions, ProbeResult, ReadResult, StoreStats, Value } from "./types.js";

/** What one scenario run concluded. */
type Outcome = "failure-reproduced" | "safe" | "unexpected";

/** Prints numbered steps of one scenario run. */
class Steps {
  private n = 0;
  /** Prints the next numbered step. */
  step(what: string, result: string): void {
    this.n++;
    process.stdout.write(`  ${String(this.n).padStart(2)}. ${what.padEnd(60)} -> ${result}\n`);
  }
}

function show(v: Value): string {
  return typeof v === "string" ? JSON.stringify(v) : `<${v.byteLength} bytes>`;
}

function showRead(r: ReadResult): string {
  return r.status === "OK"
    ? `OK ${show(r.value)} (version ${r.version}, generation ${r.generation}, found in scope ${r.scope})`
    : "NOT_FOUND";
}

function showProbe(p: ProbeResult): string {
  return (
    `state ${p.state}, value_present ${p.valuePresent}, retention_present ${p.retentionPresent}, ` +
    `version ${String(p.version)}, generation ${String(p.generation)}, tombstone_seq ${String(p.tombstoneSeq)}`
  );
}

function showError(err: unknown): string {
  return err instanceof EngramError ? `${err.code}: ${err.message}` : `error: ${String(err)}`;
}

function showSegments(s: StoreStats): string {
  return s.segments.map((g) => `segment ${g.id} generation ${g.generation} (${g.records} records)`).join("; ");
}

function verdict(label: string, outcome: Outcome, text: string): Outcome {
  const tag = outcome === "unexpected" ? "UNEXPECTED" : outcome === "safe" ? "SAFE" : "FAILURE";
  process.stdout.write(`  => RESULT ${label}: ${tag}: ${text}\n\n`);
  return outcome;
}

// ---------------------------------------------------------------------------------------------
// (a) seed 000: forget -> re-write -> GC (phantom write loss)

async function phantomWriteLoss(dir: string, unsafe: boolean): Promise<Outcome> {
  const label = unsafe ? "(a) unsafe" : "(a) defaults";
  const opts: OpenOptions = unsafe ? { unsafe: { gcKeyedBy: "tombstone-seq" } } : {};
  process.stdout.write(
    `== ${label}: forget -> re-write -> gc ${unsafe ? '(unsafe: { gcKeyedBy: "tombstone-seq" })' : "(generation-keyed GC)"}\n`,
  );
  const store = await Engram.open(dir, opts);
  try {
    const s = new Steps();
    const key = "pref.theme";
    const w1 = await store.write(key, "light");
    s.step(`write ${key} = "light"`, `version ${w1.version}, generation ${w1.generation}`);
    const f = await store.forget(key);
    s.step(`forget ${key}`, `tombstone seq ${String(f.tombstoneSeq)}, generation ${String(f.generation)} (tombstone only)`);
    s.step(`probe ${key}`, showProbe(await store.probe(key)));
    const w2 = await store.write(key, "dark");
    s.step(`write ${key} = "dark" (auto-clear)`, `ok: version ${w2.version}, generation ${w2.generation}`);
    const gc = await store.gc();
    s.step("gc()", `kept ${gc.recordsKept}, dropped ${gc.recordsDropped} records, ${gc.retentionRecordsDropped} retention records`);
    const r = await store.read(key);
    s.step(`read ${key}`, showRead(r));
    s.step(`probe ${key}`, showProbe(await store.probe(key)));
    const cas = await store.write(key, "dark again", { expectedVersion: w2.version }).then(
      (w) => `ok: version ${w.version} (the version and the value agree)`,
      (err: unknown) => showError(err),
    );
    s.step(`write ${key} expectedVersion ${w2.version}`, cas);
    if (r.status === "NOT_FOUND") return verdict(label, unsafe ? "failure-reproduced" : "unexpected", `PHANTOM WRITE LOSS: the acknowledged write of "dark" (version ${w2.version}) is gone after gc`);
    if (r.value === "dark") return verdict(label, unsafe ? "unexpected" : "safe", `WRITE SURVIVED: "dark" (version ${w2.version}) is still readable after gc`);
    return verdict(label, "unexpected", `read returned ${showRead(r)}`);
  } finally {
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------
// (b) seed 002: a read straddling an in-place compaction triggered by a sibling scope's erasure

const KEY = "pref.theme";
const ERASED = "user:alice/session:1";
const READER = "user:alice/session:2";
const OTHER = "user:bob";

/**
 * Values padded so that the global and user:bob records have the same size and the erased one is
 * two group frames shorter (each write is framed on disk, and compaction drops the frames): the
 * rewrite then moves user:bob's record exactly onto the global record's old offset.
 */
function equalSizeValues(): Record<string, string> {
  const base: Record<string, string> = { [ERASED]: "alice session-1 draft", global: "theme=solarized", [OTHER]: "bob private note" };
  const total = Math.max(...Object.entries(base).map(([scope, v]) => scope.length + v.length));
  // The record's length as the store writes it (format 3: a function of the fields, varints
  // included; these three writes have sequences below 128 and generation 0).
  const version = formatVersionWritten();
  const recordBytes = (scope: string, valueLen: number): number => recordLengthOf(version)(scope.length, KEY.length, valueLen, 1, 0, 0);
  // A varint's size steps at 128, so not every record length is reachable: pad the erased value
  // until both others can be padded to exactly two frames more than its record.
  const fit = (scope: string, v: string, target: number): string | null => {
    for (let n = v.length; n <= target; n++) if (recordBytes(scope, n) === target) return v.padEnd(n, ".");
    return null;
  };
  for (let e = total - ERASED.length; e < 4 * total; e++) {
    const target = recordBytes(ERASED, e) + 2 * groupFrameBytes(version);
    const global = fit("global", base["global"] as string, target);
    const other = fit(OTHER, base[OTHER] as string, target);
    if (global !== null && other !== null) return { [ERASED]: (base[ERASED] as string).padEnd(e, "."), global, [OTHER]: other };
  }
  throw new Error("no padding gives the global and user:bob records two frames more than the erased one");
}

function timeout<T>(ms: number, what: string): Promise<T> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms).unref());
}

/** Runs a read through the armed pause point (the point stays armed after a release). */
async function readThroughPause(store: Engram, scope: string): Promise<ReadResult> {
  const read = store.read(KEY, { scope });
  await Promise.race([store.faults.waitFor("read:after-authorize"), timeout(10_000, "read:after-authorize")]);
  store.faults.release("read:after-authorize");
  return read;
}

async function writeRecords(store: Engram, s: Steps): Promise<void> {
  const values = equalSizeValues();
  for (const scope of [ERASED, "global", OTHER]) {
    const w = await store.write(KEY, values[scope] ?? "", { scope });
    s.step(`write ${KEY} in ${scope}`, `version ${w.version}, generation ${w.generation}, value ${JSON.stringify(values[scope])}`);
  }
  s.step("stats()", `${showSegments(store.stats())}, sequence ${store.stats().sequence}`);
}

function judgeRead(label: string, unsafe: boolean, r: ReadResult | null, err: unknown): Outcome {
  const expected = equalSizeValues()["global"];
  if (err instanceof ScopeErasedDuringRead) {
    return verdict(label, unsafe ? "unexpected" : "safe", `FAILED CLOSED with ScopeErasedDuringRead (authorized generation ${err.authorizedGeneration}, live ${err.liveGeneration}): no bytes returned`);
  }
  if (r === null) return verdict(label, "unexpected", `the read failed: ${showError(err)}`);
  if (r.status === "OK" && (r.value !== expected || r.scope !== "global")) {
    return verdict(label, unsafe ? "failure-reproduced" : "unexpected", `TORN READ: a read of ${KEY} in ${READER} returned ${show(r.value)}, another scope's value, reported as scope ${r.scope}`);
  }
  return verdict(label, "unexpected", `the straddling read returned ${showRead(r)} (no race observed)`);
}

async function tornRead(dir: string, unsafe: boolean): Promise<Outcome> {
  const label = unsafe ? "(b) unsafe" : "(b) defaults";
  const opts: OpenOptions = {
    compaction: { mode: "in-place" },
    faults: { pauseAt: ["read:after-authorize"] },
    ...(unsafe ? { unsafe: { skipReadValidation: true } } : {}),
  };
  process.stdout.write(`== ${label}: read straddling an in-place compaction ${unsafe ? "(unsafe: { skipReadValidation: true })" : "(validated reads)"}\n`);
  process.stdout.write(`   (records sized so that the compaction moves user:bob's record exactly onto the global one's old offset)\n`);
  const store = await Engram.open(dir, opts);
  try {
    const s = new Steps();
    await writeRecords(store, s);
    const read = store.read(KEY, { scope: READER }).then(
      (r) => ({ r, err: null as unknown }),
      (err: unknown) => ({ r: null, err }),
    );
    await Promise.race([store.faults.waitFor("read:after-authorize"), timeout(10_000, "read:after-authorize")]);
    s.step(`read ${KEY} in ${READER} (inherits global)`, "authorized, paused at read:after-authorize");
    const fs = await store.forgetScope(ERASED, { reclaim: "eager" });
    s.step(`forgetScope ${ERASED} eager`, `seq ${fs.tombstoneSeq}, ${fs.slots} slots, ${String(fs.reclaimedBytes ?? "?")} bytes reclaimed`);
    s.step("stats()", showSegments(store.stats()));
    store.faults.release("read:after-authorize");
    const { r, err } = await read;
    s.step("release the read", r !== null ? showRead(r) : showError(err));
    s.step(`read ${KEY} in ${READER} again`, await readThroughPause(store, READER).then(showRead, showError));
    return judgeRead(label, unsafe, r, err);
  } finally {
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------

/** Runs the demo; returns the exit code (0 unless the safe defaults misbehaved). */
export async function runDemo(options: { keep?: boolean } = {}): Promise<number> {
  const root = mkdtempSync(join(tmpdir(), "engram-demo-"));
  process.stdout.write(`engram demo: the two failures of the seed notes, on fresh stores under ${root}\n\n`);
  try {
    const outcomes = [
      await phantomWriteLoss(join(root, "a-unsafe"), true),
      await phantomWriteLoss(join(root, "a-defaults"), false),
      await tornRead(join(root, "b-unsafe"), true),
      await tornRead(join(root, "b-defaults"), false),
    ];
    const safeOk = outcomes[1] === "safe" && outcomes[3] === "safe";
    const reproduced = outcomes[0] === "failure-reproduced" && outcomes[2] === "failure-reproduced";
    process.stdout.write(
      safeOk
        ? `summary: with the defaults the write survived GC and the straddling read failed closed${reproduced ? "; the unsafe options reproduced both failures" : ""}.\n`
        : "summary: the safe defaults did NOT hold (see UNEXPECTED above).\n",
    );
    return safeOk ? 0 : 1;
  } finally {
    if (options.keep === true) process.stdout.write(`(kept ${root})\n`);
    else rmSync(root, { recursive: true, force: true });
  }
}
