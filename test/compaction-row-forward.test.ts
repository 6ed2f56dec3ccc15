/**
 * A compaction plan walks compact rows as they are (engine/compaction-plan.ts KIND_ROW): a name a
 * batch wrote and no one asked about since stays a row of typed arrays through the pass, and the
 * pass's publication moves the row's pointer. The property: a name held as a row when the plan
 * was made keeps its value after the pass even when something made the row a Slot between the
 * plan and the publication — the Slot it became is the pointer the publication must move.
 *
 * How it works: 600 names are written by batches (held as rows) into small segments beside
 * overwritten values (garbage, so every segment is compacted). compact() runs with the test hook
 * that fires after its plan, before the seal and the jobs (`unsafePlanReuseForTests.afterPlan`,
 * a point where no write happened, so the pass keeps that plan), and there every other name is
 * asked for through `keydir.get`, which makes its row a Slot. Every name must then read its value,
 * at once and after a reopen, in both modes, inline and with a worker; the number of rows must
 * really have fallen in the hook and no row may be left forwarded once the pass ended. Twin: with
 * `unsafeCompactForTests.noForward` a row made a Slot under the pass is freed instead of
 * forwarded, so the publication moves neither; those Slots keep their places before the pass and
 * their reads fail or return other bytes (caught in both modes).
 *
 * Also: a pass leaves the names it walked as rows. 2,000 names loaded by batches are closed and
 * reopened (the hint files defer every name); compact() — whose plan applies every deferred
 * entry — must leave each name with one generation-1 PUT a row (`rowsInUse`) and every value
 * readable, and the 200 names overwritten before the pass (two PUTs: Slots) and the 100 written
 * with a TTL (Slots) must not be rows; a stats(), a list() and a listSlots() then see every name
 * and leave the rows as they are (list's versions equal to what probe() says). Before the thirty-third session that pass, and any stats(), made a Slot of every
 * name (~253 B of JS heap per key at 200k: bench/heap-pass.mjs).
 *
 * And: a scope erasure or an export walks only its subtree (Keydir.anyInSubtree). After such a
 * pass, two sibling scopes are erased (lazily, then eagerly) and a third exported: only their own
 * names may stop being rows. Then, past the erasures' 24 h window, two passes must drop both
 * erasure records — the names written into an erased scope after it are rows whose one PUT is
 * newer, which keep no erasure — and after a reopen the erased names stay forgotten. Before the
 * thirty-fourth session each of these made a Slot of every row of the whole keydir.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeCompactForTests } from "../engine/keydir.js";
import { unsafePlanReuseForTests } from "../engine/compactor.js";
import type { BatchOp, OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";

const NAMES = 600;

afterEach(() => {
  unsafeCompactForTests.noForward = false;
  unsafePlanReuseForTests.afterPlan = null;
});

/** The value of name `row${i}`. */
function valueOf(i: number): string {
  return `value-${i}`.repeat(10);
}

/** How many of the row names read a wrong value (or throw) in `store`. */
function wrongReads(store: Store): number {
  let wrong = 0;
  for (let i = 0; i < NAMES; i++) {
    try {
      const got = store.readSync(`row${i}`);
      if (got.status !== "OK" || got.value !== valueOf(i)) wrong++;
    } catch {
      wrong++;
    }
  }
  return wrong;
}

/**
 * Loads the names as rows, compacts with half of them made Slots between the plan and the jobs,
 * and returns the wrong reads after the pass and after a reopen, and the rows before and after the hook.
 */
