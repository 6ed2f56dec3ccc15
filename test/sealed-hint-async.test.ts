/**
 * Sealed hints are written off the commit turn (engine/hints.ts writeSealedHintAsync): the turn
 * that seals a segment encodes its hint and starts the file's write; the .tmp's fdatasync, the
 * rename and the directory fsync complete on libuv's pool. Until then the segment is
 * `hintWriting`, and three rules keep that invisible to everything but timing: a pass neither
 * takes the segment nor skips it (it waits: an in-place rewrite's hint must not be replaced by the
 * older hint landing after it, and an eager erasure must reach every file, I8), and flush() and
 * close() wait for the write (no write in the directory outlives the lock).
 *
 * Method: a store of 4 KiB segments; the gate `unsafeSealedHintForTests.hold` holds every sealed
 * hint's write after its encoding, so each state is reached deterministically, never by timing.
 * With the gate closed the write that sealed a segment has resolved, its hint is absent, and reads
 * and more writes succeed. close(), an in-place compact() of that segment and an eager
 * forgetScope() of a scope in two such segments are each
 * started with the gate closed, given 50 turns of the event loop, and the gate then opened: when
 * close resolves the hint is on disk; the pass compacts the segment and every sealed segment loads
 * from its hint at the next open (`opened.hinted`); no file holds an erased value once the erasure
 * resolves; every model value reads back. Each rule has a twin that must fail its check, awaited
 * with the gate still closed (so it fails deterministically): `inTurn` (the hint written, syncs
 * included, in the sealing turn) leaves the hint present when the write resolves;
 * `closeWithoutWait` resolves close with the hint missing, which the next open finds;
 * `takePending` lets the in-place pass rewrite the segment under its held hint, which then lands
 * stale (the next open scans the segment); `skipPending` resolves the eager erasure while a file
 * still holds the erased values.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { unsafeSealedHintForTests } from "../engine/hints.js";
import { hintFileName } from "../segments/hint.js";
import type { OpenOptions } from "../rules/types.js";
import { within } from "./helpers/io-faults.js";
import { tempDir } from "./helpers/tmp.js";

const DEADLINE = 30_000;
const OPTS: OpenOptions = { durability: "sync", segmentBytes: 4096, compaction: { workers: 1, auto: false } };
/** Turns of the event loop the tests let pass while a hint is held (see turns()). */
const TURNS = 50;

afterEach(() => {
  unsafeSealedHintForTests.inTurn = false;
  unsafeSealedHintForTests.closeWithoutWait = false;
  unsafeSealedHintForTests.hold = null;
  unsafeSealedHintForTests.takePending = false;
  unsafeSealedHintForTests.skipPending = false;
});

/** A gate: `hold` stays pending until `open()`. */
function gate(): { hold: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const hold = new Promise<void>((resolve) => (open = resolve));
  return { hold, open };
}

