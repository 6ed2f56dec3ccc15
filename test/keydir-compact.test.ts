/**
 * Compact rows (engine/compact-slots.ts): a batch's new names are held as rows of typed arrays,
 * not Slot objects, until anything asks for them. The property: a store with rows answers every
 * call exactly as a store without them, and no pass over all slots (compaction, GC, listing,
 * stats) misses a name held as a row.
 *
 * How it works: one seeded script drives two stores side by side, one whose keydir reserves rows
 * and one whose keydir does not (`compactRows.enabled` false when it opens). The script mixes what
 * reaches every path of a row: batches of new names (rows held), overwrites of names held as rows
 * (the row overwritten in place), forgets of them (the row made a Slot), forgets of absent names
 * (a reserved row taken back at once), writes with a TTL (a row that cannot hold the result:
 * applied as a Slot), a name twice in one batch, batches refused by a bad last op (every
 * reservation taken back), lone writes, undeletes, scope erasures, compactions in both modes and
 * reopens. Every call's result must be equal, and at checkpoints so must every name's probe and
 * read, the listings and stats; the rows must really have been in use (rowsInUse seen above
 * zero). A batch that overwrites names held as rows keeps them rows and leaves the keydir's
 * change count as it was (its plans stay in step). A read that makes a row a Slot while an
 * overwrite of it is queued frees the row's number, which the next batch's new names reuse: the
 * overwrite must still apply to its own names. Two twins: with `unsafeCompactForTests.keepStep`
 * (a Slot made of a held row moves nothing) the overwrite is applied to the new names' rows (under
 * tests a debug check in the store rejects it first; either way it is caught); with
 * `unsafeCompactForTests.skipRows` a pass leaves held rows unseen (no Slot made of them, none of
 * their records filed by the compaction plan's walk, which walks rows as they are), so their
 * records are dropped as garbage and the values are lost.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { compactRows, unsafeCompactForTests } from "../engine/keydir.js";
import type { BatchOp, OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

const SCOPES = ["global", "user:a", "user:a/session:1", "user:b"];
const STEPS = Number(process.env["ENGRAM_COMPACT_ROWS_STEPS"] ?? 160);

afterEach(() => {
  compactRows.enabled = true;
  unsafeCompactForTests.skipRows = false;
  unsafeCompactForTests.keepStep = false;
});

/** A store opened with rows on or off (the keydir reads the switch when it is made). */
async function openWith(dir: string, rows: boolean, options: OpenOptions): Promise<Store> {
  compactRows.enabled = rows;
  try {
    return await Store.open(dir, options);
  } finally {
    compactRows.enabled = true;
  }
}

/** The result of a call, or its error's code: both stores must give the same. */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return await call();
  } catch (err) {
    return { error: (err as { code?: string }).code ?? String(err) };
  }
}

/** Everything a caller can see of the names used so far. */
async function view(s: Store, names: ReadonlyArray<[string, string]>): Promise<unknown> {
  const probes: unknown[] = [];
  for (const [scope, key] of names) probes.push([scope, key, await s.probe(key, { scope }), s.readSync(key, { scope })]);
  const slots: unknown[] = [];
  for (const scope of SCOPES) slots.push(await s.listSlots(scope, 10_000));
  const st = s.stats();
  return { probes, slots, scopes: await s.listScopes(), counts: [st.slots, st.liveSlots, st.tombstones] };
}

