/**
 * What the inspector's JSON API returns: read-only views of a store built from its public calls
 * (stats, list, probe, read) plus the two inspector accessors (listScopes, listSlots). Each view
 * is bounded (scopes, keys, value bytes, segments) so that a large store cannot make one
 * response unbounded.
 */
import { EngramError } from "../../rules/errors.js";
import { parentScope, scopeLineage } from "../../rules/names.js";
import type { Engram } from "../engram.js";
import type { ProbeResult, SegmentStats, SlotState, StoreStats } from "../types.js";
import { STATE_EXPLANATIONS } from "./states.js";

/** Most scopes the tree lists. */
export const SCOPES_MAX = 2000;
/** Most keys (own slots, and inherited keys) listed for one scope. */
export const KEYS_MAX = 1000;
/** Most value bytes sent to the page; longer values are cut and marked truncated. */
export const VALUE_SHOW_BYTES_MAX = 64 * 1024;
/** Most segments the chart receives. */
export const SEGMENTS_MAX = 500;

/** One node of the scope tree. */
export interface ScopeRow {
  scope: string;
  parent: string | null;
  /** Live keys in exactly this scope (not inherited). */
  liveKeys: number;
  /** Slots in exactly this scope, in any state. */
  slots: number;
}

/** The scope tree; `enumerable` false when the store cannot list its scopes (then only "global"). */
export interface ScopeTree {
  enumerable: boolean;
  scopes: ScopeRow[];
  truncated: boolean;
}

/** One key of the selected scope: its own slot, or a live key inherited from `origin`. */
export interface KeyRow {
  key: string;
  origin: string;
  inherited: boolean;
  state: SlotState;
  version: number | null;
}

/** A value as the page shows it: text, or bytes as hex and base64; cut at VALUE_SHOW_BYTES_MAX. */
export type ValueView =
  | { kind: "text"; text: string; bytes: number; truncated: boolean }
  | { kind: "bytes"; hex: string; base64: string; bytes: number; truncated: boolean };

/** A key's detail: its probe in `origin`, the value there, and what a read in `scope` resolves to. */
export interface KeyDetail {
  scope: string;
  origin: string;
  key: string;
  probe: ProbeResult;
  explanation: string;
  value: ValueView | null;
  /** The scope a read of this key in `scope` (inheriting) is answered from, or null for NOT_FOUND. */
  readFrom: string | null;
  readError: { code: string; message: string } | null;
}

/** The store's totals and segments, and a signature that changes whenever the store does. */
export interface Summary {
  dir: string;
  role: string;
  signature: string;
  totals: Omit<StoreStats, "segments">;
  segments: SegmentStats[];
  segmentsTruncated: boolean;
}

/** Live keys in exactly `scope`. */
async function liveCount(store: Engram, scope: string): Promise<number> {
  let n = 0;
  for await (const _ of store.list({ scope, inherit: false, limit: KEYS_MAX })) n += 1;
  return n;
}

/** Scopes holding slots, or null when the backend cannot enumerate them (NOT_SUPPORTED). */
async function slotScopes(store: Engram): Promise<string[] | null> {
  try {
    return await store.listScopes();
  } catch (err) {
    if (err instanceof EngramError && err.code === "NOT_SUPPORTED") return null;
    throw err;
  }
}

/** The scope tree: every scope holding a slot and all its ancestors, with counts. */
export async function scopeTree(store: Engram): Promise<ScopeTree> {
  const held = await slotScopes(store);
  const names = new Set<string>(["global"]);
  for (const s of held ?? []) for (const a of scopeLineage(s)) names.add(a);
  const sorted = [...names].sort();
  const shown = sorted.slice(0, SCOPES_MAX);
  const heldSet = new Set(held ?? []);
  const scopes: ScopeRow[] = [];
  for (const scope of shown) {
    const slots = heldSet.has(scope) ? (await store.listSlots({ scope, limit: KEYS_MAX })).length : 0;
    scopes.push({ scope, parent: parentScope(scope), liveKeys: slots > 0 ? await liveCount(store, scope) : 0, slots });
  }
  return { enumerable: held !== null, scopes, truncated: sorted.length > shown.length };
}

/** Slot keys of exactly `scope`, or [] when the backend cannot list them. */
async function ownKeys(store: Engram, scope: string): Promise<string[]> {
  try {
    return await store.listSlots({ scope, limit: KEYS_MAX });
  } catch (err) {
    if (err instanceof EngramError && err.code === "NOT_SUPPORTED") return [];
    throw err;
  }
}

/** The keys of `scope`: its own slots in any state, then live keys inherited from its ancestors. */
export async function keysOf(store: Engram, scope: string): Promise<{ scope: string; keys: KeyRow[] }> {
  const rows: KeyRow[] = [];
  const own = new Set<string>();
  for (const key of await ownKeys(store, scope)) {
    const p = await store.probe(key, { scope });
    rows.push({ key, origin: scope, inherited: false, state: p.state, version: p.version });
    if (p.state === "live") own.add(key);
  }
  for await (const e of store.list({ scope, inherit: true, limit: KEYS_MAX })) {
    if (e.scope === scope || own.has(e.key)) continue;
    rows.push({ key: e.key, origin: e.scope, inherited: true, state: "live", version: e.version });
  }
  rows.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.inherited === b.inherited ? 0 : a.inherited ? 1 : -1));
  return { scope, keys: rows };
}

/** A value cut to VALUE_SHOW_BYTES_MAX for display. */
export function valueView(value: string | Uint8Array): ValueView {
  if (typeof value === "string") {
    const bytes = Buffer.byteLength(value, "utf8");
    const truncated = bytes > VALUE_SHOW_BYTES_MAX;
    const text = truncated ? Buffer.from(value, "utf8").subarray(0, VALUE_SHOW_BYTES_MAX).toString("utf8") : value;
    return { kind: "text", text, bytes, truncated };
  }
  const cut = Buffer.from(value.buffer, value.byteOffset, Math.min(value.byteLength, VALUE_SHOW_BYTES_MAX));
  return { kind: "bytes", hex: cut.toString("hex"), base64: cut.toString("base64"), bytes: value.byteLength, truncated: value.byteLength > cut.length };
}

/** The detail of `key` whose slot lives in `origin`, seen from the selected `scope`. */
export async function keyDetail(store: Engram, scope: string, origin: string, key: string): Promise<KeyDetail> {
  const probe = await store.probe(key, { scope: origin });
  const detail: KeyDetail = { scope, origin, key, probe, explanation: STATE_EXPLANATIONS[probe.state], value: null, readFrom: null, readError: null };
  try {
    const own = await store.read(key, { scope: origin, inherit: false });
    if (own.status === "OK") detail.value = valueView(own.value);
    const seen = await store.read(key, { scope });
    detail.readFrom = seen.status === "OK" ? seen.scope : null;
  } catch (err) {
    if (!(err instanceof EngramError)) throw err;
    detail.readError = { code: err.code, message: err.message }; // e.g. SCOPE_ERASED_DURING_READ: shown, not retried
  }
  return detail;
}

/** The totals of stats(), the segments, and the change signature the page polls. */
export function summary(store: Engram): Summary {
  const { segments, ...totals } = store.stats();
  const role = "role" in store && typeof store.role === "string" ? store.role : "owner";
  const signature = [totals.sequence, totals.compactions, totals.totalBytes, totals.slots, segments.length].join(":");
  return { dir: store.dir, role, signature, totals, segments: segments.slice(0, SEGMENTS_MAX), segmentsTruncated: segments.length > SEGMENTS_MAX };
}
