/**
 * Prints where a V8 CPU profile spent its time: the functions with the most self time.
 *
 *   node --import tsx bench/profile-top.ts bench/results/profiles/w4-2 [--top 30]
 *
 * Given a directory (one per child: node writes one profile per thread), prints each profile.
 */
import * as fs from "node:fs";
import * as path from "node:path";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Self time (µs) per function, largest first. */
export function selfTimes(p: CpuProfile): Array<{ name: string; micros: number }> {
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const self = new Map<string, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i] as number);
    if (node === undefined) continue;
    const f = node.callFrame;
    const where = f.url === "" ? "" : ` ${path.basename(f.url.replace(/^file:\/\//, ""))}:${f.lineNumber + 1}`;
    const name = `${f.functionName === "" ? "(anonymous)" : f.functionName}${where}`;
    self.set(name, (self.get(name) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  return [...self.entries()].map(([name, micros]) => ({ name, micros })).sort((a, b) => b.micros - a.micros);
}

function print(file: string, top: number): void {
  const p = JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile;
  const rows = selfTimes(p);
  const total = rows.reduce((sum, r) => sum + r.micros, 0);
  const busy = total - (rows.find((r) => r.name === "(idle)")?.micros ?? 0);
  process.stdout.write(`\n${file}: ${(total / 1e6).toFixed(2)} s sampled, ${(busy / 1e6).toFixed(2)} s busy\n\n| self ms | % of busy | function |\n|---:|---:|---|\n`);
  for (const r of rows.filter((x) => x.name !== "(idle)").slice(0, top)) {
    process.stdout.write(`| ${(r.micros / 1000).toFixed(1)} | ${((100 * r.micros) / Math.max(1, busy)).toFixed(1)} | ${r.name} |\n`);
  }
}

const target = process.argv[2];
if (target !== undefined && !target.startsWith("--")) {
  const at = process.argv.indexOf("--top");
  const top = at >= 0 ? Number(process.argv[at + 1]) : 30;
  const files = fs.statSync(target).isDirectory()
    ? fs
        .readdirSync(target)
        .filter((f) => f.endsWith(".cpuprofile"))
        .map((f) => path.join(target, f))
    : [target];
  for (const f of files) print(f, top);
}
