/**
 * The agent tool layer (src/tools.ts) over a real store (moved here from test/tools.test.ts; the
 * JSON Schema checks, which need no store, stay there).
 *
 * How it works: a table of bad calls (unknown tool, non-object arguments, missing and mistyped
 * keys, bad scopes, NaN / fractional / negative numbers, camelCase argument names, bad base64,
 * oversized values) is sent through handleToolCall; each must come back as an INVALID_ARGUMENT
 * wire error, and afterwards the store's commit sequence and slot count are unchanged and probe
 * reports the touched keys absent. Then every tool is called for real and its result compared
 * with the snake_case wire shapes of API.md: write, read (with inheritance and bytes as base64),
 * forget (tombstone only, null when nothing was live), probe, undelete, list, forget_scope, and
 * the error mapping (VERSION_CONFLICT with expected/actual, TOMBSTONED under require-clear).
 * Read-only mode and a bound default scope are checked on fresh stores.
 *
 * Properties stressed: a bad call never throws out of the handler and never writes; every
 * EngramError keeps its stable code on the wire.
 */
import { InvalidArgumentError, VersionConflictError } from "../../../rules/errors.js";
import type { OpenOptions } from "../../../rules/types.js";
import { handleToolCall, toWireError } from "../../tools.js";
import type { WireResult } from "../../tools.js";
import { expect } from "../expect.js";
import type { ConformanceStore, Harness } from "../harness.js";

const BAD_CALLS: Array<[label: string, name: string, args: unknown, message: RegExp]> = [
  ["unknown tool", "memory_delete", { key: "k" }, /unknown tool "memory_delete"/],
  ["empty tool name", "", { key: "k" }, /unknown tool/],
  ["no arguments", "memory_write", undefined, /key/],
  ["null arguments", "memory_write", null, /JSON object/],
  ["array arguments", "memory_write", [{ key: "k", value: "v" }], /JSON object/],
  ["string arguments", "memory_write", "k=v", /JSON object/],
  ["missing key", "memory_write", { value: "v" }, /key/],
  ["missing value", "memory_write", { key: "k" }, /value/],
  ["empty key", "memory_write", { key: "", value: "v" }, /key must not be empty/],
  ["key with NUL", "memory_write", { key: "a\u0000b", value: "v" }, /NUL/],
  ["key of 1025 bytes", "memory_write", { key: "x".repeat(1025), value: "v" }, /1024/],
  ["key of 1026 UTF-8 bytes", "memory_write", { key: "é".repeat(513), value: "v" }, /1024/],
  ["key with a lone surrogate", "memory_write", { key: "k\ud800", value: "v" }, /well-formed/],
  ["numeric key", "memory_write", { key: 42, value: "v" }, /key must be a string/],
  ["numeric value", "memory_write", { key: "k", value: 42 }, /value/],
  ["null value", "memory_write", { key: "k", value: null }, /value/],
  ["value with a lone surrogate", "memory_write", { key: "k", value: "\udc00" }, /value/],
  ["bad base64", "memory_write", { key: "k", value: { base64: "not base64!" } }, /value/],
  ["base64 with extra field", "memory_write", { key: "k", value: { base64: "aGk=", kind: "x" } }, /value/],
  ["value too large (engine check)", "memory_write", { key: "k", value: "x".repeat(65) }, /.+/],
  ["empty scope", "memory_write", { key: "k", value: "v", scope: "" }, /scope/],
  ["scope under global", "memory_write", { key: "k", value: "v", scope: "global/x" }, /scope/],
  ["scope with trailing slash", "memory_write", { key: "k", value: "v", scope: "user:alice/" }, /scope/],
  ["scope of 9 components", "memory_write", { key: "k", value: "v", scope: "a/b/c/d/e/f/g/h/i" }, /scope/],
  ["scope starting with -", "memory_write", { key: "k", value: "v", scope: "-x" }, /scope/],
  ["scope component of 65 chars", "memory_write", { key: "k", value: "v", scope: "x".repeat(65) }, /scope/],
  ["numeric scope", "memory_write", { key: "k", value: "v", scope: 7 }, /scope/],
  ["NaN expected_version", "memory_write", { key: "k", value: "v", expected_version: Number.NaN }, /expected_version/],
  ["Infinity expected_version", "memory_write", { key: "k", value: "v", expected_version: Infinity }, /expected_version/],
  ["fractional expected_version", "memory_write", { key: "k", value: "v", expected_version: 1.5 }, /integer/],
  ["negative expected_version", "memory_write", { key: "k", value: "v", expected_version: -1 }, />= 1/],
  ["string expected_version", "memory_write", { key: "k", value: "v", expected_version: "3" }, /expected_version/],
  ["string clear_tombstone", "memory_write", { key: "k", value: "v", clear_tombstone: "yes" }, /clear_tombstone/],
  ["zero ttl_ms", "memory_write", { key: "k", value: "v", ttl_ms: 0 }, /ttl_ms/],
  ["camelCase argument", "memory_write", { key: "k", value: "v", expectedVersion: 3 }, /snake_case/],
  ["read without key", "memory_read", {}, /key/],
  ["read with string inherit", "memory_read", { key: "k", inherit: "no" }, /inherit/],
  ["forget with bad scope", "memory_forget", { key: "k", scope: "global/" }, /scope/],
  ["forget with reclaim", "memory_forget", { key: "k", reclaim: "eager" }, /reclaim/],
  ["forget_scope without scope", "memory_forget_scope", {}, /scope/],
  ["forget_scope of global", "memory_forget_scope", { scope: "global" }, /refuses "global"/],
  ["forget_scope with bad reclaim", "memory_forget_scope", { scope: "user:a", reclaim: "now" }, /reclaim/],
  ["probe with array key", "memory_probe", { key: ["k"] }, /key/],
  ["undelete with extra field", "memory_undelete", { key: "k", extra: true }, /extra/],
  ["list with limit 0", "memory_list", { limit: 0 }, /limit/],
  ["list with limit 1001", "memory_list", { limit: 1001 }, /limit/],
  ["list with NaN limit", "memory_list", { limit: Number.NaN }, /limit/],
  ["list with numeric prefix", "memory_list", { prefix: 5 }, /prefix/],
];

