/**
 * W5's floor stores (bench/w5-floor.ts, blind, and bench/w5-floor-answers.ts, answering as the
 * contract asks), the least-work stores whose W5 times the bench reports beside the goal: their
 * figures only mean something if they do W5 correctly and read nothing they did not write, and
 * the answering one's only if it answers. Method: W5 at a small size through measureW5Floor
 * (which throws on any wrong value), for each; a byte of a stored value flipped on disk between a
 * close and a reopen, which the read must refuse (its crc32) rather than return; the answering
 * store's decisions read back through its state() across closes and opens — a forget of nothing
 * writes no record (the blind store, its twin, writes one), a write after a forget takes the next
 * generation, an overwrite keeps it; the floors reading their log through mmap (bench/native-mmap.ts,
 * built here with the machine's C compiler): W5 right, and a byte flipped in the file after a
 * first read seen by the next read (the mapping shows the file's bytes; the chunk reader, its
 * twin, returns the copy it already holds), and the addon refusing a mapping past the file's end
 * (a read there would raise SIGBUS); and the report's line that sets the floors against the best
 * peer's W5 time and engram's, from hand-made samples.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadMmap, type Mmap } from "../bench/native-mmap.js";
import { FloorStore, measureW5Floor } from "../bench/w5-floor.js";
import { AnsweringFloorStore } from "../bench/w5-floor-answers.js";
import { addSample, w5FloorLine, type Samples } from "../bench/report.js";
import type { BatchOp } from "../bench/adapters.js";

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

  for (const [name, open] of [
    ["blind", (dir: string) => FloorStore.open(dir, false)],
    ["answering", (dir: string) => AnsweringFloorStore.open(dir, false)],
  ] as const) {
    it(`refuses a value whose bytes changed on disk instead of returning them (${name})`, () => {
      const dir = tmp();
      const s = open(dir);
      s.batch([{ type: "put", key: "k", value: Buffer.from("value-bytes") }]);
      s.close();
      const log = path.join(dir, "log");
      const bytes = fs.readFileSync(log);
      const at = bytes.indexOf("value-bytes");
      expect(at).toBeGreaterThan(0);
      bytes[at] = (bytes[at] as number) ^ 0x01;
      fs.writeFileSync(log, bytes);
      const again = open(dir);
      expect(() => again.get("k")).toThrow(/crc32/);
    });
  }
});

describe("W5's answering floor store", () => {
  it("runs W5 with every value right and reports each phase under its own names", () => {
    const m = measureW5Floor(tmp(), 4000, true);
    for (const id of ["seconds", "delete.seconds", "rewrite.seconds", "verify.seconds", "reopenMs"]) {
      expect(m[`limit.w5floor.answers.${id}`]).toBeGreaterThan(0);
      expect(m[`limit.w5floor.${id}`]).toBeUndefined();
    }
  });

  it("writes no record for a forget of nothing, where the blind store (its twin) writes one", () => {
    const dir = tmp();
    const grows = (s: { logBytes: number; batch(ops: readonly BatchOp[]): void }, ops: readonly BatchOp[]): number => {
      const before = s.logBytes;
      s.batch(ops);
      return s.logBytes - before;
    };
    const answering = AnsweringFloorStore.open(path.join(dir, "a"), false);
    const blind = FloorStore.open(path.join(dir, "b"), false);
    for (const s of [answering, blind]) {
      s.batch([{ type: "put", key: "here", value: Buffer.from("v") }]);
      const commitAlone = grows(s, []);
      const forgetNothing = grows(s, [{ type: "del", key: "never-written" }]);
      const forgetSomething = grows(s, [{ type: "del", key: "here" }]);
      expect(forgetSomething).toBeGreaterThan(commitAlone + "here".length);
      if (s === answering) expect(forgetNothing).toBe(commitAlone);
      else expect(forgetNothing).toBeGreaterThan(commitAlone + "never-written".length);
    }
    expect(answering.state("never-written")).toEqual({ kind: "none", generation: 0 });
    expect(answering.state("here")).toEqual({ kind: "del", generation: 1 });
    answering.close();
    blind.close();
  });

  it("decides generations as the contract does, across closes and opens", () => {
    const dir = tmp();
    let s = AnsweringFloorStore.open(dir, true);
    s.prepare();
    s.batch([
      { type: "put", key: "a", value: Buffer.from("a1") },
      { type: "put", key: "b", value: Buffer.from("b1") },
    ]);
    expect(s.state("a")).toEqual({ kind: "put", generation: 1 });
    s.batch([{ type: "del", key: "a" }]);
    expect(s.state("a")).toEqual({ kind: "del", generation: 1 });
    expect(s.get("a")).toBeUndefined();
    s.batch([{ type: "put", key: "a", value: Buffer.from("a2") }, { type: "put", key: "b", value: Buffer.from("b2") }]);
    expect(s.state("a")).toEqual({ kind: "put", generation: 2 }); // a write after a forget: the next generation
    expect(s.state("b")).toEqual({ kind: "put", generation: 1 }); // an overwrite keeps it
    s.batch([{ type: "del", key: "b" }]);
    s.close();
    s = AnsweringFloorStore.open(dir, true);
    expect(s.state("a")).toEqual({ kind: "put", generation: 2 });
    expect(s.state("b")).toEqual({ kind: "del", generation: 1 }); // from the table's cell
    expect(Buffer.from(s.get("a") as Uint8Array).toString()).toBe("a2");
    expect(s.get("b")).toBeUndefined();
    s.batch([{ type: "put", key: "b", value: Buffer.from("b3") }]);
    expect(s.state("b")).toEqual({ kind: "put", generation: 2 });
    s.close();
    s = AnsweringFloorStore.open(dir, false);
    expect(s.state("b")).toEqual({ kind: "put", generation: 2 });
    expect(Buffer.from(s.get("b") as Uint8Array).toString()).toBe("b3");
    expect(s.state("c")).toEqual({ kind: "none", generation: 0 });
    s.close();
  });
});

/** The mmap addon, built on first use; a test fails with the reason when it cannot be built here. */
function mmapAddon(): Mmap {
  const loaded = loadMmap();
  if (typeof loaded === "string") throw new Error(loaded);
  return loaded;
}

