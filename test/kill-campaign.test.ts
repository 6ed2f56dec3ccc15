/**
 * Kill campaign with erasures, undeletes, GC and held readers (issue 9): nothing acknowledged is
 * lost, nothing forgotten comes back, no eagerly erased byte survives, and a held read returns
 * the value it was authorized for or fails closed — across real SIGKILLs.
 *
 * Method: a real child process (test/helpers/campaign-child.ts) runs random operations one at a
 * time on a store with 4 KiB segments, automatic compaction in a worker thread, gc() calls and
 * tombstoneRetentionMs 0: writes, forgets, undeletes, lazy and eager forgetScope, and held reads
 * (an async read paused at read:after-authorize while a gc rewrites segments, then released).
 * Every operation is announced before it is issued and acknowledged after it settled; the parent
 * keeps a model from the acknowledgements and SIGKILLs the child at a random moment. After each
 * kill the parent reopens the directory and checks every slot of the model (the one operation in
 * flight may or may not have happened), that an undeleted slot is not tombstoned again
 * (require-clear half of the runs), byte-scans every file under the directory for every value an
 * acknowledged eager forgetScope erased, and runs verify(). Both compaction modes. The campaign
 * continues on the same directory, so later kills land on a store with a long history.
 * ENGRAM_CAMPAIGN_KILLS (per mode, default 3) and ENGRAM_CAMPAIGN_SEED tune it (docs/TESTING.md).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { campaignOptions, KEYS, SCOPES, type CampaignConfig, type CampaignOp } from "./helpers/campaign-spec.js";
import { between, ROOT, rng } from "./helpers/crash-proc.js";
import { tempDir } from "./helpers/tmp.js";

const KILLS = Number(process.env["ENGRAM_CAMPAIGN_KILLS"] ?? 3);
// A fixed default seed: CI replays one op stream (kill moments still vary). A random CI run with seed
// 52746571 once flagged an undeleted (empty) slot that a later forgetScope erased probing
// "reclaimed": the store was right (an erasure kills every slot with a history) and the model now says so.
const SEED = Number(process.env["ENGRAM_CAMPAIGN_SEED"] ?? 20261201);

/** What the model knows of one slot. `killed` null: unknown (an operation in flight at a kill). */
interface SlotModel {
  value: string | null;
  killed: boolean | null;
  written: string[];
  /** The slot's recent history, for a violation's message (replay with the printed seed). */
  log: string[];
}

interface Msg {
  t: string;
  n?: number;
  o?: CampaignOp;
  ok?: boolean;
  code?: string;
  res?: { held?: boolean; status?: string; value?: string | null; error?: string };
}

const within = (scope: string, root: string): boolean => scope === root || scope.startsWith(`${root}/`);
const id = (scope: string, key: string): string => `${scope}\u0000${key}`;

class Campaign {
  readonly slots = new Map<string, SlotModel>();
  readonly erased = new Set<string>();
  readonly violations: string[] = [];
  heldRounds = 0;
  acked = 0;

  constructor() {
    for (const s of SCOPES) for (let k = 0; k < KEYS; k++) this.slots.set(id(s, `k${k}`), { value: null, killed: false, written: [], log: [] });
  }

  private slot(scope: string, key: string): SlotModel {
    return this.slots.get(id(scope, key)) as SlotModel;
  }

  private subtree(root: string): SlotModel[] {
    return [...this.slots.entries()].filter(([k]) => within(k.split("\u0000")[0] as string, root)).map(([, v]) => v);
  }

  /** Appends `what` to the history of every slot `o` touches. */
  note(o: CampaignOp, what: string): void {
    const touched = o.op === "forgetScope" ? this.subtree(o.scope) : o.op === "gc" ? [] : [this.slot(o.scope, o.key)];
    for (const s of touched) {
      s.log.push(what);
      if (s.log.length > 12) s.log.shift();
    }
  }

