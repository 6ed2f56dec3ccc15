/**
 * Two inconsistencies of the `engram` command left by the fifty-sixth session's CLI work: a
 * `--dir` that cannot hold a store was a usage error (exit 1) for the commands that read but
 * INVALID_ARGUMENT (exit 2; IO_ERROR for an existing directory such as /proc) for the commands
 * that may create a store (put, import, mcp); and every INVALID_ARGUMENT printed one generic hint
 * about keys, scopes and --dir, even under a backup TARGET or an ENGRAM_FAULTS error.
 *
 * How it works: every case runs the built CLI (dist/bin/engram.js) as a real child process with a
 * deadline (`run` kills a child that overstays and fails the case), stdin closed. For each bad
 * `--dir` (a plain file, a path under that file, a missing path under /proc, /proc itself) the
 * commands that write and the commands that read run side by side and must answer alike: exit 1,
 * the same words, `{"error": "USAGE"}` with --json, no stack trace, and nothing created beside
 * the path. The cases that must keep working (a new nested path, an empty directory, a store)
 * exit 0 and leave no probe directory behind. The hint cases compare stderr byte for byte.
 *
 * Properties stressed: a --dir that cannot hold a store is refused before any open, as a usage
 * error, by every command; a new store is still made in a new or empty directory; the hint under
 * INVALID_ARGUMENT speaks of what the message names, or is left out where the message already
 * says what to do. Each case was seen to fail with its fix reverted (docs/TESTING.md).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt } from "./helpers/built.js";
import { expectNoStack, run } from "./helpers/cli-run.js";
import { tempDir } from "./helpers/tmp.js";


let root: string;
let store: string;
let exportFile: string;
let n = 0;

/** A fresh path under the test's root (not created). */
function fresh(label: string): string {
  return path.join(root, `${label}-${++n}`);
}

/** The names in `dir`, sorted (a probe directory left behind, or a store made by mistake, shows). */
function names(dir: string): string[] {
  return fs.readdirSync(dir).sort();
}

beforeAll(async () => {
  assertBuilt();
  root = tempDir("cli-dir-hints");
  store = path.join(root, "store");
  const s = await Engram.open(store, { compaction: { workers: 0 } });
  await s.write("k", "v1");
  await s.close();
  exportFile = path.join(root, "store.jsonl");
  const r = await run(["export", "--dir", store, "--output", exportFile, "-q"]);
  expect(r.status, r.stderr).toBe(0);
});

/** The command lines run against a bad --dir: those that may create a store, and those that read. */
const WRITERS: Array<[string, (dir: string) => string[]]> = [
  ["put", (dir) => ["put", "--dir", dir, "k", "v"]],
  ["import", (dir) => ["import", "--dir", dir, exportFile]],
  ["mcp", (dir) => ["mcp", "--dir", dir]],
];
const READERS: Array<[string, (dir: string) => string[]]> = [
  ["get", (dir) => ["get", "--dir", dir, "k"]],
  ["forget", (dir) => ["forget", "--dir", dir, "k"]],
  ["inspect", (dir) => ["inspect", "--dir", dir]],
];

