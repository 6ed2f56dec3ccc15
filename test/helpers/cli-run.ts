/**
 * The built CLI run to its end as a real child process, for the CLI contract tests
 * (test/cli-contract.test.ts, test/cli-dir-hints.test.ts): its exit status and both streams.
 */
import { spawn } from "node:child_process";
import { expect } from "vitest";
import { CLI_BIN } from "./built.js";

/** How long one command may take before it is killed and the call rejects. */
export const CLI_RUN_DEADLINE_MS = 60_000;

/** What a finished command left: its exit status (null when a signal ended it) and its output. */
export interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI to its end with `env` added; kills it and rejects after CLI_RUN_DEADLINE_MS. */
export function run(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const child = spawn(process.execPath, [CLI_BIN, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`engram ${args.join(" ")} did not exit within ${CLI_RUN_DEADLINE_MS} ms; stderr: ${stderr}`));
    }, CLI_RUN_DEADLINE_MS);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** No uncaught exception: a stack trace prints "    at " frames. */
export function expectNoStack(r: Ran): void {
  expect(r.stderr).not.toMatch(/^\s+at |node:internal/m);
}
