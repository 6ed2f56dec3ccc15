// Differential check: the same seeded random operations against an engine store and a PostgreSQL
// store (both with an injected clock), comparing every call's answer and then read/probe/list of
// every (scope, key) after every step (docs/SCALE-OUT.md "Allowed differences": what it tolerates).
// The operations: writes (TTLs, cleared tombstones, expected versions), forgets, undeletes,
// safeRewrite, lazy and eager erasures at three depths (a, a/b, a/b/c), batches of mixed rows,
// clock advances (TTL expiry, retention windows), gc, compact and (--reopen) close/open; each
// step's snapshot also lists every scope whole, a page (limit 2) of its inherited view and a prefix.
// Usage, after npm run build, with a PostgreSQL server at $PG:
//   node scripts/backend-diff.mjs FROM TO [STEPS] [--verbose] [--trace] [--continue] [--reopen]
//     [--lazy] [--gc2] [--no-tseq] [--strict-eager] [--strict-reopen] [--strict-passes]
// SCRIPT=ops.json replays fixed operations instead; SHOW="scope|key" prints that slot every step.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
const WT = process.env.WT ?? path.join(path.dirname(new URL(import.meta.url).pathname), "..");
const { Engram, safeRewrite } = await import(path.join(WT, "dist/src/index.js"));
const PG = process.env.PG ?? "postgresql://engram@127.0.0.1:55432/postgres";
const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const flags = new Set(process.argv.slice(2).filter((a) => a.startsWith("--")));
const FROM = Number(args[0] ?? 1), TO = Number(args[1] ?? FROM), STEPS = Number(args[2] ?? 150);
const RET = 10_000;
// Three depths under "a" (an erasure of a/b/c, a/b or a supersedes or overlaps the others).
const SCOPES = ["global", "a", "a/b", "a/b/c", "a/c", "d"];
const KEYS = ["k1", "k2", "k3"];

function gen(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}
const pick = (r, a) => a[Math.floor(r() * a.length)];

function randomOp(r) {
  const p = r();
  const scope = pick(r, SCOPES), key = pick(r, KEYS);
  if (p < 0.30) return { t: "write", scope, key, value: `v${Math.floor(r() * 1000)}`, ttl: r() < 0.15 ? Math.floor(r() * 3 * RET) : undefined, clear: r() < 0.1, expect: r() < 0.1 ? pick(r, ["cur", "null"]) : undefined };
  if (p < 0.43) return { t: "forget", scope, key };
  if (p < 0.50) return { t: "undelete", scope, key };
  if (p < 0.56) return { t: "forgetScope", scope: pick(r, SCOPES), reclaim: r() < 0.5 && !flags.has("--lazy") ? "eager" : "lazy" };
  if (p < 0.68) {
    const n = 1 + Math.floor(r() * 4);
    const ops = [];
    for (let i = 0; i < n; i++) {
      const s = pick(r, SCOPES), k = pick(r, KEYS);
      // Mixed rows: plain writes, writes with a TTL, a cleared tombstone or an expected version
      // (null: absent; 1: usually a conflict, refusing the whole batch), and forgets.
      const q = r();
      if (q < 0.45) ops.push({ op: "write", scope: s, key: k, value: `b${Math.floor(r() * 1000)}` });
      else if (q < 0.55) ops.push({ op: "write", scope: s, key: k, value: `t${Math.floor(r() * 1000)}`, ttlMs: Math.floor(r() * 2 * RET) });
      else if (q < 0.62) ops.push({ op: "write", scope: s, key: k, value: `c${Math.floor(r() * 1000)}`, clearTombstone: true });
      else if (q < 0.7) ops.push({ op: "write", scope: s, key: k, value: `e${Math.floor(r() * 1000)}`, expectedVersion: r() < 0.5 ? null : 1 });
      else ops.push({ op: "forget", scope: s, key: k });
    }
    return { t: "batch", ops };
  }
  if (p < 0.80) return { t: "advance", ms: pick(r, [1, 100, RET / 2, RET + 1, 3 * RET]) };
  if (p < 0.82) return { t: "safeRewrite", scope, key, value: `s${Math.floor(r() * 1000)}`, clear: r() < 0.3 };
  if (p < 0.93) return { t: "gc" };
  if (p < 0.97) return { t: "compact" };
  return { t: "reopen" };
}

function norm(x) {
  if (x instanceof Error) return { error: x.code ?? x.message };
  if (x && typeof x === "object" && !Array.isArray(x)) {
    const o = { ...x };
    for (const k of ["reclaimedBytes", "segments", "bytesBefore", "bytesAfter", "recordsKept", "recordsDropped", "durationMs", "retentionRecordsDropped", "mode"]) delete o[k];
    return o;
  }
  return x;
}

