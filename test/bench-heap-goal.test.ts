/**
 * The bench report's verdict on issue 11's heap goal (bench/report.ts ISSUE_11_GOALS): JS heap
 * per key ≤ 100 B after the reopen and, since the thirty-third session, also after the reopened
 * store's first compact() pass (W3's `heap.perKeyAfterPass`). Method: hand-made samples of the two
 * metrics go through `goalsTable`, and the heap goal's row must say met only when both medians are
 * within the bound; a run from before the second row existed (no samples of it) is judged on the
 * reopen's figure alone, as its report was.
 */
import { describe, expect, it } from "vitest";
import { addSample, goalsTable, type Samples } from "../bench/report.js";

/** The heap goal's row of goalsTable for engram samples `metrics` (one sample each). */
function heapRow(metrics: Record<string, number>): string {
  const samples: Samples = new Map();
  addSample(samples, "engram", metrics);
  const row = goalsTable(samples).split("\n").find((line) => line.startsWith("| JS heap per key after reopen |"));
  if (row === undefined) throw new Error("no heap goal row in the goals table");
  return row;
}

describe("the heap goal asks both figures", () => {
  it("met when the reopen and the pass are both within 100 B per key", () => {
    const row = heapRow({ "heap.perKey": 0.4, "heap.perKeyAfterPass": 78.7 });
    expect(row).toContain("78.7 B/key after a compact() pass");
    expect(row.endsWith("| met |")).toBe(true);
  });

  it("missed when the pass leaves more than 100 B per key, however lean the reopen", () => {
    const row = heapRow({ "heap.perKey": 0.4, "heap.perKeyAfterPass": 253 });
    expect(row.endsWith("| **missed** |")).toBe(true);
  });

  it("a report without the pass's figure is judged on the reopen alone", () => {
    expect(heapRow({ "heap.perKey": 0.4 }).endsWith("| met |")).toBe(true);
    expect(heapRow({ "heap.perKey": 136 }).endsWith("| **missed** |")).toBe(true);
  });
});
