/**
 * `engram export`, `engram import` and `engram backup` through the built CLI (real processes).
 *
 * How it works: an origin store is seeded in-process (strings, bytes, TTLs, nested scopes,
 * forgotten keys, an erased scope, an undeleted slot), closed, exported with the CLI, and the
 * export imported into a new directory with the CLI. Then: every live value comes back with
 * the same kind and bytes and (within the clock's drift) the same expiry; every version in the
 * new store, and every later write, is above every version and tombstone sequence the origin
 * ever issued (versions never go backwards or repeat); retention records are in the export
 * without values; no forgotten value appears anywhere in the export — while its twin finds
 * those very bytes still in the origin's segment files, so the check can see a leak. `--scope`
 * exports only a subtree. Bad files (bad JSON, unknown or missing fields, bad scope, duplicate
 * slot, bad base64, wrong header, counts that do not match, a line after the end, a truncated
 * file) are refused with their line number, exit 2, and leave no directory behind; an import
 * into a non-empty store is refused and changes nothing. A store of ENGRAM_EXPORT_LARGE
 * (default 12000) slots shows progress on stderr both ways. Import is atomic per batch: an
 * import killed with SIGKILL leaves a whole number of batches. Backup makes a copy that opens.
 *
 * Property stressed: export → import is faithful for live data, never carries a forgotten
 * value, and never lets a version repeat.
 */
import { spawn, spawnSync } from "node:child_process";
import type { SpawnSyncReturns } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const CLI = CLI_BIN;
const LARGE = Number(process.env["ENGRAM_EXPORT_LARGE"] ?? 12000);

beforeAll(() => assertBuilt());

/** Runs the built CLI; `input` is piped to stdin. */
function engram(args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", input: input ?? "", env: { ...process.env, NO_COLOR: "1" }, maxBuffer: 256 * 1024 * 1024 });
}

const SECRET = "FORGOTTEN-SECRET-7f3a";

/** Seeds a store with every kind of slot; returns what is live and what was forgotten. */
async function seed(dir: string): Promise<{ live: Map<string, string | Uint8Array>; ttl: Set<string>; maxSeq: number }> {
  const s = await Engram.open(dir, { compaction: { workers: 0, auto: false } });
  const live = new Map<string, string | Uint8Array>();
  const id = (scope: string, key: string): string => `${scope}\u0000${key}`;
  try {
    await s.write("theme", "dark", { scope: "user:alice" });
    live.set(id("user:alice", "theme"), "dark");
    const bytes = new Uint8Array([0, 1, 2, 250, 255, 10, 13]);
    await s.write("blob", bytes, { scope: "user:alice/session:1" });
    live.set(id("user:alice/session:1", "blob"), bytes);
    await s.write("ünï ✓", "multi\nline \"quoted\"", { scope: "global" });
    live.set(id("global", "ünï ✓"), 'multi\nline "quoted"');
    await s.write("short", "lived", { scope: "user:bob", ttlMs: 3_600_000 });
    live.set(id("user:bob", "short"), "lived");
    await s.write("gone", `${SECRET}-1`, { scope: "user:alice" });
    await s.forget("gone", { scope: "user:alice" });
    await s.write("a", `${SECRET}-2`, { scope: "user:carol/session:9" });
    await s.write("b", `${SECRET}-3`, { scope: "user:carol" });
    await s.forgetScope("user:carol");
    await s.write("again", "v1", { scope: "user:bob" });
    await s.forget("again", { scope: "user:bob" });
    await s.undelete("again", { scope: "user:bob" });
    await s.write("again", "v2", { scope: "user:bob" });
    live.set(id("user:bob", "again"), "v2");
    await s.write("later", `${SECRET}-4`, { scope: "user:bob" });
    await s.forget("later", { scope: "user:bob" }); // the very last operation: the highest sequence is a tombstone
    return { live, ttl: new Set([id("user:bob", "short")]), maxSeq: s.stats().sequence };
  } finally {
    await s.close();
  }
}

/** Every value of a store by (scope, key), through exportEntries. */
async function valuesOf(s: Engram): Promise<Map<string, { value: string | Uint8Array; version: number; expiresAt: number | null }>> {
  const out = new Map<string, { value: string | Uint8Array; version: number; expiresAt: number | null }>();
  for await (const e of s.exportEntries()) if (e.kind === "value") out.set(`${e.scope}\u0000${e.key}`, { value: e.value, version: e.version, expiresAt: e.expiresAt });
  return out;
}