async function afterForwardedPass(mode: "in-place" | "copy-on-write", workers: number): Promise<{ wrongNow: number; wrongReopened: number; rowsBefore: number; rowsAfter: number }> {
  const dir = tempDir(`row-forward-${mode}-${workers}`);
  const options: OpenOptions = { durability: "none", segmentBytes: 32 * 1024, compaction: { workers, auto: false } };
  let s = await Store.open(dir, options);
  await s.batch(Array.from({ length: 200 }, (_, i) => ({ op: "write" as const, key: `old${i}`, value: "x".repeat(100) })));
  const batch: BatchOp[] = [];
  for (let i = 0; i < NAMES; i++) {
    batch.push({ op: "write", key: `row${i}`, value: valueOf(i) });
    if (i % 3 === 0) batch.push({ op: "write", key: `old${i % 200}`, value: "y".repeat(100) }); // garbage beside the rows
    if (batch.length >= 100) await s.batch(batch.splice(0));
  }
  if (batch.length > 0) await s.batch(batch);
  const store = s;
  const rowsBefore = store.keydir.rowsInUse;
  let rowsAfter = -1;
  unsafePlanReuseForTests.afterPlan = async () => {
    for (let i = 0; i < NAMES; i += 2) expect(store.keydir.get("global", `row${i}`)).toBeDefined();
    rowsAfter = store.keydir.rowsInUse;
  };
  const report = await store.compact({ mode });
  unsafePlanReuseForTests.afterPlan = null;
  expect(report.segments.length).toBeGreaterThan(1);
  expect(store.keydir.rowsForwarded).toBe(0);
  const wrongNow = wrongReads(store);
  await store.close();
  s = await Store.open(dir, options);
  const wrongReopened = wrongReads(s);
  await s.close();
  return { wrongNow, wrongReopened, rowsBefore, rowsAfter };
}

describe("a row made a Slot between a plan and its publication is moved as that Slot", () => {
  for (const mode of ["in-place", "copy-on-write"] as const) {
    for (const workers of [0, 1]) {
      it(`${mode}, workers ${workers}: every name keeps its value; the twin that frees the row loses some`, async () => {
        const safe = await afterForwardedPass(mode, workers);
        expect(safe.rowsBefore).toBeGreaterThanOrEqual(NAMES);
        expect(safe.rowsAfter).toBe(safe.rowsBefore - NAMES / 2);
        expect(safe.wrongNow).toBe(0);
        expect(safe.wrongReopened).toBe(0);
        unsafeCompactForTests.noForward = true;
        const twin = await afterForwardedPass(mode, workers);
        expect(twin.rowsAfter).toBe(twin.rowsBefore - NAMES / 2);
        expect(twin.wrongNow).toBeGreaterThan(0);
        expect(twin.wrongReopened).toBe(0); // the records themselves were moved: only the pointers were stale
      }, 60_000);
    }
  }
});

describe("a pass over a reopened store leaves its plain names rows", () => {
  it("after a hinted reopen, compact() holds every name with one generation-1 PUT as a row, and every value reads", async () => {
    const dir = tempDir("row-forward-reopen");
    const options: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, compaction: { workers: 0, auto: false } };
    let s = await Store.open(dir, options);
    for (let i = 0; i < 2000; i += 100) {
      await s.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `row${i + j}`, value: valueOf(i + j) })));
    }
    await s.batch(Array.from({ length: 200 }, (_, j) => ({ op: "write" as const, key: `row${j * 10}`, value: `again-${j}` }))); // two PUTs each: Slots
    for (let j = 0; j < 100; j++) await s.write(`ttl${j}`, "short-lived", { ttlMs: 3_600_000 }); // an expiry: Slots
    await s.close();
    s = await Store.open(dir, options);
    expect(s.keydir.isDeferred).toBe(true);
    await s.compact({ mode: "in-place" });
    expect(s.keydir.isDeferred).toBe(false);
    expect(s.keydir.rowsInUse).toBe(2000 - 200);
    const stats = s.stats(); // counts rows as they are: makes no Slot of them
    expect(stats.liveSlots).toBe(2000 + 100);
    expect(stats.slots).toBe(2000 + 100);
    expect(stats.scopes).toBe(1);
    const listed = [];
    for await (const e of s.list({ prefix: "row" })) listed.push(e);
    expect(listed.length).toBe(2000);
    expect(await s.listSlots("global", 5000)).toHaveLength(2000 + 100);
    expect(s.keydir.rowsInUse).toBe(2000 - 200);
    for (const e of listed) expect(e.version).toBe((await s.probe(e.key)).version); // the row's PUT, as a probe (which makes a Slot) tells it
    for (let i = 0; i < 2000; i++) {
      const got = s.readSync(`row${i}`);
      expect(got.status === "OK" ? got.value : got.status).toBe(i % 10 === 0 ? `again-${i / 10}` : valueOf(i));
    }
    for (let j = 0; j < 100; j++) expect(s.readSync(`ttl${j}`).status).toBe("OK");
    await s.close();
  }, 60_000);
});

