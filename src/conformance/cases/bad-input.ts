/**
 * Bad inputs, row by row: every one is an InvalidArgumentError that writes nothing (moved here
 * from test/bad-input.test.ts).
 *
 * How it works: one store (maxValueBytes 1024, so that "too large" is cheap) holds a few
 * committed values. For each row of the table the test snapshots stats().sequence and the
 * backend's fingerprint of everything it stores (the engine: the bytes of every segment file;
 * PostgreSQL: every row), makes the bad call, and asserts that it failed with an
 * InvalidArgumentError whose code is "INVALID_ARGUMENT" (whether the call threw synchronously or
 * rejected), that the sequence and the fingerprint are unchanged, and that the store still works
 * afterwards (a write and a read of a probe key succeed, and the earlier values are intact). The
 * table covers bad scopes, keys, values, per-call options, forgetScope / list / compact arguments
 * and batches — including a bad row after good rows, where nothing of the good rows may be
 * written. Bad OpenOptions are refused, and a refused open of an existing store changes nothing.
 *
 * Property stressed: validation happens before anything is queued or written, and a refused
 * call leaves no trace (API.md: "A bad scope or key is an InvalidArgumentError before anything is
 * written").
 */
import { InvalidArgumentError } from "../../../rules/errors.js";
import type { ListEntry, OpenOptions } from "../../../rules/types.js";
import { expect } from "../expect.js";
import type { ConformanceStore, Harness } from "../harness.js";

/** Passes a deliberately ill-typed argument through the typed API. */
export const bad = (x: unknown): never => x as never;

/** Runs a call that may throw synchronously, reject, or fail while iterating; returns the error. */
export async function failure(call: () => unknown): Promise<unknown> {
  try {
    const r = call();
    if (r !== null && typeof r === "object" && Symbol.asyncIterator in r) {
      for await (const _ of r as AsyncIterable<ListEntry>) void _;
    } else {
      await r;
    }
  } catch (err) {
    return err;
  }
  return null;
}

/** Checks that `err` is an InvalidArgumentError with a message. */
export function expectInvalid(err: unknown, row: string): void {
  expect(err, `${row}: must throw`).not.toBeNull();
  expect(err, `${row}: ${String(err)}`).toBeInstanceOf(InvalidArgumentError);
  expect((err as InvalidArgumentError).code, row).toBe("INVALID_ARGUMENT");
  expect((err as Error).message.length, row).toBeGreaterThan(0);
}

const MAX_VALUE = 1024;
const nine = Array.from({ length: 9 }, (_, i) => `c${i}`).join("/");
const comp65 = `a${"b".repeat(64)}`;

const BAD_SCOPES: Array<[string, unknown]> = [
  ["empty", ""],
  ["dot-dot", "../x"],
  ["double slash", "a//b"],
  ["leading slash", "/a"],
  ["trailing slash", "a/"],
  ["global as first component", "global/x"],
  ["global as later component", "a/global"],
  ["9 components", nine],
  ["65-char component", comp65],
  ["space", "user a"],
  ["leading dash", "-a"],
  ["non-ASCII", "üser"],
  ["NUL", "a\u0000b"],
  ["number", 42],
  ["object", { scope: "a" }],
  ["array", ["a"]],
  ["boolean", true],
];

const BAD_KEYS: Array<[string, unknown]> = [
  ["empty", ""],
  ["NUL", "a\u0000b"],
  ["1025 bytes", "k".repeat(1025)],
  ["1026 bytes of 2-byte chars", "é".repeat(513)],
  ["lone high surrogate", "a\uD800"],
  ["lone low surrogate", "\uDC00b"],
  ["number", 7],
  ["null", null],
  ["undefined", undefined],
  ["object", { key: "k" }],
];

const BAD_VALUES: Array<[string, unknown]> = [
  ["null", null],
  ["undefined", undefined],
  ["number", 42],
  ["boolean", false],
  ["object", { v: 1 }],
  ["array of numbers", [1, 2, 3]],
  ["ArrayBuffer", new ArrayBuffer(4)],
  ["Uint16Array", new Uint16Array(2)],
  ["string over maxValueBytes", "v".repeat(MAX_VALUE + 1)],
  ["multi-byte string over maxValueBytes", "é".repeat(MAX_VALUE / 2 + 1)],
  ["bytes over maxValueBytes", new Uint8Array(MAX_VALUE + 1)],
  ["lone surrogate string", "x\uD800"],
];

