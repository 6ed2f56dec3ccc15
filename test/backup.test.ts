/**
 * `store.backup(targetDir)`: an online, consistent copy while the store keeps serving.
 *
 * How it works: writers (unique keys, so every acknowledged write can be checked exactly) and
 * forgetters run against a store with small segments, automatic compaction and an explicit
 * compaction loop in both modes; mid-run the set of writes acknowledged so far is captured and
 * `backup` is called while everything keeps running. The copy is then verified on its own
 * (`Engram.verify`), opened as a store, and must hold every write acknowledged before the call
 * with its exact value and version (unless a forget issued after the call superseded it: the
 * copy is the store at one instant during the call), no value that was never written, and no
 * value forgotten before the call. Rounds repeat with fresh stores (ENGRAM_BACKUP_ROUNDS, default 3).
 *
 * Hard links: the copy links sealed segments (same file system), and a later in-place
 * compaction of the origin must not change a linked file — the compactor switches such a
 * segment to copy-on-write. Its twin shows the hazard is real: without a second link, in-place
 * compaction rewrites the very same inode. A copy to another file system (/dev/shm, tmpfs)
 * falls back to copies. Bad targets (inside the store, not empty, no parent) are refused with
 * INVALID_ARGUMENT and leave nothing behind.
 *
 * Property stressed: the copy holds a prefix of the commit sequence that contains every write
 * acknowledged before the call, and stays intact whatever the origin does afterwards.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const ROUNDS = Number(process.env["ENGRAM_BACKUP_ROUNDS"] ?? 3);
const WRITERS = 4;
const SEGMENT_BYTES = 64 * 1024;

interface Acked {
  scope: string;
  key: string;
  value: string;
  version: number;
}

/** A store under load: writers, forgetters and compactions until stop() is called. */
function load(store: Engram): { acked: Map<string, Acked>; forgotten: Set<string>; stop: () => Promise<void> } {
  const acked = new Map<string, Acked>();
  const forgotten = new Set<string>();
  let running = true;
  const loops: Array<Promise<void>> = [];
  for (let w = 0; w < WRITERS; w += 1) {
    loops.push(
      (async () => {
        for (let i = 0; running; i += 1) {
          const scope = `user:u${w}/session:${i % 3}`;
          const key = `w${w}-${i}`;
          const value = `${key}:${"x".repeat(200 + (i % 7) * 50)}`;
          const r = await store.write(key, value, { scope });
          acked.set(`${scope}\u0000${key}`, { scope, key, value, version: r.version });
          if (i % 5 === 4) {
            // Forget an older key of this writer; acknowledged forgets must not come back in the copy.
            const old = `w${w}-${i - 3}`;
            const oldScope = `user:u${w}/session:${(i - 3) % 3}`;
            // Out of `acked` before the call: a forget in flight when the backup is called may be
            // in the copy or not, so the key is checked only once the forget is acknowledged.
            acked.delete(`${oldScope}\u0000${old}`);
            await store.forget(old, { scope: oldScope });
            forgotten.add(`${oldScope}\u0000${old}`);
          }
        }
      })(),
    );
  }
  loops.push(
    (async () => {
      for (let i = 0; running; i += 1) {
        await store.compact({ mode: i % 2 === 0 ? "in-place" : "copy-on-write" });
        // A compaction with nothing to do settles in microtasks only: yield so that I/O callbacks run.
        await new Promise((r) => setImmediate(r));
      }
    })(),
  );
  return {
    acked,
    forgotten,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Waits until `n` writes are acknowledged (deadline 20 s). */
async function untilAcked(acked: Map<string, Acked>, n: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (acked.size < n) {
    if (Date.now() > deadline) throw new Error(`only ${acked.size} of ${n} writes acknowledged within 20 s`);
    await new Promise((r) => setImmediate(r));
  }
}

function sha(file: string): string {
  return createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

describe("backup while writes, forgets and compactions run", () => {
  for (let round = 0; round < ROUNDS; round += 1) {
    it(`round ${round}: the copy verifies, opens, and holds every write acknowledged before the call`, async () => {
      const root = tempDir("backup");
      const store = await Engram.open(path.join(root, "origin"), { segmentBytes: SEGMENT_BYTES, compaction: { workers: 1, garbageRatio: 0.2 } });
      const run = load(store);
      let before: Acked[] = [];
      let forgottenBefore: string[] = [];
      try {
        await untilAcked(run.acked, 300 + round * 200);
        before = [...run.acked.values()];
        forgottenBefore = [...run.forgotten];
        const target = path.join(root, "copy");
        const report = await store.backup(target);
        expect(report.dir).toBe(target);
        expect(report.verify.ok).toBe(true);
        expect(report.segments).toBeGreaterThan(1);
        expect(report.linked + report.copied).toBe(report.segments);
        await untilAcked(run.acked, run.acked.size + 50); // the store kept serving during and after the backup
      } finally {
        await run.stop();
      }
      await store.close();
      const target = path.join(root, "copy");
      expect((await Engram.verify(target)).ok).toBe(true);
      const copy = await Engram.open(target, { compaction: { workers: 0 } });
      try {
        // The copy is the store at one instant during the call: an acknowledged write is there
        // with its value and version, unless a forget issued after the call already superseded it.
        let held = 0;
        for (const a of before) {
          const r = await copy.read(a.key, { scope: a.scope, inherit: false });
          if (r.status === "NOT_FOUND" && run.forgotten.has(`${a.scope}\u0000${a.key}`)) continue;
          expect(r, `${a.scope}/${a.key}`).toEqual({ status: "OK", value: a.value, version: a.version, generation: 1, scope: a.scope });
          held += 1;
        }
        expect(held).toBeGreaterThan(before.length / 2);
        for (const id of forgottenBefore) {
          const [scope, key] = id.split("\u0000") as [string, string];
          expect((await copy.read(key, { scope, inherit: false })).status).toBe("NOT_FOUND");
        }
        // Nothing in the copy that was never written: every live value names its own key.
        let live = 0;
        for (let w = 0; w < WRITERS; w += 1) {
          for (let s = 0; s < 3; s += 1) {
            for await (const e of copy.list({ scope: `user:u${w}/session:${s}`, inherit: false })) {
              const r = await copy.read(e.key, { scope: e.scope, inherit: false });
              expect(r.status === "OK" && String(r.value).startsWith(`${e.key}:`)).toBe(true);
              live += 1;
            }
          }
        }
        expect(live).toBeGreaterThanOrEqual(before.length);
        // The copy is a working store of its own.
        await copy.write("after", "backup", { scope: "global" });
        expect((await copy.read("after")).status).toBe("OK");
      } finally {
        await copy.close();
      }
    });
  }
});

describe("hard links", () => {
  it("twin: without a second link, in-place compaction rewrites the segment's own inode", async () => {
    const dir = tempDir("backup-twin");
    const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { workers: 0, auto: false, mode: "in-place" } });
    try {
      for (let i = 0; i < 40; i += 1) await store.write(`k${i}`, "v".repeat(300));
      const sealed = store.stats().segments.filter((s) => s.sealed);
      expect(sealed.length).toBeGreaterThan(0);
      const id = (sealed[0] as { id: number }).id;
      const file = path.join(dir, "segments", `${String(id).padStart(8, "0")}.seg`);
      const ino = fs.statSync(file).ino;
      const hash = sha(file);
      for (let i = 0; i < 40; i += 2) await store.forget(`k${i}`);
      await store.compact({ mode: "in-place", segments: [id] });
      expect(fs.statSync(file).ino).toBe(ino);
      expect(sha(file)).not.toBe(hash);
    } finally {
      await store.close();
    }
  });

  it("a linked segment is never rewritten in place afterwards: the copy stays as it was", async () => {
    const root = tempDir("backup-links");
    const store = await Engram.open(path.join(root, "origin"), { segmentBytes: 4096, compaction: { workers: 0, auto: false, mode: "in-place" } });
    const target = path.join(root, "copy");
    try {
      for (let i = 0; i < 40; i += 1) await store.write(`k${i}`, "v".repeat(300));
      const report = await store.backup(target);
      expect(report.linked).toBeGreaterThan(0);
      const files = fs.readdirSync(path.join(target, "segments"));
      const hashes = new Map(files.map((f) => [f, sha(path.join(target, "segments", f))]));
      for (let i = 0; i < 40; i += 2) await store.forget(`k${i}`);
      const c = await store.compact({ mode: "in-place" });
      expect(c.segments.length).toBeGreaterThan(0);
      for (const f of files) expect(sha(path.join(target, "segments", f)), f).toBe(hashes.get(f));
      // The forgets happened after the backup: the copy still has every value.
      await store.close();
      const copy = await Engram.open(target, { compaction: { workers: 0 } });
      try {
        for (let i = 0; i < 40; i += 1) expect((await copy.read(`k${i}`)).status).toBe("OK");
      } finally {
        await copy.close();
      }
    } finally {
      await store.close();
    }
  });

  it("copies instead of linking onto another file system (/dev/shm)", async (ctx) => {
    if (!fs.existsSync("/dev/shm") || fs.statSync("/dev/shm").dev === fs.statSync(tempDir("dev")).dev) {
      ctx.skip(); // no second file system here: nothing to show
      return;
    }
    const dir = tempDir("backup-xdev");
    const target = tempDir("backup", "/dev/shm");
    fs.rmdirSync(target);
    const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { workers: 0, auto: false } });
    try {
      for (let i = 0; i < 40; i += 1) await store.write(`k${i}`, "v".repeat(300));
      const report = await store.backup(target);
      expect(report.linked).toBe(0);
      expect(report.copied).toBe(report.segments);
      expect((await Engram.verify(target)).ok).toBe(true);
    } finally {
      await store.close();
      fs.rmSync(target, { recursive: true, force: true });
    }
  });
});

describe("bad targets", () => {
  it("refuses a target inside the store, a non-empty one, or one without a parent, and leaves nothing", async () => {
    const root = tempDir("backup-bad");
    const origin = path.join(root, "origin");
    const store = await Engram.open(origin, { compaction: { workers: 0 } });
    try {
      await store.write("k", "v");
      fs.mkdirSync(path.join(root, "full"));
      fs.writeFileSync(path.join(root, "full", "x"), "x");
      for (const t of [origin, path.join(origin, "inner"), path.join(root, "full"), path.join(root, "no", "parent"), ""]) {
        await expect(store.backup(t), t).rejects.toBeInstanceOf(InvalidArgumentError);
      }
      expect(fs.readdirSync(root).sort()).toEqual(["full", "origin"]);
      expect(fs.readdirSync(origin).sort()).toEqual(["LOCK", "segments"]);
      // An existing empty directory is a fine target.
      fs.mkdirSync(path.join(root, "empty"));
      expect((await store.backup(path.join(root, "empty"))).verify.ok).toBe(true);
    } finally {
      await store.close();
    }
  });
});
