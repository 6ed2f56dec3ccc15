/**
 * The memory_* tools' arguments as zod schemas (exported as `toolArgSchemas`): the rules
 * src/tool-args.ts checks without zod, kept here as the reference its test compares it with
 * (test/tool-args.test.ts) and for callers that want the schemas themselves. Nothing on the tool
 * call path imports this file, so a CLI command or a store open never loads zod.
 */
import * as z from "zod";
import { assertKey, assertScope } from "../rules/names.js";
import { BASE64, FORGET_GLOBAL_REFUSED, LIST_LIMIT_MAX, VALUE_SHAPE } from "./tool-args.js";

/** A zod refinement from one of the engine's grammar checks (rules/names.ts), keeping its message. */
function grammar(check: (v: unknown) => void): (v: string, ctx: z.RefinementCtx) => void {
  return (v, ctx) => {
    try {
      check(v);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: err instanceof Error ? err.message : String(err) });
    }
  };
}

const keySchema = z.string({ error: "key must be a string" }).superRefine(grammar(assertKey));
const scopeSchema = z.string({ error: "scope must be a string" }).superRefine(grammar(assertScope));

const bytesSchema = z.strictObject({
  base64: z.string({ error: "base64 must be a string" }).regex(BASE64, "base64 must be standard padded base64"),
});

const valueSchema = z.union(
  [
    z.string().refine((v) => v.isWellFormed(), "value must be well-formed Unicode (no lone surrogates)"),
    bytesSchema,
  ],
  { error: VALUE_SHAPE },
);

const versionSchema = z
  .number({ error: "expected_version must be an integer or null" })
  .int("expected_version must be an integer")
  .min(1, "expected_version must be >= 1 (versions start at 1)")
  .nullable();

const ttlSchema = z
  .number({ error: "ttl_ms must be a positive integer or null" })
  .int("ttl_ms must be an integer")
  .min(1, "ttl_ms must be >= 1")
  .nullable();

/** zod schemas of every tool's arguments; objects are strict (unknown keys are rejected). */
export const toolArgSchemas = {
  memory_read: z.strictObject({
    key: keySchema,
    scope: scopeSchema.optional(),
    inherit: z.boolean({ error: "inherit must be a boolean" }).optional(),
  }),
  memory_write: z.strictObject({
    key: keySchema,
    value: valueSchema,
    scope: scopeSchema.optional(),
    expected_version: versionSchema.optional(),
    clear_tombstone: z.boolean({ error: "clear_tombstone must be a boolean" }).optional(),
    ttl_ms: ttlSchema.optional(),
  }),
  memory_forget: z.strictObject({ key: keySchema, scope: scopeSchema.optional() }),
  memory_forget_scope: z.strictObject({
    scope: scopeSchema.refine((s) => s !== "global", FORGET_GLOBAL_REFUSED),
    reclaim: z.enum(["lazy", "eager"], { error: 'reclaim must be "lazy" or "eager"' }).optional(),
  }),
  memory_probe: z.strictObject({ key: keySchema, scope: scopeSchema.optional() }),
  memory_undelete: z.strictObject({ key: keySchema, scope: scopeSchema.optional() }),
  memory_list: z.strictObject({
    scope: scopeSchema.optional(),
    prefix: z.string({ error: "prefix must be a string" }).optional(),
    inherit: z.boolean({ error: "inherit must be a boolean" }).optional(),
    limit: z
      .number({ error: "limit must be an integer" })
      .int("limit must be an integer")
      .min(1, "limit must be >= 1")
      .max(LIST_LIMIT_MAX, `limit must be <= ${LIST_LIMIT_MAX}`)
      .optional(),
  }),
} as const;
