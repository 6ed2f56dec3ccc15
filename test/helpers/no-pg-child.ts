/**
 * A child for test/postgres-optional.test.ts, started with test/helpers/no-pg-hooks.mjs
 * registered: every import of "pg" fails as if the package were not installed, and each attempt
 * is counted. It opens a directory store (which must never try to load pg), then a PostgreSQL
 * URL (which must fail with NOT_SUPPORTED naming the package), and prints one JSON line.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Engram } from "../../src/index.js";

const attempts = (): number => (globalThis as { __pgImports?: () => number }).__pgImports?.() ?? -1;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-nopg-"));
const store = await Engram.open(dir);
await store.write("k", "v");
const read = await store.read("k");
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
const afterDirectory = attempts();
let error: { code?: string; message?: string } = {};
try {
  await Engram.open("postgresql://engram@127.0.0.1:1/none");
} catch (err) {
  error = { code: (err as { code?: string }).code, message: (err as Error).message };
}
process.stdout.write(`${JSON.stringify({ read, afterDirectory, afterUrl: attempts(), error })}\n`);
