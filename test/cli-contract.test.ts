/**
 * Four defects of the `engram` command left by the fifty-fifth session's audit: no way to arm
 * fault injection from the command line (ENGRAM_FAULTS); `backup` to a TARGET that cannot be made
 * answering with the device's advice or a bare ENOTDIR; `inspect` and `verify` disagreeing on the
 * exit code of a path that holds no store; and no `--quiet` for the progress of long commands.
 *
 * How it works: every case runs the built CLI (dist/bin/engram.js) as a real child process with a
 * deadline (`run` kills a child that overstays and fails the case). Stores are seeded in-process
 * through the library and read back in-process after the child exits, opened exclusively, so a
 * read also proves the child released the lock. The fault cases arm a failure of the put's own
 * write or fdatasync (`failAt` at io:append / io:sync, which fire once); the bad-variable cases
 * check that neither a new directory nor a byte of an existing store changed. The quiet cases use
 * a store of 12,000 slots, past the 10,000 at which export and import report progress, and
 * compare stderr with and without the switch; stdout must be the same.
 *
 * Properties stressed: an I/O failure is IO_ERROR exit 2 and leaves the previous value; a refused
 * argument value (ENGRAM_FAULTS, a backup TARGET) is INVALID_ARGUMENT exit 2 with a message that
 * says what to do and nothing opened; a `--dir` that names no store is a usage error, exit 1, for
 * inspect and verify alike; `--quiet` / `-q` drops progress only. Each case was seen to fail with
 * its fix reverted (docs/TESTING.md).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt } from "./helpers/built.js";
import { expectNoStack, run } from "./helpers/cli-run.js";
import { tempDir } from "./helpers/tmp.js";

/** Slots in the large store: past the 10,000 at which export and import print progress. */
const LARGE = 12_000;

let root: string;
let large: string;
let n = 0;

/** A fresh path under the test's root (not created). */
function fresh(label: string): string {
  return path.join(root, `${label}-${++n}`);
}

/** A store at a fresh path holding k = v1. */
async function storeWithK(): Promise<string> {
  const dir = fresh("store");
  const s = await Engram.open(dir, { compaction: { workers: 0 } });
  await s.write("k", "v1");
  await s.close();
  return dir;
}

/** Opens `dir` exclusively (the child's lock must be gone) and reads k. */
async function readK(dir: string): Promise<unknown> {
  const s = await Engram.open(dir, { compaction: { workers: 0 } });
  try {
    const r = await s.read("k");
    return r.status === "OK" ? r.value : r.status;
  } finally {
    await s.close();
  }
}

/** Every file under `dir` with its size and modification time: a fingerprint that any write changes. */
function fingerprint(dir: string): string {
  const files = fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();
  return files.map((f) => {
    const st = fs.statSync(path.join(dir, f));
    return `${f} ${st.size} ${st.mtimeMs}`;
  }).join("\n");
}

beforeAll(async () => {
  assertBuilt();
  root = tempDir("cli-contract");
  large = path.join(root, "large");
  const s = await Engram.open(large, { compaction: { workers: 0, auto: false }, durability: "none" });
  try {
    for (let b = 0; b < LARGE; b += 4000) {
      await s.batch(Array.from({ length: 4000 }, (_, i) => ({ op: "write" as const, key: `k${b + i}`, value: `value ${b + i}`, scope: `user:u${(b + i) % 3}` })));
    }
    await s.flush();
  } finally {
    await s.close();
  }
}, 120_000);

