/**
 * Many processes, one store: three real processes open one directory with `share: true` at the
 * same moment; exactly one becomes the owner and the others attach over its Unix socket.
 *
 * How it works: three test/helpers/share-child.ts processes are spawned together. Each makes 300
 * durable (`sync`) writes in its own scope, 4 in flight, and must get 300 acknowledgements; then
 * each reads the other two scopes and must find all 600 values, exact. All 900 versions must be
 * distinct (one store-wide commit sequence, decided by the owner). The clients close, then the
 * owner; the test process then opens the directory exclusively (no sharing) and finds every
 * acknowledged write with the version its writer was told. The protection-off twin runs the same
 * three processes without `share`: two of them must be refused with STORE_LOCKED, the failure
 * the issue reported, and the message names the exclusive holder.
 *
 * Property stressed: an acknowledged client call is an acknowledged owner call — nothing a
 * client was told is lost, and every process sees every other's writes.
 */
import * as fs from "node:fs";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { ShareProc, spawnedProcs, storeDir, type Tally } from "./helpers/share-proc.js";

const WRITES = 300;
const procs = spawnedProcs();
const tempDir = (): string => storeDir("share-p");

function spawnThree(dir: string, exclusive: boolean): ShareProc[] {
  const three = [0, 1, 2].map(() => new ShareProc(dir, 10_000, exclusive ? "exclusive" : "shared"));
  procs.push(...three);
  return three;
}

describe("three processes share one store", () => {
  it("300 durable writes each, every process reads the others', an exclusive reopen finds every ack", async () => {
    const dir = tempDir();
    const three = spawnThree(dir, false);
    const roles = await Promise.all(three.map((p) => p.opened()));
    expect(roles.filter((r) => r === "owner")).toHaveLength(1);
    expect(roles.filter((r) => r === "client")).toHaveLength(2);

    const tallies = (await Promise.all(three.map((p, n) => p.ask(`write p${n} 0 ${WRITES} 4`, "acked", 60_000)))) as unknown as Tally[];
    for (const t of tallies) {
      expect(t.lost).toEqual([]);
      expect(t.failed).toEqual([]);
      expect(t.acked).toHaveLength(WRITES);
    }
    const versions = tallies.flatMap((t) => t.acked.map(([, v]) => v));
    expect(new Set(versions).size).toBe(3 * WRITES);

    for (const [n, p] of three.entries()) {
      for (const other of [0, 1, 2].filter((o) => o !== n)) {
        expect(await p.ask(`check p${other} ${WRITES}`, "found")).toEqual({ found: WRITES, wrong: 0 });
      }
    }
    const owner = three[roles.indexOf("owner")] as ShareProc;
    for (const p of three.filter((x) => x !== owner)) await p.ask("close", "closed");
    await owner.ask("close", "closed");
    await Promise.all(three.map((p) => p.exited));

    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    try {
      expect(store.role).toBe("owner");
      for (const [n, t] of tallies.entries()) {
        for (const [i, version] of t.acked) {
          expect(await store.read(`k${i}`, { scope: `p${n}`, inherit: false })).toMatchObject({ status: "OK", value: `p${n}:${i}`, version });
        }
      }
    } finally {
      await store.close();
    }
  });

  it("twin without share: two of the three are refused with STORE_LOCKED naming the exclusive holder", async () => {
    const dir = tempDir();
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const three = spawnThree(dir, true);
    const opened = await Promise.all(three.map((p) => p.next((l) => l["ev"] === "open", 30_000, "its open")));
    const refused = opened.filter((l) => l["error"] === "STORE_LOCKED");
    expect(opened.filter((l) => l["role"] === "owner")).toHaveLength(1);
    expect(refused).toHaveLength(2);
    // The note in DIR/LOCK is written right after the flock: a refusal in that instant says only "lock held".
    for (const r of refused) expect(String(r["message"])).toMatch(/opened exclusively by pid \d+|lock held/);
    for (const p of three) if (opened[three.indexOf(p)]?.["role"] === "owner") await p.ask("close", "closed");
    await Promise.all(three.map((p) => p.exited));
  });
});
