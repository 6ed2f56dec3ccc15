/**
 * `EngramMemoryTool`: the defects the fifty-fourth session's audit found by driving it beside the
 * SDK's `BetaLocalFilesystemMemoryTool` (scripts in /tmp/p54/integ), each pinned here.
 *
 * How it works. Bad arguments: every command gets arguments of the wrong type (a missing
 * `new_str`, an `insert_line` of "2", 1.5 or NaN, a numeric `insert_text` or `file_text`, a
 * `view_range` of strings, a path that is not a string or that escapes /memories); each must be
 * refused with an `InvalidArgumentError` (code INVALID_ARGUMENT) while the store's commit sequence
 * stays where it was, so nothing was written. The twin runs the missing `new_str` through the
 * reference, which writes the text "undefined" into the file: the check can see a write.
 * Concurrent rename: a store wrapper holds the rename's one `batch` at a gate (a promise the test
 * opens; no sleeps) while a second tool instance on the same store edits the source file, or
 * creates the destination file. The rename must not lose either: it starts over and moves the
 * edited text, or refuses with the reference's "already exists". The twin sets
 * `unsafeMemoryToolForTests.renameWithoutCas` (the old batch without compare-and-set) and must
 * see the edit lost and the destination overwritten.
 *
 * Property stressed: bad input writes nothing and is typed; a rename never loses another
 * writer's change.
 */
import { BetaLocalFilesystemMemoryTool } from "@anthropic-ai/sdk/tools/memory/node";
import { afterEach, describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError } from "../src/index.js";
import { EngramMemoryTool, unsafeMemoryToolForTests, type MemoryToolStore } from "../src/integrations/memory-tool.js";
import type { BatchOp, BatchResult } from "../src/types.js";
import { tempDir } from "./helpers/tmp.js";

const SCOPE = "agent:claude";
const WAIT_MS = 10_000;

afterEach(() => {
  unsafeMemoryToolForTests.renameWithoutCas = false;
});

/** Rejects after `ms` so that no wait of this file can hang. */
function deadline<T>(p: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Calls one command by name with arguments the SDK's types would refuse. */
function call(tool: EngramMemoryTool | BetaLocalFilesystemMemoryTool, command: Record<string, unknown>): Promise<string> {
  const fn = (tool as unknown as Record<string, (c: unknown) => Promise<string>>)[command["command"] as string] as (c: unknown) => Promise<string>;
  return fn.call(tool, command);
}

const BAD_CALLS: Array<Record<string, unknown>> = [
  { command: "str_replace", path: "/memories/f.md", old_str: "alpha" },
  { command: "str_replace", path: "/memories/f.md", old_str: "alpha", new_str: null },
  { command: "str_replace", path: "/memories/f.md", old_str: 5, new_str: "x" },
  { command: "insert", path: "/memories/f.md", insert_line: "2", insert_text: "x" },
  { command: "insert", path: "/memories/f.md", insert_line: 1.5, insert_text: "x" },
  { command: "insert", path: "/memories/f.md", insert_line: Number.NaN, insert_text: "x" },
  { command: "insert", path: "/memories/f.md", insert_line: 1, insert_text: 42 },
  { command: "insert", path: "/memories/f.md", insert_line: 1 },
  { command: "create", path: "/memories/new.md", file_text: 12 },
  { command: "create", path: "/memories/new.md" },
  { command: "create", path: 7, file_text: "x" },
  { command: "view", path: "/memories/f.md", view_range: ["1", "2"] },
  { command: "view", path: "/memories/f.md", view_range: "1-2" },
  { command: "create", path: "/memories/../escape.md", file_text: "x" },
  { command: "create", path: "/memories/%2e%2e/escape.md", file_text: "x" },
  { command: "rename", old_path: "/memories/f.md", new_path: "/etc/f.md" },
  { command: "delete", path: "/memories/a\\..\\..\\x" },
];

describe("bad arguments", () => {
  it("every command refuses wrong types with InvalidArgumentError and writes nothing", async () => {
    const store = await Engram.open(tempDir("memtool-badargs"), { compaction: { workers: 0 } });
    try {
      const tool = new EngramMemoryTool(store, { scope: SCOPE });
      await tool.create({ command: "create", path: "/memories/f.md", file_text: "alpha\nbeta" });
      for (const bad of BAD_CALLS) {
        const before = store.stats().sequence;
        const err = await call(tool, bad).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, JSON.stringify(bad)).toBeInstanceOf(InvalidArgumentError);
        expect((err as InvalidArgumentError).code).toBe("INVALID_ARGUMENT");
        expect(store.stats().sequence, JSON.stringify(bad)).toBe(before);
      }
      expect(await tool.view({ command: "view", path: "/memories/f.md" })).toBe("Here's the content of /memories/f.md with line numbers:\n     1\talpha\n     2\tbeta");
    } finally {
      await store.close();
    }
  });

  it("twin: the reference writes a missing new_str as the text \"undefined\"", async () => {
    const reference = await BetaLocalFilesystemMemoryTool.init(tempDir("memtool-badargs-ref"));
    await reference.create({ command: "create", path: "/memories/f.md", file_text: "alpha\nbeta" });
    await call(reference, { command: "str_replace", path: "/memories/f.md", old_str: "alpha" });
    expect(await reference.view({ command: "view", path: "/memories/f.md" })).toContain("undefined");
  });
});

