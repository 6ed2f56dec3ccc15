/**
 * Without a PostgreSQL server the PostgreSQL tests skip visibly, never pass silently.
 *
 * How it works: a child vitest run of the PostgreSQL test files with ENGRAM_PG_DISABLE set (the
 * globalSetup then starts nothing and hands the reason on, as when the server binaries are
 * missing or the server cannot start) and vitest's JSON report. Every test of those files must
 * be reported as skipped, none as passed, and the reason must be in the skipped tests' names.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

describe("no server", () => {
  it("every PostgreSQL test is reported skipped, with the reason", () => {
    const out = path.join(tempDir("pgskip"), "report.json");
    const env: Record<string, string | undefined> = { ...process.env, ENGRAM_PG_DISABLE: "server disabled for this check", NO_COLOR: "1" };
    delete env["ENGRAM_PG_URL"];
    delete env["ENGRAM_PG_SKIP"];
    delete env["ENGRAM_TEST_JSON"];
    const files = ["test/conformance-postgres.test.ts", "test/postgres-processes.test.ts", "test/postgres-backend.test.ts", "test/postgres-cli-mcp.test.ts"];
    const r = spawnSync(process.execPath, [path.join(ROOT, "node_modules/vitest/vitest.mjs"), "run", ...files, "--reporter=json", `--outputFile=${out}`], {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(fs.existsSync(out), r.stderr.slice(-2000)).toBe(true);
    const report = JSON.parse(fs.readFileSync(out, "utf8")) as {
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
      testResults: Array<{ assertionResults: Array<{ status: string; fullName: string }> }>;
    };
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
    expect(report.numPassedTests).toBe(0);
    expect(report.numFailedTests).toBe(0);
    expect(report.numPendingTests).toBeGreaterThanOrEqual(files.length);
    const skipped = report.testResults.flatMap((f) => f.assertionResults).filter((a) => a.status === "skipped" || a.status === "pending");
    for (const s of skipped) expect(s.fullName).toMatch(/skipped: server disabled for this check/);
    expect(r.status).toBe(0);
  });
});
