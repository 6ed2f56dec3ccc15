/**
 * W5's floor store (bench/w5-floor.ts), the least-work store whose W5 time the bench reports
 * beside the goal: its figure only means something if it does W5 correctly and reads nothing it
 * did not write. Method: W5 at a small size through measureW5Floor (which throws on any wrong
 * value); a byte of a stored value flipped on disk between a close and a reopen, which the read
 * must refuse (its crc32) rather than return; and the report's line that sets the floor against
 * the best peer's W5 time and engram's, from hand-made samples.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FloorStore, measureW5Floor } from "../bench/w5-floor.js";
import { addSample, w5FloorLine, type Samples } from "../bench/report.js";

const dirs: string[] = [];
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "w5floor-test-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe("W5's floor store", () => {
  it("runs W5 with every value right and reports each phase", () => {
    const m = measureW5Floor(tmp(), 4000);
    for (const id of ["limit.w5floor.seconds", "limit.w5floor.delete.seconds", "limit.w5floor.rewrite.seconds", "limit.w5floor.verify.seconds", "limit.w5floor.reopenMs"]) {
      expect(m[id]).toBeGreaterThan(0);
    }
    const phases = (m["limit.w5floor.delete.seconds"] as number) + (m["limit.w5floor.rewrite.seconds"] as number) + (m["limit.w5floor.verify.seconds"] as number);
    expect(Math.abs((m["limit.w5floor.seconds"] as number) - phases)).toBeLessThan(1e-6);
  });

  it("keeps values, forgets and rewrites across a close and an open from its table", () => {
    const dir = tmp();
    const s = FloorStore.open(dir, true);
    s.prepare();
    s.batch([
      { type: "put", key: "a", value: Buffer.from("one") },
      { type: "put", key: "b", value: Buffer.from("two") },
    ]);
    s.batch([{ type: "del", key: "a" }, { type: "put", key: "b", value: Buffer.from("three") }]);
    expect(s.get("a")).toBeUndefined();
    expect(Buffer.from(s.get("b") as Uint8Array).toString()).toBe("three");
    s.close();
    const again = FloorStore.open(dir, false);
    expect(again.get("a")).toBeUndefined();
    expect(Buffer.from(again.get("b") as Uint8Array).toString()).toBe("three");
    expect(again.get("c")).toBeUndefined();
    again.close();
  });

  it("refuses a value whose bytes changed on disk instead of returning them", () => {
    const dir = tmp();
    const s = FloorStore.open(dir, false);
    s.batch([{ type: "put", key: "k", value: Buffer.from("value-bytes") }]);
    s.close();
    const log = path.join(dir, "log");
    const bytes = fs.readFileSync(log);
    const at = bytes.indexOf("value-bytes");
    expect(at).toBeGreaterThan(0);
    bytes[at] = (bytes[at] as number) ^ 0x01;
    fs.writeFileSync(log, bytes);
    const again = FloorStore.open(dir, false);
    expect(() => again.get("k")).toThrow(/crc32/);
  });
});

describe("the report sets the floor against the goal", () => {
  it("divides the floor by the best peer's W5 time and engram's by the floor", () => {
    const samples: Samples = new Map();
    addSample(samples, "engram", { "w5.seconds": 2.4 });
    addSample(samples, "classic-level", { "w5.seconds": 1.6 });
    addSample(samples, "lmdb", { "w5.seconds": 2.0 });
    const line = w5FloorLine(samples, { "limit.w5floor.seconds": 0.8 });
    expect(line).toContain("0.50× classic-level's");
    expect(line).toContain("3.00× the floor");
    expect(w5FloorLine(samples, "not measured")).toBeNull();
    expect(w5FloorLine(samples, {})).toBeNull();
  });
});
