/**
 * Regression tests for the API-surface defects of issue 9 (11, 13, 14, 15), each on the real
 * engine or the built CLI: naming a segment twice in compact() is one compaction, not a
 * CORRUPTION on a healthy store; gc/compact/verify/list report bad calls by rejecting (never a
 * synchronous throw), flush() after close() rejects, compact("in-place") and compact(42) are
 * InvalidArgumentErrors, and the tool schema's expected_version starts at 1; safeRewrite refuses
 * only a killed value (not one undeleted or merely expired); the CLI stores binary stdin byte for
 * byte and leaves an existing non-store directory untouched.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Engram, HalfReclaimedSlotError, InvalidArgumentError, StoreClosedError, listTools, safeRewrite, validateToolCall } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const FAST = { segmentBytes: 4096, compaction: { workers: 0, auto: false } } as const;

describe("defect 11: compact({segments: [1, 1]}) in place", () => {
  it("compacts segment 1 once and keeps every live value", async () => {
    const store = await Engram.open(tempDir("dup-seg"), { ...FAST, compaction: { mode: "in-place", workers: 0, auto: false } });
    try {
      for (let i = 0; i < 20; i++) await store.write(`k${i}`, `v${i}-${"d".repeat(300)}`);
      for (let i = 0; i < 20; i += 2) await store.forget(`k${i}`);
      const report = await store.compact({ segments: [1, 1] });
      expect(report.segments).toEqual([1]);
      for (let i = 1; i < 20; i += 2) expect(await store.read(`k${i}`)).toMatchObject({ value: `v${i}-${"d".repeat(300)}` });
    } finally {
      await store.close();
    }
  });
});

describe("defect 13: failures are rejections; closed is closed; bad compact options are refused", () => {
  it("gc, compact, verify and list reject (never throw synchronously) once closed; flush rejects too", async () => {
    const store = await Engram.open(tempDir("closed"), FAST);
    await store.write("k", "v");
    await store.close();
    const calls: Array<[string, () => unknown]> = [
      ["gc", () => store.gc()],
      ["compact", () => store.compact()],
      ["verify", () => store.verify()],
      ["flush", () => store.flush()],
      ["list", () => store.list()[Symbol.asyncIterator]().next()],
    ];
    for (const [name, call] of calls) {
      let result: unknown;
      expect(() => (result = call()), `${name} does not throw synchronously`).not.toThrow();
      await expect(result as Promise<unknown>, name).rejects.toBeInstanceOf(StoreClosedError);
    }
  });

  it('compact("in-place") and compact(42) are InvalidArgumentErrors', async () => {
    const store = await Engram.open(tempDir("bad-compact"), FAST);
    try {
      for (const bad of ["in-place", 42, [1]]) {
        await expect(store.compact(bad as never), String(bad)).rejects.toBeInstanceOf(InvalidArgumentError);
      }
    } finally {
      await store.close();
    }
  });

  it("the tool schema's expected_version minimum is 1, matching what the store accepts", () => {
    const write = listTools().find((t) => t.name === "memory_write");
    const schema = write?.inputSchema as { properties: Record<string, { minimum?: number }> };
    expect(schema.properties["expected_version"]?.minimum).toBe(1);
    expect(validateToolCall("memory_write", { key: "k", value: "v", expected_version: 0 }).ok).toBe(false);
    expect(validateToolCall("memory_write", { key: "k", value: "v", expected_version: 1 }).ok).toBe(true);
  });
});

describe("defect 14: safeRewrite refuses only a killed value", () => {
  it("after an explicit undelete it writes", async () => {
    const store = await Engram.open(tempDir("sr-undelete"), FAST);
    try {
      await store.write("k", "v1");
      await store.forget("k");
      await expect(safeRewrite(store, "k", "v2")).rejects.toBeInstanceOf(HalfReclaimedSlotError);
      await store.undelete("k");
      await expect(safeRewrite(store, "k", "v2")).resolves.toMatchObject({ ok: true });
      expect(await store.read("k")).toMatchObject({ value: "v2" });
    } finally {
      await store.close();
    }
  });

  it("on a key that merely expired it writes", async () => {
    let now = 1_000_000;
    const store = await Engram.open(tempDir("sr-expired"), { ...FAST, clock: () => now });
    try {
      await store.write("k", "v1", { ttlMs: 10 });
      now += 1000;
      expect(await store.read("k")).toEqual({ status: "NOT_FOUND" });
      await expect(safeRewrite(store, "k", "v2")).resolves.toMatchObject({ ok: true });
      expect(await store.read("k")).toMatchObject({ value: "v2" });
    } finally {
      await store.close();
    }
  });
});

describe("defect 15: the CLI", () => {
  const CLI = CLI_BIN;
  beforeAll(() => assertBuilt());
  const run = (args: string[], input?: Buffer): ReturnType<typeof spawnSync> =>
    spawnSync(process.execPath, [CLI, ...args], { input: input ?? Buffer.alloc(0), env: { ...process.env, NO_COLOR: "1" } });

  it("put from stdin stores binary bytes exactly", () => {
    const dir = tempDir("cli-bin");
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0xc3, 0x28, 0x41, 0x0a]);
    expect(run(["put", "--dir", dir, "blob"], bytes).status).toBe(0);
    const got = run(["get", "--dir", dir, "blob"]);
    expect(got.status).toBe(0);
    expect(Buffer.from(got.stdout as Buffer).subarray(0, bytes.length)).toEqual(bytes);
  });

  it("get on an existing non-store directory creates nothing in it", () => {
    const dir = tempDir("cli-notstore");
    fs.writeFileSync(path.join(dir, "notes.txt"), "mine");
    const got = run(["get", "--dir", dir, "k"]);
    expect(got.status).not.toBe(0);
    expect(fs.readdirSync(dir)).toEqual(["notes.txt"]);
  });
});
