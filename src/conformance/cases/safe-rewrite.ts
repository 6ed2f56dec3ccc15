/**
 * safeRewrite (src/safe-rewrite.ts) over a real store: the write-after-forget guard of seed note
 * 000 (moved here from test/safe-rewrite.test.ts; its branch-by-branch tests over an in-memory
 * fake stay there).
 *
 * How it works: a forgotten key, a key reclaimed by gc(), and the seed's half-reclaimed slot as
 * reproduced by `unsafe: { gcKeyedBy: "tombstone-seq" }`, each on a fresh store.
 * Properties stressed: no plain write ever lands on a slot whose retention record survives its
 * value; the clearing write bumps the generation and survives the next gc.
 */
import { HalfReclaimedSlotError } from "../../../rules/errors.js";
import type { OpenOptions } from "../../../rules/types.js";
import { safeRewrite } from "../../safe-rewrite.js";
import { expect } from "../expect.js";
import type { ConformanceStore, Harness } from "../harness.js";

/** Registers the safeRewrite cases. */
export function safeRewriteCases(h: Harness): void {
  h.describe("safeRewrite over a real Engram", () => {
    async function withStore(_name: string, fn: (s: ConformanceStore) => Promise<void>, opts: OpenOptions = {}): Promise<void> {
      const s = await h.open(opts);
      try {
        await fn(s);
      } finally {
        await s.close();
      }
    }

    h.it("fresh and live keys are written", async () => {
      await withStore("plain", async (s) => {
        const w1 = await safeRewrite(s, "k", "v1");
        const w2 = await safeRewrite(s, "k", "v2");
        expect(w2.version).toBeGreaterThan(w1.version);
        expect(await s.read("k")).toMatchObject({ status: "OK", value: "v2", version: w2.version });
      });
    });

    h.it("a forgotten key needs clearTombstone, which bumps the generation", async () => {
      await withStore("forgotten", async (s) => {
        const w1 = await s.write("k", "v1", { scope: "user:a" });
        await s.forget("k", { scope: "user:a" });
        await expect(safeRewrite(s, "k", "v2", { scope: "user:a" })).rejects.toBeInstanceOf(HalfReclaimedSlotError);
        expect(await s.read("k", { scope: "user:a" })).toEqual({ status: "NOT_FOUND" });
        const w2 = await safeRewrite(s, "k", "v2", { scope: "user:a", clearTombstone: true });
        expect(w2.generation).toBeGreaterThan(w1.generation);
        expect(await s.read("k", { scope: "user:a" })).toMatchObject({ value: "v2" });
      });
    });

    h.it("a key reclaimed by gc needs clearTombstone, and the re-write survives the next gc", async () => {
      await withStore("reclaimed", async (s) => {
        await s.write("k", "v1");
        await s.forget("k");
        await s.gc();
        const p = await s.probe("k");
        expect(p).toMatchObject({ valuePresent: false, retentionPresent: true });
        await expect(safeRewrite(s, "k", "v2")).rejects.toMatchObject({ code: "HALF_RECLAIMED" });
        await safeRewrite(s, "k", "v2", { clearTombstone: true });
        await s.gc();
        expect(await s.read("k")).toMatchObject({ value: "v2" });
      });
    });

    h.itWith(["unsafeGc"], "the seed's half-reclaimed slot (unsafe tombstone-seq GC) is refused", async () => {
      await withStore(
        "unsafe",
        async (s) => {
          await s.write("pref.theme", "light");
          await s.forget("pref.theme");
          await s.write("pref.theme", "dark");
          await s.gc();
          const p = await s.probe("pref.theme");
          expect(p).toMatchObject({ state: "reclaimed", valuePresent: false, retentionPresent: true });
          await expect(safeRewrite(s, "pref.theme", "dark")).rejects.toBeInstanceOf(HalfReclaimedSlotError);
        },
        { unsafe: { gcKeyedBy: "tombstone-seq" } },
      );
    });
  });
}
