/**
 * compact-13: compaction threads run below the process's CPU priority (`compaction.niceness`,
 * default 10, Linux only), so that on a machine with few cores the thread serving the store's
 * calls goes first when a pass contends with it (W5's read-all waited 222–339 ms in the run queue
 * behind a pass: docs/performance-history.md, compact-13). The property is the threads' nice values,
 * read from /proc/self/task/<tid>/stat after a pass made the pool start its worker: the worker
 * runs at the main thread's nice plus the option, and no other thread moved. Twin: with
 * `niceness: 0` no thread of the process runs below the main thread. Bad values are
 * INVALID_ARGUMENT before anything is created.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { describe, expect, it } from "vitest";
import { Engram, InvalidArgumentError } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const linux = process.platform === "linux";

/** The nice value of every thread of this process, by thread id. */
function nices(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of fs.readdirSync("/proc/self/task")) {
    const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // after the command name: state is field 3
    out.set(Number(tid), Number(fields[16])); // field 19 of stat(5): nice
  }
  return out;
}

/** Opens a store with `niceness`, runs one compaction in its worker, and returns the threads' nice values while it is open. */
async function threadsAfterPass(niceness: number | undefined): Promise<Map<number, number>> {
  const dir = tempDir("priority-");
  const store = await Engram.open(dir, { durability: "none", segmentBytes: 4096, compaction: { workers: 1, auto: false, ...(niceness === undefined ? {} : { niceness }) } });
  try {
    for (let i = 0; i < 60; i++) await store.write(`k${i}`, "v".repeat(200), { scope: "user:a" });
    for (let i = 0; i < 60; i += 2) await store.forget(`k${i}`, { scope: "user:a" });
    await store.compact({ mode: "copy-on-write" });
    return nices();
  } finally {
    await store.close();
  }
}

describe.runIf(linux)("compaction threads' CPU priority", () => {
  it("runs the worker at the main thread's nice plus the default 10, and moves no other thread", async () => {
    const main = os.getPriority(0);
    const before = new Set(nices().keys());
    const after = await threadsAfterPass(undefined);
    const lowered = [...after].filter(([, nice]) => nice === Math.min(19, main + 10));
    expect(lowered.length).toBeGreaterThanOrEqual(1);
    for (const [tid] of lowered) expect(before.has(tid)).toBe(false); // a thread the store started
    expect(after.get(process.pid)).toBe(main);
    for (const [tid, nice] of after) if (before.has(tid)) expect(nice).toBe(main);
  }, 30_000);

  it("honours another niceness", async () => {
    const main = os.getPriority(0);
    const after = await threadsAfterPass(3);
    expect([...after.values()].filter((nice) => nice === Math.min(19, main + 3)).length).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it("twin: with niceness 0 no thread runs below the main thread", async () => {
    const main = os.getPriority(0);
    const after = await threadsAfterPass(0);
    expect([...after.values()].every((nice) => nice === main)).toBe(true);
  }, 30_000);
});

describe("compaction.niceness bad input", () => {
  it("is INVALID_ARGUMENT for a value outside 0..19 or not an integer, and creates nothing", async () => {
    for (const niceness of [-1, 20, 1.5, "10", null]) {
      const dir = tempDir("priority-bad-");
      const err: unknown = await Engram.open(dir, { compaction: { niceness: niceness as number } }).then(
        async (s) => {
          await s.close();
          return null;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect(fs.readdirSync(dir)).toEqual([]);
    }
  });
});
