/**
 * Misspelt option names. An option name engram does not know is ignored (API.md: callers may pass
 * fields of their own, and a newer engram's options reach an older one), but a name within a
 * typo of a known one is refused with InvalidArgumentError naming the known one: `{ scop: "user:a" }`
 * read as no option would write a user's memory to "global", and `unsafe: { gcKeyedby }` would run
 * the safe store while its caller believes it runs the unsafe twin.
 *
 * A near miss: not a known name, but equal to one after case folding and dropping "_" and "-"
 * (`expected_version`, `Scope`), or within 1 edit of one (2 edits for names of 6 characters or
 * more; an edit is an insertion, deletion, substitution or swap of two neighbours), or one of a
 * few common wrong names (`ttl`, `version`).
 */
import { InvalidArgumentError } from "./errors.js";

/** The options of every per-call method (write, read, readSync, forget, forgetScope, undelete, probe, list, compact). */
export const CALL_OPTION_NAMES: ReadonlySet<string> = new Set([
  "scope", "inherit", "expectedVersion", "clearTombstone", "ttlMs", "reclaim", "prefix", "limit", "mode", "segments",
]);
/** The fields of one batch() row: a write's or a forget's options, and the row's own fields. */
export const BATCH_ROW_NAMES: ReadonlySet<string> = new Set([...CALL_OPTION_NAMES, "op", "key", "value"]);
/** OpenOptions' top-level names (API.md), and those of its nested objects. */
export const OPEN_OPTION_NAMES: ReadonlySet<string> = new Set([
  "durability", "syncIntervalMs", "segmentBytes", "valueBytesMax", "maxValueBytes", "cacheBytes", "blockCacheBytes",
  "compaction", "retention", "tombstoneWrites", "clock", "faults", "unsafe", "share", "shareTimeoutMs",
]);
export const COMPACTION_OPTION_NAMES: ReadonlySet<string> = new Set(["mode", "workers", "auto", "garbageRatio", "niceness"]);
export const RETENTION_OPTION_NAMES: ReadonlySet<string> = new Set(["ttlMs", "tombstoneRetentionMs", "scopes"]);
export const UNSAFE_OPTION_NAMES: ReadonlySet<string> = new Set(["gcKeyedBy", "skipReadValidation", "shareAckBeforeCommit"]);
export const FAULT_OPTION_NAMES: ReadonlySet<string> = new Set(["pauseAt", "crashAt", "crashAfter", "failAt"]);

/** Wrong names common enough to name their right one, whatever their distance. */
const WRONG_NAMES: ReadonlyMap<string, string> = new Map([
  ["ttl", "ttlMs"],
  ["version", "expectedVersion"],
]);

/** Longest name compared (a longer unknown name is nobody's typo; it also bounds the edit-distance table). */
const NAME_CHARS_MAX = 64;

/**
 * Throws InvalidArgumentError when an own field of `o` is a near miss of a name in `known`: `where`
 * names the call or option object (`write`, `options.retention`). Known and far-off names pass.
 */
export function refuseMisspelt(o: object, known: ReadonlySet<string>, where: string): void {
  const name = misspeltName(o, known);
  if (name !== null) throwMisspelt(name, known, where);
}

/**
 * The first own field of `o` that is a near miss of a name in `known`, or null. Allocates nothing
 * when every field is known (the hot path: a read's `{ scope }`, a batch row).
 */
export function misspeltName(o: object, known: ReadonlySet<string>): string | null {
  for (const name in o) {
    if (known.has(name) || !Object.hasOwn(o, name)) continue;
    if (nearestKnown(name, known) !== null) return name;
  }
  return null;
}

/** Throws the InvalidArgumentError of misspelt option `name` (a near miss of a name in `known`) in `where`. */
export function throwMisspelt(name: string, known: ReadonlySet<string>, where: string): never {
  const meant = nearestKnown(name, known);
  if (meant === null) throw new InvalidArgumentError(`${where}: option ${JSON.stringify(name)} was taken for a misspelt one, and no known option is near it: please report it`);
  throw new InvalidArgumentError(
    `${where}: unknown option ${JSON.stringify(name)}; did you mean ${JSON.stringify(meant)}? (a misspelt option would be ignored — a misspelt scope writes to "global" — so it is refused: spell it ${JSON.stringify(meant)})`,
  );
}

/** The known name `name` is a near miss of, or null. */
export function nearestKnown(name: string, known: ReadonlySet<string>): string | null {
  if (name.length > NAME_CHARS_MAX) return null;
  const wrong = WRONG_NAMES.get(name);
  if (wrong !== undefined && known.has(wrong)) return wrong;
  const folded = fold(name);
  for (const candidate of known) {
    const target = fold(candidate);
    const allowed = target.length >= 6 ? 2 : 1;
    if (folded === target || editDistance(folded, target, allowed) <= allowed) return candidate;
  }
  return null;
}

/** Lower case without "_" and "-": `expected_version` and `expectedVersion` fold alike. */
function fold(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, "");
}

/**
 * Edit distance of `a` and `b` (insertions, deletions, substitutions, swaps of neighbours), or
 * `cap + 1` as soon as it is known to pass `cap`.
 */
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) > cap) return cap + 1;
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, (before[j - 2] as number) + 1);
      row.push(d);
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin > cap) return cap + 1;
    before = prev;
    prev = row;
  }
  return prev[b.length] as number;
}

/** Nested OpenOptions objects and the names each knows. */
const OPEN_OPTION_OBJECTS: ReadonlyArray<[string, ReadonlySet<string>]> = [
  ["compaction", COMPACTION_OPTION_NAMES],
  ["retention", RETENTION_OPTION_NAMES],
  ["unsafe", UNSAFE_OPTION_NAMES],
  ["faults", FAULT_OPTION_NAMES],
];

/** Refuses a misspelt name in OpenOptions `o` (a plain object), at the top level and in its nested option objects. */
export function refuseMisspeltOpenOptions(o: Record<string, unknown>): void {
  refuseMisspelt(o, OPEN_OPTION_NAMES, "options");
  for (const [field, known] of OPEN_OPTION_OBJECTS) {
    const nested = o[field];
    if (nested !== null && typeof nested === "object" && !Array.isArray(nested)) refuseMisspelt(nested, known, `options.${field}`);
  }
}
