/**
 * The PostgreSQL test server (test/setup/postgres.ts) as the test files see it: its URL or the
 * reason it is missing, a URL for one store (its own schema), and the cleanup of the schemas a
 * file created (so that a run against an outside server, ENGRAM_PG_URL, leaves nothing behind).
 */
import pg from "pg";

/** The server URL, or undefined. */
export const PG_URL: string | undefined = process.env["ENGRAM_PG_URL"] === "" ? undefined : process.env["ENGRAM_PG_URL"];

/** Why there is no server (null when there is one). */
export const PG_SKIP: string | null = PG_URL === undefined ? (process.env["ENGRAM_PG_SKIP"] ?? "no ENGRAM_PG_URL") : null;

/** The store URL for `schema` on the test server (keeps the server URL's own parameters). */
export function storeUrl(schema: string): string {
  const u = new URL(PG_URL as string);
  u.searchParams.set("schema", schema);
  return u.href;
}

/** Drops every schema whose name starts with `prefix` (the stores one test file created). */
export async function dropSchemas(prefix: string): Promise<void> {
  if (PG_URL === undefined) return;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  try {
    const res = await pool.query("SELECT schema_name FROM information_schema.schemata WHERE left(schema_name, $1) = $2", [prefix.length, prefix]);
    for (const r of res.rows as Array<{ schema_name: string }>) await pool.query(`DROP SCHEMA "${r.schema_name}" CASCADE`);
  } finally {
    await pool.end();
  }
}
