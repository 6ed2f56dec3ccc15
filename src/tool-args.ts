/**
 * The memory_* tools' argument checks, without a schema library: the single gate in front of the
 * store for every tool call (handleToolCall, so the CLI and the MCP server alike). It gives the
 * answers the zod schemas of src/tool-schemas.ts give — the same parsed arguments, the same
 * issues in the same order, the same messages — which test/tool-args.test.ts compares on every
 * conformance bad call and thousands of generated ones. Why not zod itself: loading it (95 module
 * files) took ~70 ms of every CLI command's ~350 (thirty-fifth session); the schemas stay, as the
 * exported `toolArgSchemas` and as this file's reference.
 *
 * The rules zod follows that this file keeps: an object's fields are checked in the schema's
 * order, then its unrecognized keys (`for...in`, so inherited enumerable ones too) are one issue;
 * a field's type failure ends its checks (fatal), its refinements do not and all run; a union
 * takes the first option that passes, else the one option whose issues are all non-fatal, else
 * its own message.
 */
import { assertKey, assertScope } from "../rules/names.js";

/** Standard padded base64 (what a `{ base64 }` value must be). */
export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** The most entries one memory_list call returns. */
export const LIST_LIMIT_MAX = 1000;
/** memory_list's limit when none is given. */
export const LIST_LIMIT_DEFAULT = 100;
/** memory_forget_scope's refusal of the root scope. */
export const FORGET_GLOBAL_REFUSED = 'memory_forget_scope refuses "global" (it would erase every memory)';
/** A value that is neither a string nor `{ base64 }`. */
export const VALUE_SHAPE = 'value must be a string or {"base64": "..."}';

/** One problem with an argument: where (the path of keys), what, and whether it ended its field's checks. */
interface Issue {
  path: readonly string[];
  message: string;
  fatal: boolean;
  /** An unrecognized-keys issue (its message gets the snake_case hint). */
  keys: boolean;
}

/** Checks `v`, pushing its issues with `path`; returns the parsed value (meaningful only without issues). */
type Check = (v: unknown, path: readonly string[], issues: Issue[]) => unknown;

interface Field {
  check: Check;
  optional: boolean;
}

/** A refinement of a string: the message of its failure, or null. */
type Refine = (s: string) => string | null;

