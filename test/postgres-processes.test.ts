/**
 * Many processes on one PostgreSQL store: the database arbitrates.
 *
 * How it works: two real child processes (node --import tsx) open the same store URL and each
 * increments one counter key 150 times with compare-and-set — read, then write with
 * `expectedVersion`, retrying on VERSION_CONFLICT. Afterwards the counter must equal the sum of
 * increments (no increment lost), the versions the two children were given must be distinct and
 * each child's strictly growing, and at least one conflict must have happened (otherwise the run
 * did not overlap and proved nothing). The twin: the same two children writing blindly (no
 * expectedVersion) must lose increments — the check can tell a lost update when it happens.
 * Also: a second handle in this process sees the children's writes, and close() drains the pool
 * (the process exits on its own, which node:test would not allow with open sockets).
 * When no server could start, the tests register as skipped with the reason.
 */
import { spawn } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { ROOT } from "./helpers/built.js";
import { dropSchemas, storeUrl } from "./helpers/pg.js";

const url = process.env["ENGRAM_PG_URL"];
const skip = url === undefined || url === "" ? (process.env["ENGRAM_PG_SKIP"] ?? "no ENGRAM_PG_URL") : null;
const TIMES = 150;
const tag = `p${process.pid}_`;
afterAll(() => dropSchemas(tag));

interface ChildResult {
  done: number;
  conflicts: number;
  versions: number[];
}

function child(args: string[], script = "test/helpers/pg-counter-child.ts"): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", script, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => p.kill("SIGKILL"), 100_000);
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.stderr.on("data", (d: Buffer) => (err += d.toString()));
    p.on("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`child exited ${String(code)}: ${err.slice(-2000)}`));
      resolve(JSON.parse(out.trim().split("\n").pop() as string) as ChildResult);
    });
  });
}

function ascending(xs: number[]): boolean {
  return xs.every((x, i) => i === 0 || x > (xs[i - 1] as number));
}

describe.skipIf(skip !== null)(`two processes, one PostgreSQL store${skip === null ? "" : ` [skipped: ${skip}]`}`, () => {
  it("CAS increments from two processes are never lost", async () => {
    const at = storeUrl(`${tag}cas`);
    const [a, b] = await Promise.all([child([at, String(TIMES)]), child([at, String(TIMES)])]);
    const store = await Engram.open(at);
    try {
      const r = await store.read("counter", { scope: "app:shared" });
      expect(r).toMatchObject({ status: "OK", value: String(2 * TIMES) });
      const all = [...a.versions, ...b.versions];
      expect(all.length).toBe(2 * TIMES);
      expect(new Set(all).size).toBe(2 * TIMES);
      expect(ascending(a.versions) && ascending(b.versions)).toBe(true);
      expect(a.conflicts + b.conflicts, "the two children never overlapped").toBeGreaterThan(0);
      expect((r as { version: number }).version).toBe(Math.max(...all));
    } finally {
      await store.close();
    }
  });

  it("the twin without compare-and-set loses increments (the check can tell)", async () => {
    const at = storeUrl(`${tag}blind`);
    await Promise.all([child([at, String(TIMES), "blind"], "test/helpers/pg-blind-child.ts"), child([at, String(TIMES), "blind"], "test/helpers/pg-blind-child.ts")]);
    const store = await Engram.open(at);
    try {
      const r = await store.read("counter", { scope: "app:shared" });
      expect(r.status).toBe("OK");
      expect(Number((r as { value: string }).value)).toBeLessThan(2 * TIMES);
    } finally {
      await store.close();
    }
  });
});

if (skip !== null) it.skip(`PostgreSQL process tests [skipped: ${skip}]`, () => undefined);