/** Registers the tool-layer cases. */
export function toolCases(h: Harness): void {
  let opened: ConformanceStore | undefined;
  /** The bad-call table's store (maxValueBytes 64), opened by the first test that needs it. */
  const shared = async (): Promise<ConformanceStore> => {
    opened ??= await h.open({ maxValueBytes: 64 });
    return opened;
  };

  /** A fresh store of its own for tests that need an empty or specially configured one. */
  async function withFreshStore<T>(_name: string, fn: (s: ConformanceStore) => Promise<T>, opts: OpenOptions = {}): Promise<T> {
    const s = await h.open(opts);
    try {
      return await fn(s);
    } finally {
      await s.close();
    }
  }

  h.describe("bad calls", () => {
    for (const [label, name, args, message] of BAD_CALLS) h.it(`${label} -> INVALID_ARGUMENT, nothing written`, async () => {
      const store = await shared();
      const before = store.stats();
      const result = await handleToolCall(store, name, args);
      expect(result).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" });
      expect((result as { message: string }).message).toMatch(message);
      const after = store.stats();
      expect(after.sequence).toBe(before.sequence);
      expect(after.slots).toBe(0);
      expect((await store.probe("k")).state).toBe("absent");
    });

    h.it("the whole table left the store empty", async () => {
      const store = await shared();
      expect(store.stats().liveSlots).toBe(0);
      const listed = await handleToolCall(store, "memory_list", {});
      expect(listed).toEqual({ ok: true, entries: [], truncated: false });
      await store.close();
    });
  });

  h.describe("wire shapes", () => {
    h.it("write / read / forget / probe / undelete / list", async () => {
      await withFreshStore("shapes", async (s) => {
        const w = await handleToolCall(s, "memory_write", { key: "pref.theme", value: "dark" });
        expect(w).toEqual({ ok: true, version: expect.any(Number), generation: expect.any(Number) });
        const version = (w as { version: number }).version;

        const r = await handleToolCall(s, "memory_read", { key: "pref.theme" });
        expect(r).toEqual({ status: "OK", value: "dark", version, generation: expect.any(Number), scope: "global" });

        const p = await handleToolCall(s, "memory_probe", { key: "pref.theme" });
        expect(p).toEqual({
          state: "live",
          value_present: true,
          retention_present: true,
          physical_records: expect.any(Number),
          version,
          generation: expect.any(Number),
          tombstone_seq: null,
          expires_at: null,
        });

        const f = await handleToolCall(s, "memory_forget", { key: "pref.theme" });
        expect(f).toEqual({ ok: true, tombstone_seq: expect.any(Number), generation: expect.any(Number) });
        expect((f as { tombstone_seq: number }).tombstone_seq).toBeGreaterThan(version);
        expect(await handleToolCall(s, "memory_read", { key: "pref.theme" })).toEqual({ status: "NOT_FOUND" });
        expect(await handleToolCall(s, "memory_forget", { key: "pref.theme" })).toMatchObject({ ok: true, tombstone_seq: null });

        const pf = await handleToolCall(s, "memory_probe", { key: "pref.theme" });
        expect(pf).toMatchObject({ value_present: false, retention_present: true });
        expect(["tombstoned", "reclaimed"]).toContain((pf as { state: string }).state);

        const u = await handleToolCall(s, "memory_undelete", { key: "pref.theme" });
        expect(u).toEqual({ ok: true, generation: expect.any(Number) });
        const w2 = await handleToolCall(s, "memory_write", { key: "pref.theme", value: "light", expected_version: null });
        expect(w2).toMatchObject({ ok: true });
        expect((w2 as { generation: number }).generation).toBe((u as { generation: number }).generation);

        const l = await handleToolCall(s, "memory_list", {});
        expect(l).toEqual({ ok: true, entries: [{ key: "pref.theme", scope: "global", version: expect.any(Number) }], truncated: false });
      });
    });

    h.it("reads inherit from parent scopes and report where the value was found", async () => {
      await withFreshStore("inherit", async (s) => {
        await handleToolCall(s, "memory_write", { key: "lang", value: "en", scope: "user:alice" });
        const r = await handleToolCall(s, "memory_read", { key: "lang", scope: "user:alice/session:1" });
        expect(r).toMatchObject({ status: "OK", value: "en", scope: "user:alice" });
        const noInherit = await handleToolCall(s, "memory_read", { key: "lang", scope: "user:alice/session:1", inherit: false });
        expect(noInherit).toEqual({ status: "NOT_FOUND" });
      });
    });

    h.it("bytes travel as base64 and come back as base64", async () => {
      await withFreshStore("bytes", async (s) => {
        const base64 = Buffer.from([0, 1, 2, 255, 254]).toString("base64");
        await handleToolCall(s, "memory_write", { key: "blob", value: { base64 } });
        expect(await handleToolCall(s, "memory_read", { key: "blob" })).toMatchObject({ status: "OK", value: { base64 } });
        const stored = await s.read("blob");
        expect(stored.status === "OK" && stored.value instanceof Uint8Array).toBe(true);
      });
    });

    h.it("list honours limit, prefix and reports truncation", async () => {
      await withFreshStore("list", async (s) => {
        for (const k of ["a1", "a2", "a3", "b1"]) await s.write(k, k);
        const l = await handleToolCall(s, "memory_list", { prefix: "a", limit: 2 });
        expect(l).toEqual({
          ok: true,
          entries: [
            { key: "a1", scope: "global", version: expect.any(Number) },
            { key: "a2", scope: "global", version: expect.any(Number) },
          ],
          truncated: true,
        });
      });
    });

    h.it("forget_scope erases a scope and its descendants", async () => {
      await withFreshStore("scope", async (s) => {
        await s.write("k", "1", { scope: "user:bob" });
        await s.write("k", "2", { scope: "user:bob/session:1" });
        await s.write("k", "g");
        const r = await handleToolCall(s, "memory_forget_scope", { scope: "user:bob", reclaim: "eager" });
        expect(r).toMatchObject({ ok: true, tombstone_seq: expect.any(Number), slots: 2 });
        expect(await handleToolCall(s, "memory_read", { key: "k", scope: "user:bob/session:1" })).toMatchObject({ value: "g", scope: "global" });
      });
    });
  });

  h.describe("errors on the wire", () => {
    h.it("VERSION_CONFLICT carries expected and actual", async () => {
      await withFreshStore("conflict", async (s) => {
        const w = await s.write("k", "v");
        const r = await handleToolCall(s, "memory_write", { key: "k", value: "v2", expected_version: w.version + 100 });
        expect(r).toMatchObject({ ok: false, error: "VERSION_CONFLICT", expected: w.version + 100, actual: w.version });
        expect(await s.read("k")).toMatchObject({ value: "v" });
      });
    });

    h.it("TOMBSTONED under require-clear, then clear_tombstone succeeds", async () => {
      await withFreshStore(
        "require-clear",
        async (s) => {
          await s.write("k", "v1");
          await s.forget("k");
          const r = await handleToolCall(s, "memory_write", { key: "k", value: "v2" });
          expect(r).toMatchObject({ ok: false, error: "TOMBSTONED", tombstone_seq: expect.any(Number) });
          const ok = await handleToolCall(s, "memory_write", { key: "k", value: "v2", clear_tombstone: true });
          expect(ok).toMatchObject({ ok: true });
        },
        { tombstoneWrites: "require-clear" },
      );
    });

    h.it("toWireError keeps EngramError codes and maps anything else to INTERNAL", () => {
      expect(toWireError(new InvalidArgumentError("bad"))).toEqual({ ok: false, error: "INVALID_ARGUMENT", message: "bad" });
      expect(toWireError(new VersionConflictError(1, 2, "k"))).toMatchObject({ error: "VERSION_CONFLICT", expected: 1, actual: 2 });
      expect(toWireError(new Error("disk on fire"))).toMatchObject({ ok: false, error: "INTERNAL", message: /disk on fire/ });
    });

    h.it("a closed store is a CLOSED wire error, not a throw", async () => {
      const s = await h.open();
      await s.close();
      const r: WireResult = await handleToolCall(s, "memory_read", { key: "k" });
      expect(r).toMatchObject({ ok: false, error: "CLOSED" });
    });
  });

  h.describe("context", () => {
    h.it("read-only mode refuses mutating tools and writes nothing", async () => {
      await withFreshStore("ro", async (s) => {
        await s.write("k", "v");
        const seq = s.stats().sequence;
        for (const [name, args] of [
          ["memory_write", { key: "k", value: "x" }],
          ["memory_forget", { key: "k" }],
          ["memory_forget_scope", { scope: "user:a" }],
          ["memory_undelete", { key: "k" }],
        ] as const) {
          const r = await handleToolCall(s, name, args, { readOnly: true });
          expect(r).toMatchObject({ ok: false, error: "INVALID_ARGUMENT", message: /read-only/ });
        }
        expect(s.stats().sequence).toBe(seq);
        expect(await handleToolCall(s, "memory_read", { key: "k" }, { readOnly: true })).toMatchObject({ value: "v" });
      });
    });

    h.it("a bound default scope applies when scope is omitted, and an explicit scope wins", async () => {
      await withFreshStore("bound", async (s) => {
        const ctx = { defaultScope: "user:carol" };
        await handleToolCall(s, "memory_write", { key: "k", value: "carol" }, ctx);
        expect(await s.read("k", { scope: "user:carol", inherit: false })).toMatchObject({ value: "carol" });
        expect(await s.read("k", { inherit: false })).toEqual({ status: "NOT_FOUND" });
        await handleToolCall(s, "memory_write", { key: "k", value: "g", scope: "global" }, ctx);
        expect(await handleToolCall(s, "memory_read", { key: "k" }, ctx)).toMatchObject({ value: "carol", scope: "user:carol" });
      });
    });
  });
}