  /** Applies an acknowledged operation; records a violation when its outcome is impossible. */
  ack(o: CampaignOp, m: Msg, requireClear: boolean): void {
    this.acked += 1;
    this.note(o, `${o.op}${o.op === "forgetScope" ? `(${o.scope},${o.eager ? "eager" : "lazy"})` : ""} ${m.ok ? "ok" : m.code}`);
    if (o.op === "read") return this.checkRead(o, m);
    if (!m.ok) {
      const s = o.op === "write" ? this.slot(o.scope, o.key) : null;
      const legit = o.op === "write" && requireClear && m.code === "TOMBSTONED" && s?.killed !== false;
      if (!legit) this.violations.push(`${JSON.stringify(o).slice(0, 120)} failed with ${m.code}`);
      return;
    }
    this.applyEffect(o);
  }

  private applyEffect(o: CampaignOp): void {
    if (o.op === "write") {
      const s = this.slot(o.scope, o.key);
      s.value = o.value;
      s.killed = false;
      s.written.push(o.value);
    } else if (o.op === "forget") {
      const s = this.slot(o.scope, o.key);
      if (s.value !== null) s.killed = true;
      s.value = null;
    } else if (o.op === "undelete") {
      const s = this.slot(o.scope, o.key);
      if (s.killed !== false) s.killed = false;
    } else if (o.op === "forgetScope") {
      for (const s of this.subtree(o.scope)) {
        // An erasure kills every slot with a history, an undeleted empty one included (the
        // conformance case "forgetScope after undelete kills the slot again" pins that contract).
        if (s.value !== null || s.written.length > 0) s.killed = true;
        s.value = null;
        if (o.eager) for (const v of s.written) this.erased.add(v);
      }
    }
  }

  private checkRead(o: Extract<CampaignOp, { op: "read" }>, m: Msg): void {
    const want = this.slot(o.scope, o.key).value;
    const r = m.res ?? {};
    if (r.held === true) this.heldRounds += 1;
    if (r.error !== undefined) {
      if (r.error !== "SCOPE_ERASED_DURING_READ") this.violations.push(`held read ${o.scope}/${o.key} failed with ${r.error}`);
    } else if ((r.status === "OK" ? r.value : null) !== want) {
      this.violations.push(`held read ${o.scope}/${o.key} returned ${String(r.value).slice(0, 40)}, authorized for ${String(want).slice(0, 40)}`);
    }
  }

  /** The operation in flight at the kill: settle the model by what the reopened store shows. */
  settleInFlight(o: CampaignOp | null, store: Engram): void {
    if (o !== null) this.note(o, `${o.op} IN FLIGHT AT KILL`);
    if (o === null || o.op === "gc" || o.op === "read") return;
    if (o.op === "forgetScope") {
      for (const s of this.subtree(o.scope)) s.killed = null;
      const took = [...this.slots.entries()].some(([k, s]) => {
        const [scope, key] = k.split("\u0000") as [string, string];
        return within(scope, o.scope) && s.value !== null && store.readSync(key, { scope, inherit: false }).status === "NOT_FOUND";
      });
      if (took) for (const s of this.subtree(o.scope)) s.value = null;
      return;
    }
    const s = this.slot(o.scope, o.key);
    const got = store.readSync(o.key, { scope: o.scope, inherit: false });
    if (o.op === "write") {
      s.written.push(o.value);
      if (got.status === "OK" && got.value === o.value) {
        s.value = o.value;
        s.killed = false;
      } else s.killed = s.killed === false ? false : null;
    } else if (o.op === "forget") {
      if (got.status === "NOT_FOUND") s.value = null;
      s.killed = null;
    } else s.killed = null;
  }

