/**
 * Runs the built `engram ui` as a real child process for the inspector tests: waits (with a
 * deadline) for the URL line it prints first, and stops it with SIGTERM (SIGKILL past a deadline,
 * which fails the test). Also the plain HTTP client the security tests use, with any Host header.
 */
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess, SpawnSyncReturns } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { CLI_BIN, ROOT } from "./built.js";

/** The CLI as package.json "bin" ships it (the bundle). */
export const CLI = CLI_BIN;
/** How long `engram ui` may take to print its URL. */
const START_DEADLINE_MS = 20_000;
/** How long it may take to exit after SIGTERM. */
const STOP_DEADLINE_MS = 15_000;

/** A running `engram ui`. */
export interface UiProcess {
  child: ChildProcess;
  /** The first stdout line's URL. */
  url: string;
  port: number;
  token: string;
  stderr(): string;
  /** SIGTERM, then resolves with the exit code; rejects if it did not exit before the deadline. */
  stop(): Promise<number | null>;
}

/** Starts `engram ui --dir dir [...extra]` and resolves once its URL line is printed. */
export function startUi(dir: string, extra: string[] = []): Promise<UiProcess> {
  const child = spawn(process.execPath, [CLI, "ui", "--dir", dir, ...extra], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } });
  let out = "";
  let err = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise<UiProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`engram ui printed no URL within ${START_DEADLINE_MS} ms; stderr: ${err}`));
    }, START_DEADLINE_MS);
    void exited.then((code) => reject(new Error(`engram ui exited (${String(code)}) before printing its URL; stderr: ${err}`)));
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl < 0) return;
      clearTimeout(timer);
      const line = out.slice(0, nl);
      const m = /^engram ui: (http:\/\/127\.0\.0\.1:(\d+)\/\?token=([A-Za-z0-9_-]+))$/.exec(line);
      if (m === null) return reject(new Error(`unexpected first line: ${JSON.stringify(line)}`));
      resolve({
        child,
        url: m[1] as string,
        port: Number(m[2]),
        token: m[3] as string,
        stderr: () => err,
        stop: async () => {
          child.kill("SIGTERM");
          let deadline: NodeJS.Timeout | undefined;
          const late = new Promise<never>((_, rej) => {
            deadline = setTimeout(() => {
              child.kill("SIGKILL");
              rej(new Error(`engram ui did not exit within ${STOP_DEADLINE_MS} ms of SIGTERM`));
            }, STOP_DEADLINE_MS);
          });
          try {
            return await Promise.race([exited, late]);
          } finally {
            clearTimeout(deadline);
          }
        },
      });
    });
  });
}

/** Runs the built CLI to completion (with a deadline). */
export function engram(args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 30_000, env: { ...process.env, NO_COLOR: "1" } });
}

/** A raw HTTP answer. */
export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request to 127.0.0.1:port with exactly these headers (Host included); 10 s deadline. */
export function rawRequest(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers, timeout: 10_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer to ${method} ${path} within 10 s`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** Throws unless dist/ holds the same page files as src/ui/static (assertBuilt checks only .ts). */
export function assertStaticBuilt(): void {
  const src = join(ROOT, "src", "ui", "static");
  for (const f of readdirSync(src)) {
    const out = join(ROOT, "dist", "src", "ui", "static", f);
    if (!existsSync(out) || !readFileSync(out).equals(readFileSync(join(src, f)))) {
      throw new Error(`dist/src/ui/static/${f} differs from src/ui/static/${f}: run \`npm run build\` (npm test builds first)`);
    }
  }
}
