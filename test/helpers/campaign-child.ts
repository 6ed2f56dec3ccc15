/**
 * Child process of test/kill-campaign.test.ts: runs random operations one at a time against a
 * real store until the parent SIGKILLs it. Usage: node --import tsx campaign-child.ts CONFIG_JSON.
 * Each operation is announced with a "send" line (written synchronously, before the store is
 * called) and confirmed with an "ack" line once it settled, so the parent knows every
 * acknowledged operation and the single one in flight. Operations: write, forget, undelete,
 * forgetScope (lazy and eager), gc, and a held read — an async read paused at
 * read:after-authorize while a gc runs, then released; its outcome is reported for checking.
 */
import * as fs from "node:fs";
import { Engram } from "../../src/engram.js";
import { rng } from "./crash-proc.js";
import { campaignOptions, KEYS, SCOPES, type CampaignConfig, type CampaignOp } from "./campaign-spec.js";
import { useBuiltWorker } from "./built-worker.js";

useBuiltWorker(); // the compaction worker from dist/ while it is fresh (built-worker.ts)

function say(m: object): void {
  fs.writeSync(1, `${JSON.stringify(m)}\n`);
}

function codeOf(e: unknown): string {
  return typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : `raw:${String(e)}`;
}

/** Picks the next operation. */
function pick(random: () => number, c: CampaignConfig, n: number): CampaignOp {
  const scope = SCOPES[Math.floor(random() * SCOPES.length)] as string;
  const key = `k${Math.floor(random() * KEYS)}`;
  const r = random();
  if (r < 0.46) {
    written.push({ scope, key });
    if (written.length > 16) written.shift();
    return { op: "write", scope, key, value: `v-${c.run}-${n}-${"p".repeat(Math.floor(random() * 300))}`, clear: random() < 0.3 };
  }
  if (r < 0.64) return { op: "forget", scope, key };
  if (r < 0.72) return { op: "undelete", scope, key };
  if (r < 0.77) return { op: "forgetScope", scope: scope === "global" ? "user:a" : scope, eager: false };
  if (r < 0.82) return { op: "forgetScope", scope: scope === "global" ? "user:b" : scope, eager: true };
  if (r < 0.9) return { op: "gc" };
  // Mostly a slot written lately: only a read that finds a value pauses after authorization.
  const recent = written[Math.floor(random() * written.length)];
  return recent !== undefined && random() < 0.85 ? { op: "read", ...recent } : { op: "read", scope, key };
}

/** Slots the child wrote lately (the held reads' targets). */
const written: Array<{ scope: string; key: string }> = [];

/** A held read: paused after authorization while a gc runs, then released. */
async function heldRead(store: Engram, o: Extract<CampaignOp, { op: "read" }>): Promise<object> {
  const reading = store.read(o.key, { scope: o.scope, inherit: false }).then((r) => ({ r }), (e: unknown) => ({ e }));
  const paused = await Promise.race([store.faults.waitFor("read:after-authorize").then(() => true), reading.then(() => false)]);
  if (paused) {
    await store.gc();
    store.faults.release("read:after-authorize");
  }
  const out = await reading;
  if ("e" in out) return { held: paused, error: codeOf(out.e) };
  return { held: paused, status: out.r.status, value: out.r.status === "OK" ? out.r.value : null };
}

async function apply(store: Engram, o: CampaignOp): Promise<object> {
  switch (o.op) {
    case "write":
      return { version: (await store.write(o.key, o.value, { scope: o.scope, clearTombstone: o.clear })).version };
    case "forget":
      return { seq: (await store.forget(o.key, { scope: o.scope })).tombstoneSeq };
    case "undelete":
      return { generation: (await store.undelete(o.key, { scope: o.scope })).generation };
    case "forgetScope":
      return { slots: (await store.forgetScope(o.scope, { reclaim: o.eager ? "eager" : "lazy" })).slots };
    case "gc":
      return { dropped: (await store.gc()).retentionRecordsDropped };
    case "read":
      return heldRead(store, o);
  }
}

async function main(): Promise<void> {
  const c = JSON.parse(process.argv[2] as string) as CampaignConfig;
  const store = await Engram.open(c.dir, campaignOptions(c, true));
  const random = rng(c.seed);
  say({ t: "ready" });
  for (let n = 0; ; n++) {
    const o = pick(random, c, n);
    say({ t: "send", n, o });
    try {
      say({ t: "ack", n, ok: true, res: await apply(store, o) });
    } catch (e) {
      say({ t: "ack", n, ok: false, code: codeOf(e) });
    }
  }
}

await main();