describe("export → import", () => {
  it("is faithful for live values, carries retention records without values, and versions never repeat", async () => {
    const root = tempDir("export");
    const origin = path.join(root, "origin");
    const { live, maxSeq } = await seed(origin);
    const exp = engram(["export", "--dir", origin]);
    expect(exp.status, exp.stderr).toBe(0);
    const lines = exp.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toEqual({ engram: "export", format: 1, scope: "global", sequence: maxSeq });
    expect(lines.at(-1)).toEqual({ kind: "end", values: live.size, retention: expect.any(Number), sequence: maxSeq });
    const retention = lines.filter((l) => l["kind"] === "retention");
    expect(retention.length).toBeGreaterThanOrEqual(4); // gone, carol's two, later
    for (const r of retention) expect(Object.keys(r).sort()).toEqual(["generation", "key", "kind", "scope", "state", "tombstoneSeq", "version"]);
    expect(exp.stdout).not.toContain(SECRET);
    expect(exp.stdout).not.toContain(Buffer.from(SECRET).toString("base64").slice(0, 12));

    const target = path.join(root, "new");
    const imp = engram(["import", "--dir", target], exp.stdout);
    expect(imp.status, imp.stderr).toBe(0);
    expect(imp.stdout).toMatch(new RegExp(`imported ${live.size} values`));

    const s = await Engram.open(target, { compaction: { workers: 0 } });
    try {
      const got = await valuesOf(s);
      expect(new Set(got.keys())).toEqual(new Set(live.keys()));
      const originValues = await (async () => {
        const o = await Engram.open(origin, { compaction: { workers: 0 } });
        try {
          return await valuesOf(o);
        } finally {
          await o.close();
        }
      })();
      for (const [id, want] of live) {
        const g = got.get(id);
        expect(g?.value, id).toEqual(want);
        expect(typeof g?.value, id).toBe(typeof want);
        expect(g?.version, id).toBeGreaterThan(maxSeq); // above everything the origin issued
        const o = originValues.get(id);
        if (o?.expiresAt === null) expect(g?.expiresAt, id).toBeNull();
        else expect(Math.abs((g?.expiresAt ?? 0) - (o?.expiresAt ?? 0)), id).toBeLessThan(10_000);
      }
      const w = await s.write("fresh", "x");
      expect(w.version).toBeGreaterThan(Math.max(...[...got.values()].map((g) => g.version)));
    } finally {
      await s.close();
    }
    // After a reopen the raised sequence holds (it is in a segment header).
    const again = await Engram.open(target, { compaction: { workers: 0 } });
    try {
      expect((await again.write("fresh2", "y")).version).toBeGreaterThan(maxSeq + live.size);
    } finally {
      await again.close();
    }
  });

  it("twin: the forgotten values are still in the origin's segment files, so the export check can see a leak", async () => {
    const root = tempDir("export-twin");
    const origin = path.join(root, "origin");
    await seed(origin);
    const raw = fs.readdirSync(path.join(origin, "segments")).map((f) => fs.readFileSync(path.join(origin, "segments", f)).toString("latin1")).join("");
    expect(raw).toContain(`${SECRET}-1`);
    expect(raw).toContain(`${SECRET}-4`);
  });

  it("twin: importing without raising the sequence would reissue versions the source already used", async () => {
    const root = tempDir("export-twin-seq");
    const origin = path.join(root, "origin");
    const { maxSeq } = await seed(origin);
    const naive = await Engram.open(path.join(root, "naive"), { compaction: { workers: 0 } });
    try {
      const r = await naive.write("theme", "dark", { scope: "user:alice" });
      expect(r.version).toBeLessThanOrEqual(maxSeq); // a version the origin issued for another write
    } finally {
      await naive.close();
    }
  });

  it("--scope exports only that subtree", async () => {
    const root = tempDir("export-scope");
    const origin = path.join(root, "origin");
    await seed(origin);
    const exp = engram(["export", "--dir", origin, "--scope", "user:alice"]);
    expect(exp.status, exp.stderr).toBe(0);
    const scopes = exp.stdout.trimEnd().split("\n").slice(1, -1).map((l) => (JSON.parse(l) as { scope: string }).scope);
    expect(new Set(scopes)).toEqual(new Set(["user:alice", "user:alice/session:1"]));
  });
});

