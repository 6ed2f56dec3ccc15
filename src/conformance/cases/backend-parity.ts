/**
 * Where the PostgreSQL backend once answered differently from the file engine for the same calls
 * (an audit of the fifty-third session, reproduced by running one script's operations against both
 * backends and comparing every read, probe and list after each step).
 *
 * How it works: each test opens a fresh store with an injected clock and a 10 s retention window,
 * drives a short fixed sequence, and checks the versions, generations and probes that the engine
 * gives — the reference — so that any backend must give them too: a batch spends one sequence on
 * its commit, an undelete's slot outlives the pass that drops the kill it cancelled, a slot that a
 * forgetScope kills after its value went is kept a window from the erasure, and a key first
 * written under a retained erasure reports that erasure as its tombstoneSeq. The fifty-fourth
 * session's second round added: a forget a later write superseded is forgotten at gc (one pass
 * later while the value it killed was still there), an erasure stays while an overwritten value
 * may remain, an expired value under an erasure that named its slot stays while the erasure does,
 * a slot an erasure alone killed goes with the erasure, an undelete's record is judged against the
 * forget's record (not a later erasure's kill, nor a forget whose record already went), and an
 * erasure over more than 4 MiB of names spends one more sequence. The third round follows the
 * engine's fifty-fourth session reopen rules (docs/ENGINE.md "The GC rule"): a forget whose record
 * went with the value it killed is forgotten (a later write shows no tombstoneSeq), an erasure
 * stays while an older erasure of an ancestor does, and a slot left with only its undelete takes
 * the undelete's generation. The fifty-fifth session's: an undelete's record that a later forget
 * made unneeded goes while something else holds the slot (the slot, emptied later, goes at once),
 * and a descendant's erasure that an ancestor's later one supersedes goes at the next gc on both
 * (the engine's gc recounts every file, so the one holding that record is rewritten too). The
 * fifty-sixth session's: an undelete that a later write superseded goes with that write's records
 * (before, the later value held it and the slot stayed "absent" at the undelete's generation a
 * window after the value went, or not, depending on whether a pass ran before the write:
 * `scripts/backend-diff.mjs --reopen` seed 32).
 *
 * Property stressed: the same operations give the same answers on every backend.
 */
import type { OpenOptions } from "../../../rules/types.js";
import { expect } from "../expect.js";
import type { Harness } from "../harness.js";

const RETENTION_MS = 10_000;

/** Runs `body` on a fresh store with a clock it moves (retention 10 s), and closes the store whatever `body` does. */
async function clocked(h: Harness, body: (c: { store: Awaited<ReturnType<Harness["open"]>>; advance: (ms: number) => void }) => Promise<void>): Promise<void> {
  let now = 1_700_000_000_000;
  const options: OpenOptions = { durability: "none", clock: () => now, retention: { tombstoneRetentionMs: RETENTION_MS } };
  const store = await h.open(options);
  try {
    await body({
      store,
      advance: (ms) => {
        now += ms;
      },
    });
  } finally {
    await store.close();
  }
}

