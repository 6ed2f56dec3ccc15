/**
 * forgetScope of a scope with 1,000,000 slots (issue 9, "Bounds"): the erase list is chunked into
 * SCOPE_ERASE records of at most ERASE_LIST_CHUNK_BYTES, written as one batch in one commit group,
 * so the erasure works at any size and stays atomic across a crash.
 *
 * Method: a real store loads 1,000,000 slots of tiny values with batch() (100,000 operations per
 * batch), plus slots in a sibling scope, and erases the scope. The test counts the SCOPE_ERASE
 * records on disk (more than one: chunked, each under the chunk limit), then checks atomicity on
 * a copy of the directory taken right after the erasure was acknowledged: the erasure's group cut
 * in the middle (a torn tail inside the chunks) must reopen with every one of the slots still
 * readable — none half-erased. The original reopens with every sampled slot erased, the sibling
 * scope intact and the retention records (version, generation) kept — also after a gc rewrote the
 * erasure's segment and another restart (every chunk relocated). ENGRAM_ERASE_SLOTS sets the size
 * (default 1,000,000).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import * as C from "../segments/constants.js";
import { initChecksum } from "../segments/checksum.js";
import { ERASE_LIST_CHUNK_BYTES } from "../segments/erase-list.js";
import { chooseHeader, formatOf } from "../segments/header.js";
import { readGroupFrame } from "../segments/group.js";
import { scanRecords } from "../segments/scan.js";
import { tempDir } from "./helpers/tmp.js";

const N = Number(process.env["ENGRAM_ERASE_SLOTS"] ?? 1_000_000);
const OPTS = { compaction: { workers: 0, auto: false } };

function lastSegment(dir: string): string {
  const d = path.join(dir, "segments");
  return path.join(d, fs.readdirSync(d).filter((n) => /^\d{8}\.seg$/.test(n)).sort().at(-1) as string);
}

/** The SCOPE_ERASE records of a segment file: value length of each. */
function erasuresIn(file: string): number[] {
  const bytes = fs.readFileSync(file);
  const h = chooseHeader(bytes, 0);
  const out: number[] = [];
  scanRecords(bytes, 0, (h.header.flags & C.FLAG_SEALED) !== 0, (r) => {
    if (r.type === C.RecordType.SCOPE_ERASE) out.push((r.value as Uint8Array).length);
  }, false, formatOf(h));
  return out;
}

describe("forgetScope of a scope with a million slots", () => {
  it(`erases ${N} slots with a chunked, atomic erase list`, async () => {
    await initChecksum();
    const dir = tempDir("million");
    const store = await Engram.open(dir, OPTS);
    for (let i = 0; i < N; i += 100_000) {
      await store.batch(Array.from({ length: Math.min(100_000, N - i) }, (_, j) => ({ op: "write" as const, key: `k${i + j}`, value: "v", scope: "user:big" })));
    }
    for (let i = 0; i < 10; i++) await store.write(`keep${i}`, `kept-${i}`, { scope: "user:bigger" });
    const before = await store.probe("k4242", { scope: "user:big" });
    const beforeLast = await store.probe(`k${N - 1}`, { scope: "user:big" }); // in the last chunk
    const erased = await store.forgetScope("user:big");
    expect(erased.slots).toBe(N);
    const image = tempDir("million-copy");
    fs.cpSync(dir, image, { recursive: true }); // what a crash right after the acknowledgement leaves
    fs.rmSync(path.join(image, "LOCK"), { force: true });
    await store.close();

    // The image holds the erasure in its last (active) segment; the closed store's last segment is
    // the empty one its close started when it sealed the large active segment (engine/store.ts sealLargeActive).
    const lists = erasuresIn(lastSegment(image));
    expect(lists.length).toBeGreaterThan(N >= 200_000 ? 1 : 0);
    for (const bytes of lists) expect(bytes).toBeLessThanOrEqual(ERASE_LIST_CHUNK_BYTES);

    // Atomic: cut the erasure's group in the middle of its chunks; nothing of it may apply.
    const copy = lastSegment(image);
    const bytes = fs.readFileSync(copy);
    let at = C.DATA_START;
    let last = at;
    for (let f = readGroupFrame(bytes, at, bytes.length); typeof f !== "string"; f = readGroupFrame(bytes, at, bytes.length)) {
      last = at;
      at = f.bodyEnd;
    }
    fs.truncateSync(copy, last + Math.floor((at - last) / 2));
    const torn = await Engram.open(image, OPTS);
    for (let i = 0; i < N; i += Math.max(1, Math.floor(N / 500))) expect(torn.readSync(`k${i}`, { scope: "user:big" }), `k${i}`).toMatchObject({ status: "OK", value: "v" });
    expect(torn.stats().liveSlots).toBe(N + 10);
    await torn.close();

    const reopened = await Engram.open(dir, OPTS);
    for (let i = 0; i < N; i += Math.max(1, Math.floor(N / 500))) expect(reopened.readSync(`k${i}`, { scope: "user:big" }), `k${i}`).toEqual({ status: "NOT_FOUND" });
    expect(reopened.stats().liveSlots).toBe(10);
    expect(reopened.readSync("keep3", { scope: "user:bigger" })).toMatchObject({ status: "OK", value: "kept-3" });
    const after = await reopened.probe("k4242", { scope: "user:big" });
    expect(after).toMatchObject({ valuePresent: false, retentionPresent: true, version: before.version, generation: before.generation });
    // GC reclaims every value and rewrites the erasure's segment: every chunk moves together and
    // keeps the retention records of its slots across another restart.
    await reopened.gc();
    await reopened.close();
    const again = await Engram.open(dir, OPTS);
    expect(await again.probe("k4242", { scope: "user:big" })).toMatchObject({ state: "reclaimed", physicalRecords: 0, version: before.version, generation: before.generation });
    expect(await again.probe(`k${N - 1}`, { scope: "user:big" })).toMatchObject({ state: "reclaimed", version: beforeLast.version, generation: beforeLast.generation });
    expect((await again.verify()).ok).toBe(true);
    await again.close();
  }, 600_000);
});
