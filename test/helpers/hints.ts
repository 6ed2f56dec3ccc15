/**
 * Hint files in tests: a test that damages segment bytes to exercise recovery's scan (torn tails,
 * corruption rules) removes the hint files first, since a valid hint lets the open skip the scan of
 * the bytes it describes (docs/ENGINE.md "Hint files": damage there is found by reads and verify).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { Store } from "../../engine/store.js";
import type { OpenOptions } from "../../rules/types.js";
import { rng } from "./rng.js";
import { tempDir } from "./tmp.js";

/** Deletes every `NNNNNNNN.hint` under DIR/segments; returns how many there were. */
export function dropHints(dir: string): number {
  const segs = path.join(dir, "segments");
  let n = 0;
  for (const name of fs.existsSync(segs) ? fs.readdirSync(segs) : []) {
    if (!name.endsWith(".hint")) continue;
    fs.rmSync(path.join(segs, name), { force: true });
    n += 1;
  }
  return n;
}

/** The segment ids that have a hint file under DIR/segments, ascending. */
export function hintIds(dir: string): number[] {
  return fs
    .readdirSync(path.join(dir, "segments"))
    .filter((n) => /^\d{8}\.hint$/.test(n))
    .map((n) => Number(n.slice(0, 8)))
    .sort((a, b) => a - b);
}

/**
 * A closed store in a fresh temp dir (`label`) whose hints cover overwrites, forgets and undeletes:
 * three rounds over `scopes` × `keys` with the generator seeded `seed` (70% writes, 20% forgets
 * after the first round, which writes every name), opened with `opts` (small segments: many hints).
 */
export async function churnedHintStore(label: string, seed: number, opts: OpenOptions, scopes: readonly string[], keys: readonly string[]): Promise<string> {
  const dir = tempDir(label);
  const s = await Store.open(dir, opts);
  const r = rng(seed);
  for (let round = 0; round < 3; round++) {
    for (const scope of scopes) {
      for (const key of keys) {
        const p = r();
        if (p < 0.7 || round === 0) await s.write(key, `v${round}-${key}`, { scope, clearTombstone: true });
        else if (p < 0.9) await s.forget(key, { scope });
      }
    }
  }
  await s.close();
  return dir;
}
