/**
 * Seed 000, phantom write loss, and its unsafe twin (moved here from
 * test/seed-phantom-write.test.ts; on the engine the GC runs in a real worker thread, in both
 * compaction modes).
 *
 * The sequence is the seed's: write k=v1, forget k (tombstone T), write k=v2 (auto-clear bumps the
 * slot generation in the same record), then gc(). The generation-keyed GC (default) keeps v2
 * because its generation is above the one T killed; v2 survives the GC and a reopen. Under
 * `unsafe.gcKeyedBy: "tombstone-seq"` the GC sweeps every slot whose tombstone sequence is below
 * the watermark and the same script must lose v2: read NOT_FOUND, probe "reclaimed" with the
 * retention record alive, and a write expecting v2's version gets VERSION_CONFLICT — the seed's
 * half-reclaimed slot — durably (still so after a reopen).
 * Property stressed: I5, and that the test can tell the two GC designs apart.
 */
import { VersionConflictError } from "../../../rules/errors.js";
import type { OpenOptions } from "../../../rules/types.js";
import { expect } from "../expect.js";
import type { Harness } from "../harness.js";

type Mode = "copy-on-write" | "in-place" | "default";

/** Registers the seed-000 cases. */
export function seedPhantomWriteCases(h: Harness): void {
  async function replay(mode: Mode, unsafe: boolean) {
    const options: OpenOptions = {
      ...(mode === "default" ? {} : { compaction: { mode, workers: 1, auto: false } }),
      ...(unsafe ? { unsafe: { gcKeyedBy: "tombstone-seq" as const } } : {}),
    };
    const store = await h.open(options);
    const dir = store;
    const v1 = await store.write("pref.theme", "light");
    const forgot = await store.forget("pref.theme");
    expect(forgot).toMatchObject({ ok: true, generation: v1.generation });
    expect(forgot.tombstoneSeq).toBeGreaterThan(v1.version);
    const v2 = await store.write("pref.theme", "dark");
    expect(v2.version).toBeGreaterThan(forgot.tombstoneSeq as number);
    expect(v2.generation).toBe(v1.generation + 1);
    const gc = await store.gc();
    // The engine's GC rewrites segments; a database has none to name.
    if (mode !== "default") expect(gc.segments.length).toBeGreaterThan(0);
    return { dir, options, store, v1, forgot, v2 };
  }

  const modes: Mode[] = h.supports.inPlaceCompaction ? ["copy-on-write", "in-place"] : ["default"];
  for (const mode of modes) {
    h.describe(`seed 000 with GC (${mode === "default" ? "the backend's GC" : `${mode}, in a worker`})`, () => {
      h.itWith(["reopen"], "keeps the rewritten value: the GC is keyed on generation", async () => {
        const { dir, options, store, v2, forgot } = await replay(mode, false);
        expect(await store.read("pref.theme")).toMatchObject({ status: "OK", value: "dark", version: v2.version, generation: v2.generation });
        const probe = await store.probe("pref.theme");
        expect(probe).toMatchObject({ state: "live", valuePresent: true, retentionPresent: true, version: v2.version, tombstoneSeq: forgot.tombstoneSeq });
        // The superseded v1 record is gone; only v2 remains physically.
        expect(probe.physicalRecords).toBe(1);
        await store.close();
        const reopened = await h.reopen(dir, options);
        expect(await reopened.read("pref.theme")).toMatchObject({ status: "OK", value: "dark", version: v2.version });
        expect((await reopened.write("pref.theme", "dim", { expectedVersion: v2.version })).version).toBeGreaterThan(v2.version);
        await reopened.close();
      });

      h.itWith(["reopen", "unsafeGc"], "loses the rewritten value under unsafe.gcKeyedBy tombstone-seq", async () => {
        const { dir, options, store, v2, forgot } = await replay(mode, true);
        expect(await store.read("pref.theme")).toEqual({ status: "NOT_FOUND" });
        const probe = await store.probe("pref.theme");
        expect(probe).toMatchObject({ state: "reclaimed", valuePresent: false, retentionPresent: true, physicalRecords: 0, version: v2.version, tombstoneSeq: forgot.tombstoneSeq });
        const stale = store.write("pref.theme", "again", { expectedVersion: v2.version });
        await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
        await expect(stale).rejects.toMatchObject({ code: "VERSION_CONFLICT", expected: v2.version, actual: null });
        await store.close();
        // The loss is durable: the value is gone from the store.
        const reopened = await h.reopen(dir, options);
        expect(await reopened.read("pref.theme")).toEqual({ status: "NOT_FOUND" });
        await reopened.close();
      });
    });
  }
}