type Row = [string, (s: ConformanceStore) => unknown];

/** Every bad per-call row: a name and the call. */
export const rows: Row[] = [];
for (const [name, scope] of BAD_SCOPES) {
  rows.push([`write scope ${name}`, (s) => s.write("k", "v", { scope: bad(scope) })]);
  rows.push([`read scope ${name}`, (s) => s.read("k", { scope: bad(scope) })]);
  rows.push([`readSync scope ${name}`, (s) => s.readSync("k", { scope: bad(scope) })]);
  rows.push([`forget scope ${name}`, (s) => s.forget("k", { scope: bad(scope) })]);
  rows.push([`undelete scope ${name}`, (s) => s.undelete("k", { scope: bad(scope) })]);
  rows.push([`probe scope ${name}`, (s) => s.probe("k", { scope: bad(scope) })]);
  rows.push([`list scope ${name}`, (s) => s.list({ scope: bad(scope) })]);
  rows.push([`forgetScope ${name}`, (s) => s.forgetScope(bad(scope))]);
  rows.push([`batch row scope ${name}`, (s) => s.batch([{ op: "write", key: "k", value: "v", scope: bad(scope) }])]);
}
for (const [name, key] of BAD_KEYS) {
  rows.push([`write key ${name}`, (s) => s.write(bad(key), "v")]);
  rows.push([`read key ${name}`, (s) => s.read(bad(key))]);
  rows.push([`readSync key ${name}`, (s) => s.readSync(bad(key))]);
  rows.push([`forget key ${name}`, (s) => s.forget(bad(key))]);
  rows.push([`undelete key ${name}`, (s) => s.undelete(bad(key))]);
  rows.push([`probe key ${name}`, (s) => s.probe(bad(key))]);
  rows.push([`batch write key ${name}`, (s) => s.batch([{ op: "write", key: bad(key), value: "v" }])]);
  rows.push([`batch forget key ${name}`, (s) => s.batch([{ op: "forget", key: bad(key) }])]);
}
for (const [name, value] of BAD_VALUES) {
  rows.push([`write value ${name}`, (s) => s.write("k", bad(value))]);
  rows.push([`batch value ${name}`, (s) => s.batch([{ op: "write", key: "k", value: bad(value) }])]);
}
const BAD_WRITE_OPTS: Array<[string, unknown]> = [
  ["expectedVersion NaN", { expectedVersion: NaN }],
  ["expectedVersion -1", { expectedVersion: -1 }],
  ["expectedVersion 0", { expectedVersion: 0 }],
  ["expectedVersion 1.5", { expectedVersion: 1.5 }],
  ["expectedVersion '3'", { expectedVersion: "3" }],
  ["expectedVersion Infinity", { expectedVersion: Infinity }],
  ["expectedVersion 2^53", { expectedVersion: 2 ** 53 }],
  ["ttlMs 0", { ttlMs: 0 }],
  ["ttlMs -5", { ttlMs: -5 }],
  ["ttlMs NaN", { ttlMs: NaN }],
  ["ttlMs Infinity", { ttlMs: Infinity }],
  ["ttlMs '100'", { ttlMs: "100" }],
  ["clearTombstone 'yes'", { clearTombstone: "yes" }],
  ["clearTombstone 1", { clearTombstone: 1 }],
  ["options a string", "global"],
  ["options a number", 5],
  ["options an array", ["global"]],
];
for (const [name, opts] of BAD_WRITE_OPTS) {
  rows.push([`write ${name}`, (s) => s.write("k", "v", bad(opts))]);
  if (typeof opts === "object" && !Array.isArray(opts)) {
    rows.push([`batch row ${name}`, (s) => s.batch([{ op: "write", key: "k", value: "v", ...(opts as object) }])]);
  }
}
rows.push(
  ["read inherit 1", (s) => s.read("k", { inherit: bad(1) })],
  ["read inherit 'false'", (s) => s.read("k", { inherit: bad("false") })],
  ["readSync inherit 1", (s) => s.readSync("k", { inherit: bad(1) })],
  ["read options a string", (s) => s.read("k", bad("global"))],
  ["list inherit 1", (s) => s.list({ inherit: bad(1) })],
  ["list limit 0", (s) => s.list({ limit: 0 })],
  ["list limit -1", (s) => s.list({ limit: -1 })],
  ["list limit 1.5", (s) => s.list({ limit: 1.5 })],
  ["list limit NaN", (s) => s.list({ limit: NaN })],
  ["list limit '2'", (s) => s.list({ limit: bad("2") })],
  ["list prefix 42", (s) => s.list({ prefix: bad(42) })],
  // A missing scope is not "global" here: it would erase every scope (fifty-third session's audit).
  ["forgetScope without a scope", (s) => s.forgetScope(bad(undefined))],
  ["forgetScope reclaim 'now'", (s) => s.forgetScope("user:a", { reclaim: bad("now") })],
  ["forgetScope reclaim true", (s) => s.forgetScope("user:a", { reclaim: bad(true) })],
  ["compact mode 'x'", (s) => s.compact({ mode: bad("x") })],
  ["compact segments '1'", (s) => s.compact({ segments: bad("1") })],
  ["compact segments [1.5]", (s) => s.compact({ segments: [1.5] })],
  ["batch not an array (object)", (s) => s.batch(bad({ op: "write", key: "k", value: "v" }))],
  ["batch not an array (string)", (s) => s.batch(bad("write"))],
  ["batch null", (s) => s.batch(bad(null))],
  ["batch bad op name", (s) => s.batch([bad({ op: "delete", key: "k" })])],
  ["batch missing op", (s) => s.batch([bad({ key: "k", value: "v" })])],
  ["batch row null", (s) => s.batch([bad(null)])],
  ["batch row a number", (s) => s.batch([bad(5)])],
  [
    "batch: good rows, then a bad key",
    (s) => s.batch([{ op: "write", key: "good1", value: "1" }, { op: "forget", key: "a" }, { op: "write", key: "", value: "2" }]),
  ],
  [
    "batch: good rows, then a bad op",
    (s) => s.batch([{ op: "write", key: "good1", value: "1" }, { op: "write", key: "good2", value: "2", scope: "user:a" }, bad({ op: "erase", key: "b" })]),
  ],
  [
    "batch: good rows, then a value over maxValueBytes",
    (s) => s.batch([{ op: "write", key: "good1", value: "1" }, { op: "write", key: "good2", value: new Uint8Array(MAX_VALUE + 1) }]),
  ],
  [
    "batch: good rows, then a bad ttlMs",
    (s) => s.batch([{ op: "forget", key: "a" }, { op: "write", key: "good2", value: "2", ttlMs: -1 }]),
  ],
  // A misspelt option is refused, not ignored: `scop` read as no option writes to "global"
  // (fifty-fourth session; rules/option-names.ts). Names far from every known one still pass.
  ["write option 'scop'", (s) => s.write("k", "v", bad({ scop: "user:a" }))],
  ["write option 'Scope'", (s) => s.write("k", "v", bad({ Scope: "user:a" }))],
  ["write option 'expected_version'", (s) => s.write("k", "v", bad({ expected_version: 1 }))],
  ["write option 'ttl'", (s) => s.write("k", "v", bad({ ttl: 1000 }))],
  ["write option 'clearTombstones'", (s) => s.write("k", "v", bad({ clearTombstones: true }))],
  ["read option 'inherits'", (s) => s.read("k", bad({ inherits: false }))],
  ["readSync option 'scopes'", (s) => s.readSync("k", bad({ scopes: "user:a" }))],
  ["forget option 'scop'", (s) => s.forget("a", bad({ scop: "user:a" }))],
  ["undelete option 'scop'", (s) => s.undelete("a", bad({ scop: "user:a" }))],
  ["probe option 'scop'", (s) => s.probe("a", bad({ scop: "user:a" }))],
  ["forgetScope option 'reclam'", (s) => s.forgetScope("user:a", bad({ reclam: "eager" }))],
  ["list option 'prefx'", (s) => s.list(bad({ prefx: "a" }))],
  ["compact option 'mod'", (s) => s.compact(bad({ mod: "in-place" }))],
  ["batch row option 'scop'", (s) => s.batch([{ op: "write", key: "good1", value: "1" }, bad({ op: "write", key: "k", value: "v", scop: "user:a" })])],
  ["batch row field 'vaule'", (s) => s.batch([bad({ op: "write", key: "k", vaule: "v" })])],
);

