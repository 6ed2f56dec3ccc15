/**
 * A process of a shared-store test (test/share-*.test.ts, bench/share.ts). Usage:
 *   node --import tsx test/helpers/share-child.ts DIR [shareTimeoutMs] [exclusive | OPTIONS-JSON]
 * It opens DIR with `share: true` (durability sync), prints {"ev":"open","role":...} and then
 * runs one command per stdin line, answering each with one JSON line on stdout:
 *   write SCOPE FROM COUNT INFLIGHT  keys k<FROM>..k<FROM+COUNT-1> = "SCOPE:i", INFLIGHT at a time:
 *                                    {"acked":[[i,version]...],"lost":[i...],"failed":[[i,code]...]}
 *   stream SCOPE INFLIGHT            writes k0, k1, ... until the next `stop` line, then answers
 *                                    like write (OWNER_LOST calls are "lost", other errors "failed")
 *   check SCOPE COUNT                reads k0..k<COUNT-1> of SCOPE: {"found":n,"wrong":n}
 *   waitfor POINT                    {"paused":POINT} once an operation is paused there (owner's faults)
 *   release POINT                    lets the operations paused there go on: {"released":POINT}
 *   list SCOPE PAUSEAT               lists SCOPE (no inheritance) in the background; after PAUSEAT
 *                                    entries prints {"listing":PAUSEAT} and waits for a `go` line,
 *                                    then prints {"listed":[keys...]} or {"listError":CODE,"message":...}
 *   go                               lets a paused list go on
 *   role                             {"role":...}
 *   close                            closes the store, answers {"closed":true} and exits
 * Role changes are printed as {"ev":"event","text":...} lines as they happen. With `exclusive`
 * it opens without `share` (the protection-off twin); OPTIONS-JSON adds open options (faults,
 * unsafe). A refused open prints {"ev":"open","error":CODE,"message":...} and exits.
 */
import * as readline from "node:readline";
import { Engram, EngramError } from "../../src/index.js";
import { SharedStore } from "../../share/handle.js";
import type { FaultPoint, OpenOptions } from "../../src/types.js";
import { useBuiltWorker } from "./built-worker.js";

useBuiltWorker(); // the compaction worker from dist/ while it is fresh (built-worker.ts)

const [dir, timeoutRaw] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write("usage: share-child.ts DIR [shareTimeoutMs]\n");
  process.exit(2);
}

function out(v: unknown): void {
  process.stdout.write(`${JSON.stringify(v)}\n`);
}

const exclusive = process.argv[4] === "exclusive";
const extra = (process.argv[4] ?? "").startsWith("{") ? (JSON.parse(process.argv[4] as string) as OpenOptions) : {};
let store: Engram;
try {
  if (exclusive) {
    store = await Engram.open(dir, { durability: "sync", compaction: { workers: 0 } });
  } else {
    const handle = await SharedStore.open(dir, { share: true, durability: "sync", compaction: { workers: 0 }, shareTimeoutMs: Number(timeoutRaw ?? 10000), ...extra });
    handle.onEvent = (text) => out({ ev: "event", text, role: handle.role });
    store = Engram.fromBackend(handle);
  }
} catch (err) {
  out({ ev: "open", error: err instanceof EngramError ? err.code : String(err), message: err instanceof Error ? err.message : "" });
  process.exit(0);
}
out({ ev: "open", role: store.role, pid: process.pid });

interface Tally {
  acked: Array<[number, number]>;
  lost: number[];
  failed: Array<[number, string]>;
}

async function writeOne(scope: string, i: number, t: Tally): Promise<void> {
  try {
    const r = await store.write(`k${i}`, `${scope}:${i}`, { scope });
    t.acked.push([i, r.version]);
  } catch (err) {
    if (err instanceof EngramError && err.code === "OWNER_LOST") t.lost.push(i);
    else t.failed.push([i, err instanceof EngramError ? err.code : String(err)]);
  }
}

/** Writes keys from `next()` with `inflight` workers until next() says stop (-1). */
async function pump(scope: string, inflight: number, next: () => number): Promise<Tally> {
  const t: Tally = { acked: [], lost: [], failed: [] };
  const worker = async (): Promise<void> => {
    for (let i = next(); i >= 0; i = next()) await writeOne(scope, i, t);
  };
  await Promise.all(Array.from({ length: inflight }, worker));
  return t;
}

let goList = null as (() => void) | null;

/** Lists `scope`, pausing after `pauseAt` entries until a `go` line arrives. */
async function listPaused(scope: string, pauseAt: number): Promise<unknown> {
  const keys: string[] = [];
  try {
    for await (const e of store.list({ scope, inherit: false })) {
      keys.push(e.key);
      if (keys.length === pauseAt) {
        const go = new Promise<void>((resolve) => (goList = resolve));
        out({ listing: pauseAt });
        await go;
      }
    }
    return { listed: keys };
  } catch (err) {
    return { listError: err instanceof EngramError ? err.code : String(err), message: err instanceof Error ? err.message : "", after: keys.length };
  }
}

let stopStream: (() => void) | null = null;
const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const [cmd, ...a] = line.trim().split(/\s+/);
  if (cmd === "write") {
    const [scope, from, count, inflight] = [a[0] as string, Number(a[1]), Number(a[2]), Number(a[3])];
    let i = from;
    out(await pump(scope, inflight, () => (i < from + count ? i++ : -1)));
  } else if (cmd === "stream") {
    const [scope, inflight] = [a[0] as string, Number(a[1])];
    let i = 0;
    let stopped = false;
    stopStream = () => (stopped = true);
    void pump(scope, inflight, () => (stopped ? -1 : i++)).then(out);
    out({ ev: "streaming" });
  } else if (cmd === "stop") {
    stopStream?.();
  } else if (cmd === "check") {
    const [scope, count] = [a[0] as string, Number(a[1])];
    let found = 0;
    let wrong = 0;
    for (let i = 0; i < count; i++) {
      const r = await store.read(`k${i}`, { scope, inherit: false });
      if (r.status === "OK") {
        if (r.value === `${scope}:${i}`) found++;
        else wrong++;
      }
    }
    out({ found, wrong });
  } else if (cmd === "waitfor") {
    await store.faults.waitFor(a[0] as FaultPoint);
    out({ paused: a[0] });
  } else if (cmd === "release") {
    store.faults.release(a[0] as FaultPoint);
    out({ released: a[0] });
  } else if (cmd === "list") {
    const [scope, pauseAt] = [a[0] as string, Number(a[1])];
    void listPaused(scope, pauseAt).then(out);
  } else if (cmd === "go") {
    (goList as (() => void) | null)?.();
  } else if (cmd === "role") {
    out({ role: store.role });
  } else if (cmd === "close") {
    await store.close();
    out({ closed: true });
    process.exit(0);
  }
}
