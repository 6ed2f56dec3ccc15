/**
 * The agent-facing tool layer: JSON Schemas for the memory_* tools, validation of their arguments
 * (src/tool-args.ts), and `handleToolCall`, which maps a tool call onto a store and returns the snake_case
 * wire shapes of API.md. It never throws: every failure is a `{ ok: false, error, message }`.
 */
import type * as z from "zod";
import { EngramError, type ErrorCodeName } from "../rules/errors.js";
import { KEY_BYTES_MAX, SCOPE_DEPTH_MAX, SEQ_MAX, TTL_MS_MAX } from "../rules/limits.js";
import { assertScope } from "../rules/names.js";
import { BASE64, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, parseToolArgs } from "./tool-args.js";
import type { toolArgSchemas } from "./tool-schemas.js";
import type {
  ForgetResult,
  ForgetScopeOptions,
  ForgetScopeResult,
  ListEntry,
  ListOptions,
  ProbeResult,
  ReadOptions,
  ReadResult,
  ScopeOption,
  SlotState,
  UndeleteResult,
  Value,
  WriteOptions,
  WriteResult,
} from "./types.js";

/** The store methods the tool layer needs; `Engram` satisfies it structurally. */
export interface MemoryStore {
  /** Engram.read (memory_read): the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, opts?: ReadOptions): Promise<ReadResult>;
  /** Engram.write (memory_write): writes `value` under `key`, resolving with its version and generation once committed. */
  write(key: string, value: Value, opts?: WriteOptions): Promise<WriteResult>;
  /** Engram.forget (memory_forget): tombstones `key` in exactly `scope`, resolving once the tombstone is committed. */
  forget(key: string, opts?: ScopeOption): Promise<ForgetResult>;
  /** Engram.forgetScope (memory_forget_scope): erases `scope` and every descendant scope. */
  forgetScope(scope: string, opts?: ForgetScopeOptions): Promise<ForgetScopeResult>;
  /** Engram.undelete (memory_undelete): clears the slot's tombstone; the slot is then empty and writable. */
  undelete(key: string, opts?: ScopeOption): Promise<UndeleteResult>;
  /** Engram.probe (memory_probe): the value record and the retention record of `key` in exactly `scope`, separately. */
  probe(key: string, opts?: ScopeOption): Promise<ProbeResult>;
  /** Engram.list (memory_list): live keys in key order, the nearest scope's entry winning when inheriting. */
  list(opts?: ListOptions): AsyncIterable<ListEntry>;
}

/** A plain JSON Schema object (draft-07 subset used by the tool definitions). */
export interface JsonSchema {
  [keyword: string]: JsonValue;
}

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** The names of every tool this layer serves. */
export type ToolName =
  | "memory_read"
  | "memory_write"
  | "memory_forget"
  | "memory_forget_scope"
  | "memory_probe"
  | "memory_undelete"
  | "memory_list";

/** One tool as an agent host sees it (the MCP `tools/list` shape). */
export interface ToolDefinition {
  /** The tool's name, as the agent calls it. */
  name: ToolName;
  /** What the tool does and when to use it, written for the agent. */
  description: string;
  /** JSON Schema of the tool's arguments (snake_case; unknown properties are refused). */
  inputSchema: JsonSchema;
  /** True when the tool changes the store; such tools are hidden and refused in read-only mode. */
  mutates: boolean;
}

/** How a tool set is bound: a default scope for calls that omit `scope`, and read-only mode. */
export interface ToolContext {
  /** The scope of calls that give no `scope` (default "global"); an invalid one makes every call INVALID_ARGUMENT. */
  defaultScope?: string;
  /** Hide the mutating tools from `listTools` and refuse their calls with INVALID_ARGUMENT (default false). */
  readOnly?: boolean;
}

/** A value on the wire: a string, or bytes as `{ "base64": "..." }`. */
export type WireValue = string | { base64: string };