/** Registers the parity cases. */
export function backendParityCases(h: Harness): void {
  h.describe("the same answers as the engine (backend parity)", () => {
    h.it("a batch spends one sequence on its commit: the next call's sequence is two above the batch's last op", () =>
      clocked(h, async ({ store }) => {
        const [a, b] = await store.batch([
          { op: "write", key: "a", value: "1" },
          { op: "write", key: "b", value: "2" },
        ]);
        expect(a).toMatchObject({ ok: true, version: 1 });
        expect(b).toMatchObject({ ok: true, version: 2 });
        expect((await store.write("c", "3")).version).toBe(4);
        const [f] = await store.batch([{ op: "forget", key: "a" }]);
        expect(f).toMatchObject({ ok: true, tombstoneSeq: 5 });
        expect((await store.forget("b")).tombstoneSeq).toBe(7);
        expect(await store.probe("c")).toMatchObject({ state: "live", version: 4 });
      }),
    );

    h.it("an undelete outlives the gc pass that drops the kill it cancelled: the next write takes the undelete's generation", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1");
        await store.forget("k");
        await store.gc(); // the value goes now: the kill's window runs from here
        advance(RETENTION_MS / 2);
        const u = await store.undelete("k");
        expect(u.generation).toBe(2);
        advance(RETENTION_MS / 2 + 1); // the kill's window has passed, the undelete is half-way through its own
        await store.gc();
        expect(await store.probe("k")).toMatchObject({ state: "absent", retentionPresent: true, version: null, generation: 2, tombstoneSeq: null });
        const w = await store.write("k", "v2");
        expect(w.generation).toBe(2);
      }),
    );

    h.it("forgetScope over a slot whose value already went keeps it a retention window from the erasure", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.forget("k", { scope: "a" });
        await store.gc(); // the value goes now
        advance(RETENTION_MS / 2);
        const e = await store.forgetScope("a");
        advance(RETENTION_MS / 2 + 1); // past the forget's window, inside the erasure's
        await store.gc();
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "reclaimed", retentionPresent: true, version: 1, generation: 1, tombstoneSeq: e.tombstoneSeq });
        expect((await store.write("k", "v2", { scope: "a" })).generation).toBe(2);
      }),
    );

    h.it("a key first written after an erasure of its scope or an ancestor reports the erasure as its tombstoneSeq", () =>
      clocked(h, async ({ store }) => {
        const e = await store.forgetScope("a");
        await store.write("k", "v", { scope: "a" });
        await store.write("k", "v", { scope: "a/b" });
        await store.write("k", "v", { scope: "c" });
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "live", tombstoneSeq: e.tombstoneSeq });
        expect(await store.probe("k", { scope: "a/b" })).toMatchObject({ state: "live", tombstoneSeq: e.tombstoneSeq });
        expect(await store.probe("k", { scope: "c" })).toMatchObject({ state: "live", tombstoneSeq: null });
        expect(await store.probe("never", { scope: "a" })).toMatchObject({ state: "absent", tombstoneSeq: null });
      }),
    );

    h.it("a forget that a later write superseded is forgotten at the gc pass that finds the write the slot's only value", () =>
      clocked(h, async ({ store }) => {
        await store.write("k", "v1");
        await store.forget("k");
        await store.gc(); // the forgotten value goes: the later write is the slot's only value
        await store.write("k", "v2", { clearTombstone: true });
        expect(await store.probe("k")).toMatchObject({ state: "live", version: 3, generation: 2, tombstoneSeq: 2 });
        await store.gc();
        expect(await store.probe("k")).toMatchObject({ state: "live", version: 3, generation: 2, tombstoneSeq: null });
        expect((await store.write("k", "v3")).generation).toBe(2);
      }),
    );

    h.it("a value a write overwrote counts until the next pass: the forget it superseded goes one pass later", () =>
      clocked(h, async ({ store }) => {
        await store.write("k", "v1");
        await store.forget("k");
        await store.write("k", "v2", { clearTombstone: true }); // the killed value's record is still there
        await store.gc(); // reclaims it; the forget still stood over a record when the pass began
        expect(await store.probe("k")).toMatchObject({ state: "live", version: 3, tombstoneSeq: 2 });
        await store.gc();
        expect(await store.probe("k")).toMatchObject({ state: "live", version: 3, tombstoneSeq: null });
      }),
    );

    h.it("an erasure stays while a value it may list is overwritten but not yet reclaimed", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        const e = await store.forgetScope("a");
        await store.write("k", "v2", { scope: "a", clearTombstone: true });
        await store.write("k", "v3", { scope: "a" }); // v2's record remains until a pass
        advance(RETENTION_MS + 1); // past the erasure's window
        await store.gc(); // v1 and v2 go; the erasure stays: they were there when the pass began
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "live", version: 4, tombstoneSeq: e.tombstoneSeq });
        await store.gc();
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "live", version: 4, tombstoneSeq: null });
      }),
    );

    h.it("an expired value written after an erasure that named its slot stays while that erasure does", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.write("x", "x1", { scope: "a" });
        const e = await store.forgetScope("a");
        await store.write("k", "v2", { scope: "a", clearTombstone: true, ttlMs: 100 });
        await store.gc(); // v1 and x1 go
        advance(RETENTION_MS + 101); // past the erasure's window and the expired value's
        await store.gc(); // the erasure held the value when the pass began: both stay this pass
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "expired", version: 4, generation: 2 });
        await store.gc();
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false });
        expect(e.tombstoneSeq).toBe(3);
      }),
    );

    h.it("an undelete outlives its forget's record by a pass also when a later erasure killed the slot again", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.forget("k", { scope: "a" });
        await store.gc(); // the value goes: the forget's window runs from here
        expect((await store.undelete("k", { scope: "a" })).generation).toBe(2);
        await store.forgetScope("a"); // kills the undeleted slot again
        advance(RETENTION_MS + 1);
        await store.gc(); // the erasure and the forget go; the undelete stays a pass, the kill forgotten
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: true, version: null, generation: 2, tombstoneSeq: null });
        await store.gc();
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false });
      }),
    );

    h.it("a forget whose record went while an erasure held its slot no longer holds the undelete when the erasure goes", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.forget("k", { scope: "a" });
        await store.gc(); // the value goes: the forget's window runs from here
        await store.undelete("k", { scope: "a" });
        advance(RETENTION_MS / 2);
        const e = await store.forgetScope("a"); // holds the slot for its own window
        advance(RETENTION_MS / 2 + 1);
        await store.gc(); // the forget's window passed: its record goes, the erasure holds the slot
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "reclaimed", retentionPresent: true, version: 1, tombstoneSeq: e.tombstoneSeq });
        advance(RETENTION_MS / 2);
        await store.gc(); // the erasure goes, and with nothing older to cancel the undelete goes too
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false });
        expect((await store.write("k", "v2", { scope: "a" })).generation).toBe(1);
      }),
    );

    h.it("an erasure whose list of names passes 4 MiB spends one more sequence (the engine's chunked records and their commit)", () =>
      clocked(h, async ({ store }) => {
        const pad = "k".repeat(1000);
        const ops = Array.from({ length: 4300 }, (_, i) => ({ op: "write" as const, scope: "big", key: `${pad}${i}`, value: "" }));
        await store.batch(ops); // sequences 1..4300, the commit 4301
        const e = await store.forgetScope("big"); // 4300 entries of ~1028 bytes: over 4 MiB
        expect(e.tombstoneSeq).toBe(4302);
        expect((await store.write("after", "v")).version).toBe(4304);
        const small = await store.forgetScope("other");
        expect(small.tombstoneSeq).toBe(4305);
        expect((await store.write("after", "v")).version).toBe(4306);
      }),
    );

    h.it("a slot an erasure alone killed goes with the erasure, not a window after its value", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.forgetScope("a");
        advance(RETENTION_MS / 2);
        await store.gc(); // the value goes now; the erasure's window runs from its commit
        advance(RETENTION_MS / 2 + 1);
        await store.gc(); // the erasure goes, and the slot with it
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false, tombstoneSeq: null });
        expect((await store.write("k", "v2", { scope: "a" })).generation).toBe(1);
      }),
    );

    h.it("a forget whose record went with the value it killed is forgotten: a later write shows no tombstoneSeq", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a/b" });
        await store.forget("k", { scope: "a/b" });
        await store.forgetScope("a/b", { reclaim: "eager" });
        advance(RETENTION_MS + 1);
        await store.write("j", "x", { scope: "a/b" });
        await store.write("j", "y", { scope: "a/b" }); // an overwritten value under the erasure holds it through the gc
        await store.gc(); // the forget's record goes, the erasure stays
        const w = await store.write("k", "v2", { scope: "a/b" });
        expect(w).toMatchObject({ version: 6, generation: 2 });
        await store.compact(); // the erasure goes
        expect(await store.probe("k", { scope: "a/b" })).toMatchObject({ state: "live", version: 6, generation: 2, tombstoneSeq: null });
      }),
    );

    h.it("an erasure stays while an older erasure of an ancestor does, and goes in a pass after it", () =>
      clocked(h, async ({ store, advance }) => {
        await store.forgetScope("a", { reclaim: "eager" });
        await store.write("k", "v1", { scope: "a/c" });
        await store.forgetScope("a/c", { reclaim: "eager" });
        await store.write("j", "x", { scope: "a/b" });
        await store.write("j", "y", { scope: "a/b" }); // holds the erasure of "a" through the first gc
        advance(RETENTION_MS + 1);
        await store.gc();
        expect(await store.probe("k", { scope: "a/c" })).toMatchObject({ state: "reclaimed", version: 2, generation: 1, tombstoneSeq: 3 });
        await store.gc();
        await store.gc();
        await store.gc();
        expect(await store.probe("k", { scope: "a/c" })).toMatchObject({ state: "absent", retentionPresent: false });
      }),
    );

    h.it("an undelete a later write superseded goes with that write's records: the slot is not left at the undelete's generation", () =>
      clocked(h, async ({ store, advance }) => {
        await store.write("k", "v1", { scope: "a" });
        await store.forget("k", { scope: "a" });
        expect((await store.undelete("k", { scope: "a" })).generation).toBe(2);
        await store.forgetScope("a", { reclaim: "eager" });
        expect((await store.write("k", "v2", { scope: "a" })).generation).toBe(3);
        await store.forgetScope("a");
        advance(RETENTION_MS + 1);
        await store.gc();
        await store.gc();
        expect(await store.probe("k", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false, version: null, generation: null, tombstoneSeq: null });
      }),
    );

    h.it("an undelete whose window ended is not held by a value written before any pass: the slot goes with the value", () =>
      clocked(h, async ({ store, advance }) => {
        const o = { scope: "a/b" };
        await store.write("k", "v1", o);
        await store.forget("k", o);
        expect((await store.undelete("k", o)).generation).toBe(2);
        advance(RETENTION_MS + 1);
        await store.gc();
        await store.gc();
        expect(await store.probe("k", o)).toMatchObject({ state: "absent", retentionPresent: true, generation: 2 });
        advance(RETENTION_MS + 1); // the undelete's window ends; no pass runs before the write
        await store.write("k", "v2", { ...o, ttlMs: 1000 });
        advance(2 * RETENTION_MS);
        await store.gc();
        await store.gc();
        expect(await store.probe("k", o)).toMatchObject({ state: "absent", retentionPresent: false, generation: null });
      }),
    );

    h.it("an undelete's record that a later forget made unneeded goes while the slot stays: the slot, emptied later, goes with its last record", () =>
      clocked(h, async ({ store, advance }) => {
        const o = { scope: "t" };
        await store.write("k", "v1", o);
        await store.forget("k", o);
        expect((await store.undelete("k", o)).generation).toBe(2);
        await store.write("k", "v2", o);
        await store.forget("k", o); // a forget later than the undelete: the undelete guards nothing now
        await store.gc(); // the undelete's record goes; the forget holds the slot
        expect((await store.write("k", "v3", o)).generation).toBe(3);
        await store.gc();
        await store.gc(); // the forget, superseded by v3, goes
        await store.forgetScope("t");
        advance(RETENTION_MS + 1);
        await store.gc(); // v3 goes (the erasure stays: v3 was older than it as the pass began)
        await store.gc(); // the erasure goes, and with it the slot's last record
        expect(await store.probe("k", o)).toMatchObject({ state: "absent", retentionPresent: false, generation: null });
        expect((await store.write("k", "v4", o)).generation).toBe(1);
      }),
    );

    h.itWith(["reopen"], "a descendant's erasure that an ancestor's later one supersedes goes at the next gc, and the ancestor's a pass later, before and after a reopen", async () => {
      let now = 1_700_000_000_000;
      const options: OpenOptions = { durability: "none", clock: () => now, retention: { tombstoneRetentionMs: RETENTION_MS } };
      let store = await h.open(options);
      const dir = store;
      try {
        await store.write("x", "live", { scope: "global" });
        await store.write("k", "v1", { scope: "a/b" });
        // Eager: on the engine the erasure's record is left in a rewritten file beside x, with no other garbage.
        await store.forgetScope("a/b", { reclaim: "eager" });
        await store.write("j", "v1", { scope: "a" });
        await store.forgetScope("a"); // supersedes the erasure of a/b
        now += RETENTION_MS + 1;
        await store.gc(); // a/b's goes (superseded); a's stays: a/b's was retained as the pass began, and j was there
        expect((await store.write("n", "v1", { scope: "a" })).version).toBe(6);
        expect(await store.probe("n", { scope: "a" })).toMatchObject({ state: "live", tombstoneSeq: 5 });
        expect(await store.probe("k", { scope: "a/b" })).toMatchObject({ state: "reclaimed", retentionPresent: true, tombstoneSeq: 5 });
        await store.gc(); // a's goes, and the slots only it held
        const after = async (): Promise<void> => {
          expect(await store.probe("n", { scope: "a" })).toMatchObject({ state: "live", tombstoneSeq: null });
          expect(await store.probe("k", { scope: "a/b" })).toMatchObject({ state: "absent", retentionPresent: false });
          expect(await store.probe("j", { scope: "a" })).toMatchObject({ state: "absent", retentionPresent: false });
        };
        await after();
        await store.close();
        store = await h.reopen(dir, options);
        await after();
        expect((await store.write("k", "v2", { scope: "a/b" })).generation).toBe(1);
      } finally {
        await store.close();
      }
    });
  });
}
