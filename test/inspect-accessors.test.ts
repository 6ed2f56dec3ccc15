/**
 * The two read-only accessors the web inspector enumerates a store with: `listScopes()` and
 * `listSlots({ scope, limit })`, in process over a real store.
 *
 * How it works: slots are made in every state (live, tombstoned, reclaimed by gc, erased by
 * forgetScope, undeleted to absent-with-retention) across nested scopes; the accessors must name
 * exactly the scopes and keys that `probe` reports a retention record for — before and after a
 * reopen — and nothing else (an ancestor with no slot of its own is not a slot scope). Bad
 * arguments are INVALID_ARGUMENT, a closed store is CLOSED, and neither call writes anything
 * (the sequence does not move).
 *
 * Property stressed: the accessors agree with probe() slot for slot, so the inspector's tree and
 * key lists show every retention record the store holds.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const SESSION = "user:alice/session:1";

async function slotsByProbe(store: Engram, scopes: string[], keys: string[]): Promise<Map<string, string[]>> {
  const found = new Map<string, string[]>();
  for (const scope of scopes) {
    for (const key of keys) {
      if (!(await store.probe(key, { scope })).retentionPresent) continue;
      found.set(scope, [...(found.get(scope) ?? []), key]);
    }
  }
  return found;
}

describe("listScopes / listSlots", () => {
  it("name every slot in any state, agree with probe, survive a reopen, and write nothing", async () => {
    const dir = join(tempDir("accessors"), "s");
    const opts = { segmentBytes: 4096, compaction: { workers: 0, auto: false } } as const;
    let store = await Engram.open(dir, opts);
    await store.write("live", "1", { scope: SESSION });
    await store.write("gone", "2", { scope: SESSION });
    await store.forget("gone", { scope: SESSION });
    await store.write("filler", "f".repeat(5000));
    await store.gc();
    await store.write("x", "4", { scope: "user:bob/session:9" });
    await store.forgetScope("user:bob", { reclaim: "eager" }); // compacts: other dead records go too
    await store.write("tomb", "3", { scope: SESSION });
    await store.forget("tomb", { scope: SESSION });
    await store.write("undone", "5", { scope: "user:carol" });
    await store.forget("undone", { scope: "user:carol" });
    await store.undelete("undone", { scope: "user:carol" });
    const states = await Promise.all(["live", "gone", "tomb"].map(async (k) => (await store.probe(k, { scope: SESSION })).state));
    expect(states).toEqual(["live", "reclaimed", "tombstoned"]);

    const allScopes = ["global", "user:alice", SESSION, "user:bob", "user:bob/session:9", "user:carol"];
    const allKeys = ["live", "gone", "tomb", "filler", "x", "undone"];
    for (let round = 0; round < 2; round++) {
      const seq = store.stats().sequence;
      const expected = await slotsByProbe(store, allScopes, allKeys);
      expect(await store.listScopes()).toEqual([...expected.keys()].sort());
      expect(await store.listScopes()).not.toContain("user:alice"); // an ancestor without slots of its own
      for (const scope of allScopes) expect([scope, await store.listSlots({ scope })]).toEqual([scope, (expected.get(scope) ?? []).sort()]);
      expect(await store.listSlots({ scope: SESSION, limit: 2 })).toEqual(["gone", "live"]);
      expect(store.stats().sequence).toBe(seq);
      await store.close();
      store = await Engram.open(dir, opts);
    }

    for (const bad of [{ scope: "bad scope" }, { scope: 7 }, { scope: SESSION, limit: 0 }, { scope: SESSION, limit: 1.5 }, "global"]) {
      await expect(store.listSlots(bad as never)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    }
    await store.close();
    await expect(store.listScopes()).rejects.toMatchObject({ code: "CLOSED" });
    await expect(store.listSlots({ scope: SESSION })).rejects.toMatchObject({ code: "CLOSED" });
  });
});