/** Bad OpenOptions: each must be INVALID_ARGUMENT, on any backend. */
export const BAD_OPEN: Array<[string, unknown]> = [
  ["durability 'fast'", { durability: "fast" }],
  ["segmentBytes 10", { segmentBytes: 10 }],
  ["segmentBytes 1.5e4 + 0.5", { segmentBytes: 15_000.5 }],
  ["segmentBytes '4096'", { segmentBytes: "4096" }],
  ["syncIntervalMs 0", { syncIntervalMs: 0 }],
  ["maxValueBytes -1", { maxValueBytes: -1 }],
  ["compaction not an object", { compaction: "in-place" }],
  ["compaction.mode 'x'", { compaction: { mode: "x" } }],
  ["compaction.workers -1", { compaction: { workers: -1 } }],
  ["compaction.workers 1.5", { compaction: { workers: 1.5 } }],
  ["compaction.garbageRatio 2", { compaction: { garbageRatio: 2 } }],
  ["compaction.garbageRatio NaN", { compaction: { garbageRatio: NaN } }],
  ["compaction.auto 'yes'", { compaction: { auto: "yes" } }],
  ["tombstoneWrites 'x'", { tombstoneWrites: "x" }],
  ["faults.pauseAt ['nope']", { faults: { pauseAt: ["nope"] } }],
  ["faults.pauseAt not an array", { faults: { pauseAt: "read:after-authorize" } }],
  ["faults.crashAt 'nope'", { faults: { crashAt: "nope" } }],
  ["unsafe.gcKeyedBy 'seq'", { unsafe: { gcKeyedBy: "seq" } }],
  ["unsafe.skipReadValidation 'yes'", { unsafe: { skipReadValidation: "yes" } }],
  ["retention.ttlMs -1", { retention: { ttlMs: -1 } }],
  ["retention.ttlMs NaN", { retention: { ttlMs: NaN } }],
  ["retention.tombstoneRetentionMs -1", { retention: { tombstoneRetentionMs: -1 } }],
  ["retention.scopes bad pattern", { retention: { scopes: { "a//b": { ttlMs: 5 } } } }],
  ["retention.scopes ttlMs 0", { retention: { scopes: { "user:*": { ttlMs: 0 } } } }],
  ["clock not a function", { clock: 5 }],
  ["misspelt 'durabilty'", { durabilty: "none" }],
  ["misspelt 'shareTimeoutMS'", { shareTimeoutMs: undefined, shareTimeoutMS: 1000 }],
  ["misspelt 'retention.tombstoneRetentionMS'", { retention: { tombstoneRetentionMS: 1000 } }],
  ["misspelt 'unsafe.gcKeyedby'", { unsafe: { gcKeyedby: "tombstone-seq" } }],
  ["options a string", "sync"],
  ["options an array", []],
];