/** A store whose next `batch` waits at a gate the test opens, after telling the test it arrived. */
function gatedStore(store: Engram): { gated: MemoryToolStore; armed: () => { arrived: Promise<void>; open: () => void } } {
  let hold: { arrive: () => void; gate: Promise<void> } | null = null;
  const gated: MemoryToolStore = {
    read: (k, o) => store.read(k, o),
    write: (k, v, o) => store.write(k, v, o),
    forget: (k, o) => store.forget(k, o),
    list: (o) => store.list(o),
    batch: async (ops: BatchOp[]): Promise<BatchResult[]> => {
      const h = hold;
      hold = null;
      if (h !== null) {
        h.arrive();
        await h.gate;
      }
      return store.batch(ops);
    },
  };
  const armed = (): { arrived: Promise<void>; open: () => void } => {
    let arrive: () => void = () => {};
    let open: () => void = () => {};
    const arrived = new Promise<void>((r) => (arrive = r));
    const gate = new Promise<void>((r) => (open = r));
    hold = { arrive, gate };
    return { arrived, open };
  };
  return { gated, armed };
}

/** Runs a rename held at its batch while `meanwhile` runs on a second tool; returns the rename's outcome. */
async function renameAround(store: Engram, oldPath: string, newPath: string, meanwhile: (other: EngramMemoryTool) => Promise<unknown>): Promise<string> {
  const { gated, armed } = gatedStore(store);
  const renamer = new EngramMemoryTool(gated, { scope: SCOPE });
  const other = new EngramMemoryTool(store, { scope: SCOPE });
  const gate = armed();
  const renamed = renamer.rename({ command: "rename", old_path: oldPath, new_path: newPath }).then(
    (ok) => ok,
    (err: unknown) => `refused: ${(err as Error).message}`,
  );
  await deadline(gate.arrived, "the rename reaching its batch");
  await other.view({ command: "view", path: "/memories" }); // the other instance's own queue is free
  await meanwhile(other);
  gate.open();
  return deadline(renamed, "the rename");
}

/** Both races on a fresh store: an edit of the source, then a file made at the destination. */
async function races(): Promise<{ edited: string; editedOld: string; dest: string; destText: string }> {
  const store = await Engram.open(tempDir("memtool-rename-race"), { compaction: { workers: 0 } });
  try {
    const tool = new EngramMemoryTool(store, { scope: SCOPE });
    await tool.create({ command: "create", path: "/memories/f.md", file_text: "v1" });
    const edited = await renameAround(store, "/memories/f.md", "/memories/g.md", (o) => o.str_replace({ command: "str_replace", path: "/memories/f.md", old_str: "v1", new_str: "v2 edited" }));
    const editedOld = await tool.view({ command: "view", path: "/memories/g.md" });
    await tool.create({ command: "create", path: "/memories/h.md", file_text: "h" });
    const dest = await renameAround(store, "/memories/h.md", "/memories/dest.md", (o) => o.create({ command: "create", path: "/memories/dest.md", file_text: "precious" }));
    const destText = await tool.view({ command: "view", path: "/memories/dest.md" });
    return { edited, editedOld, dest, destText };
  } finally {
    await store.close();
  }
}

describe("rename against a concurrent writer", () => {
  it("keeps an edit of the source made meanwhile, and refuses a destination made meanwhile", async () => {
    const r = await races();
    expect(r.edited).toBe("Successfully renamed /memories/f.md to /memories/g.md");
    expect(r.editedOld).toBe("Here's the content of /memories/g.md with line numbers:\n     1\tv2 edited");
    expect(r.dest).toBe("refused: The destination /memories/dest.md already exists");
    expect(r.destText).toBe("Here's the content of /memories/dest.md with line numbers:\n     1\tprecious");
  });

  it("twin: without compare-and-set the edit is lost and the destination overwritten", async () => {
    unsafeMemoryToolForTests.renameWithoutCas = true;
    const r = await races();
    expect(r.edited).toBe("Successfully renamed /memories/f.md to /memories/g.md");
    expect(r.editedOld).toBe("Here's the content of /memories/g.md with line numbers:\n     1\tv1");
    expect(r.dest).toBe("Successfully renamed /memories/h.md to /memories/dest.md");
    expect(r.destText).toBe("Here's the content of /memories/dest.md with line numbers:\n     1\th");
  });
});
