/**
 * `valueBytesMax` (qualifier last, issue 14 "Names") and its older public name `maxValueBytes`.
 * Method: open real stores with each name, write a value one byte over the limit and one at it;
 * both names must enforce the same limit, and the same value given under both names is accepted.
 * Different values under the two names are refused at open with InvalidArgumentError, and the
 * directory is left uncreated. Twin: a store opened with neither takes the 16 MiB default, so the
 * over-limit value of the others is accepted there — the refusals come from the option, not the value.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError, type OpenOptions } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const FAST: OpenOptions = { durability: "none", compaction: { workers: 0, auto: false } };
const LIMIT = 64;

async function limitHolds(options: OpenOptions): Promise<void> {
  const store = await Engram.open(path.join(tempDir("alias"), "store"), { ...FAST, ...options });
  try {
    await expect(store.write("k", "v".repeat(LIMIT + 1))).rejects.toBeInstanceOf(InvalidArgumentError);
    expect((await store.write("k", "v".repeat(LIMIT))).ok).toBe(true);
  } finally {
    await store.close();
  }
}

describe("valueBytesMax and its older name maxValueBytes", () => {
  it("valueBytesMax bounds values", () => limitHolds({ valueBytesMax: LIMIT }));
  it("maxValueBytes still bounds values the same way", () => limitHolds({ maxValueBytes: LIMIT }));
  it("both names with one value are accepted", () => limitHolds({ valueBytesMax: LIMIT, maxValueBytes: LIMIT }));

  it("two different values are INVALID_ARGUMENT and create nothing", async () => {
    const dir = path.join(tempDir("alias-both"), "store");
    const err = await Engram.open(dir, { ...FAST, valueBytesMax: LIMIT, maxValueBytes: LIMIT * 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).code).toBe("INVALID_ARGUMENT");
    expect((err as Error).message).toMatch(/valueBytesMax/);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("twin: without either, the over-limit value is accepted (the default is 16 MiB)", async () => {
    const store = await Engram.open(path.join(tempDir("alias-none"), "store"), FAST);
    try {
      expect((await store.write("k", "v".repeat(LIMIT + 1))).ok).toBe(true);
    } finally {
      await store.close();
    }
  });
});
