/**
 * The compaction worker's two entries when engram runs from its sources (engine/compactor.ts
 * workerEntry): through tsx (engine/ts-boot.mjs compiling engine/compaction-worker.ts), and the
 * compiled twin in dist/ that the tests use while dist/ is fresh (workerFromBuildForTests, set by
 * test/setup/worker.ts before every file: test/helpers/built-worker.ts). Since the fifty-eighth
 * session every other test runs on the second whenever `npm test` built first, so this file keeps
 * the first one working too. Method: per entry and mode, a store with a worker thread writes 300
 * keys into 16 KiB segments, forgets every third, compacts, and must read every survivor back, a
 * forgotten key as absent, before and after a reopen; the pass must have run on a worker thread
 * (its pool holds one). Checked by hand, each with dist/ rebuilt: BUILT_WORKER naming a missing
 * file fails both dist/ cases and no other (compact() rejects: "the compaction worker thread
 * stopped before it answered (Cannot find module …)"), and a `tsWorker` naming a missing file
 * fails both tsx cases and no other.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { workerFromBuildForTests } from "../engine/compactor.js";
import { staleSource } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

type Mode = "copy-on-write" | "in-place";
const KEYS = 300;
const valueOf = (i: number): string => `v${i}:`.padEnd(300, "x");
const setByTheSetup = workerFromBuildForTests.use;

afterEach(() => {
  workerFromBuildForTests.use = setByTheSetup;
});

/** Reads every key of the store's scope "s": survivors hold their value, every third key is absent. */
async function expectContent(store: Store, what: string): Promise<void> {
  for (let i = 0; i < KEYS; i++) {
    const r = await store.read(`k${i}`, { scope: "s" });
    if (i % 3 === 0) expect(r.status, `${what}: k${i} forgotten`).not.toBe("OK");
    else expect(r, `${what}: k${i}`).toMatchObject({ status: "OK", value: valueOf(i) });
  }
}

/** One pass on a worker started from the entry `use` selects, checked before and after a reopen. */
async function compactsThrough(use: boolean, mode: Mode): Promise<void> {
  workerFromBuildForTests.use = use;
  const dir = tempDir(`worker-entry-${use ? "dist" : "tsx"}`);
  const opts = { durability: "none" as const, segmentBytes: 16 * 1024, compaction: { mode, workers: 1, auto: false } };
  const store = await Store.open(dir, opts);
  try {
    await store.batch(Array.from({ length: KEYS }, (_, i) => ({ op: "write" as const, scope: "s", key: `k${i}`, value: valueOf(i) })));
    for (let i = 0; i < KEYS; i += 3) await store.forget(`k${i}`, { scope: "s" });
    const report = await store.compact({ mode });
    expect(report.segments.length, "the pass compacted segments").toBeGreaterThan(0);
    expect(report.bytesAfter, "the pass reclaimed the forgotten values").toBeLessThan(report.bytesBefore);
    expect(store.compactor.workerThreadsForTests().length, "the pass ran on a worker thread").toBe(1);
    await expectContent(store, `${mode}, after the pass`);
  } finally {
    await store.close();
  }
  const again = await Store.open(dir, opts);
  try {
    await expectContent(again, `${mode}, after a reopen`);
  } finally {
    await again.close();
  }
}

describe("the compaction worker's entries from sources", () => {
  it("the setup starts workers from dist/ exactly while dist/ is fresh", () => {
    expect(setByTheSetup).toBe(staleSource() === null);
  });

  for (const mode of ["copy-on-write", "in-place"] as const) {
    it(`${mode}: a pass on a worker compiled through tsx (ts-boot.mjs)`, async () => {
      await compactsThrough(false, mode);
    });
    it(`${mode}: a pass on the compiled worker in dist/`, async () => {
      if (staleSource() !== null) expect.fail(`dist/ is older than ${staleSource()}: run \`npm run build\` (npm test builds first)`);
      await compactsThrough(true, mode);
    });
  }
});
