/**
 * `pg` is optional: the embedded default never loads it, and a URL without it is a clear error.
 *
 * How it works: a real child process runs with module hooks (test/helpers/no-pg-hooks.mjs) under
 * which the package "pg" cannot be resolved, exactly as when the optional dependency is not
 * installed, and which count every attempt. The child opens a directory store, writes and reads
 * (no attempt to load pg may have happened), then opens a postgresql:// URL: that must fail with
 * NOT_SUPPORTED and a message naming the package and the install command. The hooks are checked
 * too: the same child reports at least one attempt after the URL — otherwise the test would pass
 * without having blocked anything. Runs without a server.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers/built.js";

describe("the optional pg dependency", () => {
  it("is never loaded for a directory, and its absence is NOT_SUPPORTED with the fix", () => {
    const r = spawnSync(process.execPath, ["--import", "./test/helpers/no-pg-hooks.mjs", "--import", "tsx", "test/helpers/no-pg-child.ts"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status, r.stderr.slice(-2000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop() as string) as { read: unknown; afterDirectory: number; afterUrl: number; error: { code?: string; message?: string } };
    expect(out.read).toMatchObject({ status: "OK", value: "v" });
    expect(out.afterDirectory).toBe(0);
    expect(out.afterUrl).toBeGreaterThan(0);
    expect(out.error.code).toBe("NOT_SUPPORTED");
    expect(out.error.message).toMatch(/optional dependency pg/);
    expect(out.error.message).toMatch(/npm install pg/);
  });
});
