/**
 * `EngramStore` (engram/langgraph) and U+0000 in what it stores: kept, on both of engram's backends.
 *
 * How it works. PostgreSQL's jsonb refuses the escape `\u0000` ("unsupported Unicode escape
 * sequence"), and LangGraph's PostgresStore writes `JSON.stringify(value)` into a jsonb column, so
 * a value holding NUL fails there. engram stores an item's JSON as bytes (the engine's records;
 * the PostgreSQL backend's `bytes BYTEA` column) and escapes NUL in its own key layout, so it has
 * no such limit, and the in-memory reference keeps such values too: EngramStore keeps them, and
 * docs/API.md says so. A value with NUL in a string, in an object key and inside an array, under
 * an item key that holds NUL itself, is put beside LangGraph's InMemoryStore; get, search
 * (plain, and with a filter on the NUL string) and a batch get must give the reference's answer
 * (times aside), on the engine and then after a reopen. The same runs on engram's PostgreSQL
 * backend (the throwaway cluster of test/setup/postgres.ts; skipped, with the reason in its name,
 * without one), where the row's `bytes` column must hold the JSON with its `\u0000` escape and
 * the same JSON cast to jsonb on that server must be refused, and the key cast to text — the
 * difference from PostgresStore (a jsonb value column, a text key column), shown on a real server
 * rather than asserted.
 *
 * Property stressed: a value the reference accepts reads back exactly, whatever the backend.
 */
import { InMemoryStore, type SearchItem } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { EngramStore, itemKey } from "../src/integrations/langgraph.js";
import { dropSchemas, PG_SKIP, PG_URL, storeUrl } from "./helpers/pg.js";
import { tempDir } from "./helpers/tmp.js";

const tag = `lgnul${process.pid}`;
afterAll(async () => {
  await dropSchemas(`${tag}_`);
});

/** A value with NUL in a string, an object key and an array. */
function withNul(): Record<string, unknown> {
  return { s: "a\u0000b", "k\u0000ey": 1, arr: ["\u0000", "x\u0000"], nested: { t: "\u0000\u0000" } };
}

const NS = ["nul"];
const KEY = "item\u0000key";

/** An item's public fields without its times (each store stamps its own). */
function untimed(items: Array<Omit<SearchItem, "score"> | null | undefined>): unknown[] {
  return items.map((i) => (i === null || i === undefined ? i : { namespace: i.namespace, key: i.key, value: i.value }));
}

/** Everything a caller can read of the item, from `store`. */
async function readings(store: EngramStore | InMemoryStore): Promise<unknown> {
  return {
    get: untimed([await store.get(NS, KEY)]),
    search: untimed(await store.search(NS)),
    filtered: untimed(await store.search(NS, { filter: { s: "a\u0000b" } })),
    missed: untimed(await store.search(NS, { filter: { s: "ab" } })),
    batch: untimed(await store.batch([{ namespace: NS, key: KEY }])),
  };
}

/** Puts the item into `engram` (through an EngramStore) and the reference; checks, reopens with `reopen`, checks again. */
async function roundTrip(engram: Engram, reopen: () => Promise<Engram>): Promise<void> {
  const ref = new InMemoryStore();
  await ref.put(NS, KEY, withNul());
  const expected = await readings(ref);
  expect((expected as { get: Array<{ value: unknown }> }).get[0]?.value, "the reference keeps NUL").toEqual(withNul());
  await new EngramStore(engram).put(NS, KEY, withNul());
  expect(await readings(new EngramStore(engram)), "as put").toEqual(expected);
  await engram.close();
  const again = await reopen();
  try {
    expect(await readings(new EngramStore(again)), "after a reopen").toEqual(expected);
  } finally {
    await again.close();
  }
}

describe("a value holding U+0000", () => {
  it("round-trips on the engine as in the reference, across a reopen", async () => {
    const dir = tempDir("lg-nul");
    const open = (): Promise<Engram> => Engram.open(dir, { compaction: { workers: 0 } });
    await roundTrip(await open(), open);
  });

  it.skipIf(PG_SKIP !== null)(`round-trips on engram's PostgreSQL backend (bytea), where jsonb refuses it${PG_SKIP === null ? "" : ` [skipped: ${PG_SKIP}]`}`, async () => {
    const schema = `${tag}_store`;
    const open = (): Promise<Engram> => Engram.open(storeUrl(schema));
    await roundTrip(await open(), open);
    const db = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      const row = await db.query(`SELECT convert_from(bytes, 'UTF8') AS json FROM "${schema}".engram_values WHERE key = $1`, [itemKey(NS, KEY)]);
      expect(row.rowCount, "one row under the escaped key").toBe(1);
      const json = (row.rows[0] as { json: string }).json;
      expect(json).toContain(String.raw`"a\u0000b"`);
      expect((JSON.parse(json) as { value: unknown }).value).toEqual(withNul());
      // What LangGraph's PostgresStore does with the same value: JSON.stringify into jsonb.
      await expect(db.query("SELECT $1::jsonb", [JSON.stringify(withNul())]), "jsonb refuses \\u0000").rejects.toThrow(/unsupported Unicode escape sequence/);
      // And its text key column: PostgreSQL's text holds no NUL byte.
      await expect(db.query("SELECT $1::text", [KEY]), "text refuses NUL").rejects.toThrow(/0x00/);
    } finally {
      await db.end();
    }
  });
});