/** Registers the bad-input cases. */
export function badInputCases(h: Harness): void {
  h.describe("bad per-call inputs: InvalidArgumentError, nothing written, store still usable", () => {
    let opened: ConformanceStore | undefined;

    /** The table's store, opened by the first test that needs it (runners differ in their hooks). */
    const storeOf = async (): Promise<ConformanceStore> => {
      if (opened !== undefined) return opened;
      // Small segments keep the preallocated file (hashed twice per row) small.
      const s = await h.open({ durability: "none", maxValueBytes: MAX_VALUE, ...(h.supports.engineOptions ? { segmentBytes: 64 * 1024 } : {}) });
      await s.write("a", "A");
      await s.write("b", new Uint8Array([1, 2]), { scope: "user:a" });
      await s.write("gone", "G");
      await s.forget("gone");
      opened = s;
      return s;
    };

    let n = 0;
    for (const [row, call] of rows) h.it(row, async () => {
      const store = await storeOf();
      const fingerprint = (): Promise<string> => h.fingerprint(store);
      const seq = store.stats().sequence;
      const bytes = await fingerprint();
      const err = await failure(() => call(store));
      expectInvalid(err, row);
      expect(store.stats().sequence, `${row}: sequence moved`).toBe(seq);
      expect(await fingerprint(), `${row}: stored bytes changed`).toBe(bytes);
      // Nothing of a refused batch's good rows is visible.
      expect(await store.read("good1")).toEqual({ status: "NOT_FOUND" });
      expect(await store.read("good2", { scope: "user:a" })).toEqual({ status: "NOT_FOUND" });
      expect(await store.probe("good1")).toMatchObject({ state: "absent", retentionPresent: false });
      // Earlier values are intact and the store still takes writes.
      expect(await store.read("a")).toMatchObject({ status: "OK", value: "A" });
      expect(await store.read("b", { scope: "user:a" })).toMatchObject({ status: "OK", value: new Uint8Array([1, 2]) });
      expect(await store.read("gone")).toEqual({ status: "NOT_FOUND" });
      n += 1;
      const w = await store.write("alive", `row ${n}`);
      expect(w.version).toBeGreaterThan(seq);
      expect(await store.read("alive")).toMatchObject({ value: `row ${n}`, version: w.version });
    });

    h.it("the limits themselves are accepted: 1024-byte key, 8 components of 64 chars, maxValueBytes value", async () => {
      const store = await storeOf();
      const key = "é".repeat(512);
      const scope = Array.from({ length: 8 }, (_, i) => `${i}${"x".repeat(63)}`).join("/");
      await store.write(key, "v".repeat(MAX_VALUE), { scope });
      expect(await store.read(key, { scope })).toMatchObject({ status: "OK", value: "v".repeat(MAX_VALUE), scope });
      await store.write("k\u{1F600}", new Uint8Array(MAX_VALUE), { scope: "A.b_c:d@e-f" });
      expect(await store.read("k\u{1F600}", { scope: "A.b_c:d@e-f/x" })).toMatchObject({ status: "OK", scope: "A.b_c:d@e-f" });
      await store.close();
    });
  });


  h.it("bad input to a data call is a rejected promise, never a synchronous throw", async () => {
    const s = await h.open({ durability: "none" });
    try {
      const calls: Array<[string, () => Promise<unknown>]> = [
        ["write", () => s.write("", "v")],
        ["read", () => s.read("")],
        ["forget", () => s.forget("")],
        ["undelete", () => s.undelete("")],
        ["probe", () => s.probe("")],
        ["forgetScope", () => s.forgetScope("")],
        ["batch", () => s.batch(bad(null))],
      ];
      for (const [name, call] of calls) {
        let p: Promise<unknown> | null = null;
        let thrown: unknown = null;
        try {
          p = call();
        } catch (err) {
          thrown = err;
        }
        expect(thrown, `${name} threw synchronously`).toBeNull();
        await expect(p, name).rejects.toBeInstanceOf(InvalidArgumentError);
      }
    } finally {
      await s.close();
    }
  });

  h.describe("bad OpenOptions: InvalidArgumentError", () => {
    for (const [row, options] of BAD_OPEN) h.it(`${row}: refused`, async () => {
      const err = await failure(() => h.open(bad(options)));
      expectInvalid(err, row);
    });

    h.itWith(["reopen"], "an existing store is untouched by a refused open", async () => {
      const good: OpenOptions = { durability: "none" };
      const dir = await h.open(good);
      let s = dir;
      const w = await s.write("k", "v");
      await s.close();
      // The fingerprint is taken on a reopened store: closing may itself write (a sync mark), and
      // what must not change is what a refused open leaves behind, compared in the same state.
      s = await h.reopen(dir, good);
      const bytes = await h.fingerprint(s);
      await s.close();
      for (const [row, options] of BAD_OPEN) {
        expectInvalid(await failure(() => h.reopen(dir, bad(options))), row);
      }
      s = await h.reopen(dir, good);
      try {
        expect(await h.fingerprint(s), "stored bytes changed").toBe(bytes);
        expect(await s.read("k")).toMatchObject({ value: "v", version: w.version });
      } finally {
        await s.close();
      }
    });
  });
}