describe("import refuses bad input and writes nothing", () => {
  const header = JSON.stringify({ engram: "export", format: 1, scope: "global", sequence: 9 });
  const v = (o: Record<string, unknown> = {}): string => JSON.stringify({ kind: "value", scope: "global", key: "k", version: 3, generation: 1, expiresAt: null, value: "v", ...o });
  const end = (values: number, retention = 0): string => JSON.stringify({ kind: "end", values, retention, sequence: 9 });
  const cases: Array<[string, string[], number]> = [
    ["bad JSON", [header, v(), "{not json", end(1)], 3],
    ["unknown field", [header, v({ extra: 1 }), end(1)], 2],
    ["missing field", [header, JSON.stringify({ kind: "value", scope: "global", key: "k", version: 3, generation: 1, value: "v" }), end(1)], 2],
    ["bad scope", [header, v({ scope: "global/x" }), end(1)], 2],
    ["bad key", [header, v({ key: "" }), end(1)], 2],
    ["duplicate slot", [header, v(), v({ value: "w" }), end(2)], 3],
    ["bad base64", [header, JSON.stringify({ kind: "value", scope: "global", key: "k", version: 3, generation: 1, expiresAt: null, base64: "!!" }), end(1)], 2],
    ["both value and base64", [header, v({ base64: "AA==" }), end(1)], 2],
    ["bad version", [header, v({ version: 0 }), end(1)], 2],
    ["wrong header", [JSON.stringify({ engram: "other", format: 1, scope: "global", sequence: 1 }), v(), end(1)], 1],
    ["counts do not match", [header, v(), end(2)], 3],
    ["a line after the end", [header, v(), end(1), v({ key: "j" })], 4],
    ["truncated: no end line", [header, v(), v({ key: "j" })], 3],
    ["bad kind", [header, JSON.stringify({ kind: "other", scope: "global", key: "k" }), end(0)], 2],
    ["empty line", [header, v(), "", end(1)], 3],
  ];
  for (const [name, lines, line] of cases) {
    it(`${name}: refused at line ${line}`, () => {
      const root = tempDir("import-bad");
      const file = path.join(root, "in.jsonl");
      fs.writeFileSync(file, `${lines.join("\n")}\n`);
      const target = path.join(root, "new");
      const r = engram(["import", "--dir", target, file]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`INVALID_ARGUMENT: line ${line}: .*nothing was imported`));
      expect(fs.existsSync(target)).toBe(false);
    });
  }

  it("a store that is not empty is refused and unchanged", async () => {
    const root = tempDir("import-nonempty");
    const target = path.join(root, "s");
    const s = await Engram.open(target, { compaction: { workers: 0 } });
    await s.write("mine", "keep");
    const seq = s.stats().sequence;
    await s.close();
    const r = engram(["import", "--dir", target], `${[header, v(), end(1)].join("\n")}\n`);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/import needs a new or empty store/);
    const again = await Engram.open(target, { compaction: { workers: 0 } });
    try {
      expect(again.stats().sequence).toBe(seq);
      expect((await again.read("k")).status).toBe("NOT_FOUND");
    } finally {
      await again.close();
    }
  });
});

describe("large stores", () => {
  it(`progress on stderr both ways for ${LARGE} slots; an import killed mid-way leaves whole batches`, async () => {
    const root = tempDir("export-large");
    const origin = path.join(root, "origin");
    const s = await Engram.open(origin, { compaction: { workers: 0, auto: false }, durability: "none" });
    try {
      for (let b = 0; b < LARGE; b += 4000) {
        await s.batch(Array.from({ length: Math.min(4000, LARGE - b) }, (_, i) => ({ op: "write" as const, key: `k${String(b + i).padStart(6, "0")}`, value: `v${b + i}`, scope: "user:big" })));
      }
      await s.flush();
    } finally {
      await s.close();
    }
    const exp = engram(["export", "--dir", origin]);
    expect(exp.status, exp.stderr).toBe(0);
    expect(exp.stderr).toMatch(/engram export: 10000 of about \d+ slots/);
    const file = path.join(root, "big.jsonl");
    fs.writeFileSync(file, exp.stdout);
    const imp = engram(["import", "--dir", path.join(root, "full"), file]);
    expect(imp.status, imp.stderr).toBe(0);
    expect(imp.stderr).toMatch(/engram import: 10000 lines/);

    // Kill an import after its third batch is reported committed: what it leaves is whole batches.
    const target = path.join(root, "killed");
    const child = spawn(process.execPath, [CLI, "import", "--progress", "--dir", target, file], { stdio: ["ignore", "ignore", "pipe"] });
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    let stderr = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no third batch within 30 s: ${stderr}`)), 30_000);
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        if (/batch 3 committed/.test(stderr)) {
          clearTimeout(timer);
          child.kill("SIGKILL");
          resolve();
        }
      });
    });
    await exited;
    const k = await Engram.open(target, { compaction: { workers: 0 } });
    try {
      let n = 0;
      for await (const e of k.exportEntries()) if (e.kind === "value") n += 1;
      expect(n % 1000 === 0 && n >= 3000, `${n} values survived`).toBe(true);
    } finally {
      await k.close();
    }
  });
});

describe("engram backup", () => {
  it("copies an open-able, verified store", async () => {
    const root = tempDir("backup-cli");
    const origin = path.join(root, "origin");
    await seed(origin);
    const target = path.join(root, "copy");
    const r = engram(["backup", "--dir", origin, target]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/verified/);
    const c = await Engram.open(target, { compaction: { workers: 0 } });
    try {
      expect((await c.read("theme", { scope: "user:alice" })).status).toBe("OK");
      expect((await c.read("gone", { scope: "user:alice" })).status).toBe("NOT_FOUND");
    } finally {
      await c.close();
    }
    expect(engram(["backup", "--dir", origin, target]).status).toBe(2); // not empty any more
  });
});
