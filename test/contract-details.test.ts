/**
 * Contract details that a review found loose (issue 14 "Contract details"), one property each:
 * an explicit `scope: null` is a bad scope on every call (only an absent option means "global"),
 * and the package reports the version package.json declares. Method: each call with `scope: null`
 * must throw InvalidArgumentError, and afterwards the store holds exactly what it held before
 * (the stats' sequence does not move and a probe of the key stays absent).
 */
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError, VERSION } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const bad = (x: unknown): never => x as never;

describe("scope: null is refused, not taken for global", () => {
  let store: Engram;
  beforeAll(async () => {
    store = await Engram.open(tempDir("scope-null"), { compaction: { workers: 0 } });
  });
  afterAll(async () => {
    await store.close();
  });

  const calls: Array<[string, (s: Engram) => unknown]> = [
    ["write", (s) => s.write("k", "v", { scope: bad(null) })],
    ["read", (s) => s.read("k", { scope: bad(null) })],
    ["readSync", (s) => s.readSync("k", { scope: bad(null) })],
    ["forget", (s) => s.forget("k", { scope: bad(null) })],
    ["undelete", (s) => s.undelete("k", { scope: bad(null) })],
    ["probe", (s) => s.probe("k", { scope: bad(null) })],
    ["list", (s) => s.list({ scope: bad(null) })[Symbol.asyncIterator]().next()],
    ["forgetScope", (s) => s.forgetScope(bad(null))],
    ["batch", (s) => s.batch([{ op: "write", key: "k", value: "v", scope: bad(null) }])],
  ];
  for (const [name, call] of calls) {
    it(`${name} with scope: null throws INVALID_ARGUMENT and writes nothing`, async () => {
      const before = store.stats().sequence;
      await expect(Promise.resolve().then(() => call(store))).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(store.stats().sequence).toBe(before);
      expect((await store.probe("k")).state).toBe("absent");
    });
  }

  it("an absent scope still means global", async () => {
    const w = await store.write("absent-scope", "v");
    expect(await store.read("absent-scope", { scope: "global" })).toMatchObject({ status: "OK", version: w.version, scope: "global" });
  });
});

describe("VERSION", () => {
  it("is package.json's version, written in one place", () => {
    const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});