  /** Checks every slot, the undeleted slots' state, and the byte scan. Returns slots checked. */
  async check(store: Engram, dir: string, requireClear: boolean, label: string): Promise<number> {
    let checked = 0;
    for (const [k, s] of this.slots) {
      const [scope, key] = k.split("\u0000") as [string, string];
      const got = store.readSync(key, { scope, inherit: false });
      const value = got.status === "OK" ? got.value : null;
      if (value !== s.value) this.violations.push(`${label}: ${scope}/${key} reads ${String(value).slice(0, 40)}, model ${String(s.value).slice(0, 40)}`);
      if (requireClear && s.killed === false && s.value === null && s.written.length > 0) {
        const p = await store.probe(key, { scope });
        if (p.state !== "absent") this.violations.push(`${label}: ${scope}/${key} was undeleted but probes ${p.state}; history: ${s.log.join(" | ")}`);
      }
      checked += 1;
    }
    const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => fs.readFileSync(path.join(e.parentPath, e.name)));
    for (const v of this.erased) {
      const nonce = Buffer.from(`${v.split("-").slice(0, 3).join("-")}-`);
      if (files.some((b) => b.includes(nonce))) this.violations.push(`${label}: eagerly erased value ${nonce.toString()} is still on disk`);
    }
    const report = await store.verify();
    if (!report.ok) this.violations.push(`${label}: verify: ${JSON.stringify(report.problems).slice(0, 300)}`);
    return checked;
  }
}

/** Runs one child until the kill; feeds the model; returns the operation in flight. */
async function oneLife(c: CampaignConfig, campaign: Campaign, killAfterAcks: number, killDelayMs: number): Promise<CampaignOp | null> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/campaign-child.ts", JSON.stringify(c)], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  let pending: CampaignOp | null = null;
  let acks = 0;
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  const lines = createInterface({ input: child.stdout });
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000); // never hang: a stuck child dies too
  lines.on("line", (line) => {
    const m = JSON.parse(line) as Msg;
    if (m.t === "send") pending = m.o as CampaignOp;
    else if (m.t === "ack" && pending !== null) {
      campaign.ack(pending, m, c.requireClear);
      pending = null;
      acks += 1;
      // The kill lands a few ms after the Nth acknowledgement: inside the next operation, a
      // compaction in the worker, or a held read's gc.
      if (acks === killAfterAcks) timer = setTimeout(() => child.kill("SIGKILL"), killDelayMs);
    }
  });
  const signal = await exited;
  await new Promise<void>((resolve) => (lines as unknown as { closed?: boolean }).closed ? resolve() : lines.once("close", resolve));
  clearTimeout(timer);
  clearTimeout(deadline);
  if (signal !== "SIGKILL") throw new Error(`child ended with ${String(signal)}: ${stderr.slice(0, 2000)}`);
  return pending;
}

describe.each(["copy-on-write", "in-place"] as const)("kill campaign (%s)", (mode) => {
  it(`${KILLS} SIGKILLs amid erasures, undeletes, gc and held reads lose nothing and resurrect nothing`, async () => {
    const seed = (SEED + (mode === "in-place" ? 1 : 0)) >>> 0;
    const random = rng(seed);
    const dir = tempDir(`campaign-${mode}`);
    const campaign = new Campaign();
    const requireClear = random() < 0.5;
    let slotsChecked = 0;
    for (let kill = 0; kill < KILLS; kill++) {
      const c: CampaignConfig = { dir, mode, requireClear, seed: (seed * 31 + kill) >>> 0, run: kill };
      const inFlight = await oneLife(c, campaign, between(random, 20, 120), between(random, 0, 25));
      const store = await Engram.open(dir, campaignOptions(c, false));
      try {
        campaign.settleInFlight(inFlight, store);
        slotsChecked += await campaign.check(store, dir, requireClear, `seed ${seed} kill ${kill}`);
      } finally {
        await store.close();
      }
      expect(campaign.violations, `seed ${seed} (ENGRAM_CAMPAIGN_SEED=${SEED})`).toEqual([]);
    }
    console.log(`kill campaign ${mode}: ${KILLS} kills survived, ${campaign.acked} acknowledged operations, ${slotsChecked} slots checked, ${campaign.heldRounds} held-reader rounds, ${campaign.erased.size} eagerly erased values byte-scanned, require-clear ${requireClear}, seed ${SEED}`);
    expect(campaign.acked).toBeGreaterThan(KILLS);
  }, 60_000 + KILLS * 20_000);
});
