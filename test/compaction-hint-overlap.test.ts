/**
 * A compaction encodes its output's hint while the output's bytes (copy-on-write) or the
 * journal's (in-place) are written and fdatasynced on libuv's pool (engine/compaction-core.ts).
 * The hint must still be keyed by the header the segment has on disk when the hint is staged:
 * copy-on-write keys it by the header read back before the data write (and checks it again after),
 * in-place by the header the rewrite will write, compared with the one it did write and encoded
 * again on a mismatch.
 *
 * Method: a real store (32 KiB segments, three scopes, overwrites, forgets) is compacted in each
 * mode, inline and with a worker, twice (a second pass rewrites outputs of the first); it is
 * closed and reopened. Every segment must open from its hint (`opened.hinted` equals the segment
 * count), and the rebuilt state must equal what a scan of a hint-less copy rebuilds, field by
 * field; every value reads back. The twin (inline, where the test switches reach the worker code)
 * makes the in-place prediction wrong: with the check the hints are re-encoded and every segment
 * still opens hinted; without it the rewritten segments' hints name a header they do not have,
 * and the open must scan them — the count drops, which is what this test can see.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeHintOverlapForTests } from "../engine/compaction-core.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { openState, scannedState } from "./helpers/recovered-state.js";

type Mode = "copy-on-write" | "in-place";
const KEYS = 1200;
const SCOPES = ["global", "user:a", "user:a/notes"];

/** The options of a store of this test: small segments, no automatic compaction. */
function optsOf(mode: Mode, workers: number): OpenOptions {
  return { durability: "none", segmentBytes: 32 * 1024, compaction: { mode, workers, auto: false } };
}

/** The value key i holds after round `round` of writes. */
function valueOf(i: number, round: number): Uint8Array {
  return new TextEncoder().encode(`v${round}-${i}-`.padEnd(120 + (i % 40), "x"));
}

/** Writes every key, overwrites every third, forgets every fourth, compacts twice; returns the closed store's directory and what each key should read. */
async function build(mode: Mode, workers: number, label: string): Promise<{ dir: string; want: Map<string, Uint8Array | undefined> }> {
  const dir = tempDir(label);
  const s = await Store.open(dir, optsOf(mode, workers));
  const want = new Map<string, Uint8Array | undefined>();
  const name = (i: number): [string, string] => [SCOPES[i % SCOPES.length] as string, `k${i}`];
  for (let i = 0; i < KEYS; i += 100) {
    const ops = [];
    for (let j = i; j < i + 100; j++) {
      const [scope, key] = name(j);
      ops.push({ op: "write" as const, scope, key, value: valueOf(j, 1) });
      want.set(`${scope}/${key}`, valueOf(j, 1));
    }
    await s.batch(ops);
  }
  for (let i = 0; i < KEYS; i += 3) {
    const [scope, key] = name(i);
    await s.write(key, valueOf(i, 2), { scope });
    want.set(`${scope}/${key}`, valueOf(i, 2));
  }
  for (let i = 0; i < KEYS; i += 4) {
    const [scope, key] = name(i);
    await s.forget(key, { scope });
    want.set(`${scope}/${key}`, undefined);
  }
  const first = await s.compact({ mode });
  expect(first.segments.length).toBeGreaterThan(2);
  for (let i = 1; i < KEYS; i += 5) {
    const [scope, key] = name(i);
    await s.forget(key, { scope });
    want.set(`${scope}/${key}`, undefined);
  }
  const second = await s.compact({ mode });
  expect(second.segments.length).toBeGreaterThan(0);
  await s.close();
  return { dir, want };
}

/** Every key reads what `want` says, on a reopened store. */
async function expectValues(dir: string, opts: OpenOptions, want: ReadonlyMap<string, Uint8Array | undefined>): Promise<void> {
  const s = await Store.open(dir, opts);
  try {
    for (const [name, value] of want) {
      const cut = name.lastIndexOf("/");
      const got = s.readSync(name.slice(cut + 1), { scope: name.slice(0, cut) });
      if (value === undefined) expect(got.status, name).toBe("NOT_FOUND");
      else expect(got.status === "OK" && Buffer.from(got.value as Uint8Array).equals(Buffer.from(value)), name).toBe(true);
    }
  } finally {
    await s.close();
  }
}

afterEach(() => {
  unsafeHintOverlapForTests.mispredict = false;
  unsafeHintOverlapForTests.unchecked = false;
});

describe("a compaction's hint, encoded while its bytes are written, opens its output", () => {
  for (const mode of ["copy-on-write", "in-place"] as const) {
    for (const workers of [0, 1]) {
      it(`${mode}, ${workers === 0 ? "inline" : "worker"}: every segment opens hinted, as a scan rebuilds it`, async () => {
        const opts = optsOf(mode, workers);
        const { dir, want } = await build(mode, workers, `hint-overlap-${mode}-${workers}`);
        const reference = await scannedState(dir, opts, "hint-overlap-scan");
        const opened = await openState(dir, opts);
        expect(opened.segments).toBeGreaterThanOrEqual(2); // copy-on-write merges every source into one output
        expect(opened.hinted).toBe(opened.segments);
        expect(opened.state).toEqual(reference);
        await expectValues(dir, opts, want);
      }, 60_000);
    }
  }

  it("in-place, a wrong prediction of the rewritten header: re-encoded by the check, lost without it (twin)", async () => {
    const opts = optsOf("in-place", 0);
    unsafeHintOverlapForTests.mispredict = true;
    const checked = await build("in-place", 0, "hint-overlap-mispredict");
    const withCheck = await openState(checked.dir, opts);
    expect(withCheck.hinted).toBe(withCheck.segments);
    expect(withCheck.state).toEqual(await scannedState(checked.dir, opts, "hint-overlap-scan"));

    unsafeHintOverlapForTests.unchecked = true;
    const unchecked = await build("in-place", 0, "hint-overlap-unchecked");
    const without = await openState(unchecked.dir, opts);
    expect(without.hinted).toBeLessThan(without.segments); // the rewritten segments' hints name another header
    // Nothing is lost either way: a hint that does not match its header is never used, the open scans.
    expect(without.state).toEqual(await scannedState(unchecked.dir, opts, "hint-overlap-scan"));
    await expectValues(unchecked.dir, opts, unchecked.want);
  }, 60_000);
});