class Side {
  constructor(name, openFn) { this.name = name; this.openFn = openFn; }
  async open() { this.s = await this.openFn(); }
  async run(op) {
    const s = this.s;
    try {
      switch (op.t) {
        case "write": {
          const o = { scope: op.scope };
          if (op.ttl !== undefined) o.ttlMs = op.ttl;
          if (op.clear) o.clearTombstone = true;
          if (op.expect === "null") o.expectedVersion = null;
          if (op.expect === "cur") { const rd = await s.read(op.key, { scope: op.scope, inherit: false }); o.expectedVersion = rd.status === "OK" ? rd.version : null; }
          return norm(await s.write(op.key, op.value, o));
        }
        case "forget": return norm(await s.forget(op.key, { scope: op.scope }));
        case "undelete": return norm(await s.undelete(op.key, { scope: op.scope }));
        case "forgetScope": return norm(await s.forgetScope(op.scope, { reclaim: op.reclaim }));
        case "batch": return (await s.batch(op.ops)).map(norm);
        case "safeRewrite": return norm(await safeRewrite(s, op.key, op.value, { scope: op.scope, clearTombstone: op.clear }));
        case "advance": return null;
        case "gc": await s.gc(); if (flags.has("--gc2")) await s.gc(); return null;
        case "compact": await s.compact(); return null;
        case "reopen": await s.close(); await this.open(); return null;
      }
    } catch (e) { return norm(e); }
  }
  async snapshot() {
    const out = {};
    for (const sc of SCOPES) for (const k of KEYS) {
      const rd = await this.s.read(k, { scope: sc });
      const pr = await this.s.probe(k, { scope: sc });
      // physicalRecords differs by design (a PostgreSQL slot holds at most one value row): compared as present or not.
      out[`${sc}|${k}`] = { read: rd.status === "OK" ? [rd.value, rd.version, rd.generation, rd.scope] : rd.status, probe: { ...pr, physicalRecords: pr.physicalRecords > 0, ...(flags.has("--no-tseq") ? { tombstoneSeq: "-" } : {}) } };
    }
    for (const sc of SCOPES) {
      const l = [];
      for await (const e of this.s.list({ scope: sc })) l.push([e.key, e.scope, e.version]);
      out[`list ${sc}`] = l;
      // A page (limit) of the inherited view, and a prefix.
      const page = [];
      for await (const e of this.s.list({ scope: sc, inherit: true, limit: 2 })) page.push([e.key, e.scope, e.version]);
      out[`list ${sc} inherit limit 2`] = page;
      const pre = [];
      for await (const e of this.s.list({ scope: sc, prefix: "k2", inherit: true })) pre.push([e.key, e.scope, e.version]);
      out[`list ${sc} prefix k2`] = pre;
    }
    return out;
  }
}

// gc passes on both sides, at the same clock, until neither side's snapshot changes (at least two,
// at most SETTLE_MAX): the engine's eager erasure may have done some of the passes' work already,
// so the two sides may need different numbers of passes to reach the same settled state.
const SETTLE_MAX = 6;
async function settle(eng, pg) {
  let prev = null;
  for (let i = 0; i < SETTLE_MAX; i++) {
    await eng.run({ t: "gc" }); await pg.run({ t: "gc" });
    const now = JSON.stringify([await eng.snapshot(), await pg.snapshot()]);
    if (i >= 1 && now === prev) return;
    prev = now;
  }
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "p54diff-"));
let failures = 0;
let toleratedReopen = 0;

