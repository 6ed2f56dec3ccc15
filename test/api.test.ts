/**
 * The engine-specific remainder of the API tests: what only a store of segment files can show.
 * The contract-level tests that lived here moved into the exported conformance suite
 * (src/conformance/cases/api.ts), which test/conformance-engine.test.ts runs against the engine.
 *
 * How it works: a real store in a temp dir; after an eager forgetScope every segment file is read
 * byte by byte and must not contain the erased values (I8 at the file level).
 * Property stressed: "eager" means the bytes are gone from the files, not only unreadable.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import type { OpenOptions } from "../src/types.js";
import { tempDir as freshDir } from "./helpers/tmp.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = freshDir("api");
  dirs.push(d);
  return d;
}

const FAST: OpenOptions = { durability: "none", compaction: { workers: 0, auto: false } };

async function fresh(options: OpenOptions = FAST): Promise<{ store: Engram; dir: string; options: OpenOptions }> {
  const dir = tempDir();
  return { store: await Engram.open(dir, options), dir, options };
}

describe("reclamation in segment files", () => {
  it("forgetScope eager: the erased values' bytes are gone from every segment file", async () => {
    const { store, dir } = await fresh();
    try {
      const secret = "SECRET-VALUE-4f1c9a";
      await store.write("keep", "kept-value-xyz");
      await store.write("s", secret, { scope: "user:a/session:1" });
      await store.write("t", secret, { scope: "user:a" });
      const r = await store.forgetScope("user:a", { reclaim: "eager" });
      expect(r.reclaimedBytes).toBeGreaterThan(0);
      const segDir = path.join(dir, "segments");
      for (const f of fs.readdirSync(segDir)) {
        expect(fs.readFileSync(path.join(segDir, f)).includes(Buffer.from(secret)), f).toBe(false);
      }
      expect(await store.read("keep")).toMatchObject({ value: "kept-value-xyz" });
      expect(await store.read("s", { scope: "user:a/session:1" })).toEqual({ status: "NOT_FOUND" });
    } finally {
      await store.close();
    }
  });
});
