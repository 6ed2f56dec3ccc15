/**
 * Spawning test/helpers/crash-child.ts as a real Node process running the TypeScript sources
 * (node --import tsx). A child starts in standby: it loads the engine, prints {"t":"standby"} and
 * waits for its configuration on stdin. Loading takes most of a child's life (~0.8 s of CPU under
 * tsx), so a test spawns the next child while the current one runs and hands it the directory
 * only once the current one is dead and the parent has checked and closed the store.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Msg } from "./crash-model.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** How a child ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** One child process speaking the crash protocol. */
export class CrashChild {
  readonly proc: ChildProcessWithoutNullStreams;
  /** Resolves once the child printed "standby" (engine loaded). */
  readonly standby: Promise<void>;
  /** Resolves after the process exited and its stdout was fully read. */
  readonly exited: Promise<Exit>;
  /** Messages in arrival order. */
  readonly messages: Msg[] = [];
  private handler: ((m: Msg) => void) | null = null;
  private stderr = "";
  private killedByParent = false;

  constructor() {
    this.proc = spawn(process.execPath, ["--import", "tsx", "test/helpers/crash-child.ts"], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
    // A child that died early makes a later stdin write fail with EPIPE: not an error of the test.
    this.proc.stdin.on("error", () => undefined);
    this.proc.stderr.setEncoding("utf8");
    this.proc.stderr.on("data", (d: string) => {
      this.stderr += d;
    });
    let onStandby: () => void = () => undefined;
    let onStandbyFail: (e: Error) => void = () => undefined;
    this.standby = new Promise<void>((resolve, reject) => {
      onStandby = resolve;
      onStandbyFail = reject;
    });
    // Never leave an unhandled rejection behind when a test kills an unused standby child.
    this.standby.catch(() => undefined);
    const rl = createInterface({ input: this.proc.stdout });
    rl.on("line", (line) => {
      let m: Msg;
      try {
        m = JSON.parse(line) as Msg;
      } catch {
        this.stderr += `[unparsable stdout] ${line}\n`;
        return;
      }
      if (m.t === "standby") onStandby();
      this.messages.push(m);
      this.handler?.(m);
    });
    const closed = new Promise<void>((resolve) => rl.once("close", () => resolve()));
    this.exited = new Promise<Exit>((resolve) => {
      this.proc.once("exit", (code, signal) => {
        void closed.then(() => {
          onStandbyFail(new Error(`child exited before standby (code ${code}, signal ${signal}): ${this.stderr}`));
          resolve({ code, signal, stderr: this.stderr });
        });
      });
    });
  }

  /** Handles every later message (synchronously, as each line arrives). */
  onMessage(handler: (m: Msg) => void): void {
    this.handler = handler;
  }

  /** Sends the configuration that starts the child's work. */
  start(config: object): void {
    this.proc.stdin.write(`${JSON.stringify(config)}\n`);
  }

  /** SIGKILLs the child now (idempotent). */
  kill(): void {
    if (this.killedByParent || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.killedByParent = true;
    this.proc.kill("SIGKILL");
  }

  /** True once kill() was called. */
  get killed(): boolean {
    return this.killedByParent;
  }
}

export { rng } from "./rng.js";

/** An integer in [lo, hi]. */
export function between(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/** The seed of this run: ENGRAM_CRASH_SEED when set, else random (printed on failure). */
export function runSeed(): number {
  const env = process.env["ENGRAM_CRASH_SEED"];
  return env !== undefined && env !== "" ? Number(env) >>> 0 : Math.floor(Math.random() * 2 ** 31);
}
