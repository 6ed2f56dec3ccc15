/**
 * A real full file system (no injection): as root, a 2 MiB tmpfs is mounted under a temp dir
 * (unmounted in `finally`); when not root, or when mount is refused, the test is skipped with a
 * message. The store fills it through ordinary writes until the kernel answers ENOSPC; that write
 * must reject with IoError ENOSPC, the host process survives, every acknowledged value stays
 * readable, and later calls reject cleanly rather than hang. Space is then freed — forget + gc as
 * far as the full disk allows, then an unrelated ballast file is deleted — and writes, gc and a
 * reopen must work again with every acknowledged operation intact (checked against a model).
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, IoError, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";
import { expectIoError, guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";

guardUnhandledRejections();

const root = typeof process.getuid === "function" && process.getuid() === 0;
if (!root) console.warn("io-full-disk: SKIPPED — mounting a tmpfs needs root; run the suite as root to test a real full disk");

const T = 20_000;

function tryMount(dir: string): boolean {
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir], { stdio: "pipe" });
    return true;
  } catch (err) {
    console.warn(`io-full-disk: SKIPPED — mount -t tmpfs failed: ${String(err)}`);
    return false;
  }
}

describe("a real full tmpfs", () => {
  for (const mode of ["copy-on-write", "in-place"] as const) {
    it.skipIf(!root)(`ENOSPC is an IoError, the store stays usable, and works again once space is freed (${mode})`, async () => {
      const mnt = tempDir("tmpfs");
      if (!tryMount(mnt)) return;
      try {
        const ballast = path.join(mnt, "ballast");
        fs.writeFileSync(ballast, Buffer.alloc(384 * 1024, 1));
        const dir = path.join(mnt, "store");
        const options: OpenOptions = { segmentBytes: 64 * 1024, retention: { tombstoneRetentionMs: 0 }, compaction: { mode, workers: 1, auto: false } };
        const store = await Engram.open(dir, options);
        const model = new Map<string, string | null>();
        const val = (i: number): string => `${i}:${"f".repeat(4000)}`;
        let full: unknown = null;
        for (let i = 0; i < 2000 && full === null; i++) {
          const r = await settle(T, store.write(`k${i}`, val(i)), `write k${i}`);
          if (r.ok) model.set(`k${i}`, val(i));
          else full = r.error;
        }
        expect(full, "the disk filled up").not.toBeNull();
        expectIoError(full, "ENOSPC");
        console.log(`io-full-disk (${mode}): ENOSPC after ${model.size} acknowledged 4 KiB writes`);
        for (let i = 0; i < 3; i++) {
          const r = await settle(T, store.write(`more${i}`, val(i)), "write on a full disk");
          if (r.ok) model.set(`more${i}`, val(i));
          else expectIoError(r.error, "ENOSPC");
        }
        for (const [k, v] of model) expect(await store.read(k)).toMatchObject({ value: v });
        // Free what the full disk allows: forgets (small records) and a gc that may itself need space.
        const keys = [...model.keys()].filter((_, i) => i % 2 === 0);
        for (const k of keys) {
          const r = await settle(T, store.forget(k), `forget ${k}`);
          if (r.ok) model.set(k, null);
          else expect(r.error).toBeInstanceOf(IoError);
        }
        const gc1 = await settle(60_000, store.gc(), "gc on a full disk");
        if (!gc1.ok) expect(gc1.error).toBeInstanceOf(IoError);
        fs.rmSync(ballast);
        await within(60_000, store.gc(), "gc once space is free");
        for (let i = 0; i < 20; i++) {
          await within(T, store.write(`after${i}`, val(i)), `write after${i}`);
          model.set(`after${i}`, val(i));
        }
        for (const [k, v] of model) expect(await store.read(k)).toMatchObject(v === null ? { status: "NOT_FOUND" } : { value: v });
        await within(T, store.close(), "close");
        const again = await within(T, Engram.open(dir, options), "reopen");
        try {
          for (const [k, v] of model) expect(await again.read(k), k).toMatchObject(v === null ? { status: "NOT_FOUND" } : { value: v });
          expect((await again.verify()).problems).toEqual([]);
        } finally {
          await again.close();
        }
      } finally {
        execFileSync("umount", [mnt], { stdio: "pipe" });
      }
    });
  }
});
