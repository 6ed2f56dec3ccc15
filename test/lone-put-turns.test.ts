/**
 * A lone writer's durable puts chain without an event-loop turn, but never more than
 * INLINE_GROUPS_PER_TURN of them in a row (engine/commit.ts drainNow).
 *
 * Method: a durable store with no fault table (so each lone put takes the inline fdatasync path)
 * takes PUTS awaited puts, one in flight. Beside them a setImmediate callback re-arms itself and
 * notes, at every event-loop turn, how many puts were acknowledged by then. The gaps between the
 * turns must never exceed INLINE_GROUPS_PER_TURN: timers, I/O callbacks and worker messages
 * still run while a writer loops. And the puts must chain: far fewer turns than puts, the turn a
 * put used to cost. A reopen then reads every put. The twin lifts the bound
 * (`unsafeDrainForTests.inlineGroupsPerTurn = Infinity`): the loop then starves the event loop,
 * and the same gap check fails. Every wait has a deadline.
 *
 * The same puts also start each drain without an async resource: an async_hooks hook counts the
 * "Microtask" resources made while they run (Node's queueMicrotask makes one, with a bound
 * function, per call: interpreted JS on every lone put of a short-lived process), and there must
 * be none. Its twin starts drains with queueMicrotask again (`unsafeDrainForTests
 * .viaQueueMicrotask`) and the count then reaches most of the puts.
 */
import { createHook } from "node:async_hooks";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "../engine/store.js";
import { INLINE_GROUPS_PER_TURN, unsafeDrainForTests } from "../engine/commit.js";
import type { OpenOptions } from "../rules/types.js";
import { tempDir } from "./helpers/tmp.js";
import { within } from "./helpers/io-faults.js";

afterEach(() => {
  unsafeDrainForTests.inlineGroupsPerTurn = INLINE_GROUPS_PER_TURN;
  unsafeDrainForTests.viaQueueMicrotask = false;
});

const T = 10_000;
const PUTS = 200;
const OPTS: OpenOptions = { durability: "sync", compaction: { workers: 0, auto: false } };

/** The acknowledged-put count at each event-loop turn during PUTS awaited puts, and the reopened store's misses. */
async function turnsDuringPuts(): Promise<{ atTurns: number[]; missing: number }> {
  const dir = tempDir("lone-put-turns");
  const store = await Store.open(dir, OPTS);
  let acked = 0;
  let running = true;
  const atTurns: number[] = [];
  const onTurn = (): void => {
    if (!running) return;
    atTurns.push(acked);
    setImmediate(onTurn);
  };
  setImmediate(onTurn);
  try {
    for (let i = 0; i < PUTS; i++) {
      await within(T, store.write(`k${i}`, `value ${i}`), `put k${i}`);
      acked += 1;
    }
  } finally {
    running = false;
    await store.close();
  }
  const reopened = await Store.open(dir, OPTS);
  let missing = 0;
  try {
    for (let i = 0; i < PUTS; i++) if (reopened.readSync(`k${i}`).status !== "OK") missing += 1;
  } finally {
    await reopened.close();
  }
  return { atTurns, missing };
}

/** The "Microtask" async resources made while PUTS awaited puts run, and the reopened store's misses. */
async function microtasksDuringPuts(): Promise<{ microtasks: number; missing: number }> {
  let microtasks = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "Microtask") microtasks += 1;
    },
  });
  hook.enable();
  try {
    const { missing } = await turnsDuringPuts();
    return { microtasks, missing };
  } finally {
    hook.disable();
  }
}

/** The most puts acknowledged between two turns (from the loop's start to its end). */
function largestGap(atTurns: readonly number[]): number {
  const marks = [0, ...atTurns.filter((n) => n < PUTS), PUTS];
  let gap = 0;
  for (let i = 1; i < marks.length; i++) gap = Math.max(gap, (marks[i] as number) - (marks[i - 1] as number));
  return gap;
}

describe("lone durable puts and the event loop", () => {
  it(`chain without a turn, but the loop turns at least every ${INLINE_GROUPS_PER_TURN} puts`, async () => {
    const { atTurns, missing } = await turnsDuringPuts();
    const during = atTurns.filter((n) => n < PUTS).length;
    expect(largestGap(atTurns)).toBeLessThanOrEqual(INLINE_GROUPS_PER_TURN);
    expect(during, "the puts chain: fewer turns than puts").toBeLessThan(PUTS / 2);
    expect(missing).toBe(0);
  });

  it("start each drain with no async resource: no Microtask resource per put", async () => {
    const { microtasks, missing } = await microtasksDuringPuts();
    expect(microtasks).toBe(0);
    expect(missing).toBe(0);
  });

  it("twin: drains started with queueMicrotask make a Microtask resource for most puts, and the count check fails", async () => {
    unsafeDrainForTests.viaQueueMicrotask = true;
    const { microtasks, missing } = await microtasksDuringPuts();
    expect(microtasks).toBeGreaterThan(PUTS / 2);
    expect(missing).toBe(0);
  });

  it("twin: with no bound on the chain the loop never turns while the writer loops, and the gap check fails", async () => {
    unsafeDrainForTests.inlineGroupsPerTurn = Infinity;
    const { atTurns, missing } = await turnsDuringPuts();
    expect(largestGap(atTurns)).toBeGreaterThan(INLINE_GROUPS_PER_TURN);
    expect(missing).toBe(0);
  });
});
