/**
 * The exported conformance suite (src/conformance) against the embedded engine.
 *
 * How it works: `conformance()` registers every contract-level test with vitest's describe/it;
 * the factory opens a real store in a fresh temp directory with inline compaction (workers 0, no
 * background compaction, so results do not depend on timing), and `reopen` opens the same
 * directory again. The engine supports everything: readSync, both compaction modes, faults and the
 * unsafe GC twin. Property stressed: the engine is the reference implementation of API.md.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, it } from "vitest";
import { conformance } from "../src/conformance/index.js";
import { Engram, type OpenOptions } from "../src/index.js";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "engram-conf-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;

/** The engine's own options for tests: inline compaction unless the test chose a mode. */
function engineOptions(options: OpenOptions = {}): OpenOptions {
  return { ...options, compaction: { workers: 0, auto: false, ...options.compaction } };
}

conformance({
  name: "conformance: embedded engine",
  describe,
  it,
  afterAll,
  open: (options) => Engram.open(path.join(root, `s${++n}`), engineOptions(options)),
  reopen: (previous, options) => Engram.open((previous as Engram).dir, engineOptions(options)),
  supports: { readSync: true, inPlaceCompaction: true, faults: true, unsafeGc: true, engineOptions: true },
});
