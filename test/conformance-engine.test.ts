/**
 * The exported conformance suite (src/conformance) against the embedded engine.
 *
 * How it works: `conformance()` registers every contract-level test with vitest's describe/it;
 * the factory opens a real store in a fresh temp directory with inline compaction (workers 0, no
 * background compaction, so results do not depend on timing), and `reopen` opens the same
 * directory again. The fingerprint is a hash of every segment file's name and bytes. The engine
 * supports everything: readSync, both compaction modes, faults and the unsafe GC twin.
 * Property stressed: the engine is the reference implementation of API.md.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import fc from "fast-check";
import { afterAll, describe, it, vi } from "vitest";
import { conformance } from "../src/conformance/index.js";
import { Engram, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { modelTimeLimitMs, modelTimeoutMs } from "./helpers/model-timeout.js";

/** Runs of the model-based test by default; ENGRAM_MODEL_RUNS overrides, and the timeout grows with it (~40 ms a run here). */
const MODEL_RUNS = 100;
/** The model test's timeout; fast-check is stopped ahead of it (modelTimeLimitMs) so that what it found is reported. */
const TIMEOUT_MS = modelTimeoutMs(MODEL_RUNS, 500);
vi.setConfig({ testTimeout: TIMEOUT_MS });

const root = tempDir("conf");
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;

function plain(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The engine's own options for tests: inline compaction unless the test chose; bad options pass through untouched. */
function engineOptions(options: OpenOptions | undefined): OpenOptions | undefined {
  if (options === undefined) return { compaction: { workers: 0, auto: false } };
  if (!plain(options) || (options.compaction !== undefined && !plain(options.compaction))) return options;
  return { ...options, compaction: { workers: 0, auto: false, ...options.compaction } };
}

/** Hash of every file under DIR/segments (name, size and bytes). */
function segmentHash(dir: string): string {
  const segDir = path.join(dir, "segments");
  const h = createHash("sha256");
  if (!fs.existsSync(segDir)) return "no segments dir";
  for (const name of fs.readdirSync(segDir).sort()) {
    const bytes = fs.readFileSync(path.join(segDir, name));
    h.update(`${name}:${bytes.length}:`);
    h.update(bytes);
  }
  return h.digest("hex");
}

conformance({
  name: "conformance: embedded engine",
  describe,
  it,
  afterAll,
  open: (options) => Engram.open(path.join(root, `s${++n}`), engineOptions(options)),
  reopen: (previous, options) => Engram.open(previous.dir, engineOptions(options)),
  fingerprint: async (store) => segmentHash(store.dir),
  supports: { readSync: true, inPlaceCompaction: true, faults: true, unsafeGc: true, engineOptions: true, liveStats: true },
  fastCheck: fc,
  modelRuns: MODEL_RUNS,
  modelTimeLimitMs: modelTimeLimitMs(TIMEOUT_MS),
});
