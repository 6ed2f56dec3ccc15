/** A description of the machine and of the filesystem the stores run on, for the report. */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";

function tryExec(cmd: string, args: string[]): string | null {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

/** "ext4 on /dev/vda (mounted at /)" for the filesystem holding `dir`. */
export function filesystemOf(dir: string): string {
  const f = tryExec("findmnt", ["-n", "-o", "FSTYPE,SOURCE,TARGET,OPTIONS", "--target", dir]);
  if (f !== null && f !== "") {
    const [type, source, target, options] = f.split(/\s+/);
    return `${type ?? "?"} on ${source ?? "?"} (mounted at ${target ?? "?"}, ${options ?? ""})`;
  }
  const d = tryExec("df", ["-T", dir]);
  const line = d?.split("\n")[1];
  if (line !== undefined) {
    const cols = line.split(/\s+/);
    return `${cols[1] ?? "?"} on ${cols[0] ?? "?"} (mounted at ${cols[6] ?? "?"})`;
  }
  return "unknown";
}

export function describeMachine(dir: string): string[] {
  let cpu = os.cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
    if (m?.[1] !== undefined) cpu = m[1].trim();
  } catch {
    // keep os.cpus()
  }
  const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
  const load = os.loadavg().map((x) => x.toFixed(2)).join(" / ");
  return [
    `CPU: ${cpu}, ${cores} cores available`,
    `Memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    `OS: ${os.type()} ${os.release()} (${os.arch()})`,
    `Node: ${process.version}`,
    `Temp dir: ${dir}, filesystem ${filesystemOf(dir)}`,
    `Load average at start (1/5/15 min): ${load} — other work on the machine shows up as noise`,
  ];
}
