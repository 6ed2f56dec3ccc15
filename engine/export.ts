/**
 * Export: every slot of a scope's subtree, as `engram export` writes it — a live value with its
 * version, generation and expiry, or a retention record (version, generation, tombstone) without
 * any value.
 *
 * Values are read through the ordinary read path (exact scope, no inheritance), so the rules
 * that keep a forgotten value from ever being read keep it out of an export too: a slot
 * forgotten before its read is exported as a retention record, never with its value. The slot
 * list is taken in one turn; writes that land meanwhile are exported as they are when read
 * (export is online, not a snapshot: export a backup for a point-in-time copy).
 */
import { InternalError, ScopeErasedDuringRead } from "../rules/errors.js";
import type { ExportEntry, ProbeResult, ReadResult, ScopeOption } from "../rules/types.js";
import * as A from "../rules/args.js";
import type { Keydir } from "./keydir.js";

/** What export needs from the store. */
export interface ExportHost {
  readonly keydir: Keydir;
  assertOpen(): void;
  read(key: string, options: { scope: string; inherit: false }): Promise<ReadResult>;
  probe(key: string, options: { scope: string }): Promise<ProbeResult>;
}

/** How often one slot is re-read when a compaction moved it mid-read. */
const READ_ATTEMPTS_MAX = 16;

/** The (scope, key) pairs of `root`'s subtree, in scope then key order. */
function slotsOf(keydir: Keydir, root: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  keydir.anyInSubtree(root, (_ref, scope, key) => {
    out.push([scope, key]); // a held row is listed as it is: no Slot made
    return false;
  });
  const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  return out.sort((a, b) => cmp(a[0], b[0]) || cmp(a[1], b[1]));
}

/** Reads one slot's value; a read torn by a compaction is retried (it names no other slot's bytes). */
async function readExact(host: ExportHost, scope: string, key: string): Promise<ReadResult> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await host.read(key, { scope, inherit: false });
    } catch (err) {
      if (!(err instanceof ScopeErasedDuringRead) || attempt >= READ_ATTEMPTS_MAX) throw err;
    }
  }
}

/** One slot's entry, or null when it vanished (its retention record was dropped meanwhile). */
async function entryOf(host: ExportHost, scope: string, key: string): Promise<ExportEntry | null> {
  for (let attempt = 1; attempt <= READ_ATTEMPTS_MAX; attempt += 1) {
    const r = await readExact(host, scope, key);
    const p = await host.probe(key, { scope });
    if (r.status === "OK" && p.state === "live" && p.version === r.version) {
      return { kind: "value", scope, key, value: r.value, version: r.version, generation: r.generation, expiresAt: p.expiresAt };
    }
    if (p.state === "live") continue; // written between the read and the probe: read again
    if (p.state === "absent") return null;
    return { kind: "retention", scope, key, state: p.state, version: p.version, generation: p.generation, tombstoneSeq: p.tombstoneSeq };
  }
  throw new InternalError(`export: ${scope}/${key} changed on every one of ${READ_ATTEMPTS_MAX} reads; export again when writes to it pause`);
}

/** exportEntries(): see the file comment. */
export async function* exportEntries(host: ExportHost, options?: ScopeOption): AsyncGenerator<ExportEntry> {
  host.assertOpen();
  const root = A.scopeOf(A.optsOf(options, "exportEntries"));
  for (const [scope, key] of slotsOf(host.keydir, root)) {
    const e = await entryOf(host, scope, key);
    if (e !== null) yield e;
  }
}