describe("ENGRAM_FAULTS arms the open's fault injection (for tests)", () => {
  for (const [point, errno] of [["io:sync", "EIO"], ["io:append", "ENOSPC"]] as const) {
    it(`a put whose ${point} fails with ${errno}: IO_ERROR, exit 2, and the store still reads the previous value`, async () => {
      const dir = await storeWithK();
      const r = await run(["put", "--dir", dir, "k", "v2"], { ENGRAM_FAULTS: JSON.stringify({ failAt: { point, errno } }) });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^engram: IO_ERROR: .*${errno}.*injected at ${point}`, "m"));
      expectNoStack(r);
      expect(await readK(dir)).toBe("v1");
      // The failure fired once: the same put without the variable goes through.
      expect((await run(["put", "--dir", dir, "k", "v3"])).status).toBe(0);
      expect(await readK(dir)).toBe("v3");
    });
  }

  it("with --json the failure is the wire error IO_ERROR on stdout", async () => {
    const dir = await storeWithK();
    const r = await run(["put", "--dir", dir, "--json", "k", "v2"], { ENGRAM_FAULTS: '{"failAt":{"point":"io:sync","errno":"EIO","times":1}}' });
    expect(r.status).toBe(2);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, error: "IO_ERROR" });
    expect(await readK(dir)).toBe("v1");
  });

  const bad: Array<[string, string, RegExp]> = [
    ["bad JSON", "{failAt:", /not JSON/],
    ["an array", "[]", /not a JSON object/],
    ["an unknown point", '{"failAt":{"point":"io:bogus","errno":"EIO"}}', /faults\.failAt\.point must be one of io:create/],
    ["an unknown crash point", '{"crashAt":"write:after-nothing"}', /faults\.crashAt must be a fault point name/],
    ["an unknown errno", '{"failAt":{"point":"io:sync","errno":"EBUSY"}}', /faults\.failAt\.errno/],
    ["a misspelt field", '{"failat":{"point":"io:sync","errno":"EIO"}}', /unknown field "failat"/],
    ["an unknown failAt field", '{"failAt":{"point":"io:sync","errno":"EIO","count":2}}', /unknown field "failAt\.count"/],
    ["pauseAt, which nothing could release", '{"pauseAt":["write:after-append"]}', /"pauseAt" does not apply here/],
  ];
  for (const [name, value, message] of bad) {
    it(`${name}: INVALID_ARGUMENT, exit 2, nothing created or written`, async () => {
      const missing = fresh("never");
      const r = await run(["put", "--dir", missing, "k", "v"], { ENGRAM_FAULTS: value });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^engram: INVALID_ARGUMENT: ENGRAM_FAULTS: /m);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toMatch(/nothing was opened/);
      expectNoStack(r);
      expect(fs.existsSync(missing)).toBe(false);
      const imported = await run(["import", "--dir", missing, path.join(root, "no-such-export.jsonl")], { ENGRAM_FAULTS: value });
      expect(imported.status).toBe(2);
      expect(fs.existsSync(missing)).toBe(false);
    });
  }

  it("a bad value over an existing store changes none of its files, and --json says INVALID_ARGUMENT", async () => {
    const dir = await storeWithK();
    const before = fingerprint(dir);
    const r = await run(["put", "--dir", dir, "--json", "k", "v2"], { ENGRAM_FAULTS: '{"failAt":{"point":"io:nope","errno":"EIO"}}' });
    expect(r.status).toBe(2);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" });
    expect(fingerprint(dir)).toBe(before);
    expect(await readK(dir)).toBe("v1");
  });
});

describe("backup to a TARGET that cannot be made", () => {
  let store: string;
  beforeAll(async () => {
    store = await storeWithK();
    fs.writeFileSync(path.join(root, "a-file"), "not a directory\n");
  });

  const targets: Array<[string, () => string]> = [
    ["a parent that does not exist", () => path.join(root, "no-such-parent", "deeper", "bk")],
    ["a parent that is a file", () => path.join(root, "a-file", "bk")],
    ["a parent under /proc", () => "/proc/self/engram-bk"],
  ];
  for (const [name, target] of targets) {
    it(`${name}: INVALID_ARGUMENT, exit 2, "not a writable directory; choose another", not the device's advice`, async () => {
      const r = await run(["backup", "--dir", store, target()]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^engram: INVALID_ARGUMENT: backup target .* cannot be made: .* is not a writable directory \(.*\); choose another TARGET/m);
      expect(r.stderr).not.toMatch(/free space or fix the device|IO_ERROR|ENOTDIR: not a directory/);
      expectNoStack(r);
      const rJson = await run(["backup", "--dir", store, "--json", target()]);
      expect(rJson.status).toBe(2);
      expect(JSON.parse(rJson.stdout)).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" });
    });
  }

  it("a good TARGET is still backed up, and the check leaves nothing beside it", async () => {
    const parent = fresh("bk-parent");
    fs.mkdirSync(parent);
    const r = await run(["backup", "--dir", store, path.join(parent, "bk")]);
    expect(r.status, r.stderr).toBe(0);
    expect(fs.readdirSync(parent)).toEqual(["bk"]);
    expect(await readK(path.join(parent, "bk"))).toBe("v1");
  });
});

