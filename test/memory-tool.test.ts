/**
 * `EngramMemoryTool` (engram/memory-tool) against the Anthropic SDK's own
 * `BetaLocalFilesystemMemoryTool`, differentially.
 *
 * How it works: a seeded random sequence of memory-tool commands (view with and without ranges,
 * create, str_replace, insert, delete, rename; over files, nested and empty directories, hidden
 * names, node_modules, trailing and doubled slashes, missing paths and paths below files) runs
 * against the reference in a temp directory and against EngramMemoryTool on a real engram store;
 * every result string and every refusal message is compared. The engram store is closed and
 * reopened every few commands, so each comparison after a reopen also checks durability. Two
 * differences are allowed and normalised, both named by the issue: directory sizes (a file
 * system's own), and refusals where the reference lets a raw file-system error through
 * (ENOTDIR, EINVAL: messages that name host paths), for which only "both refused" is compared.
 *
 * Then the safety cases: every traversal form (`..`, `.`, `%2e%2e`, `%2f`, backslashes, NUL,
 * paths outside /memories, `/memoriesX`) is refused by every command before anything is
 * written (the store's commit sequence does not move, no key appears). Its twin runs the same
 * forms through the reference, which accepts some of them (it normalises `/memories/a/../b` and
 * treats `/memoriesX/y` as `/memories/X/y`): the check is able to see a path that got through.
 * Last, a directory rename and a directory delete are each one atomic batch (one commit group:
 * the sequence advances by exactly the batch's records plus its commit record).
 *
 * Property stressed: drop-in equality with the reference, call for call, across reopens.
 * ENGRAM_MEMTOOL_OPS (default 400) and ENGRAM_MEMTOOL_SEED tune the run.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { BetaLocalFilesystemMemoryTool } from "@anthropic-ai/sdk/tools/memory/node";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { EngramMemoryTool } from "../src/integrations/memory-tool.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const OPS = Number(process.env["ENGRAM_MEMTOOL_OPS"] ?? 400);
const SEED = Number(process.env["ENGRAM_MEMTOOL_SEED"] ?? 20261201);
const REOPEN_EVERY = 25;


const PATHS = [
  "/memories",
  "/memories/",
  "/memories/notes.md",
  "/memories/a",
  "/memories/a/",
  "/memories/a/b.txt",
  "/memories/a/c",
  "/memories/a/c/d.md",
  "/memories/a/c/deep/e.txt",
  "/memories//notes.md",
  "/memories/z.txt",
  "/memories/.hidden",
  "/memories/.hidden/x.txt",
  "/memories/node_modules/m.txt",
  "/memories/notes.md/under",
  "/memories/Ünïcode ë.txt",
  "/memories/sp ace/f.txt",
];
const TEXTS = ["", "one line", "alpha\nbeta\ngamma", "x\nx\ny\n", "pref: dark\ntheme: light\npref: none\n", "ünï\ncode\n", "a\n\n\nb"];
const NEEDLES = ["", "x", "beta", "pref", "dark", "nope", "a\nb", "\n"];

type Cmd = Record<string, unknown> & { command: string };

/** One random command. */
function randomCommand(r: () => number): Cmd {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const p = pick(PATHS);
  switch (pick(["view", "view", "create", "create", "create", "str_replace", "insert", "delete", "rename"] as const)) {
    case "view": {
      const ranges = [undefined, [1, 2], [2, -1], [0, 1], [3, 10], [1]];
      const range = pick(ranges);
      return range === undefined ? { command: "view", path: p } : { command: "view", path: p, view_range: range };
    }
    case "create":
      return { command: "create", path: p, file_text: pick(TEXTS) };
    case "str_replace":
      return { command: "str_replace", path: p, old_str: pick(NEEDLES), new_str: pick(["X", "", "two\nlines"]) };
    case "insert":
      return { command: "insert", path: p, insert_line: pick([0, 1, 2, 5, -1]), insert_text: pick(["new", "new\n", "a\nb\n"]) };
    case "delete":
      return { command: "delete", path: p };
    case "rename":
      return { command: "rename", old_path: p, new_path: pick(PATHS) };
  }
}

type Outcome = { ok: string } | { error: string };

