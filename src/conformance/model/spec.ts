/**
 * The reference model of engram's logical semantics, for src/conformance/cases/model.ts. It is written from
 * API.md (and the semantics the engine issue pins down), not from the engine: it imports no
 * engine code, only the public result types.
 *
 * A slot (scope, key) is one of
 *   - absent   (no entry in `slots`): never written, or its retention record is gone;
 *   - "put"    : holds a value; live until `expiresAt` (then "expired");
 *   - "killed" : forgotten, or its scope (or an ancestor) erased; a write clears it (auto-clear:
 *                generation + 1) or is refused (require-clear without clearTombstone);
 *   - "cleared": undeleted: generation + 1, empty, writable, not tombstoned.
 * The model does not predict sequence numbers (a batch commit may consume some): it learns each
 * version / tombstoneSeq from the engine's result and checks only that it is newer than
 * everything committed before. It does not predict physical reclamation either: `reclaimable`
 * says a gc()/compact() (or background compaction) ran since the slot's value died, so probe
 * may report "reclaimed" instead of "tombstoned".
 */
import type { ProbeResult, SlotState, Value } from "../../../rules/types.js";

export const SCOPES = ["global", "user:a", "user:a/session:1", "user:b", "user:b/session:2"] as const;
export type Scope = (typeof SCOPES)[number];
export const KEYS = ["k1", "k2", "k3", "x"] as const;
export type Key = (typeof KEYS)[number];

/** Options of one run that change the logical semantics. */
export interface ModelConfig {
  tombstoneWrites: "auto-clear" | "require-clear";
  /** retention.ttlMs; undefined = not given (no TTL). */
  defaultTtlMs: number | null | undefined;
  /** retention.scopes: a TTL for "user:*\/session:*" scopes, or none. */
  sessionTtlMs: number | null | undefined;
  /** Background compaction may reclaim at any moment. */
  autoCompaction: boolean;
}

export interface MSlot {
  status: "put" | "killed" | "cleared";
  /** Last written value and its version (kept after the slot dies: probe reports the version). */
  value: Value;
  version: number;
  generation: number;
  /** null: never expires. */
  expiresAt: number | null;
  /** Sequence of the latest kill (forget or scope erasure) covering this slot. */
  killSeq: number | null;
  /** A compaction ran since the value died: its bytes may be gone. */
  reclaimable: boolean;
}

export type WriteOutcome =
  | { kind: "ok"; generation: number }
  | { kind: "conflict"; expected: number | null; actual: number | null; orTombstoned: number | null }
  | { kind: "tombstoned"; tombstoneSeq: number };

/**
 * A predicted sequence number matches: equal, or — for a placeholder (negative: assigned by an
 * operation queued earlier in the same batch or group, so unknown in advance) — newer than
 * `seqBefore`, everything committed before.
 */
export function seqMatches(got: number | null, want: number | null, seqBefore: number): boolean {
  return want !== null && want < 0 ? got !== null && got > seqBefore : got === want;
}

export function isDescendantOrSelf(scope: string, root: string): boolean {
  return root === "global" || scope === root || scope.startsWith(`${root}/`);
}

/** The scope and its ancestors, nearest first. */
export function lineage(scope: string): string[] {
  const out = [scope];
  let s = scope;
  while (s !== "global") {
    const cut = s.lastIndexOf("/");
    s = cut < 0 ? "global" : s.slice(0, cut);
    out.push(s);
  }
  return out;
}

function isSessionScope(scope: string): boolean {
  const parts = scope.split("/");
  return parts.length === 2 && /^user:[^/]*$/.test(parts[0] as string) && /^session:[^/]*$/.test(parts[1] as string);
}

export class Model {
  readonly cfg: ModelConfig;
  readonly slots = new Map<string, MSlot>();
  /** The injected clock. */
  now: number;
  /** Highest sequence the engine has reported (results or stats().sequence). */
  maxSeq = 0;

  constructor(cfg: ModelConfig, now: number) {
    this.cfg = cfg;
    this.now = now;
  }

  clone(): Model {
    const m = new Model(this.cfg, this.now);
    for (const [k, s] of this.slots) m.slots.set(k, { ...s });
    m.maxSeq = this.maxSeq;
    return m;
  }

  /** Takes `other`'s slots as this model's (a copy decided on, kept: a batch that was not refused). */
  adopt(other: Model): void {
    this.slots.clear();
    for (const [k, s] of other.slots) this.slots.set(k, s);
  }

  static id(scope: string, key: string): string {
    return `${scope}\u0000${key}`;
  }

  get(scope: string, key: string): MSlot | undefined {
    return this.slots.get(Model.id(scope, key));
  }

  isLive(s: MSlot | undefined): s is MSlot {
    return s !== undefined && s.status === "put" && (s.expiresAt === null || this.now < s.expiresAt);
  }

  isExpired(s: MSlot | undefined): boolean {
    return s !== undefined && s.status === "put" && s.expiresAt !== null && this.now >= s.expiresAt;
  }

