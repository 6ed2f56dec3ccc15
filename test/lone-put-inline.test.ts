/**
 * The synchronous commit of a lone durable put (engine/commit.ts `commitGroupNow`) keeps I1 and
 * I10. Method: a store opened without a fault table (a fault table sends every group through the
 * awaited path, so the fast path is only reachable without one) and the I/O observer of
 * segments/io.ts, which sees every successful system call synchronously, before it returns. One
 * event log takes, in order, each segment pwritev, each segment fdatasync and each caller's
 * acknowledgment (the put's promise callback); at each pwritev and fdatasync the observer also
 * reads the key being put with `readSync`. The detector then says, for every put, whether an
 * fdatasync of its segment lies between its pwritev and its acknowledgment and whether the key
 * was ever readable before that fdatasync. Its twin runs the same loop with durability "none"
 * (a store that acknowledges without any fdatasync) and must be caught. The observer also proves
 * the fast path ran (the fdatasync's stack passes through commitGroupNow), and, thrown from the
 * observer, stands for a failure just after a successful pwritev (`write:after-append`) or
 * fdatasync (`write:after-sync`): the put must be rejected, never visible, the store must take
 * the next put, and a reopen must hold exactly the acknowledged puts. Every wait has a deadline.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Engram, type OpenOptions } from "../src/index.js";
import { Store } from "../engine/store.js";
import { IoError } from "../rules/errors.js";
import { setIoObserver, type IoEvent } from "../segments/io.js";
import { tempDir } from "./helpers/tmp.js";
import { expectIoError, guardUnhandledRejections, settle, within } from "./helpers/io-faults.js";

guardUnhandledRejections();
afterEach(() => setIoObserver(null));

const T = 10_000;
const PUTS = 120;
const BASE: OpenOptions = { compaction: { workers: 0, auto: false } };

type Entry = { kind: "write" | "sync" | "ack"; key: string; visible: boolean; inline: boolean };

/** True for an event on a segment file (not the manifest, the lock or a hint). */
function onSegment(e: IoEvent): boolean {
  return "path" in e && e.path.endsWith(".seg");
}

/**
 * Puts PUTS keys one at a time, each awaited, logging every segment pwritev and fdatasync (with
 * whether the key in flight was readable then) and every acknowledgment, in the order they happen.
 */
async function logLonePuts(durability: "sync" | "none"): Promise<Entry[]> {
  const store = await Store.open(tempDir("lone-put"), { ...BASE, durability });
  const log: Entry[] = [];
  let current = "";
  setIoObserver((e) => {
    if (current === "" || !onSegment(e) || (e.op !== "write" && e.op !== "sync")) return;
    const inline = e.op === "sync" && (new Error().stack ?? "").includes("commitGroupNow");
    log.push({ kind: e.op, key: current, visible: store.readSync(current).status === "OK", inline });
  });
  try {
    for (let i = 0; i < PUTS; i++) {
      current = `k${i}`;
      const key = current;
      await within(T, store.write(key, `value ${i}`).then(() => log.push({ kind: "ack", key, visible: true, inline: false })), `put ${key}`);
    }
  } finally {
    current = "";
    setIoObserver(null);
    await store.close();
  }
  return log;
}

/** The puts of `log` acknowledged without an fdatasync after their pwritev, or readable before it. */
function violations(log: Entry[]): string[] {
  const bad: string[] = [];
  for (let i = 0; i < PUTS; i++) {
    const key = `k${i}`;
    const wrote = log.findIndex((e) => e.kind === "write" && e.key === key);
    const synced = log.findIndex((e, at) => at > wrote && e.kind === "sync" && e.key === key);
    const acked = log.findIndex((e) => e.kind === "ack" && e.key === key);
    if (wrote < 0 || acked < 0) bad.push(`${key}: not written or not acknowledged`);
    else if (synced < 0 || synced > acked) bad.push(`${key}: acknowledged with no fdatasync after its write (I1)`);
    if (log.some((e, at) => e.key === key && e.kind !== "ack" && e.visible && (synced < 0 || at <= synced))) bad.push(`${key}: readable before its fdatasync (I10)`);
  }
  return bad;
}

describe("a lone durable put committed in the drain's own turn", () => {
  it("is fdatasynced on the fast path before it is visible or acknowledged (I1, I10)", async () => {
    const log = await logLonePuts("sync");
    expect(violations(log)).toEqual([]);
    const syncs = log.filter((e) => e.kind === "sync");
    expect(syncs.length).toBeGreaterThanOrEqual(PUTS);
    expect(syncs.every((e) => e.inline)).toBe(true); // every put took commitGroupNow
  });

  it("twin: a store that acknowledges without fdatasync (durability none) is caught", async () => {
    const log = await logLonePuts("none");
    const bad = violations(log);
    expect(bad.length).toBe(PUTS);
    expect(bad.every((b) => b.includes("(I1)"))).toBe(true);
  });

  for (const point of ["write", "sync"] as const) {
    it(`a failure right after the ${point === "write" ? "pwritev (write:after-append)" : "fdatasync (write:after-sync)"} is never acknowledged nor visible, and the store goes on`, async () => {
      const dir = tempDir(`lone-put-${point}`);
      const store = await Store.open(dir, { ...BASE, durability: "sync" });
      for (let i = 0; i < 10; i++) await within(T, store.write(`a${i}`, `before ${i}`), "put before");
      let armed = true;
      let stackOfFailure = "";
      setIoObserver((e) => {
        if (!armed || !onSegment(e) || e.op !== point) return;
        armed = false;
        stackOfFailure = new Error().stack ?? "";
        throw new IoError("EIO", point === "write" ? "write" : "fdatasync", "thrown by the test's observer");
      });
      const failed = await settle(T, store.write("lost", "never acknowledged"), "failing put");
      setIoObserver(null);
      expect(stackOfFailure).toContain("commitGroupNow");
      expect(failed.ok).toBe(false);
      expectIoError((failed as { error: unknown }).error, "EIO");
      expect(store.readSync("lost").status).toBe("NOT_FOUND");
      for (let i = 0; i < 10; i++) await within(T, store.write(`b${i}`, `after ${i}`), "put after");
      expect(store.readSync("b9")).toMatchObject({ status: "OK", value: "after 9" });
      await within(T, store.close(), "close");
      const again = await Engram.open(dir, BASE);
      try {
        expect((await again.read("lost")).status).toBe("NOT_FOUND");
        for (let i = 0; i < 10; i++) {
          expect(await again.read(`a${i}`)).toMatchObject({ value: `before ${i}` });
          expect(await again.read(`b${i}`)).toMatchObject({ value: `after ${i}` });
        }
      } finally {
        await again.close();
      }
      const report = await Engram.verify(dir);
      expect(report).toMatchObject({ ok: true });
    });
  }
});