/** A refinement from one of the engine's grammar checks (rules/names.ts), keeping its message. */
function grammar(assert: (v: unknown) => void): Refine {
  return (s) => {
    try {
      assert(s);
      return null;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
}

/** A string: `typeMessage` (fatal) for anything else, then every refinement's failure (not fatal). */
function text(typeMessage: string, ...refines: Refine[]): Check {
  return (v, path, issues) => {
    if (typeof v !== "string") {
      issues.push({ path, message: typeMessage, fatal: true, keys: false });
      return v;
    }
    for (const refine of refines) {
      const message = refine(v);
      if (message !== null) issues.push({ path, message, fatal: false, keys: false });
    }
    return v;
  };
}

/** A boolean. */
function flag(typeMessage: string): Check {
  return (v, path, issues) => {
    if (typeof v !== "boolean") issues.push({ path, message: typeMessage, fatal: true, keys: false });
    return v;
  };
}

/** One of `options`. */
function oneOf(options: readonly string[], message: string): Check {
  return (v, path, issues) => {
    if (typeof v !== "string" || !options.includes(v)) issues.push({ path, message, fatal: true, keys: false });
    return v;
  };
}

/**
 * A safe integer in [min, max] (null too when `nullable`): a finite number, then an integer (both
 * fatal), then within the safe range (its failure, with the integer message, is not fatal), then
 * each bound.
 */
function integer(o: { type: string; int: string; min: number; minMessage: string; max?: { value: number; message: string }; nullable: boolean }): Check {
  return (v, path, issues) => {
    if (v === null && o.nullable) return v;
    if (typeof v !== "number" || !Number.isFinite(v)) issues.push({ path, message: o.type, fatal: true, keys: false });
    else if (!Number.isInteger(v)) issues.push({ path, message: o.int, fatal: true, keys: false });
    else {
      if (!Number.isSafeInteger(v)) issues.push({ path, message: o.int, fatal: false, keys: false });
      if (v < o.min) issues.push({ path, message: o.minMessage, fatal: false, keys: false });
      if (o.max !== undefined && v > o.max.value) issues.push({ path, message: o.max.message, fatal: false, keys: false });
    }
    return v;
  };
}

/** True for what an object schema parses: an object that is not null and not an array. */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A strict object of `shape`: each field in the shape's order (a missing required one checked as
 * undefined, a missing optional one skipped), then every key not in the shape as one issue. The
 * parsed object holds the shape's keys the input has, in the shape's order.
 */
function strictObject(shape: Readonly<Record<string, Field>>, typeMessage: string): Check {
  const names = Object.keys(shape);
  return (v, path, issues) => {
    if (!isObject(v)) {
      issues.push({ path, message: typeMessage, fatal: true, keys: false });
      return v;
    }
    const out: Record<string, unknown> = {};
    for (const name of names) {
      const field = shape[name] as Field;
      const present = name in v;
      if (!present && field.optional) continue;
      if (field.optional && v[name] === undefined) {
        out[name] = undefined;
        continue;
      }
      const parsed = field.check(v[name], [...path, name], issues);
      if (present) out[name] = parsed;
    }
    const unknown: string[] = [];
    for (const key in v) if (!Object.hasOwn(shape, key)) unknown.push(key);
    if (unknown.length > 0) {
      const message = `Unrecognized key${unknown.length > 1 ? "s" : ""}: ${unknown.map((k) => `"${k}"`).join(", ")}`;
      issues.push({ path, message, fatal: false, keys: true });
    }
    return out;
  };
}

/** The first of `options` that passes; else the one whose issues are all non-fatal, with its issues; else `message`. */
function union(options: readonly Check[], message: string): Check {
  return (v, path, issues) => {
    const tries = options.map((check) => {
      const own: Issue[] = [];
      return { value: check(v, path, own), issues: own };
    });
    const passed = tries.find((t) => t.issues.length === 0);
    if (passed !== undefined) return passed.value;
    const standing = tries.filter((t) => t.issues.every((i) => !i.fatal));
    if (standing.length === 1) {
      const only = standing[0] as (typeof tries)[number];
      issues.push(...only.issues);
      return only.value;
    }
    issues.push({ path, message, fatal: true, keys: false });
    return v;
  };
}

const required = (check: Check): Field => ({ check, optional: false });
const optional = (check: Check): Field => ({ check, optional: true });

const key = text("key must be a string", grammar(assertKey));
const scope = text("scope must be a string", grammar(assertScope));
const bytes = strictObject({ base64: required(text("base64 must be a string", (s) => (BASE64.test(s) ? null : "base64 must be standard padded base64"))) }, VALUE_SHAPE);
const value = union([text(VALUE_SHAPE, (s) => (s.isWellFormed() ? null : "value must be well-formed Unicode (no lone surrogates)")), bytes], VALUE_SHAPE);
const inherit = flag("inherit must be a boolean");

/** Every tool's arguments, as src/tool-schemas.ts declares them. */
const SHAPES = {
  memory_read: { key: required(key), scope: optional(scope), inherit: optional(inherit) },
  memory_write: {
    key: required(key),
    value: required(value),
    scope: optional(scope),
    expected_version: optional(integer({ type: "expected_version must be an integer or null", int: "expected_version must be an integer", min: 1, minMessage: "expected_version must be >= 1 (versions start at 1)", nullable: true })),
    clear_tombstone: optional(flag("clear_tombstone must be a boolean")),
    ttl_ms: optional(integer({ type: "ttl_ms must be a positive integer or null", int: "ttl_ms must be an integer", min: 1, minMessage: "ttl_ms must be >= 1", nullable: true })),
  },
  memory_forget: { key: required(key), scope: optional(scope) },
  memory_forget_scope: {
    scope: required(text("scope must be a string", grammar(assertScope), (s) => (s === "global" ? FORGET_GLOBAL_REFUSED : null))),
    reclaim: optional(oneOf(["lazy", "eager"], 'reclaim must be "lazy" or "eager"')),
  },
  memory_probe: { key: required(key), scope: optional(scope) },
  memory_undelete: { key: required(key), scope: optional(scope) },
  memory_list: {
    scope: optional(scope),
    prefix: optional(text("prefix must be a string")),
    inherit: optional(inherit),
    limit: optional(integer({ type: "limit must be an integer", int: "limit must be an integer", min: 1, minMessage: "limit must be >= 1", max: { value: LIST_LIMIT_MAX, message: `limit must be <= ${LIST_LIMIT_MAX}` }, nullable: false })),
  },
} as const satisfies Record<string, Record<string, Field>>;

/** The name of a memory_* tool. */
export type ToolArgsName = keyof typeof SHAPES;

const CHECKS = Object.fromEntries(Object.entries(SHAPES).map(([name, shape]) => [name, strictObject(shape, "arguments must be a JSON object")])) as Record<ToolArgsName, Check>;

/**
 * Parses the arguments `raw` (an object) of tool `name`: the parsed arguments, or the message of
 * every issue — "name: path: message; …", an unrecognized key's with the snake_case hint.
 */
export function parseToolArgs(name: ToolArgsName, raw: Record<string, unknown>): { ok: true; data: Record<string, unknown> } | { ok: false; message: string } {
  const issues: Issue[] = [];
  const data = CHECKS[name](raw, [], issues) as Record<string, unknown>;
  if (issues.length === 0) return { ok: true, data };
  const parts = issues.map((issue) => {
    const at = issue.path.join(".");
    const message = issue.keys ? `${issue.message} (arguments are snake_case)` : issue.message;
    return at === "" ? message : `${at}: ${message}`;
  });
  return { ok: false, message: `${name}: ${parts.join("; ")}` };
}
