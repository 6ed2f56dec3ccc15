/**
 * vitest globalSetup: a throwaway PostgreSQL cluster for the whole run.
 *
 * How it works: unless ENGRAM_PG_URL already names a server (an outside PostgreSQL, CockroachDB
 * or YugabyteDB), it finds the server binaries (`pg_config --bindir`, then PATH), creates a temp
 * directory owned by the `postgres` system user (the server refuses to run as root), runs
 * `initdb` and `pg_ctl start` as that user on a free port bound to 127.0.0.1, and hands the URL to
 * every test file through ENGRAM_PG_URL (the forks inherit the environment). Teardown stops the
 * cluster with `pg_ctl -m fast stop` and deletes the directory. When the server cannot start,
 * ENGRAM_PG_SKIP carries the reason instead, and every PostgreSQL test registers as skipped with
 * that reason in its name — visible in the report, never a silent pass (ENGRAM_PG_DISABLE=reason
 * takes that path on purpose; test/postgres-skip.test.ts uses it).
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

let stop: (() => void) | null = null;

function binDir(): string | null {
  try {
    const dir = execFileSync("pg_config", ["--bindir"], { encoding: "utf8", timeout: 10_000 }).trim();
    if (fs.existsSync(path.join(dir, "initdb"))) return dir;
  } catch {
    // fall through to PATH
  }
  try {
    return path.dirname(execFileSync("sh", ["-c", "command -v initdb"], { encoding: "utf8", timeout: 10_000 }).trim());
  } catch {
    return null;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Runs a server binary as the postgres user when we are root (as ourselves otherwise). */
function asPostgres(bin: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [cmd, argv] = root ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  execFileSync(cmd, argv, { stdio: "pipe", timeout: 60_000 });
}

export async function setup(): Promise<void> {
  if (process.env["ENGRAM_PG_URL"] !== undefined && process.env["ENGRAM_PG_URL"] !== "") return;
  // ENGRAM_PG_DISABLE=reason: start nothing, and let every PostgreSQL test skip with that reason.
  const disabled = process.env["ENGRAM_PG_DISABLE"];
  if (disabled !== undefined && disabled !== "") {
    process.env["ENGRAM_PG_SKIP"] = disabled;
    return;
  }
  const bin = binDir();
  if (bin === null) {
    process.env["ENGRAM_PG_SKIP"] = "PostgreSQL server binaries not found (pg_config/initdb); .ci/run installs the Debian package postgresql";
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-pg-"));
  try {
    if (process.getuid?.() === 0) execFileSync("chown", ["postgres:postgres", dir]);
    fs.chmodSync(dir, 0o700);
    const data = path.join(dir, "data");
    asPostgres(path.join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "engram", "--no-sync"]);
    const port = await freePort();
    const opts = `-k ${dir} -p ${port} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on`;
    asPostgres(path.join(bin, "pg_ctl"), ["-D", data, "-o", opts, "-l", path.join(dir, "log"), "-w", "-t", "60", "start"]);
    stop = () => {
      try {
        asPostgres(path.join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    };
    process.env["ENGRAM_PG_URL"] = `postgresql://engram@127.0.0.1:${port}/postgres`;
  } catch (err) {
    const log = path.join(dir, "log");
    const tail = fs.existsSync(log) ? fs.readFileSync(log, "utf8").slice(-400) : "";
    process.env["ENGRAM_PG_SKIP"] = `PostgreSQL did not start: ${(err as Error).message.split("\n")[0]} ${tail}`.trim();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function teardown(): void {
  stop?.();
  stop = null;
}
