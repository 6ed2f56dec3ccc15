/**
 * A client's list and export iterations, page by page: every entry the owner can export reaches
 * the client, and the limit on open iterations is a typed error.
 *
 * Method: an owner opened with `share: true` and a client on the same directory, in this process
 * (the socket between them is real). Three values of 1.3 MiB and one of 15 MiB are written: the
 * owner's first export page takes the three (~3.9 MiB), and before the fifty-third session took
 * the 15 MiB one too, past the frame limit (17 MiB), so the client's export failed with
 * LIMIT_EXCEEDED having returned nothing. Now an entry that would carry a page past
 * PAGE_BYTES_MAX waits for the next page: the client's export returns all four entries, each
 * value intact. The twin (`unsafeSharePagesForTests.overfill`, the rule before) fails that
 * export. Then 16 list iterations are left open on the client's connection and a 17th is
 * refused with a LimitExceededError (code LIMIT_EXCEEDED, a message that says what to do; it was
 * an InternalError "please report it"); once one of the 16 ends, a new one is served.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram, LimitExceededError } from "../src/index.js";
import { unsafeSharePagesForTests } from "../share/server.js";
import { tempDir } from "./helpers/tmp.js";

const MIB = 1024 * 1024;
const OPTS = { durability: "none" as const, compaction: { workers: 0 } };

afterEach(() => {
  unsafeSharePagesForTests.overfill = false;
});

/** An owner and a client of a fresh directory. */
async function pair(label: string): Promise<{ owner: Engram; client: Engram }> {
  const dir = tempDir(label);
  const owner = await Engram.open(dir, { ...OPTS, share: true });
  const client = await Engram.open(dir, { ...OPTS, share: true });
  expect([owner.role, client.role]).toEqual(["owner", "client"]);
  return { owner, client };
}

/** Writes the four values through the client; returns what its export yields (key and value length), or the error. */
async function exportBig(client: Engram): Promise<{ got: Array<[string, number]>; error: unknown }> {
  for (const k of ["a", "b", "c"]) await client.write(k, new Uint8Array(1.3 * MIB).fill(k.charCodeAt(0)));
  await client.write("d", new Uint8Array(15 * MIB).fill(0x64));
  const got: Array<[string, number]> = [];
  try {
    for await (const e of client.exportEntries()) {
      const value = (e as { value?: Uint8Array }).value;
      const key = (e as { key: string }).key;
      expect(value?.every((b) => b === key.charCodeAt(0)), `${key}'s bytes`).toBe(true);
      got.push([key, value?.length ?? -1]);
    }
  } catch (error) {
    return { got, error };
  }
  return { got, error: null };
}

describe("a client's cursors", () => {
  it("export: a value near the limit after a nearly full page reaches the client on the next page", async () => {
    const { owner, client } = await pair("share-pages");
    try {
      const { got, error } = await exportBig(client);
      expect(error).toBeNull();
      expect(got).toEqual([["a", Math.floor(1.3 * MIB)], ["b", Math.floor(1.3 * MIB)], ["c", Math.floor(1.3 * MIB)], ["d", 15 * MIB]]);
    } finally {
      await client.close();
      await owner.close();
    }
  });

  it("twin: a page that takes the big value past its bound fails the client's export", async () => {
    unsafeSharePagesForTests.overfill = true;
    const { owner, client } = await pair("share-pages-twin");
    try {
      const { error } = await exportBig(client);
      expect(error).toBeInstanceOf(LimitExceededError);
    } finally {
      await client.close();
      await owner.close();
    }
  });

  it("the 17th open iteration on one connection is a LimitExceededError; ending one makes room", async () => {
    const { owner, client } = await pair("share-cursors");
    try {
      for (let i = 0; i < 600; i++) await client.write(`k${String(i).padStart(4, "0")}`, "v");
      const open: Array<AsyncIterator<unknown>> = [];
      for (let i = 0; i < 16; i++) {
        const it = client.list()[Symbol.asyncIterator]();
        expect((await it.next()).done).toBe(false); // its first page (512 entries) leaves the cursor open
        open.push(it);
      }
      const extra = client.list()[Symbol.asyncIterator]();
      const refused = await extra.next().then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(LimitExceededError);
      expect((refused as LimitExceededError).code).toBe("LIMIT_EXCEEDED");
      expect((refused as Error).message).toMatch(/at most 16 .* finish or break out/);
      await open[0]?.return?.();
      let n = 0;
      for await (const _ of client.list()) n += 1;
      expect(n).toBe(600);
      for (const it of open.slice(1)) await it.return?.();
    } finally {
      await client.close();
      await owner.close();
    }
  });
});