/** A batch writing `count` names `${prefix}${i}` into `scope` (held as rows when new). */
function writesOf(scope: string, prefix: string, count: number): BatchOp[] {
  return Array.from({ length: count }, (_, i) => ({ op: "write" as const, key: `${prefix}${i}`, value: valueOf(i), scope }));
}

describe("a scope erasure and an export walk only their subtree", () => {
  it("forgetScope (lazy and eager) and export leave the other names rows; the erasure's record goes after its window, and its names stay forgotten", async () => {
    const dir = tempDir("row-forward-subtree");
    let now = 1_000_000_000;
    const options: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, clock: () => now, compaction: { workers: 0, auto: false } };
    let s = await Store.open(dir, options);
    for (let i = 0; i < 2000; i += 100) await s.batch(Array.from({ length: 100 }, (_, j) => ({ op: "write" as const, key: `row${i + j}`, value: valueOf(i + j) })));
    await s.batch([...writesOf("user:bob", "bob", 50), ...writesOf("user:bob/session:1", "one", 30), ...writesOf("user:bob/session:2", "two", 30)]);
    await s.close();
    s = await Store.open(dir, options);
    await s.compact({ mode: "in-place" });
    expect(s.keydir.rowsInUse).toBe(2000 + 50 + 60);
    await s.forgetScope("user:bob/session:1", { reclaim: "lazy" });
    expect(s.keydir.rowsInUse).toBe(2000 + 50 + 30); // the erased scope's names only were made Slots
    await s.forgetScope("user:bob/session:2", { reclaim: "eager" });
    expect(s.keydir.rowsInUse).toBe(2000 + 50);
    const values: string[] = [];
    let retained = 0;
    for await (const e of s.exportEntries({ scope: "user:bob" })) {
      if (e.kind === "value") values.push(e.key);
      else retained += 1; // the erased names' retention records
    }
    expect(values.sort()).toEqual(Array.from({ length: 50 }, (_, i) => `bob${i}`).sort());
    expect(retained).toBe(60);
    expect(s.keydir.rowsInUse).toBe(2000); // export probed each name of its subtree (a probe makes a Slot); no other
    await s.batch(writesOf("user:bob/session:1", "new", 10)); // written after the erasure: rows that do not keep it
    expect(s.keydir.rowsInUse).toBe(2000 + 10);
    now += 25 * 3_600_000; // past the erasures' retention window (24 h)
    await s.compact({ mode: "in-place" }); // drops the killed values
    await s.compact({ mode: "in-place" }); // then no older PUT under the scopes holds their erasures
    expect(s.keydir.erases.has("user:bob/session:1")).toBe(false);
    expect(s.keydir.erases.has("user:bob/session:2")).toBe(false);
    expect(s.keydir.rowsInUse).toBe(2000 + 10);
    await s.close();
    s = await Store.open(dir, options);
    for (let i = 0; i < 2000; i++) expect(s.readSync(`row${i}`, { scope: "global" }).status).toBe("OK");
    for (let i = 0; i < 50; i++) expect(s.readSync(`bob${i}`, { scope: "user:bob", inherit: false }).status).toBe("OK");
    for (let i = 0; i < 10; i++) expect(s.readSync(`new${i}`, { scope: "user:bob/session:1", inherit: false }).status).toBe("OK");
    for (let i = 0; i < 30; i++) {
      expect(s.readSync(`one${i}`, { scope: "user:bob/session:1", inherit: false }).status).not.toBe("OK");
      expect(s.readSync(`two${i}`, { scope: "user:bob/session:2", inherit: false }).status).not.toBe("OK");
    }
    await s.close();
  }, 60_000);
});
