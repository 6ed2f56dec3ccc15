/**
 * One place per invariant (issue 14, DESIGN.md "Invariants"). Method: the source of src/, share/,
 * postgres/, engine/, segments/ and rules/ is read as text and every line comment of the form
 * `// In: …` is collected; each of I1–I10 must be named by exactly one such comment, in the file
 * the map below names (the function that keeps it), and each invariant's test file must exist and
 * name it in its opening paragraph. Twins: the same checker run on sources built to break it — an
 * invariant tagged twice, one not tagged, one tagged in the wrong file, a test file whose opening
 * paragraph does not name it — must report exactly those faults.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { sourceFiles } from "./helpers/import-graph.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DIRS = ["src", "share", "postgres", "engine", "segments", "rules"];

/** Where each invariant is kept (the file of the function carrying its `// In:` comment), and the test that stresses it. */
const MAP: Record<string, { code: string; test: string }> = {
  I1: { code: "engine/commit.ts", test: "test/crash-writes.test.ts" },
  I2: { code: "segments/scan.ts", test: "test/corruption.test.ts" },
  I3: { code: "engine/reads.ts", test: "test/torture.test.ts" },
  I4: { code: "engine/reads.ts", test: "test/torture.test.ts" },
  I5: { code: "rules/gc-rule.ts", test: "test/gc-policy.test.ts" },
  I6: { code: "rules/gc-rule.ts", test: "test/retention-records.test.ts" },
  I7: { code: "engine/store.ts", test: "test/crash-writes.test.ts" },
  I8: { code: "engine/compactor.ts", test: "test/eager-erasure.test.ts" },
  I9: { code: "engine/compaction-core.ts", test: "test/crash-compaction.test.ts" },
  I10: { code: "engine/commit.ts", test: "test/crash-writes.test.ts" },
};

const TAG = /^\s*\/\/ (I(?:10|[1-9])): \S/gm;

/** The invariants each file tags, as [invariant, file] pairs. */
function tagsOf(files: ReadonlyMap<string, string>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [file, text] of files) for (const m of text.matchAll(TAG)) if (m[1] !== undefined) out.push([m[1], file]);
  return out;
}

/** The invariants named in a test file's opening comment. */
function headerNames(text: string): Set<string> {
  const m = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text);
  return new Set((m?.[1] ?? "").match(/\bI(?:10|[1-9])\b/g) ?? []);
}

/** Every fault of `sources` and `tests` against `map`, one line each (empty when all hold). */
function faults(map: typeof MAP, sources: ReadonlyMap<string, string>, tests: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  const tags = tagsOf(sources);
  for (const [inv, want] of Object.entries(map)) {
    const at = tags.filter(([i]) => i === inv).map(([, f]) => f);
    if (at.length !== 1) out.push(`${inv}: tagged ${at.length} times (${at.join(", ")})`);
    else if (at[0] !== want.code) out.push(`${inv}: tagged in ${at[0]}, not ${want.code}`);
    const test = tests.get(want.test);
    if (test === undefined) out.push(`${inv}: no test file ${want.test}`);
    else if (!headerNames(test).has(inv)) out.push(`${inv}: ${want.test} does not name it in its opening paragraph`);
  }
  return out;
}

const read = (files: string[]): Map<string, string> => new Map(files.map((f) => [f, fs.readFileSync(path.join(ROOT, f), "utf8")]));

describe("each invariant I1–I10 is kept in one place and stressed by one named test", () => {
  it("holds for the tree", () => {
    const sources = read(sourceFiles(ROOT, DIRS));
    const tests = read([...new Set(Object.values(MAP).map((m) => m.test))]);
    expect(tagsOf(sources).length).toBe(10);
    expect(faults(MAP, sources, tests)).toEqual([]);
  });
});

describe("twins: the checker reports what it is for", () => {
  const good = new Map([["a.ts", "function f() {\n  // I1: kept here.\n}\n"]]);
  const map = { I1: { code: "a.ts", test: "t.test.ts" } };
  const tests = new Map([["t.test.ts", "/**\n * Stresses I1.\n */\n"]]);

  it("a good tree has no fault", () => {
    expect(faults(map, good, tests)).toEqual([]);
  });

  it("a second tag, a missing one and a tag in the wrong file are each reported; I11 is not taken for I1", () => {
    expect(faults(map, new Map([...good, ["b.ts", "  // I1: again.\n"]]), tests)).toEqual(["I1: tagged 2 times (a.ts, b.ts)"]);
    expect(faults(map, new Map([["a.ts", "// not a tag: I1\n"]]), tests)).toEqual(["I1: tagged 0 times ()"]);
    expect(faults(map, new Map([["b.ts", "// I1: here instead.\n"]]), tests)).toEqual(["I1: tagged in b.ts, not a.ts"]);
    expect(faults(map, new Map([...good, ["c.ts", "// I11: no such.\n"]]), tests)).toEqual([]); // I11 is not of the tag's form
  });

  it("a test file that does not name its invariant up front is reported", () => {
    const later = new Map([["t.test.ts", "/**\n * Stresses something.\n */\n// I1 is mentioned only here\n"]]);
    expect(faults(map, good, later)).toEqual(["I1: t.test.ts does not name it in its opening paragraph"]);
    expect(faults(map, good, new Map())).toEqual(["I1: no test file t.test.ts"]);
  });
});