// Allowed difference (docs/SCALE-OUT.md): after a reopen the engine gives a slot with no value left
// its segment's latest reclaim time (engine/reclaim-clock.ts: never early, may be later), so a
// retention record PostgreSQL drops at its exact window may stay on the engine until at most a
// window after the open. True when every differing entry is such a slot and the window since the
// last reopen is still running: the seed stops there (later answers follow from the kept record).
function reopenClockDifference(sa, sb, now, reopenedAt) {
  if (reopenedAt === null || now >= reopenedAt + RET) return false;
  const keys = Object.keys(sa).filter((k) => JSON.stringify(sa[k]) !== JSON.stringify(sb[k]));
  return keys.length > 0 && keys.every((k) => {
    const e = sa[k].probe, p = sb[k]?.probe;
    return e !== undefined && p !== undefined && JSON.stringify(sa[k].read) === JSON.stringify(sb[k].read) && e.retentionPresent && !e.valuePresent && !p.retentionPresent;
  });
}
for (let seed = FROM; seed <= TO; seed++) {
  const clock = { now: 1_700_000_000_000 };
  const opts = { clock: () => clock.now, retention: { tombstoneRetentionMs: RET }, durability: "none" };
  const dir = path.join(tmp, `s${seed}`);
  const schema = `p54_${process.pid}_${seed}`;
  const eng = new Side("engine", () => Engram.open(dir, { ...opts, compaction: { workers: 0, auto: false } }));
  const pg = new Side("pg", () => Engram.open(`${PG}?schema=${schema}`, opts));
  await eng.open(); await pg.open();
  const r = gen(seed);
  const hist = [];
  let bad = null;
  let reopenedAt = null;
  let tolerated = false;
  const scripted = process.env.SCRIPT ? JSON.parse(fs.readFileSync(process.env.SCRIPT, "utf8")) : null;
  for (let step = 0; step < (scripted?.length ?? STEPS) && (bad === null || flags.has("--continue")); step++) {
    let op = scripted ? scripted[step] : randomOp(r);
    if (op.t === "reopen" && !flags.has("--reopen")) op = { t: "gc" };
    hist.push(op);
    if (op.t === "advance") clock.now += op.ms;
    if (op.t === "reopen") reopenedAt = clock.now;
    const a = await eng.run(op), b = await pg.run(op);
    if (flags.has("--trace")) console.log(step, JSON.stringify(op), "->", JSON.stringify(a), JSON.stringify(b));
    if (JSON.stringify(a) !== JSON.stringify(b)) { bad = { step, what: "answer", engine: a, pg: b }; break; }
    // Allowed difference (docs/SCALE-OUT.md "Allowed differences"): an eager erasure on the engine
    // compacts whole segment files, so it also reclaims other garbage those files hold, which
    // depends on the file layout. Two gc passes on both sides, at the same clock, settle it (the
    // second one for what the engine drops a pass after the first: superseded tombstones, erasures).
    if (op.t === "forgetScope" && op.reclaim === "eager" && !flags.has("--strict-eager")) await settle(eng, pg);
    // Allowed difference (docs/SCALE-OUT.md "Allowed differences", fifty-fifth session): the
    // engine keeps a slot's latest TOMBSTONE, CLEAR or erasure while an older one is on disk, so
    // it may drop it a pass after PostgreSQL, which has no older records. After a gc or compact
    // step both sides run passes until neither changes; `--strict-passes` turns that off.
    if ((op.t === "gc" || op.t === "compact") && !flags.has("--strict-passes")) await settle(eng, pg);
    const sa = await eng.snapshot(), sb = await pg.snapshot();
    if (!flags.has("--strict-reopen") && reopenClockDifference(sa, sb, clock.now, reopenedAt)) { tolerated = true; break; }
    if (process.env.SHOW) console.log(step, JSON.stringify(op).slice(0, 100), "\n   e", JSON.stringify(sa[process.env.SHOW]), "\n   p", JSON.stringify(sb[process.env.SHOW]));
    for (const k of Object.keys(sa)) {
      if (JSON.stringify(sa[k]) !== JSON.stringify(sb[k])) {
        bad = { step, what: k, engine: sa[k], pg: sb[k] };
        if (flags.has("--continue")) console.log(`  step ${step} ${k}\n    engine ${JSON.stringify(sa[k])}\n    pg     ${JSON.stringify(sb[k])}`);
        else break;
      }
    }
  }
  await eng.s.close(); await pg.s.close();
  if (tolerated) {
    toleratedReopen++;
    if (flags.has("--verbose")) console.log(`seed ${seed}: stopped at step ${hist.length - 1}: the engine's reclaim time after a reopen (allowed)`);
  } else if (bad !== null) {
    failures++;
    console.log(`seed ${seed}: step ${bad.step} ${bad.what}\n  engine ${JSON.stringify(bad.engine)}\n  pg     ${JSON.stringify(bad.pg)}`);
    if (flags.has("--verbose")) for (const [i, o] of hist.entries()) console.log(`   ${i}: ${JSON.stringify(o)}`);
  } else if (flags.has("--verbose")) console.log(`seed ${seed}: ok`);
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${TO - FROM + 1 - failures}/${TO - FROM + 1} seeds agree${toleratedReopen > 0 ? ` (${toleratedReopen} of them stopped at the engine's later reclaim time after a reopen)` : ""}`);
process.exit(failures === 0 ? 0 : 1);