describe("compact rows answer as Slots do", () => {
  it(`a seeded script of ${STEPS} steps gives equal results and views with rows on and off`, async () => {
    let now = 1_700_000_000_000;
    const options: OpenOptions = { durability: "none", segmentBytes: 64 * 1024, clock: () => now, compaction: { workers: 0, auto: false } };
    const dirs = [tempDir("rows-on"), tempDir("rows-off")];
    const stores = [await openWith(dirs[0] as string, true, options), await openWith(dirs[1] as string, false, options)];
    const random = rng(4242);
    const names: Array<[string, string]> = [];
    let fresh = 0;
    let rowsSeen = 0;
    const pick = (): [string, string] => (names.length === 0 || random() < 0.35 ? newName() : (names[Math.floor(random() * names.length)] as [string, string]));
    const newName = (): [string, string] => {
      const name: [string, string] = [SCOPES[Math.floor(random() * SCOPES.length)] as string, `k${fresh++}`];
      names.push(name);
      return name;
    };
    const value = (): string => `v${Math.floor(random() * 1e9)}`.repeat(1 + Math.floor(random() * 20));
    for (let step = 0; step < STEPS; step++) {
      now += 1000;
      const r = random();
      let call: (s: Store) => Promise<unknown>;
      if (r < 0.55) {
        const ops: BatchOp[] = [];
        const n = 1 + Math.floor(random() * 40);
        for (let i = 0; i < n; i++) {
          const [scope, key] = random() < 0.6 ? newName() : pick();
          const w = random();
          if (w < 0.7) ops.push({ op: "write", key, scope, value: value() });
          else if (w < 0.8) ops.push({ op: "write", key, scope, value: value(), ttlMs: 500 + Math.floor(random() * 5000) });
          else ops.push({ op: "forget", key: random() < 0.3 ? `absent${fresh++}` : key, scope });
          if (random() < 0.05) ops.push({ op: "write", key, scope, value: value() }); // the name twice in one batch
        }
        if (random() < 0.1) ops.push({ op: "write", key: "", scope: "global", value: "refused" }); // refused: nothing of the batch applies
        call = (s) => s.batch(ops);
      } else if (r < 0.65) {
        const [scope, key] = pick();
        const v = value(); // drawn once: both stores write the same
        call = (s) => s.write(key, v, { scope });
      } else if (r < 0.75) {
        const [scope, key] = pick();
        call = (s) => s.forget(key, { scope });
      } else if (r < 0.8) {
        const [scope, key] = pick();
        call = (s) => s.undelete(key, { scope });
      } else if (r < 0.83) {
        const scope = SCOPES[1 + Math.floor(random() * 3)] as string;
        call = (s) => s.forgetScope(scope);
      } else if (r < 0.9) {
        const mode = random() < 0.5 ? "in-place" : "copy-on-write";
        call = async (s) => {
          const report = await s.compact({ mode });
          return [report.recordsKept, report.recordsDropped];
        };
      } else if (r < 0.93) {
        for (let i = 0; i < 2; i++) {
          await (stores[i] as Store).close();
          stores[i] = await openWith(dirs[i] as string, i === 0, options);
        }
        continue;
      } else {
        expect(await view(stores[0] as Store, names)).toEqual(await view(stores[1] as Store, names));
        continue;
      }
      const a = await outcome(() => call(stores[0] as Store));
      rowsSeen = Math.max(rowsSeen, (stores[0] as Store).keydir.rowsInUse);
      const b = await outcome(() => call(stores[1] as Store));
      expect((stores[1] as Store).keydir.rowsInUse).toBe(0);
      expect(a, `step ${step}`).toEqual(b);
    }
    expect(await view(stores[0] as Store, names)).toEqual(await view(stores[1] as Store, names));
    expect(rowsSeen).toBeGreaterThan(0);
    for (const s of stores) await s.close();
  }, 120_000);
});

