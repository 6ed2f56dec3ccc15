/**
 * The failure matrix (io-failure-matrix.test.ts) driven through a client of a shared store: every
 * I/O fault point × {EIO, ENOSPC} × each compaction mode that reaches it, injected into the owner
 * (`owner.faults.failAt`; a client has no fault controls) while the script's calls come from a
 * client over the real Unix socket. Every agent host starts its own MCP server on one store, so
 * most calls of a shared store arrive this way, and a failure must reach them as it reaches the
 * owner's own callers.
 *
 * The properties: every client call settles within the deadline; a rejected one is an IoError
 * (its class and errno kept across the socket) with the injected errno, and is not applied; the
 * failure really fired in the owner; the client and the owner both read the model of acknowledged
 * state; both close; a reopened store agrees with the model and verifies clean. The script and the
 * model are the matrix's (test/helpers/fault-script.ts). Workers alternate between 0 and 1.
 */
import { describe, expect, it } from "vitest";
import { Engram, type FaultPoint, type OpenOptions } from "../src/index.js";
import { DEADLINE, matrixCases, runFaultScript, type Errno, type Mode } from "./helpers/fault-script.js";
import { guardUnhandledRejections, within } from "./helpers/io-faults.js";
import { shareFixture } from "./helpers/share-fixture.js";

guardUnhandledRejections();

const { storeDir, open } = shareFixture("share-faults");

/** One case through a client; returns the count of client calls rejected. */
async function runCase(point: FaultPoint, errno: Errno, mode: Mode, workers: number): Promise<number> {
  const dir = storeDir();
  const options: OpenOptions = { segmentBytes: 4096, retention: { tombstoneRetentionMs: 0 }, compaction: { mode, workers, auto: false } };
  const owner = await Engram.open(dir, { ...options, share: true, faults: {} });
  open.push(owner);
  const client = await Engram.open(dir, { share: true });
  open.push(client);
  expect([owner.role, client.role]).toEqual(["owner", "client"]);
  const what = `${point}/${errno}/${mode} through a client`;
  const { model, rejected } = await runFaultScript(client, () => owner.faults.failAt?.(point, errno, 1), errno, what);
  expect(owner.faults.failuresLeft?.() ?? 0, `${what}: the failure fired in the owner`).toBe(0);
  await model.check(client, `${what}: the client, before close`);
  await model.check(owner, `${what}: the owner, before close`);
  await within(DEADLINE, client.close(), `${what}: client close`);
  await within(DEADLINE, owner.close(), `${what}: owner close`);
  const again = await within(DEADLINE, Engram.open(dir, options), `${what}: reopen`);
  try {
    await model.check(again, `${what}: after reopen`);
    expect((await again.verify()).problems).toEqual([]);
  } finally {
    await again.close();
  }
  return rejected;
}

describe("every I/O point × {EIO, ENOSPC} in the owner, the calls from a client: IoError across the socket, no hang, nothing lost or back", () => {
  const cases = matrixCases();
  const ran: string[] = [];
  for (const c of cases) {
    it(`${c.point} ${c.errno} ${c.mode} (workers ${c.workers}), through a client`, async () => {
      const rejected = await runCase(c.point, c.errno, c.mode, c.workers);
      ran.push(`${c.point}/${c.errno}/${c.mode}: ${rejected} client call(s) rejected`);
    }, 60_000);
  }
  it("ran every case", () => {
    console.log(`share-fault-matrix: ${ran.length} cases\n  ${ran.join("\n  ")}`);
    expect(ran.length).toBe(cases.length);
    expect(ran.filter((r) => !r.includes(": 0 client")).length, "some failures reach a client call").toBeGreaterThan(cases.length / 2);
  });
});