describe("a --dir that cannot hold a store: the same usage error (exit 1) for commands that write and read", () => {
  const cases: Array<[string, () => string, RegExp, RegExp]> = [
    ["a plain file", () => {
      const f = fresh("plain");
      fs.writeFileSync(f, "hello\n");
      return f;
    }, /^engram: \S+ is a file, not an engram store; give --dir a store's directory, or a new or empty directory/m, /is a file, not an engram store/],
    ["a path under a plain file", () => {
      const f = fresh("plain");
      fs.writeFileSync(f, "hello\n");
      return path.join(f, "sub");
    }, /^engram: cannot make a store at \S+: \S+ is not a writable directory \(it is a file\); give --dir a store's directory/m, /no store at/],
    ["a missing path under /proc", () => `/proc/engram-no-such-${process.pid}`, /^engram: cannot make a store at \/proc\/engram-no-such-\d+: \/proc is not a writable directory \(a directory cannot be made in it: E[A-Z]+\)/m, /no store at/],
    ["a symbolic link to a missing path", () => {
      const link = fresh("link");
      fs.symlinkSync(path.join(root, `missing-${n}`), link);
      return link;
    }, /^engram: cannot make a store at \S+: it is a symbolic link to \S+missing-\d+, which does not exist; make \S+ a directory, or give --dir/m, /^engram: no store at \S+: it is a symbolic link to \S+missing-\d+, which does not exist; point --dir at a store's directory/m],
    ["/proc itself, a directory that takes no store", () => "/proc", /^engram: cannot make a store at \/proc: \/proc is not a writable directory \(a directory cannot be made in it: E[A-Z]+\)/m, /is not an engram store/],
  ];
  for (const [name, make, writeMessage, readMessage] of cases) {
    it(name, async () => {
      const dir = make();
      const before = dir.startsWith(root) ? names(root) : null;
      const lines = [...WRITERS.map(([c, l]) => [c, l, writeMessage] as const), ...READERS.map(([c, l]) => [c, l, readMessage] as const)];
      for (const [command, line, message] of lines) {
        const r = await run(line(dir));
        expect(r.status, `${command}: ${r.stderr}`).toBe(1);
        expect(r.stderr, command).toMatch(message);
        expect(r.stderr, command).not.toMatch(/INVALID_ARGUMENT|IO_ERROR/);
        expectNoStack(r);
        const rJson = await run([...line(dir), "--json"]);
        expect(rJson.status, `${command} --json: ${rJson.stderr}`).toBe(1);
        expect(JSON.parse(rJson.stdout), command).toMatchObject({ ok: false, error: "USAGE" });
      }
      if (before !== null) expect(names(root)).toEqual(before);
    });
  }

  it("a new nested path, an empty directory, a store and a link to one still work for put and import, and no probe is left behind", async () => {
    const nested = path.join(fresh("new"), "a", "b");
    const empty = fresh("empty");
    fs.mkdirSync(empty);
    const linked = fresh("link-to-store");
    fs.symlinkSync(store, linked);
    for (const dir of [nested, empty, store, linked]) {
      const r = await run(["put", "--dir", dir, "k2", "v2"]);
      expect(r.status, `${dir}: ${r.stderr}`).toBe(0);
      expect(names(dir)).toEqual(["LOCK", "segments"]);
    }
    expect(names(path.dirname(nested))).toEqual(["b"]);
    const parent = fresh("import-parent");
    fs.mkdirSync(parent);
    const imported = await run(["import", "--dir", path.join(parent, "into"), exportFile]);
    expect(imported.status, imported.stderr).toBe(0);
    expect(names(parent)).toEqual(["into"]);
  });
});

describe("the hint under INVALID_ARGUMENT fits the error", () => {
  it("a key error: the key's rule, not advice about scopes or --dir", async () => {
    const r = await run(["put", "--dir", store, "", "v"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("engram: INVALID_ARGUMENT: memory_write: key: key must not be empty\nhint: a key is 1 to 1024 bytes of UTF-8 with no NUL, e.g. pref.theme\n");
  });

  it("a backup TARGET that cannot be made: the message says what to do, and no hint follows", async () => {
    const file = fresh("a-file");
    fs.writeFileSync(file, "not a directory\n");
    const target = path.join(file, "bk");
    const r = await run(["backup", "--dir", store, target]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      `engram: INVALID_ARGUMENT: backup target ${target} cannot be made: ${file} is not a writable directory (it is a file); ` +
        "choose another TARGET, a new path in an existing directory you can write to\n",
    );
  });

  it("a bad ENGRAM_FAULTS: the message says what to do, and no hint follows", async () => {
    const r = await run(["put", "--dir", store, "k", "v"], { ENGRAM_FAULTS: "[]" });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      'engram: INVALID_ARGUMENT: ENGRAM_FAULTS: not a JSON object; nothing was opened. It takes a JSON object such as {"failAt":{"point":"io:sync","errno":"EIO"}} ' +
        '(docs/CLI-MCP.md "Fault injection"), and is for tests only: unset it to use the store\n',
    );
  });

  const fitting: Array<[string, string[], RegExp]> = [
    ["a --scope the parser refuses", ["put", "--scope", "global/x", "k", "v"], /^hint: a scope is "global" or components joined by "\/"/m],
    ["a --ttl the parser refuses", ["put", "--ttl", "soon", "k", "v"], /^hint: --ttl is the value's lifetime in milliseconds/m],
    ["forget-scope global", ["forget-scope", "global"], /^hint: erase the scopes below it one at a time, or delete the store's directory/m],
  ];
  for (const [name, args, hint] of fitting) {
    it(`${name}: a hint about that argument, and only one`, async () => {
      const r = await run([...args, "--dir", store]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(hint);
      expect(r.stderr.match(/^hint: /gm)).toHaveLength(1);
      expect(r.stderr).not.toMatch(/a key is 1/);
    });
  }
});
