/**
 * The house's layering, checked on the source itself (issue 14 "No import cycle"). Method: read
 * every import of src/, share/, postgres/, engine/, segments/ and rules/ (type-only ones too) into
 * a graph and require (1) no cycle, (2) no import that points up a layer or across between the two
 * backends (rules → segments → engine | postgres → share → src), and (3) fs-ext named only by
 * engine/lock.ts, which no compaction worker reaches (STACK.md trap 2). Twins: the same checks run
 * on small graphs built to break each rule, and on the real graph with one edge added back (the
 * compactor → store import this issue cut), and must then report exactly that failure.
 */
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { closure, findCycles, readGraph, sourceFiles, specifiersOf, upwardImports } from "./helpers/import-graph.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DIRS = ["src", "share", "postgres", "engine", "segments", "rules"];
const graph = readGraph(ROOT, sourceFiles(ROOT, DIRS));
const WORKER_ENTRIES = ["engine/compaction-worker.ts", "engine/ts-boot.mjs"];

describe("the real import graph", () => {
  it("is read: every layer has files, and the known edges are found", () => {
    for (const d of DIRS) expect([...graph.local.keys()].some((f) => f.startsWith(`${d}/`)), d).toBe(true);
    expect(graph.local.get("engine/store.ts")).toContain("engine/compactor.ts");
    expect(graph.local.get("share/handle.ts")).toContain("engine/store.ts");
    expect(graph.local.get("engine/compactor.ts")).toContain("engine/compaction-worker.ts"); // the worker URL
    expect(graph.packages.get("engine/lock.ts")).toContain("fs-ext");
  });

  it("has no cycle", () => {
    expect(findCycles(graph.local)).toEqual([]);
  });

  it("has no upward or cross-backend import", () => {
    expect(upwardImports(graph.local)).toEqual([]);
  });

  it("names fs-ext in engine/lock.ts only, and no worker reaches that file", () => {
    const users = [...graph.packages].filter(([, p]) => p.includes("fs-ext")).map(([f]) => f);
    expect(users).toEqual(["engine/lock.ts"]);
    for (const entry of WORKER_ENTRIES) {
      const reach = closure(graph.local, entry);
      expect(reach.size, entry).toBeGreaterThan(entry.endsWith(".mjs") ? 0 : 3);
      expect([...reach].filter((f) => f === "engine/lock.ts"), entry).toEqual([]);
    }
  });
});

describe("twins: the checks catch what they are for", () => {
  it("a type-only import back into store.ts makes the compactor cycle reappear", () => {
    const edges = new Map(graph.local);
    edges.set("engine/compactor.ts", [...(edges.get("engine/compactor.ts") ?? []), "engine/store.ts"]);
    const cycles = findCycles(edges);
    expect(cycles.length).toBeGreaterThan(0);
    expect(cycles.some((c) => c.includes("engine/compactor.ts") && c.includes("engine/store.ts"))).toBe(true);
  });

  it("a cycle of three, and a self-closing pair, are found", () => {
    expect(findCycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]]]))).toEqual([["a", "b", "c", "a"]]);
    expect(findCycles(new Map([["a", ["b"]], ["b", ["a"]], ["c", []]]))).toEqual([["a", "b", "a"]]);
    expect(findCycles(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]]))).toEqual([]);
  });

  it("an import up a layer, and one across backends, are reported", () => {
    const edges = new Map([
      ["segments/x.ts", ["engine/y.ts", "rules/z.ts"]],
      ["engine/y.ts", ["postgres/p.ts"]],
      ["src/a.ts", ["engine/y.ts"]],
    ]);
    expect(upwardImports(edges)).toEqual(["engine/y.ts -> postgres/p.ts", "segments/x.ts -> engine/y.ts"]);
  });

  it("a worker that reached the lock module would be seen", () => {
    const edges = new Map(graph.local);
    edges.set("engine/faults.ts", [...(edges.get("engine/faults.ts") ?? []), "engine/lock.ts"]);
    expect(closure(edges, "engine/compaction-worker.ts").has("engine/lock.ts")).toBe(true);
  });

  it("specifiers are read from every import form, and never from comments", () => {
    const text = [
      'import { a } from "./a.js";',
      'import type { B } from "./b.js";',
      'export { c } from "./c.js";',
      'import "./d.js";',
      'const e = await import("./e.js");',
      'const f = require("fs-ext");',
      'new URL("./g.js", import.meta.url);',
      'import {\n  h,\n  i,\n} from "./h.js";',
      '// import { no } from "./comment.js";',
      '/** import { no } from "./doc.js"; */',
    ].join("\n");
    expect(specifiersOf(text).sort()).toEqual(["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./g.js", "./h.js", "fs-ext"]);
  });
});