describe("W5's floor stores reading through mmap", () => {
  for (const answers of [false, true]) {
    it(`run W5 with every value right under the .mmap names (${answers ? "answering" : "blind"})`, () => {
      const m = measureW5Floor(tmp(), 4000, answers, mmapAddon());
      const prefix = answers ? "limit.w5floor.answers.mmap" : "limit.w5floor.mmap";
      for (const id of ["seconds", "delete.seconds", "rewrite.seconds", "verify.seconds", "reopenMs"]) expect(m[`${prefix}.${id}`]).toBeGreaterThan(0);
      expect(Object.keys(m).every((id) => id.startsWith(`${prefix}.`))).toBe(true);
    });
  }

  for (const mapped of [true, false]) {
    it(`${mapped ? "read the file's bytes as they are now" : "the twin, reading by chunks, returns the bytes it copied before"}`, () => {
      const dir = tmp();
      const s = AnsweringFloorStore.open(dir, true);
      s.prepare();
      if (mapped) s.mapLog(mmapAddon());
      s.batch([{ type: "put", key: "k", value: Buffer.from("value-bytes") }]); // written after the mapping was made
      expect(Buffer.from(s.get("k") as Uint8Array).toString()).toBe("value-bytes");
      const log = path.join(dir, "log");
      const at = fs.readFileSync(log).indexOf("value-bytes");
      expect(at).toBeGreaterThan(0);
      const fd = fs.openSync(log, "r+");
      fs.writeSync(fd, Buffer.from("V"), 0, 1, at);
      if (mapped) expect(() => s.get("k")).toThrow(/crc32/);
      else expect(Buffer.from(s.get("k") as Uint8Array).toString()).toBe("value-bytes");
      fs.writeSync(fd, Buffer.from("v"), 0, 1, at); // put back, for the close's scan of the log
      fs.closeSync(fd);
      s.close();
    });
  }

  it("maps nothing for an empty log and reads what is written after by chunks", () => {
    const s = AnsweringFloorStore.open(tmp(), false);
    s.mapLog(mmapAddon()); // the file is empty: the addon would refuse a length of 0
    s.batch([{ type: "put", key: "k", value: Buffer.from("after") }]);
    expect(Buffer.from(s.get("k") as Uint8Array).toString()).toBe("after");
    s.close();
  });

  it("the addon refuses a mapping past the file's end and a bad descriptor", () => {
    const mmap = mmapAddon();
    const file = path.join(tmp(), "f");
    fs.writeFileSync(file, "0123456789");
    const fd = fs.openSync(file, "r");
    try {
      expect(() => mmap.map(fd, 11)).toThrow(/SIGBUS/);
      expect(Buffer.from(mmap.map(fd, 10)).toString()).toBe("0123456789");
      expect(() => mmap.map(-1, 10)).toThrow(/open descriptor/);
      expect(() => mmap.map(fd, 0)).toThrow(/positive length/);
    } finally {
      fs.closeSync(fd);
    }
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
    expect(line).not.toContain("Answering");
    const both = w5FloorLine(samples, { "limit.w5floor.seconds": 0.8, "limit.w5floor.answers.seconds": 0.96 });
    expect(both).toContain("Answering as the contract asks (a state lookup before each write and forget): 0.960 s, 0.60× classic-level's; engram is 2.50× it.");
    expect(both).not.toContain("mmap");
    const all = w5FloorLine(samples, { "limit.w5floor.seconds": 0.8, "limit.w5floor.answers.seconds": 0.96, "limit.w5floor.answers.mmap.seconds": 0.64 });
    expect(all).toContain("The same, its log read through mmap (a native addon, as lmdb reads its file): 0.640 s, 0.40× classic-level's.");
    expect(w5FloorLine(samples, "not measured")).toBeNull();
    expect(w5FloorLine(samples, {})).toBeNull();
  });
});
