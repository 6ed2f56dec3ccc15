/**
 * Child process of test/retirement.test.ts: runs the issue-9 defect-1 script up to the moment the
 * parent SIGKILLs it. Usage: node --import tsx test/helpers/retire-child.ts DIR MODE. It writes k
 * and k2 into segment 1, rotates, pauses a read of k2 at read:after-authorize, forgets both, runs
 * gc twice, prints "ready" on stdout and waits (the read stays paused) until it is killed.
 */
import { Engram } from "../../src/engram.js";
import { runToSecondGc, type RetireMode } from "./retire-script.js";
import { useBuiltWorker } from "./built-worker.js";

useBuiltWorker(); // the compaction worker from dist/ while it is fresh (built-worker.ts)

const [dir, mode] = process.argv.slice(2) as [string, RetireMode];
let now = Date.now();
const clock = (): number => (now += 1000); // a 0 ms retention window has always passed, without sleeps
const store = await Engram.open(dir, { clock, retention: { tombstoneRetentionMs: 0 }, segmentBytes: 4096, compaction: { mode, workers: 0, auto: false }, faults: { pauseAt: ["read:after-authorize"] } });
const { reading } = await runToSecondGc(store);
reading.catch(() => undefined);
process.stdout.write("ready\n");
setInterval(() => undefined, 1000); // keep the process (and the paused read) alive until SIGKILL
