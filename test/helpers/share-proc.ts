/**
 * Drives test/helpers/share-child.ts processes from a test: spawn one over a directory, send it
 * command lines, and wait (each wait with its own deadline) for the JSON line that answers.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { tempDir } from "./tmp.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** One JSON line a child printed. */
export type Line = Record<string, unknown>;

/** A running share-child. */
export class ShareProc {
  readonly child: ChildProcess;
  readonly exited: Promise<number | string | null>;
  private readonly lines: Line[] = [];
  private waiters: Array<() => void> = [];
  private stderr = "";
  private partial = "";

  /** `mode`: "exclusive" opens without share (the twin); an object adds open options (faults, unsafe). */
  constructor(dir: string, shareTimeoutMs = 10_000, mode: "shared" | "exclusive" | object = "shared") {
    const extra = mode === "shared" ? [] : mode === "exclusive" ? ["exclusive"] : [JSON.stringify(mode)];
    const args = ["--import", "tsx", "test/helpers/share-child.ts", dir, String(shareTimeoutMs), ...extra];
    this.child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr?.on("data", (d: Buffer) => (this.stderr += d.toString()));
    this.child.stdout?.on("data", (d: Buffer) => this.onData(d.toString()));
    this.child.stdin?.on("error", () => undefined);
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve(signal ?? code)));
    void this.exited.then(() => this.wake());
  }

  private onData(s: string): void {
    this.partial += s;
    for (let nl = this.partial.indexOf("\n"); nl >= 0; nl = this.partial.indexOf("\n")) {
      const line = this.partial.slice(0, nl);
      this.partial = this.partial.slice(nl + 1);
      try {
        this.lines.push(JSON.parse(line) as Line);
      } catch {
        this.stderr += `(non-JSON stdout) ${line}\n`;
      }
    }
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Every line so far. */
  get all(): Line[] {
    return this.lines;
  }

  /** Sends one command line. */
  send(cmd: string): void {
    this.child.stdin?.write(`${cmd}\n`);
  }

  /** The first line (removed from the backlog) matching `pred`, within `timeoutMs`. */
  async next(pred: (l: Line) => boolean, timeoutMs = 30_000, what = "a line"): Promise<Line> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.lines.findIndex(pred);
      if (i >= 0) return this.lines.splice(i, 1)[0] as Line;
      if (this.child.exitCode !== null || this.child.signalCode !== null) throw new Error(`child ${this.child.pid} exited before ${what}; stderr: ${this.stderr}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} from child ${this.child.pid} within ${timeoutMs} ms; stderr: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Sends `cmd` and waits for the line that has `key`. */
  async ask(cmd: string, key: string, timeoutMs = 30_000): Promise<Line> {
    this.send(cmd);
    return this.next((l) => key in l, timeoutMs, `an answer to "${cmd}"`);
  }

  /** Waits for the "open" line: the role this child got. */
  async opened(timeoutMs = 30_000): Promise<string> {
    const l = await this.next((x) => x["ev"] === "open", timeoutMs, "its open");
    return String(l["role"] ?? `refused ${String(l["error"])}`);
  }

  /** Kills the child with SIGKILL and waits for its exit. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  /** Its stderr so far (for failure messages). */
  get log(): string {
    return this.stderr;
  }
}

/** A write tally as share-child prints it. */
export interface Tally {
  acked: Array<[number, number]>;
  lost: number[];
  failed: Array<[number, string]>;
}

/** The children a test file spawns: any still running is killed when the file ends. */
export function spawnedProcs(): ShareProc[] {
  const procs: ShareProc[] = [];
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill();
  });
  return procs;
}

/** A store path inside a fresh temporary directory (removed when the test file ends). */
export function storeDir(label: string): string {
  return path.join(tempDir(label), "store");
}