describe("a --dir that holds no store: inspect and verify agree (usage, exit 1)", () => {
  const cases: Array<[string, () => string, RegExp]> = [
    ["a plain file", () => {
      const f = fresh("plain");
      fs.writeFileSync(f, "hello\n");
      return f;
    }, /is a file, not an engram store/],
    ["an empty directory", () => {
      const d = fresh("empty");
      fs.mkdirSync(d);
      return d;
    }, /is not an engram store \(no segments\/ in it\)/],
    ["a missing path", () => fresh("missing"), /no store at/],
  ];
  for (const [name, make, message] of cases) {
    it(`${name}`, async () => {
      const dir = make();
      const before = fs.existsSync(dir) ? fingerprint(path.dirname(dir)) : "";
      for (const command of ["inspect", "verify"]) {
        const r = await run([command, "--dir", dir]);
        expect(r.status, `${command}: ${r.stderr}`).toBe(1);
        expect(r.stderr).toMatch(message);
        expectNoStack(r);
        const rJson = await run([command, "--dir", dir, "--json"]);
        expect(rJson.status, command).toBe(1);
        expect(JSON.parse(rJson.stdout)).toMatchObject({ ok: false, error: "USAGE" });
      }
      if (before !== "") expect(fingerprint(path.dirname(dir))).toBe(before);
      else expect(fs.existsSync(dir)).toBe(false);
    });
  }
});

describe("--quiet / -q drops progress, not results or errors", () => {
  it("export of 12,000 slots: progress lines without it, none with --quiet; the same stdout and summary", async () => {
    const loud = await run(["export", "--dir", large]);
    expect(loud.status, loud.stderr).toBe(0);
    expect(loud.stderr).toMatch(/^engram export: 10000 of about 12000 slots$/m);
    for (const q of ["--quiet", "-q"]) {
      const quiet = await run(["export", "--dir", large, q]);
      expect(quiet.status, quiet.stderr).toBe(0);
      expect(quiet.stderr).not.toMatch(/of about/);
      expect(quiet.stderr).toMatch(/^engram export: 12000 values, 0 retention records/m);
      expect(quiet.stdout).toBe(loud.stdout);
    }
  });

  it("import of 12,000 values with --progress: batch and line progress without it, none with -q; the result still prints", async () => {
    const file = fresh("export.jsonl");
    const exp = await run(["export", "--dir", large, "--output", file, "-q"]);
    expect(exp.status, exp.stderr).toBe(0);
    const loud = await run(["import", "--dir", fresh("imported"), "--progress", file]);
    expect(loud.status, loud.stderr).toBe(0);
    expect(loud.stderr).toMatch(/^engram import: batch 1 committed/m);
    expect(loud.stderr).toMatch(/^engram import: 10000 lines$/m);
    const into = fresh("imported");
    const quiet = await run(["-q", "import", "--dir", into, "--progress", file]);
    expect(quiet.status, quiet.stderr).toBe(0);
    expect(quiet.stderr).toBe("");
    expect(quiet.stdout).toMatch(/^imported 12000 values into /m);
    // An error still prints under --quiet: the store is no longer empty.
    const again = await run(["import", "--dir", into, "--quiet", file]);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/^engram: INVALID_ARGUMENT: import needs a new or empty store/m);
  });

  it("verify --progress: progress lines without --quiet, none with it; the verdict still prints", async () => {
    const loud = await run(["verify", "--dir", large, "--progress"]);
    expect(loud.status, loud.stderr).toBe(0);
    expect(loud.stderr).toMatch(/^verify 100\.0%/m);
    const quiet = await run(["verify", "--dir", large, "--progress", "--quiet"]);
    expect(quiet.status, quiet.stderr).toBe(0);
    expect(quiet.stderr).toBe("");
    expect(quiet.stdout).toMatch(/^verify: OK \(/m);
  });
});
