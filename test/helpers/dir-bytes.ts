/**
 * Two store directories compared byte for byte (the fast-path tests: a store as shipped against
 * one on the general path must leave the same files).
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** Every file under `dir` by relative path, with its bytes (the lock file apart). */
export function filesOf(dir: string): Map<string, Buffer> {
  const names = (fs.readdirSync(dir, { recursive: true }) as string[]).filter((n) => !n.endsWith(".lock") && fs.statSync(path.join(dir, n)).isFile());
  return new Map(names.sort().map((n) => [n, fs.readFileSync(path.join(dir, n))]));
}

/** The names whose bytes differ between two directories (a name missing on one side included). */
export function differing(a: Map<string, Buffer>, b: Map<string, Buffer>): string[] {
  const names = new Set([...a.keys(), ...b.keys()]);
  return [...names].filter((n) => {
    const x = a.get(n);
    const y = b.get(n);
    return x === undefined || y === undefined || !x.equals(y);
  });
}