/** `memory_write` success. */
export interface WireWriteResult {
  /** Always true: a failure is a WireError. */
  ok: true;
  /** The commit sequence number of the write: the slot's new version. */
  version: number;
  /** The slot's generation the value was written at. */
  generation: number;
}

/** `memory_read` result: the value with the scope it was found in, or NOT_FOUND. */
export type WireReadResult =
  | { status: "OK"; value: WireValue; version: number; generation: number; scope: string }
  | { status: "NOT_FOUND" };

/** `memory_forget` success: confirms the tombstone commit only (null: nothing live to forget). */
export interface WireForgetResult {
  /** Always true: a failure is a WireError. */
  ok: true;
  /** The commit sequence number of the tombstone; null when there was nothing live to forget. */
  tombstone_seq: number | null;
  /** The slot's generation, which the tombstone kills; null when the slot does not exist. */
  generation: number | null;
}

/** `memory_forget_scope` success. */
export interface WireForgetScopeResult {
  /** Always true: a failure is a WireError. */
  ok: true;
  /** The commit sequence number of the erasure. */
  tombstone_seq: number;
  /** Live slots the erasure killed, in the scope and its descendants. */
  slots: number;
  /** With `reclaim: "eager"` only: bytes the reclamation freed. */
  reclaimed_bytes?: number;
}

/** `memory_undelete` success: the slot is empty and writable at this generation. */
export interface WireUndeleteResult {
  /** Always true: a failure is a WireError. */
  ok: true;
  /** The slot's generation after the call: above its tombstone when one was cleared. */
  generation: number;
}

/** `memory_probe` result: value record and retention record reported separately. */
export interface WireProbeResult {
  /** The slot's state: "live", "tombstoned", "reclaimed", "expired" or "absent" (see SlotState). */
  state: SlotState;
  /** A readable value exists. */
  value_present: boolean;
  /** The slot's retention record (version, generation, tombstone) exists. */
  retention_present: boolean;
  /** Value records of this slot still physically on disk. */
  physical_records: number;
  /** The version of the slot's last write, kept after a forget; null when it has none. */
  version: number | null;
  /** The slot's generation; null when the slot does not exist. */
  generation: number | null;
  /** The commit sequence number of the latest kill of the slot (forget or scope erasure); null when none. */
  tombstone_seq: number | null;
  /** When the value expires, in ms since epoch; null when it has no TTL or no value record is on disk. */
  expires_at: number | null;
}

/** `memory_list` result: live keys in key order; `truncated` when `limit` cut the list. */
export interface WireListResult {
  /** Always true: a failure is a WireError. */
  ok: true;
  /** Live keys in key order, each with the scope it was found in and its version; at most `limit` (default 100, max 1000). */
  entries: Array<{ key: string; scope: string; version: number }>;
  /** True when more live keys matched than `limit` let through. */
  truncated: boolean;
}

/** Any failure: `error` is an EngramError code (INTERNAL for an unexpected fault). */
export interface WireError {
  /** Always false. */
  ok: false;
  /** The stable error code (the EngramError's `code`; INTERNAL for an unexpected failure). */
  error: ErrorCodeName;
  /** What went wrong and what to do, in words. */
  message: string;
  /** The error's own details in snake_case (`expected`, `actual`, `tombstone_seq`, ...). */
  [detail: string]: JsonValue;
}

/** Every shape `handleToolCall` can return. */
export type WireResult =
  | WireWriteResult
  | WireReadResult
  | WireForgetResult
  | WireForgetScopeResult
  | WireUndeleteResult
  | WireProbeResult
  | WireListResult
  | WireError;

// ---------------------------------------------------------------------------------------------
// Validation: src/tool-args.ts, the single gate in front of the store (src/tool-schemas.ts holds
// the same rules as zod schemas, exported as toolArgSchemas).

