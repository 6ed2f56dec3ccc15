/**
 * Bad inputs that only a directory-backed store can show. The per-call table (345 rows), the
 * limits, bad OpenOptions and "a refused open changes nothing" moved into the exported
 * conformance suite (src/conformance/cases/bad-input.ts), which test/conformance-engine.test.ts
 * runs against the engine with a segment-file fingerprint.
 *
 * How it works: each bad OpenOptions row opens a path that does not exist yet and asserts that no
 * segment file (indeed nothing) was created there; bad `dir` arguments are refused.
 * Property stressed: validation happens before anything is created on disk.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BAD_OPEN, bad, expectInvalid, failure } from "../src/conformance/cases/bad-input.js";
import { Engram } from "../src/index.js";
import { tempDir as freshDir } from "./helpers/tmp.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = freshDir("bad");
  dirs.push(d);
  return d;
}

describe("bad OpenOptions: InvalidArgumentError, nothing created or changed", () => {
  it.each(BAD_OPEN)("%s: a new path stays empty", async (row, options) => {
    const parent = tempDir();
    const dir = path.join(parent, "store");
    const err = await failure(() => Engram.open(dir, bad(options)));
    expectInvalid(err, row);
    expect(fs.existsSync(path.join(dir, "segments")), `${row}: segments dir created`).toBe(false);
    expect(!fs.existsSync(dir) || fs.readdirSync(dir).length === 0, `${row}: files created in ${dir}`).toBe(true);
  });

  it("a bad dir argument is InvalidArgumentError", async () => {
    for (const d of ["", 42, null, undefined]) expectInvalid(await failure(() => Engram.open(bad(d))), `dir ${String(d)}`);
  });
});
