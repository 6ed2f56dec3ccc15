/**
 * A manifest write that fails (fault point `io:manifest`: EIO or ENOSPC on the open, write,
 * fdatasync, rename or directory fsync of segments/MANIFEST) never leaves state that says
 * otherwise.
 *
 * Method: a real store with 4 KiB segments (one filler fills a segment) arms one failure at
 * `io:manifest`, then writes until a rotation needs a manifest naming the new segment. That
 * write must reject with the injected IoError; the store must not keep the half-made segment
 * (no extra entry in stats, no extra .seg file once a manifest without it is durable), must keep
 * accepting writes, and after close and reopen must hold every acknowledged write and verify
 * clean. The second case fails the manifest write that retires an emptied segment: gc rejects,
 * the segment stays published, and a reopen still finds every live value and no forgotten one.
 * Before this point existed, manifest writes bypassed segments/io.ts: no test could fail them and
 * the power-loss harness never saw them.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, IoError } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";

guardUnhandledRejections();

const DEADLINE = 20_000;
const FILL = "f".repeat(3800); // fills a 4 KiB segment alone
const OPTS = { segmentBytes: 4096, retention: { tombstoneRetentionMs: 0 }, compaction: { workers: 0, auto: false }, faults: {} };

const segFiles = (dir: string): string[] => fs.readdirSync(path.join(dir, "segments")).filter((n) => n.endsWith(".seg")).sort();

describe("io:manifest failures", () => {
  for (const errno of ["EIO", "ENOSPC"] as const) {
    it(`${errno} at a rotation: the write rejects, no half-made segment stays, reopen intact`, async () => {
      const dir = tempDir("manifest-faults");
      const store = await Engram.open(dir, OPTS);
      const acked = new Map<string, string>();
      for (let i = 0; i < 3; i++) {
        await store.write(`k${i}`, `${i}${FILL}`);
        acked.set(`k${i}`, `${i}${FILL}`);
      }
      const segmentsBefore = store.stats().segments.length;
      const filesBefore = segFiles(dir);
      store.faults.failAt?.("io:manifest", errno, 1);
      const r = await settle(DEADLINE, store.write("k3", `3${FILL}`), "write needing a rotation");
      expect(r.ok, "the write whose rotation could not be listed rejects").toBe(false);
      if (!r.ok) {
        expect(r.error).toBeInstanceOf(IoError);
        expect((r.error as IoError).errno).toBe(errno);
      }
      expect(store.faults.failuresLeft?.()).toBe(0);
      expect(store.stats().segments.length, "the unlisted segment is not kept").toBe(segmentsBefore);
      expect(segFiles(dir), "its file is gone once a manifest without it is durable").toEqual(filesBefore);
      expect((await store.read("k3")).status).toBe("NOT_FOUND");
      await within(DEADLINE, store.write("k4", `4${FILL}`), "a write after the failure");
      acked.set("k4", `4${FILL}`);
      await within(DEADLINE, store.close(), "close");
      const again = await within(DEADLINE, Engram.open(dir, { ...OPTS, faults: undefined }), "reopen");
      try {
        for (const [k, v] of acked) expect(await again.read(k), k).toMatchObject({ value: v });
        expect((await again.read("k3")).status).toBe("NOT_FOUND");
        expect((await again.verify()).problems).toEqual([]);
      } finally {
        await again.close();
      }
    });
  }

  it("EIO retiring an emptied segment: gc rejects, the segment stays published, reopen intact", async () => {
    const dir = tempDir("manifest-faults");
    const store = await Engram.open(dir, OPTS);
    await store.write("gone", `g${FILL}`); // segment 1, emptied below
    await store.write("live", `l${FILL}`);
    await store.write("live2", `m${FILL}`);
    await store.forget("gone");
    const filesBefore = segFiles(dir);
    store.faults.failAt?.("io:manifest", "EIO", 1);
    const r = await settle(DEADLINE, store.gc(), "gc retiring segment 1");
    expect(store.faults.failuresLeft?.(), "the retirement tried to write the manifest").toBe(0);
    expect(r.ok, "gc whose retirement could not be listed rejects").toBe(false);
    if (!r.ok) expect(r.error).toBeInstanceOf(IoError);
    expect(segFiles(dir), "the emptied segment stays published: its file is not unlinked").toEqual(filesBefore);
    await within(DEADLINE, store.gc(), "gc again, with the disk healthy");
    expect(segFiles(dir), "now it is retired").not.toContain(filesBefore[0]);
    expect((await store.read("gone")).status).toBe("NOT_FOUND");
    expect(await store.read("live")).toMatchObject({ value: `l${FILL}` });
    await within(DEADLINE, store.close(), "close");
    const again = await within(DEADLINE, Engram.open(dir, { ...OPTS, faults: undefined }), "reopen");
    try {
      expect((await again.read("gone")).status, "the forgotten value stays forgotten").toBe("NOT_FOUND");
      expect(await again.read("live")).toMatchObject({ value: `l${FILL}` });
      expect(await again.read("live2")).toMatchObject({ value: `m${FILL}` });
      expect((await again.verify()).problems).toEqual([]);
    } finally {
      await again.close();
    }
  });
});
