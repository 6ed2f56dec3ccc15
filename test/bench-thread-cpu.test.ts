/**
 * The bench's per-thread CPU split (bench/common.ts `threadCpuUs`, `cpuSplit`), which its W1 and
 * compaction rows report (the main thread, the busiest other thread — a compaction's worker — and
 * the rest: V8's compiler and GC helpers). Method: the split's arithmetic on two hand-made
 * readings (a thread that starts between them counts whole, one that ended counts nothing, the
 * main thread is the one whose id is the process's); then, on Linux, a real reading holds the main
 * thread, whose CPU over a 40 ms loop on it is above 0 and within the wall time around both
 * readings plus one scheduler tick. The tick is there because schedstat's first field is the
 * kernel's sum_exec_runtime, which for the thread that is running is only brought up to date at a
 * tick or a switch: each reading of the running main thread may lag by up to one tick (4 ms at
 * this machine's HZ=250, 10 ms at HZ=100), so a difference of two is off by at most one tick either
 * way. (With 2 ms and the wall taken inside the readings, CI saw 33.45 ms against 30.35 ms.)
 */
import { describe, expect, it } from "vitest";
import { cpuSplit, threadCpuUs } from "../bench/common.js";

describe("bench: CPU per thread", () => {
  it("splits two readings into the main thread, the busiest other thread and the rest", () => {
    const main = process.pid;
    const before = new Map([
      [main, 1_000],
      [main + 1, 500],
      [main + 2, 200],
      [main + 9, 700], // ended before the second reading
    ]);
    const after = new Map([
      [main, 4_000],
      [main + 1, 2_500],
      [main + 2, 260],
      [main + 5, 900], // started after the first reading
    ]);
    expect(cpuSplit(before, after)).toEqual({ mainUs: 3_000, busiestUs: 2_000, restUs: 60 + 900 });
    expect(cpuSplit(before, new Map())).toEqual({ mainUs: NaN, busiestUs: NaN, restUs: NaN });
  });

  it.runIf(process.platform === "linux")("reads the main thread's CPU as it grows, never past the wall time", () => {
    const tickUsMax = 10_000; // one tick at HZ=100, the coarsest clock Linux builds with
    const t0 = performance.now();
    const first = threadCpuUs();
    expect(first.get(process.pid)).toBeGreaterThan(0);
    let x = 0;
    while (performance.now() - t0 < 40) x = (x * 31 + 7) % 1_000_003;
    const split = cpuSplit(first, threadCpuUs());
    const wallUs = (performance.now() - t0) * 1000;
    expect(x).toBeGreaterThanOrEqual(0);
    // The loop ran on this thread (vitest runs a file on a child process's main thread: forks).
    expect(split.mainUs).toBeGreaterThan(0);
    expect(split.mainUs).toBeLessThanOrEqual(wallUs + tickUsMax); // one thread: at most the wall time around both readings
  });
});