/** Runs a command on a handler set and captures its result or refusal. */
async function run(tool: object, cmd: Cmd): Promise<Outcome> {
  try {
    const fn = (tool as Record<string, (c: Cmd) => Promise<unknown>>)[cmd.command] as (c: Cmd) => Promise<unknown>;
    return { ok: String(await fn.call(tool, cmd)) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Directory sizes are the file system's own: replace them in listings on both sides. */
function normalise(o: Outcome): Outcome {
  if (!("ok" in o) || !o.ok.startsWith("Here're the files")) return o;
  const lines = o.ok.split("\n").map((line, i) => (i === 1 || line.endsWith("/") ? line.replace(/^[^\t]*\t/, "DIR\t") : line));
  return { ok: lines.join("\n") };
}

/** True for a refusal that is a raw Node file-system error (it names host paths). */
function isRawFsError(o: Outcome): boolean {
  return "error" in o && /^E[A-Z]+: /.test(o.error);
}

describe("EngramMemoryTool against BetaLocalFilesystemMemoryTool", () => {
  it(`${OPS} random commands give the same results and refusals, across reopens (seed ${SEED})`, async () => {
    const base = tempDir("memtool-ref");
    const reference = await BetaLocalFilesystemMemoryTool.init(base);
    const dir = tempDir("memtool-engram");
    let store = await Engram.open(dir, { compaction: { workers: 0 } });
    let tool = new EngramMemoryTool(store, { scope: "agent:claude" });
    const r = rng(SEED);
    let compared = 0;
    let rawRefusals = 0;
    let successes = 0;
    const history: string[] = [];
    try {
      for (let i = 0; i < OPS; i += 1) {
        if (i > 0 && i % REOPEN_EVERY === 0) {
          await store.close();
          store = await Engram.open(dir, { compaction: { workers: 0 } });
          tool = new EngramMemoryTool(store, { scope: "agent:claude" });
        }
        const cmd = randomCommand(r);
        const want = normalise(await run(reference, cmd));
        const got = normalise(await run(tool, cmd));
        history.push(`${i} ${JSON.stringify(cmd)} -> ${JSON.stringify(want)}`);
        const where = `command ${i} ${JSON.stringify(cmd)}; the reference's last commands:\n${history.slice(-40).join("\n")}\n`;
        if (isRawFsError(want)) {
          expect("error" in got, `${where}: the reference refused (${(want as { error: string }).error}); engram answered ${JSON.stringify(got)}`).toBe(true);
          rawRefusals += 1;
        } else {
          expect(got, where).toEqual(want);
          if ("ok" in want) successes += 1;
        }
        compared += 1;
      }
      // The whole tree at the end, one more time after a last reopen.
      await store.close();
      store = await Engram.open(dir, { compaction: { workers: 0 } });
      tool = new EngramMemoryTool(store, { scope: "agent:claude" });
      expect(normalise(await run(tool, { command: "view", path: "/memories" }))).toEqual(normalise(await run(reference, { command: "view", path: "/memories" })));
    } finally {
      await store.close();
    }
    expect(compared).toBe(OPS);
    // The run must exercise both sides of the contract, not only refusals.
    expect(successes).toBeGreaterThan(OPS / 5);
    expect(rawRefusals).toBeLessThan(OPS / 4);
  });
});

const TRAVERSALS = [
  "/memories/../etc/passwd",
  "/memories/a/../../x",
  "/memories/a/../b.txt",
  "/memories/./a.txt",
  "/memories/%2e%2e/x",
  "/memories/%2E%2E%2Fx",
  "/memories/a%2fb",
  "/memories\\..\\x",
  "/memories/a\\b",
  "/memories/a\u0000b",
  "/etc/passwd",
  "memories/x",
  "",
  "/memoriesX/y",
  "/memories..",
];

/** Every command with `p` in each of its path arguments. */
function commandsOn(p: string): Cmd[] {
  return [
    { command: "view", path: p },
    { command: "create", path: p, file_text: "secret" },
    { command: "str_replace", path: p, old_str: "a", new_str: "b" },
    { command: "insert", path: p, insert_line: 0, insert_text: "x" },
    { command: "delete", path: p },
    { command: "rename", old_path: p, new_path: "/memories/ok.txt" },
    { command: "rename", old_path: "/memories/seed.txt", new_path: p },
  ];
}

describe("path safety", () => {
  it("refuses every traversal form in every command before anything is written", async () => {
    const dir = tempDir("memtool-safety");
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const tool = new EngramMemoryTool(store, { scope: "agent:claude" });
      await tool.create({ command: "create", path: "/memories/seed.txt", file_text: "a" });
      const before = store.stats().sequence;
      for (const p of TRAVERSALS) {
        for (const cmd of commandsOn(p)) {
          const out = await run(tool, cmd);
          expect("error" in out, `${JSON.stringify(cmd)} must be refused, got ${JSON.stringify(out)}`).toBe(true);
          expect((out as { error: string }).error).toMatch(/must start with \/memories|would escape \/memories|must be a string/);
        }
      }
      expect(store.stats().sequence).toBe(before);
      const keys: string[] = [];
      for await (const e of store.list({ scope: "agent:claude", inherit: false })) keys.push(e.key);
      expect(keys).toEqual(["/memories/seed.txt"]);
    } finally {
      await store.close();
    }
  });

  it("twin: the same forms run through the reference, which lets some of them through", async () => {
    const base = tempDir("memtool-safety-ref");
    const reference = await BetaLocalFilesystemMemoryTool.init(base);
    const accepted: string[] = [];
    for (const p of TRAVERSALS) {
      const out = await run(reference, { command: "create", path: p, file_text: "secret" });
      if ("ok" in out) accepted.push(p);
    }
    // The check above would have caught these: the reference wrote files for them.
    expect(accepted).toEqual(expect.arrayContaining(["/memories/a/../b.txt", "/memories/./a.txt", "/memoriesX/y"]));
    expect(fs.existsSync(path.join(base, "memories", "X", "y"))).toBe(true);
  });
});

describe("atomic directory operations", () => {
  it("renames and deletes a directory tree in one commit group", async () => {
    const dir = tempDir("memtool-atomic");
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const tool = new EngramMemoryTool(store, { scope: "agent:claude" });
      for (const f of ["x.md", "y.md", "sub/z.md"]) await tool.create({ command: "create", path: `/memories/proj/${f}`, file_text: f });
      const keysOf = async (): Promise<string[]> => {
        const keys: string[] = [];
        for await (const e of store.list({ scope: "agent:claude", inherit: false })) keys.push(e.key);
        return keys;
      };
      expect(await keysOf()).toEqual(["/memories/proj/", "/memories/proj/sub/", "/memories/proj/sub/z.md", "/memories/proj/x.md", "/memories/proj/y.md"]);
      const s0 = store.stats().sequence;
      expect(await tool.rename({ command: "rename", old_path: "/memories/proj", new_path: "/memories/archive/proj" })).toBe(
        "Successfully renamed /memories/proj to /memories/archive/proj",
      );
      // One batch: 1 marker for archive/, 5 writes, 5 empty compare-and-set writes of the sources
      // (the forget's guard), 5 forgets, and the batch's commit record.
      expect(store.stats().sequence - s0).toBe(1 + 5 + 5 + 5 + 1);
      expect(await keysOf()).toEqual([
        "/memories/archive/",
        "/memories/archive/proj/",
        "/memories/archive/proj/sub/",
        "/memories/archive/proj/sub/z.md",
        "/memories/archive/proj/x.md",
        "/memories/archive/proj/y.md",
      ]);
      const s1 = store.stats().sequence;
      expect(await tool.delete({ command: "delete", path: "/memories/archive" })).toBe("Successfully deleted /memories/archive");
      expect(store.stats().sequence - s1).toBe(6 + 1);
      expect(await keysOf()).toEqual([]);
      // Each file was one key: probe explains the forgotten ones.
      expect((await store.probe("/memories/archive/proj/x.md", { scope: "agent:claude" })).state).toBe("tombstoned");
    } finally {
      await store.close();
    }
  });
});

describe("implicit directories and forgetting", () => {
  it("keys written by other means show up as directories; forgetScope erases the whole memory", async () => {
    const dir = tempDir("memtool-implicit");
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      const tool = new EngramMemoryTool(store, { scope: "agent:claude" });
      await store.write("/memories/imported/notes.md", "from elsewhere\n", { scope: "agent:claude" });
      const listing = await tool.view({ command: "view", path: "/memories" });
      expect(listing.split("\n").slice(1)).toEqual(["4K\t/memories", "4K\t/memories/imported/", "15B\t/memories/imported/notes.md"]);
      expect(await tool.view({ command: "view", path: "/memories/imported/notes.md" })).toBe(
        "Here's the content of /memories/imported/notes.md with line numbers:\n     1\tfrom elsewhere\n     2\t",
      );
      await expect(tool.create({ command: "create", path: "/memories/imported", file_text: "x" })).rejects.toThrow("File /memories/imported already exists");
      await tool.create({ command: "create", path: "/memories/secret.md", file_text: "pin 1234" });
      const onDisk = (): string => fs.readdirSync(path.join(dir, "segments")).map((f) => fs.readFileSync(path.join(dir, "segments", f)).toString("latin1")).join("");
      expect(onDisk()).toContain("pin 1234"); // twin: the scan sees the bytes while they exist
      const erased = await store.forgetScope("agent:claude", { reclaim: "eager" });
      expect(erased.slots).toBe(2);
      await expect(tool.view({ command: "view", path: "/memories/secret.md" })).rejects.toThrow("does not exist");
      expect(onDisk()).not.toContain("pin 1234");
    } finally {
      await store.close();
    }
  });
});