/** True when `scope` is "global" or 1–8 valid components joined by "/" (API.md "Scopes"). */
export function isValidScope(scope: string): boolean {
  try {
    assertScope(scope);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// JSON Schemas and descriptions: what an agent reads.

const SCOPE_DOC =
  'Scope path, default "global" (or the server\'s bound scope). "global" is the root; otherwise 1-8 ' +
  'components joined by "/", e.g. "user:alice/session:42" (parent "user:alice", then "global").';
const KEY_DOC = "Memory key: 1-1024 UTF-8 bytes, no NUL, e.g. \"pref.theme\".";

/**
 * The schemas state every rule of src/tool-args.ts that JSON Schema can: a call the schema refuses
 * is refused by the server, and the other way round except for what a schema cannot say (a key's
 * UTF-8 byte count, lone surrogates). test/mcp-schemas.test.ts holds the two to each other.
 */
/** A scope component of rules/names.ts, not "global" (the root cannot be a component). */
const SCOPE_COMPONENT = "(?!global(?:/|$))[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}";
/** rules/names.ts assertScope as a pattern: "global", or 1-8 components joined by "/". */
const SCOPE_PATTERN = `^(?:global|${SCOPE_COMPONENT}(?:/${SCOPE_COMPONENT}){0,${SCOPE_DEPTH_MAX - 1}})$`;

// A key has at most KEY_BYTES_MAX bytes, so at most as many UTF-16 units; the bytes are the server's check.
const keyProp: JsonSchema = { type: "string", minLength: 1, maxLength: KEY_BYTES_MAX, pattern: "^[^\\u0000]*$", description: KEY_DOC };
const scopeProp: JsonSchema = { type: "string", pattern: SCOPE_PATTERN, description: SCOPE_DOC };
const valueProp: JsonSchema = {
  description: 'The value: a string, or bytes as {"base64": "..."}. Reads return the same kind.',
  anyOf: [
    { type: "string" },
    { type: "object", properties: { base64: { type: "string", pattern: BASE64.source } }, required: ["base64"], additionalProperties: false },
  ],
};

function objectSchema(properties: Record<string, JsonSchema>, required: string[]): JsonSchema {
  return { type: "object", properties, required, additionalProperties: false };
}

const READ_DESC =
  "Read a memory. Looks in `scope`, then its parents up to \"global\" (unless inherit is false); the result's " +
  "`scope` says where it was found. Returns {status:\"OK\", value, version, generation, scope} or " +
  "{status:\"NOT_FOUND\"}. NOT_FOUND right after you wrote the key does NOT prove your write was lost: call " +
  "memory_probe to see whether the value or only its retention record is gone. SCOPE_ERASED_DURING_READ means " +
  "the read overlapped an erasure and returned nothing; read again if you still need the value.";

const WRITE_DESC =
  "Write a memory; returns {ok:true, version, generation}. Pass expected_version (the version memory_read " +
  "returned) to update only if nobody changed it since (VERSION_CONFLICT otherwise); pass null to write only " +
  "if the key has no live value (absent or forgotten - a forgotten key's probe still shows its old version, " +
  "but that version is not live: use null). Writing a key " +
  "you forgot: by default the write clears the tombstone and bumps the slot's generation. If you get " +
  "TOMBSTONED, retry with clear_tombstone:true or call memory_undelete first. ttl_ms makes it expire.";

const FORGET_DESC =
  "Forget one key in exactly this scope (parents and children are untouched). {ok:true, tombstone_seq} " +
  "confirms only that the tombstone is committed - the key is no longer readable - NOT that the bytes are " +
  "reclaimed; that happens later (memory_probe's state tells: \"tombstoned\" vs \"reclaimed\"). tombstone_seq " +
  "null means there was nothing live to forget. To reuse the key later, prefer memory_probe first, and " +
  "memory_undelete or clear_tombstone:true on the write.";

const FORGET_SCOPE_DESC =
  "Erase a whole scope and every scope below it (e.g. a finished session). reclaim:\"eager\" returns only " +
  "after the value bytes are physically gone from disk; \"lazy\" (default) confirms the erasure record and " +
  "reclaims later. Irreversible. \"global\" is refused.";

const PROBE_DESC =
  "Inspect one key's slot in exactly this scope without reading its value. state: \"live\" (readable), " +
  "\"tombstoned\" (forgotten, bytes still on disk), \"reclaimed\" (value bytes gone but the retention record " +
  "with version/generation/tombstone survives - a half-reclaimed slot), \"expired\", \"absent\" (nothing). " +
  "Use it when a read is NOT_FOUND unexpectedly, after a forget to check reclamation, and before re-writing a " +
  "forgotten key: if retention_present is true and value_present false, re-write with clear_tombstone:true " +
  "or call memory_undelete first.";

const UNDELETE_DESC =
  "Clear a forgotten key's tombstone in this scope: bumps the slot generation above it and leaves the slot " +
  "empty and writable (it does NOT restore the old value). Use before re-writing a key whose probe shows " +
  "retention_present:true and value_present:false.";

const LIST_DESC =
  "List live keys in key order: {ok:true, entries:[{key, scope, version}], truncated}. Filters: scope (with its " +
  `parents unless inherit is false), prefix, limit (default ${LIST_LIMIT_DEFAULT}, max ${LIST_LIMIT_MAX}).`;

/** Every tool with its JSON Schema, description and whether it mutates the store. */
export const tools: readonly ToolDefinition[] = [
  {
    name: "memory_read",
    description: READ_DESC,
    mutates: false,
    inputSchema: objectSchema(
      { key: keyProp, scope: scopeProp, inherit: { type: "boolean", description: "Search parent scopes (default true)." } },
      ["key"],
    ),
  },
  {
    name: "memory_write",
    description: WRITE_DESC,
    mutates: true,
    inputSchema: objectSchema(
      {
        key: keyProp,
        value: valueProp,
        scope: scopeProp,
        expected_version: {
          type: ["integer", "null"],
          minimum: 1,
          maximum: SEQ_MAX,
          description: "Compare-and-set: the live version you read, or null for \"no live value\" (absent or forgotten).",
        },
        clear_tombstone: { type: "boolean", description: "Explicitly supersede a tombstone on this key (bumps generation)." },
        ttl_ms: { type: ["integer", "null"], minimum: 1, maximum: TTL_MS_MAX, description: "Expire after this many ms (null: never)." },
      },
      ["key", "value"],
    ),
  },
  {
    name: "memory_forget",
    description: FORGET_DESC,
    mutates: true,
    inputSchema: objectSchema({ key: keyProp, scope: scopeProp }, ["key"]),
  },
  {
    name: "memory_forget_scope",
    description: FORGET_SCOPE_DESC,
    mutates: true,
    inputSchema: objectSchema(
      {
        scope: { type: "string", pattern: SCOPE_PATTERN, not: { const: "global" }, description: 'The scope to erase, with all its descendants (not "global").' },
        reclaim: { type: "string", enum: ["lazy", "eager"], description: "When value bytes are removed (default lazy)." },
      },
      ["scope"],
    ),
  },
  {
    name: "memory_probe",
    description: PROBE_DESC,
    mutates: false,
    inputSchema: objectSchema({ key: keyProp, scope: scopeProp }, ["key"]),
  },
  {
    name: "memory_undelete",
    description: UNDELETE_DESC,
    mutates: true,
    inputSchema: objectSchema({ key: keyProp, scope: scopeProp }, ["key"]),
  },
  {
    name: "memory_list",
    description: LIST_DESC,
    mutates: false,
    inputSchema: objectSchema(
      {
        scope: scopeProp,
        prefix: { type: "string", description: "Only keys starting with this." },
        inherit: { type: "boolean", description: "Include parent scopes (default true)." },
        limit: { type: "integer", minimum: 1, maximum: LIST_LIMIT_MAX, description: "Max entries returned." },
      },
      [],
    ),
  },
];

/** The tools visible in a context: read-only mode hides the mutating ones. */
export function listTools(context: ToolContext = {}): ToolDefinition[] {
  return tools.filter((t) => !(context.readOnly === true && t.mutates));
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

type Args<N extends ToolName> = z.infer<(typeof toolArgSchemas)[N]>;

/** Builds an INVALID_ARGUMENT wire error. */
function invalid(message: string): WireError {
  return { ok: false, error: "INVALID_ARGUMENT", message };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isToolName(name: string): name is ToolName {
  return tools.some((t) => t.name === name);
}

/** Turns an error's own scalar fields into snake_case wire details. */
function errorDetails(err: EngramError): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [k, v] of Object.entries(err)) {
    if (k === "code" || k === "name" || k === "ok" || k === "error" || k === "message") continue;
    if (v === null || typeof v === "number" || typeof v === "string" || typeof v === "boolean") {
      out[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = v;
    }
  }
  return out;
}

/** Converts any thrown value into a wire error; EngramErrors keep their stable code. */
export function toWireError(err: unknown): WireError {
  if (err instanceof EngramError) {
    return { ok: false, error: err.code, message: err.message, ...errorDetails(err) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { ok: false, error: "INTERNAL", message: `unexpected failure: ${message}` };
}

function toValue(v: Args<"memory_write">["value"]): Value {
  if (typeof v === "string") return v;
  const buf = Buffer.from(v.base64, "base64");
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Encodes a stored value for the wire: strings as is, bytes as `{ base64 }`. */
export function toWireValue(v: Value): WireValue {
  return typeof v === "string" ? v : { base64: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
}

/** Converts a ProbeResult to its wire shape. */
export function toWireProbe(p: ProbeResult): WireProbeResult {
  return {
    state: p.state,
    value_present: p.valuePresent,
    retention_present: p.retentionPresent,
    physical_records: p.physicalRecords,
    version: p.version,
    generation: p.generation,
    tombstone_seq: p.tombstoneSeq,
    expires_at: p.expiresAt,
  };
}

async function doRead(store: MemoryStore, a: Args<"memory_read">, scope: string): Promise<WireReadResult> {
  const r = await store.read(a.key, { scope, ...(a.inherit === undefined ? {} : { inherit: a.inherit }) });
  if (r.status !== "OK") return { status: "NOT_FOUND" };
  return { status: "OK", value: toWireValue(r.value), version: r.version, generation: r.generation, scope: r.scope };
}

async function doWrite(store: MemoryStore, a: Args<"memory_write">, scope: string): Promise<WireWriteResult> {
  const opts: WriteOptions = { scope };
  if (a.expected_version !== undefined) opts.expectedVersion = a.expected_version;
  if (a.clear_tombstone !== undefined) opts.clearTombstone = a.clear_tombstone;
  if (a.ttl_ms !== undefined) opts.ttlMs = a.ttl_ms;
  const r = await store.write(a.key, toValue(a.value), opts);
  return { ok: true, version: r.version, generation: r.generation };
}

async function doForget(store: MemoryStore, a: Args<"memory_forget">, scope: string): Promise<WireForgetResult> {
  const r = await store.forget(a.key, { scope });
  return { ok: true, tombstone_seq: r.tombstoneSeq, generation: r.generation };
}

async function doForgetScope(store: MemoryStore, a: Args<"memory_forget_scope">): Promise<WireForgetScopeResult> {
  const r = await store.forgetScope(a.scope, { reclaim: a.reclaim ?? "lazy" });
  const out: WireForgetScopeResult = { ok: true, tombstone_seq: r.tombstoneSeq, slots: r.slots };
  if (r.reclaimedBytes !== undefined) out.reclaimed_bytes = r.reclaimedBytes;
  return out;
}

async function doUndelete(store: MemoryStore, a: Args<"memory_undelete">, scope: string): Promise<WireUndeleteResult> {
  const r = await store.undelete(a.key, { scope });
  return { ok: true, generation: r.generation };
}

async function doList(store: MemoryStore, a: Args<"memory_list">, scope: string): Promise<WireListResult> {
  const limit = a.limit ?? LIST_LIMIT_DEFAULT;
  const opts: ListOptions = { scope, limit: limit + 1 };
  if (a.prefix !== undefined) opts.prefix = a.prefix;
  if (a.inherit !== undefined) opts.inherit = a.inherit;
  const entries: WireListResult["entries"] = [];
  let truncated = false;
  for await (const e of store.list(opts)) {
    if (entries.length === limit) {
      truncated = true;
      break;
    }
    entries.push({ key: e.key, scope: e.scope, version: e.version });
  }
  return { ok: true, entries, truncated };
}

async function dispatch(store: MemoryStore, name: ToolName, args: unknown, scope: string): Promise<WireResult> {
  switch (name) {
    case "memory_read":
      return doRead(store, args as Args<"memory_read">, scope);
    case "memory_write":
      return doWrite(store, args as Args<"memory_write">, scope);
    case "memory_forget":
      return doForget(store, args as Args<"memory_forget">, scope);
    case "memory_forget_scope":
      return doForgetScope(store, args as Args<"memory_forget_scope">);
    case "memory_probe":
      return toWireProbe(await store.probe((args as Args<"memory_probe">).key, { scope }));
    case "memory_undelete":
      return doUndelete(store, args as Args<"memory_undelete">, scope);
    case "memory_list":
      return doList(store, args as Args<"memory_list">, scope);
  }
}

/** Validates a call without touching the store: the parsed arguments, or the wire error to return. */
export function validateToolCall(
  name: string,
  args: unknown,
  context: ToolContext = {},
): { ok: true; name: ToolName; args: unknown; scope: string } | { ok: false; error: WireError } {
  if (!isToolName(name)) {
    const known = listTools(context).map((t) => t.name).join(", ");
    return { ok: false, error: invalid(`unknown tool ${JSON.stringify(name)}; known tools: ${known}`) };
  }
  const def = tools.find((t) => t.name === name);
  if (context.readOnly === true && def?.mutates === true) {
    return { ok: false, error: invalid(`${name} is refused: this memory server is read-only`) };
  }
  if (context.defaultScope !== undefined && !isValidScope(context.defaultScope)) {
    return { ok: false, error: invalid(`the bound default scope ${JSON.stringify(context.defaultScope)} is not a valid scope`) };
  }
  const raw = args === undefined ? {} : args;
  if (!isPlainObject(raw)) return { ok: false, error: invalid(`${name}: arguments must be a JSON object`) };
  const parsed = parseToolArgs(name, raw);
  if (!parsed.ok) return { ok: false, error: invalid(parsed.message) };
  const given = (parsed.data as { scope?: string }).scope;
  return { ok: true, name, args: parsed.data, scope: given ?? context.defaultScope ?? "global" };
}

/**
 * Runs one tool call against a store and returns its wire result. Never throws: bad calls are
 * INVALID_ARGUMENT before anything is written, EngramErrors keep their code, anything else is INTERNAL.
 */
export async function handleToolCall(
  store: MemoryStore,
  name: string,
  args: unknown,
  context: ToolContext = {},
): Promise<WireResult> {
  try {
    const v = validateToolCall(name, args, context);
    if (!v.ok) return v.error;
    return await dispatch(store, v.name, v.args, v.scope);
  } catch (err) {
    return toWireError(err);
  }
}

/** True when a wire result is an error. */
export function isWireError(r: WireResult): r is WireError {
  return "ok" in r && r.ok === false;
}
