// The conformance suite under node:test, imported as "engram/conformance" (the built package), to prove that it needs
// no particular runner: test/conformance-runners.test.ts spawns `node --test` on this file.
// ENGRAM_CONF_BARE=1 declares only readSync (which the engine must honour) and no reopen, so that every test needing one must
// be registered as skipped (visible in the TAP output as "# SKIP").
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { conformance } from "engram/conformance"; // the package subpath export (self-reference)
import { Engram } from "engram";

const bare = process.env.ENGRAM_CONF_BARE === "1";
const root = mkdtempSync(join(tmpdir(), "engram-node-test-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const engine = (o) => (o && typeof o === "object" && !Array.isArray(o) && (o.compaction === undefined || typeof o.compaction === "object") ? { ...o, compaction: { workers: 0, auto: false, ...o.compaction } } : o ?? { compaction: { workers: 0, auto: false } });

conformance({
  name: bare ? "conformance under node:test (no capabilities declared)" : "conformance under node:test",
  describe,
  it,
  skip: (name, fn) => it(name, { skip: "capability not declared" }, fn),
  open: (o) => Engram.open(join(root, `s${++n}`), engine(o)),
  ...(bare ? {} : { reopen: (prev, o) => Engram.open(prev.dir, engine(o)), fastCheck: fc }),
  supports: bare ? { readSync: true } : { readSync: true, inPlaceCompaction: true, faults: true, unsafeGc: true, engineOptions: true, liveStats: true },
  modelRuns: 5,
});
