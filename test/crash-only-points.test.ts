/**
 * Crash-only fault points are refused as pause points. Three points lie inside one synchronous
 * main-thread turn (a seal's truncate, a merged copy-on-write output's publication), where no
 * operation can pause: before this check, `pauseAt` naming one opened fine, never paused, and a
 * test's `waitFor` waited until its own deadline. Method: open with each such point in `pauseAt`
 * and expect INVALID_ARGUMENT naming it and `crashAt`, with no directory created; the same points
 * are still accepted as `crashAt`, and every other point still opens as a pause point (the twin
 * that shows the check is specific, not a refusal of `pauseAt` as a whole). The I/O points
 * (`IO_FAULT_POINTS`) are met in synchronous main-thread turns too (a commit's writev, a seal's
 * fdatasync): since the forty-seventh session `pauseAt` naming one is refused the same way (before,
 * it opened and never paused); they take `crashAt` (test/crash-io-points.test.ts) and `failAt`.
 */
import { mkdtempSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CRASH_ONLY_POINTS, Engram, FAULT_POINTS, IO_FAULT_POINTS, InvalidArgumentError } from "../src/index.js";

const root = mkdtempSync(path.join(tmpdir(), "engram-crash-only-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("crash-only fault points", () => {
  it("lists exactly the synchronous points, all of them known fault points", () => {
    expect([...CRASH_ONLY_POINTS].sort()).toEqual(["compaction:after-rename", "compaction:before-unlink", "seal:after-truncate"]);
    for (const p of CRASH_ONLY_POINTS) expect(FAULT_POINTS).toContain(p);
  });

  for (const point of CRASH_ONLY_POINTS) {
    it(`refuses pauseAt ${point} with INVALID_ARGUMENT and creates nothing`, async () => {
      const dir = path.join(root, `pause-${point.replace(/[^a-z]/g, "-")}`);
      const err = await Engram.open(dir, { faults: { pauseAt: [point] } }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as InvalidArgumentError).code).toBe("INVALID_ARGUMENT");
      expect((err as Error).message).toContain(point);
      expect((err as Error).message).toContain("crashAt");
      expect(existsSync(dir)).toBe(false);
    });

    it(`still takes ${point} as crashAt`, async () => {
      const dir = path.join(root, `crash-${point.replace(/[^a-z]/g, "-")}`);
      const store = await Engram.open(dir, { faults: { crashAt: point } });
      await store.close();
    });
  }

  for (const point of IO_FAULT_POINTS) {
    it(`refuses pauseAt ${point} (a system call's point) with INVALID_ARGUMENT and creates nothing`, async () => {
      const dir = path.join(root, `pause-${point.replace(/[^a-z]/g, "-")}`);
      const err = await Engram.open(dir, { faults: { pauseAt: ["write:after-append", point] } }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toContain(point);
      expect((err as Error).message).toContain("crashAt and failAt");
      expect(existsSync(dir)).toBe(false);
    });
  }

  it("twin: every other point still opens as a pause point", async () => {
    const pausable = FAULT_POINTS.filter((p) => !CRASH_ONLY_POINTS.includes(p) && !IO_FAULT_POINTS.includes(p));
    expect(pausable.length).toBeGreaterThan(5);
    const store = await Engram.open(path.join(root, "pausable"), { faults: { pauseAt: [...pausable] } });
    await store.close();
  });
});