describe("a batch overwrites held rows in place", () => {
  it("a batch that overwrites bulk-loaded names keeps them rows and the keydir's change count (its plans stay in step)", async () => {
    const s = await Store.open(tempDir("rows-step"), { durability: "none", compaction: { workers: 0, auto: false } });
    await s.batch([{ op: "write", key: "first", value: "x" }]); // the scope's map
    await s.batch(Array.from({ length: 500 }, (_, i) => ({ op: "write" as const, key: `n${i}`, value: `v${i}` })));
    expect(s.keydir.rowsInUse).toBe(500);
    const before = s.keydir.changes;
    const written = await s.batch(Array.from({ length: 500 }, (_, i) => ({ op: "write" as const, key: `n${i}`, value: `w${i}` })));
    expect(s.keydir.rowsInUse).toBe(500);
    expect(s.keydir.changes).toBe(before);
    for (let i = 0; i < 500; i += 50) expect(await s.probe(`n${i}`)).toMatchObject({ state: "live", physicalRecords: 2, version: (written[i] as { version: number }).version });
    for (let i = 0; i < 500; i += 50) expect(s.readSync(`n${i}`)).toMatchObject({ status: "OK", value: `w${i}` });
    await s.close();
  });

  /**
   * Queues a batch overwriting held rows, reads those names before it applies (each read makes
   * the row a Slot and frees its number), queues a batch of new names (which reuse the freed
   * numbers), and returns the names whose value is not the last one written.
   */
  async function wrongAfterReuse(): Promise<string[]> {
    const s = await Store.open(tempDir("rows-reuse"), { durability: "sync", compaction: { workers: 0, auto: false } });
    await s.batch([{ op: "write", key: "first", value: "x" }]);
    await s.batch(Array.from({ length: 100 }, (_, i) => ({ op: "write" as const, key: `n${i}`, value: `v${i}` })));
    const overwrite = s.batch(Array.from({ length: 100 }, (_, i) => ({ op: "write" as const, key: `n${i}`, value: `w${i}` })));
    for (let i = 0; i < 100; i++) s.readSync(`n${i}`); // queued, not applied: each row made a Slot, its number freed
    const fresh = s.batch(Array.from({ length: 100 }, (_, i) => ({ op: "write" as const, key: `m${i}`, value: `u${i}` })));
    try {
      await Promise.all([overwrite, fresh]);
    } catch (err) {
      await s.close().catch(() => undefined);
      return [`rejected: ${String(err)}`]; // the store's debug check caught a plan applied to another name's row
    }
    const wrong: string[] = [];
    const expectValue = (key: string, value: string): void => {
      const got = s.readSync(key);
      if (got.status !== "OK" || got.value !== value) wrong.push(key);
    };
    for (let i = 0; i < 100; i++) expectValue(`n${i}`, `w${i}`);
    for (let i = 0; i < 100; i++) expectValue(`m${i}`, `u${i}`);
    await s.close();
    return wrong;
  }

  it("a queued overwrite of rows that reads made Slots meanwhile applies to its own names; without the change count (twin) it does not", async () => {
    expect(await wrongAfterReuse()).toEqual([]);
    unsafeCompactForTests.keepStep = true;
    expect((await wrongAfterReuse()).length).toBeGreaterThan(0);
  });
});

describe("a pass over all slots sees the names held as rows", () => {
  /**
   * Loads names as rows into segments that also hold overwritten values, compacts them, and
   * returns how many of the row names lost their value (read now and after a reopen).
   */
  async function lostAfterCompaction(mode: "in-place" | "copy-on-write"): Promise<{ lost: number; rows: number }> {
    const dir = tempDir(`rows-pass-${mode}`);
    const options: OpenOptions = { durability: "none", segmentBytes: 32 * 1024, compaction: { workers: 0, auto: false } };
    let s = await Store.open(dir, options);
    const old = Array.from({ length: 200 }, (_, i) => ({ op: "write" as const, key: `old${i}`, value: "x".repeat(100) }));
    await s.batch(old); // the scope's map is made here (its names are Slots)
    const fresh: BatchOp[] = [];
    for (let i = 0; i < 600; i++) {
      fresh.push({ op: "write", key: `row${i}`, value: `value-${i}`.repeat(10) });
      if (i % 3 === 0) fresh.push({ op: "write", key: `old${i % 200}`, value: "y".repeat(100) }); // garbage beside the rows
      if (fresh.length >= 100) await s.batch(fresh.splice(0));
    }
    if (fresh.length > 0) await s.batch(fresh);
    const rows = s.keydir.rowsInUse;
    await s.compact({ mode });
    let lost = 0;
    const check = (store: Store): void => {
      for (let i = 0; i < 600; i++) {
        let got: unknown;
        try {
          got = store.readSync(`row${i}`);
        } catch (err) {
          got = err;
        }
        if ((got as { value?: unknown }).value !== `value-${i}`.repeat(10)) lost++;
      }
    };
    check(s);
    await s.close();
    unsafeCompactForTests.skipRows = false;
    s = await Store.open(dir, options);
    check(s);
    await s.close();
    return { lost, rows };
  }

  for (const mode of ["in-place", "copy-on-write"] as const) {
    it(`${mode}: every name held as a row keeps its value; the twin that skips them loses some`, async () => {
      const safe = await lostAfterCompaction(mode);
      expect(safe.rows).toBeGreaterThan(500);
      expect(safe.lost).toBe(0);
      unsafeCompactForTests.skipRows = true;
      const twin = await lostAfterCompaction(mode);
      expect(twin.rows).toBeGreaterThan(500);
      expect(twin.lost).toBeGreaterThan(0);
    }, 60_000);
  }
});
