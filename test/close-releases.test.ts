/**
 * close() releases the store's index: a closed Store that its caller still references keeps no
 * slot, erasure or deferred hint entry on the JS heap (engine/keydir.ts release). Before it did,
 * a program that closed one store and opened another — every CLI command after a bulk load, the
 * W3 benchmark — kept the closed store's whole keydir alive for the new one's GCs to mark.
 *
 * Method: a real store gets 200 keys in two scopes and a scope erasure; before close the keydir
 * holds them (the twin: the measure sees slots, so an empty answer after close is the release and
 * not a measure that always says 0); after close it holds none, and every call still fails with
 * StoreClosedError instead of answering from the emptied index. A reopen finds everything.
 */
import { describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { StoreClosedError } from "../rules/errors.js";
import { tempDir } from "./helpers/tmp.js";

describe("close() releases the keydir", () => {
  it("holds the slots while open, none after close, and still refuses every call", async () => {
    const dir = tempDir("close-releases");
    const s = await Store.open(dir, { durability: "none" });
    for (let i = 0; i < 100; i++) await s.write(`k${i}`, `v${i}`, { scope: "user:a" });
    for (let i = 0; i < 100; i++) await s.write(`k${i}`, `w${i}`, { scope: "user:b" });
    await s.forgetScope("user:b");
    // Twin: the measure sees the index while the store is open.
    expect(s.keydir.size).toBeGreaterThanOrEqual(100);
    expect(s.keydir.erases.size).toBe(1);
    await s.close();
    expect(s.keydir.size).toBe(0);
    expect(s.keydir.erases.size).toBe(0);
    expect(s.keydir.isDeferred).toBe(false);
    await expect(s.read("k1", { scope: "user:a" })).rejects.toBeInstanceOf(StoreClosedError);
    expect(() => s.readSync("k1", { scope: "user:a" })).toThrow(StoreClosedError);
    await expect(s.probe("k1", { scope: "user:a" })).rejects.toBeInstanceOf(StoreClosedError);
    const again = await Store.open(dir, { durability: "none" });
    try {
      const kept = await again.read("k7", { scope: "user:a" });
      expect(kept.status === "OK" ? kept.value : kept.status).toBe("v7");
      expect((await again.read("k7", { scope: "user:b" })).status).not.toBe("OK");
    } finally {
      await again.close();
    }
  });
});