/** TURNS turns of the event loop (each setImmediate lets I/O callbacks run): a chance for a call that would not wait for a held hint to end before the gate opens. */
async function turns(): Promise<void> {
  for (let i = 0; i < TURNS; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** The value of key i: ~300 B, so that a 4 KiB segment holds about a dozen. */
function valueOf(tag: string, i: number): string {
  return `${tag}-${i}-`.padEnd(300, "v");
}

/** Writes values until the active segment is sealed; returns the sealed segment's id (the write that sealed it has resolved). */
async function writeUntilSealed(s: Store, model: Map<string, string>, tag: string, scope = "global"): Promise<number> {
  const first = s.log.activeSegment.id;
  for (let i = 0; s.log.activeSegment.id === first; i++) {
    expect(i, "a 4 KiB segment fills within 40 writes").toBeLessThan(40);
    const key = `${tag}${i}`;
    await s.write(key, valueOf(tag, i), { scope });
    model.set(`${scope}/${key}`, valueOf(tag, i));
  }
  return first;
}

/** Whether the hint file of segment `id` exists. */
function hintExists(dir: string, id: number): boolean {
  return fs.existsSync(path.join(dir, "segments", hintFileName(id)));
}

/** Every model value reads back (inherit off: each from its own scope). */
async function expectModel(s: Store, model: Map<string, string>): Promise<void> {
  for (const [name, value] of model) {
    const at = name.lastIndexOf("/");
    const r = await s.read(name.slice(at + 1), { scope: name.slice(0, at), inherit: false });
    expect(r, name).toMatchObject({ status: "OK", value });
  }
}

/** Reopens `dir`: how many of its segments loaded from hints, out of how many, after checking the model. */
async function reopened(dir: string, model: Map<string, string>): Promise<{ hinted: number; segments: number }> {
  const s = await Store.open(dir, OPTS);
  try {
    await expectModel(s, model);
    return { hinted: s.opened.hinted, segments: s.opened.segments };
  } finally {
    await s.close();
  }
}

describe("sealed hints written off the commit turn", () => {
  it("the write that seals a segment resolves before its hint is written; reads and writes go on meanwhile", async () => {
    const dir = tempDir("hint-async");
    const g = gate();
    unsafeSealedHintForTests.hold = g.hold;
    const s = await Store.open(dir, OPTS);
    const model = new Map<string, string>();
    const sealed = await writeUntilSealed(s, model, "a");
    expect(s.segments.get(sealed)?.hintWriting).not.toBeNull();
    expect(hintExists(dir, sealed)).toBe(false);
    await writeUntilSealed(s, model, "b"); // another seal, its hint held too
    await expectModel(s, model);
    g.open();
    await within(DEADLINE, s.flush(), "flush after the gate opened");
    expect(s.segments.get(sealed)?.hintWriting).toBeNull();
    expect(hintExists(dir, sealed)).toBe(true);
    await within(DEADLINE, s.close(), "close");
    const r = await reopened(dir, model);
    expect(r.hinted).toBe(r.segments);
  });

  it("twin (inTurn): the hint is written in the sealing turn, present when the write resolves", async () => {
    const dir = tempDir("hint-async-twin");
    unsafeSealedHintForTests.inTurn = true;
    unsafeSealedHintForTests.hold = gate().hold; // ignored in the turn: the write does not wait for it
    const s = await Store.open(dir, OPTS);
    const sealed = await writeUntilSealed(s, new Map(), "a");
    expect(hintExists(dir, sealed)).toBe(true);
    await within(DEADLINE, s.close(), "close");
  });

  it.each([false, true])("close() waits for a held hint (twin closeWithoutWait: %s)", async (twin) => {
    const dir = tempDir("hint-async-close");
    const g = gate();
    unsafeSealedHintForTests.hold = g.hold;
    unsafeSealedHintForTests.closeWithoutWait = twin;
    const s = await Store.open(dir, OPTS);
    const model = new Map<string, string>();
    const sealed = await writeUntilSealed(s, model, "a");
    const writing = s.segments.get(sealed)?.hintWriting ?? null;
    expect(writing).not.toBeNull();
    const closing = s.close();
    if (twin) {
      await within(DEADLINE, closing, "the twin's close, its hint held");
      expect(hintExists(dir, sealed)).toBe(false);
      const r = await reopened(dir, model);
      expect(r.hinted, "the sealed segment found without its hint").toBe(r.segments - 1);
      g.open();
      await within(DEADLINE, writing as Promise<boolean>, "the hint's write");
      return;
    }
    await turns();
    expect(hintExists(dir, sealed)).toBe(false); // held: close cannot have resolved
    g.open();
    await within(DEADLINE, closing, "close");
    expect(hintExists(dir, sealed), "written when close resolved").toBe(true);
    const r = await reopened(dir, model);
    expect(r.hinted).toBe(r.segments);
  });

  it.each([false, true])("an in-place compact() of a segment waits for its held hint (twin takePending: %s)", async (twin) => {
    const dir = tempDir("hint-async-compact");
    const s = await Store.open(dir, OPTS);
    const model = new Map<string, string>();
    await writeUntilSealed(s, model, "keep");
    await within(DEADLINE, s.flush(), "flush"); // the first segment's hint written: only the next one is held
    const g = gate();
    unsafeSealedHintForTests.hold = g.hold;
    unsafeSealedHintForTests.takePending = twin;
    const sealed = await writeUntilSealed(s, model, "a");
    const writing = s.segments.get(sealed)?.hintWriting ?? null;
    for (const name of [...model.keys()].filter((n) => n.startsWith("global/a")).slice(0, 6)) {
      await s.forget(name.slice("global/".length));
      model.delete(name);
    }
    const compacting = s.compact({ mode: "in-place", segments: [sealed] }); // by id: no seal of the active segment (its hint would be held too)
    if (twin) await within(DEADLINE, compacting, "the twin's compact, the hint held");
    else await turns();
    g.open();
    const report = await within(DEADLINE, compacting, "compact");
    expect(report.segments).toContain(sealed);
    await within(DEADLINE, writing as Promise<boolean>, "the hint's write");
    await within(DEADLINE, s.close(), "close");
    const r = await reopened(dir, model);
    // The twin's held hint, of the segment before its rewrite, lands after the rewrite's own: stale, so the open scans it.
    expect(r.hinted).toBe(twin ? r.segments - 1 : r.segments);
  });

  it.each([false, true])("an eager forgetScope() waits for a held hint and leaves no value on disk (twin skipPending: %s)", async (twin) => {
    const dir = tempDir("hint-async-eager");
    const g = gate();
    unsafeSealedHintForTests.hold = g.hold;
    unsafeSealedHintForTests.skipPending = twin;
    const s = await Store.open(dir, OPTS);
    const model = new Map<string, string>();
    const secrets = new Map<string, string>();
    await writeUntilSealed(s, secrets, "SECRET", "user:carol"); // the write that sealed went to the next segment
    await writeUntilSealed(s, model, "other", "user:dave"); // sealed too: the active segment holds no secret
    const onDisk = (): number => [...secrets.values()].filter((v) => filesHold(dir, v)).length;
    expect(onDisk()).toBe(secrets.size);
    const erasing = s.forgetScope("user:carol", { reclaim: "eager" });
    if (twin) {
      await within(DEADLINE, erasing, "the twin's erasure, the hint held");
      expect(onDisk(), "secrets on disk once the twin's erasure resolved").toBeGreaterThan(0);
    } else await turns();
    g.open();
    await within(DEADLINE, erasing, "forgetScope");
    if (!twin) expect(onDisk()).toBe(0);
    await within(DEADLINE, s.close(), "close");
    await reopened(dir, model);
  });
});

/** Whether any file under `dir` holds the bytes of `value`. */
function filesHold(dir: string, value: string): boolean {
  const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  return files.some((e) => fs.readFileSync(path.join(e.parentPath, e.name)).includes(Buffer.from(value)));
}
