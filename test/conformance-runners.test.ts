/**
 * The conformance suite needs no particular runner: here it runs under node:test.
 *
 * How it works: a child `node --test --test-reporter=tap` runs test/helpers/conformance-node-test.mjs,
 * which imports "engram/conformance" and "engram" (the built package, by its own name, as an outside user would) and calls `conformance()` with
 * node:test's describe/it against the embedded engine. The TAP summary must show hundreds of
 * passing tests and no failure. A second child declares only readSync and no reopen: every test
 * that needs one must then appear as "# SKIP" with its reason — a backend never passes by omission.
 * Property stressed: runner independence, and skips that are visible.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assertBuilt, ROOT } from "./helpers/built.js";

function runNodeTest(env: Record<string, string>): { status: number | null; out: string; count: (k: string) => number } {
  const r = spawnSync(process.execPath, ["--test", "--test-reporter=tap", join(ROOT, "test/helpers/conformance-node-test.mjs")], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, ...env, ENGRAM_MODEL_RUNS: "5" },
    timeout: 240_000,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  const count = (k: string): number => Number(new RegExp(`^# ${k} (\\d+)$`, "m").exec(out)?.[1] ?? -1);
  return { status: r.status, out, count };
}

describe("conformance under node:test", () => {
  it("passes against the engine with every capability declared", () => {
    assertBuilt();
    const r = runNodeTest({});
    expect(r.count("fail"), r.out.slice(-3000)).toBe(0);
    expect(r.count("pass")).toBeGreaterThan(400);
    expect(r.count("skipped")).toBe(0);
    expect(r.status, r.out.slice(-2000)).toBe(0);
  });

  it("registers what a bare backend lacks as skipped, with the reason in the name", () => {
    assertBuilt();
    const r = runNodeTest({ ENGRAM_CONF_BARE: "1" });
    expect(r.count("fail"), r.out.slice(-3000)).toBe(0);
    expect(r.count("skipped")).toBeGreaterThan(10);
    expect(r.out).toMatch(/\[skipped: the backend lacks reopen\] # SKIP/);
    expect(r.out).toMatch(/\[skipped: the backend lacks fastCheck\] # SKIP/);
    expect(r.status).toBe(0);
  });
});
