/**
 * Eager erasure (I8): after forgetScope(s, {reclaim: "eager"}) resolves, no file under the store's
 * directory holds a byte of the erased values.
 *
 * Unique secret values are written in a scope and its descendant, interleaved with values of
 * sibling and parent scopes, across several segments (a small segmentBytes makes them rotate). The
 * eager forget must seal the active segment if it holds secrets and compact every segment that
 * does; the test then reads every file under the directory and searches for every secret. The same
 * scan before the forget must find them all, which proves the scan can fail. Both compaction
 * modes run it; what was not erased must still read back exactly.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

function secretsOnDisk(dir: string, secrets: string[]): string[] {
  const bytes = filesUnder(dir).map((f) => fs.readFileSync(f));
  return secrets.filter((s) => bytes.some((b) => b.includes(Buffer.from(s))));
}

describe.each(["copy-on-write", "in-place"] as const)("eager forgetScope leaves no value bytes on disk (%s)", (mode) => {
  it("erases every secret of the scope and its descendants, and keeps everything else", async () => {
    const dir = tempDir("eager");
    const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { mode, workers: 1, auto: false } });
    const secrets: string[] = [];
    const kept = new Map<string, { scope: string; value: string }>();
    for (let i = 0; i < 120; i++) {
      const secretScope = i % 2 === 0 ? "user:carol" : "user:carol/session:9";
      const secret = `SECRET-${mode}-${i}-${Math.random().toString(36).slice(2)}`;
      secrets.push(secret);
      await store.write(`s${i}`, secret, { scope: secretScope });
      const keepScope = i % 3 === 0 ? "user:dave" : i % 3 === 1 ? "global" : "user:carolyn";
      const value = `keep-${i}`;
      kept.set(`k${i}`, { scope: keepScope, value });
      await store.write(`k${i}`, value, { scope: keepScope });
    }
    expect(store.stats().segments.length).toBeGreaterThan(3);
    await store.flush();
    expect(secretsOnDisk(dir, secrets)).toEqual(secrets);
    const result = await store.forgetScope("user:carol", { reclaim: "eager" });
    expect(result.slots).toBe(120);
    expect(result.reclaimedBytes).toBeGreaterThan(0);
    expect(secretsOnDisk(dir, secrets)).toEqual([]);
    for (const [key, { scope, value }] of kept) {
      expect(await store.read(key, { scope, inherit: false })).toMatchObject({ status: "OK", value, scope });
    }
    await store.close();
    const reopened = await Engram.open(dir, { segmentBytes: 4096, compaction: { mode, workers: 1, auto: false } });
    expect(await reopened.read("s0", { scope: "user:carol" })).toEqual({ status: "NOT_FOUND" });
    expect(await reopened.read("k1")).toMatchObject({ status: "OK", value: "keep-1" });
    expect((await reopened.verify()).ok).toBe(true);
    await reopened.close();
  });

  it("lazy forgetScope leaves the bytes (the eager path is what removes them)", async () => {
    const dir = tempDir("lazy");
    const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { mode, workers: 0, auto: false } });
    const secrets = ["LAZY-SECRET-1", "LAZY-SECRET-2"];
    await store.write("a", secrets[0] as string, { scope: "user:erin" });
    await store.write("b", secrets[1] as string, { scope: "user:erin/session:1" });
    const result = await store.forgetScope("user:erin");
    expect(result.reclaimedBytes).toBeUndefined();
    await store.flush();
    expect(secretsOnDisk(dir, secrets)).toEqual(secrets);
    await store.close();
  });
});