  /** The TTL a write without ttlMs gets in `scope`: the scope pattern's, else the store default. */
  ttlFor(scope: string, ttlMs: number | null | undefined): number | null {
    if (ttlMs !== undefined) return ttlMs;
    if (isSessionScope(scope) && this.cfg.sessionTtlMs !== undefined) return this.cfg.sessionTtlMs;
    return this.cfg.defaultTtlMs ?? null;
  }

  /** The live version of a slot, or null. */
  liveVersion(scope: string, key: string): number | null {
    const s = this.get(scope, key);
    return this.isLive(s) ? s.version : null;
  }

  // ---- reads --------------------------------------------------------------------------------

  read(scope: string, key: string, inherit: boolean): { value: Value; version: number; generation: number; scope: string } | null {
    for (const s of inherit ? lineage(scope) : [scope]) {
      const slot = this.get(s, key);
      if (this.isLive(slot)) return { value: slot.value, version: slot.version, generation: slot.generation, scope: s };
    }
    return null;
  }

  list(scope: string, prefix: string, inherit: boolean, limit: number | undefined): Array<{ key: string; scope: string; version: number }> {
    const found = new Map<string, { key: string; scope: string; version: number }>();
    for (const s of inherit ? lineage(scope) : [scope]) {
      for (const key of KEYS) {
        if (found.has(key) || !key.startsWith(prefix)) continue;
        const slot = this.get(s, key);
        if (this.isLive(slot)) found.set(key, { key, scope: s, version: slot.version });
      }
    }
    const sorted = [...found.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return limit === undefined ? sorted : sorted.slice(0, limit);
  }

  // ---- mutations: decide, then apply with the sequence the engine reported -----------------

  decideWrite(scope: string, key: string, expectedVersion: number | null | undefined, clearTombstone: boolean): WriteOutcome {
    const s = this.get(scope, key);
    const actual = this.isLive(s) ? s.version : null;
    const killed = s !== undefined && s.status === "killed";
    const refuseTomb = killed && this.cfg.tombstoneWrites === "require-clear" && !clearTombstone;
    if (expectedVersion !== undefined && expectedVersion !== actual) {
      // When both the CAS and the tombstone rule refuse, API.md does not say which error wins.
      return { kind: "conflict", expected: expectedVersion, actual, orTombstoned: refuseTomb ? (s.killSeq as number) : null };
    }
    if (refuseTomb) return { kind: "tombstoned", tombstoneSeq: s.killSeq as number };
    if (s === undefined) return { kind: "ok", generation: 1 };
    return { kind: "ok", generation: killed ? s.generation + 1 : s.generation };
  }

  applyWrite(scope: string, key: string, value: Value, version: number, generation: number, ttlMs: number | null | undefined): void {
    const prev = this.get(scope, key);
    const ttl = this.ttlFor(scope, ttlMs);
    this.slots.set(Model.id(scope, key), {
      status: "put",
      value,
      version,
      generation,
      expiresAt: ttl === null ? null : this.now + ttl,
      killSeq: prev?.killSeq ?? null,
      reclaimable: this.cfg.autoCompaction,
    });
  }

  /** forget(): the generation it reports and whether it writes a tombstone. */
  decideForget(scope: string, key: string): { writes: boolean; generation: number | null } {
    const s = this.get(scope, key);
    return { writes: this.isLive(s), generation: s === undefined ? null : s.generation };
  }

  applyForget(scope: string, key: string, seq: number): void {
    const s = this.get(scope, key) as MSlot;
    s.status = "killed";
    s.killSeq = seq;
    s.reclaimable = this.cfg.autoCompaction;
  }

  /** Live slots in the subtree of `root` (what forgetScope reports as `slots`). */
  liveIn(root: string): number {
    let n = 0;
    for (const s of SCOPES) {
      if (!isDescendantOrSelf(s, root)) continue;
      for (const k of KEYS) if (this.isLive(this.get(s, k))) n += 1;
    }
    return n;
  }

  applyForgetScope(root: string, seq: number): void {
    for (const s of SCOPES) {
      if (!isDescendantOrSelf(s, root)) continue;
      for (const k of KEYS) {
        const slot = this.get(s, k);
        if (slot === undefined) continue;
        // Every slot of the erased subtree is tombstoned by the erasure, whatever it held.
        // A value dying now has all its bytes on disk; an already dead one keeps what GC did to it.
        if (this.isLive(slot)) slot.reclaimable = this.cfg.autoCompaction;
        slot.status = "killed";
        slot.killSeq = seq;
      }
    }
  }

  /** undelete(): whether it writes (the slot is tombstoned) and the generation it reports. */
  decideUndelete(scope: string, key: string): { writes: boolean; generation: number | null } {
    const s = this.get(scope, key);
    if (s === undefined) return { writes: false, generation: null };
    if (s.status === "killed") return { writes: true, generation: s.generation + 1 };
    return { writes: false, generation: s.generation };
  }

  applyUndelete(scope: string, key: string): void {
    const s = this.get(scope, key) as MSlot;
    s.status = "cleared";
    s.generation += 1;
    // The dead value's bytes stay wherever GC left them.
    s.reclaimable ||= this.cfg.autoCompaction;
  }

  /** gc() / compact(): nothing logical changes; dead value bytes may now be gone. */
  applyCompaction(): void {
    for (const s of this.slots.values()) if (!this.isLive(s as MSlot | undefined)) s.reclaimable = true;
  }

  // ---- probe ---------------------------------------------------------------------------------

  /**
   * Checks a probe result against the model; returns a list of complaints (empty when it fits).
   * Where the outcome depends on physical reclamation, any allowed outcome is accepted; when the
   * engine reports the slot fully gone and that is allowed, `adopt` says so (the caller then
   * drops the slot from the model). A negative version or kill sequence is a placeholder (a
   * group's row took it, unknown in advance): any sequence above `seqBefore` matches it.
   */
  checkProbe(scope: string, key: string, p: ProbeResult, lenient: boolean, seqBefore = 0): { problems: string[]; adoptGone: boolean } {
    const s = this.get(scope, key);
    const problems: string[] = [];
    const want = (cond: boolean, what: string): void => {
      if (!cond) problems.push(what);
    };
    const seqIs = (got: number | null, expected: number | null): boolean => seqMatches(got, expected, seqBefore);
    const stateIn = (states: SlotState[]): void => want(states.includes(p.state), `state ${p.state}, want one of ${states.join("|")}`);
    const physicalAgrees = (): void => {
      if (p.state === "tombstoned" || p.state === "live") want(p.physicalRecords > 0, `state ${p.state} with physicalRecords ${p.physicalRecords}`);
      if (p.state === "reclaimed") want(p.physicalRecords === 0, `state reclaimed with physicalRecords ${p.physicalRecords}`);
    };
    if (s === undefined) {
      stateIn(["absent"]);
      want(!p.valuePresent && !p.retentionPresent, `absent slot: valuePresent ${p.valuePresent} retentionPresent ${p.retentionPresent}`);
      want(p.version === null && p.generation === null && p.tombstoneSeq === null && p.expiresAt === null, `absent slot reports ${JSON.stringify(p)}`);
      return { problems, adoptGone: false };
    }
    // An expired value reclaimed by GC may take its retention record with it (API.md does not
    // say that an expired slot keeps one); lenient mode also lets an erased slot's go (a
    // reported deviation: it vanishes at a restart).
    const mayBeGone = this.mayBeGone(s, lenient);
    if (mayBeGone && p.state === "absent" && !p.retentionPresent) {
      want(!p.valuePresent && p.version === null && p.generation === null, `gone slot reports ${JSON.stringify(p)}`);
      return { problems, adoptGone: problems.length === 0 };
    }
    want(p.retentionPresent, "retentionPresent false for a slot whose retention record must survive");
    want(p.generation === s.generation, `generation ${p.generation}, want ${s.generation}`);
    // (a cast, so that the type guard does not narrow `s` in the branches below)
    if (this.isLive(s as MSlot | undefined)) {
      stateIn(["live"]);
      want(p.valuePresent, "live slot with valuePresent false");
      want(seqIs(p.version, s.version), `version ${p.version}, want ${s.version}`);
      want(p.expiresAt === s.expiresAt, `expiresAt ${p.expiresAt}, want ${s.expiresAt}`);
    } else if (s.status === "put") {
      stateIn(s.reclaimable ? ["expired", "reclaimed"] : ["expired"]);
      want(!p.valuePresent, "expired slot with valuePresent true");
      want(seqIs(p.version, s.version) || (lenient && p.state === "reclaimed"), `version ${p.version}, want ${s.version}`);
      if (p.state === "expired") want(p.expiresAt === s.expiresAt, `expiresAt ${p.expiresAt}, want ${s.expiresAt}`);
    } else if (s.status === "killed") {
      stateIn(s.reclaimable ? ["tombstoned", "reclaimed"] : ["tombstoned"]);
      want(!p.valuePresent, "tombstoned slot with valuePresent true");
      // The version belongs to the retention record (API.md, seed 000): it survives reclamation
      // of the value and restarts. (Lenient: a reclaimed slot may have lost it at a reopen.)
      want(seqIs(p.version, s.version) || (lenient && p.state === "reclaimed"), `version ${p.version}, want ${s.version}`);
      want(seqIs(p.tombstoneSeq, s.killSeq), `tombstoneSeq ${p.tombstoneSeq}, want ${s.killSeq}`);
    } else {
      // Undeleted: empty and writable, no tombstone in force. The state stays "absent" (with the
      // retention record present) whether or not GC has since removed the old value's bytes.
      stateIn(["absent"]);
      want(!p.valuePresent, "undeleted slot with valuePresent true");
    }
    physicalAgrees();
    return { problems, adoptGone: false };
  }

  /** True when GC may have dropped the slot's retention record along with its value bytes. */
  mayBeGone(s: MSlot | undefined, lenient: boolean): boolean {
    if (s === undefined || !s.reclaimable) return false;
    return (s.status === "put" && this.isExpired(s)) || (lenient && s.status === "killed");
  }

  /** A write may find the slot gone (see checkProbe): the generation is then 1. */
  forgetSlot(scope: string, key: string): void {
    this.slots.delete(Model.id(scope, key));
  }
}
