/**
 * The tools' argument checks without zod (src/tool-args.ts parseToolArgs, what handleToolCall
 * runs) answer exactly as the zod schemas (src/tool-schemas.ts toolArgSchemas) with the message
 * formatting handleToolCall used with them: the same parsed arguments (keys given as undefined
 * included) or the same message, issue by issue.
 *
 * How it works: every tool gets (1) each of its fields set to each value of a palette — every
 * type, the numbers at and past each bound, NaN and the infinities, the scope and key grammar's
 * edge cases, valid and broken `{ base64 }` values — with the other fields valid; (2) 1,500
 * random argument objects per tool (seeded): each field absent or drawn from the palette, plus
 * up to two unknown keys (snake_case mistakes, "__proto__" as an own key from JSON.parse,
 * "constructor"); (3) objects whose fields come from their prototype. Each is parsed both ways
 * and the answers must be equal. Checked by hand: a union that reports its own message when one
 * option's issues are all refinements, an integer check that also reports the bound after a
 * fraction or stops at an unsafe integer, or unknown keys reported before the fields each fail it.
 */
import { describe, expect, it } from "vitest";
import type * as z from "zod";
import { parseToolArgs, type ToolArgsName } from "../src/tool-args.js";
import { toolArgSchemas } from "../src/tool-schemas.js";
import { rng } from "./helpers/rng.js";

/** handleToolCall's formatting of a zod error before tool-args.ts (the reference). */
function zodMessage(name: string, error: z.ZodError): string {
  const parts = error.issues.map((issue) => {
    const path = issue.path.map(String).join(".");
    const msg = issue.code === "unrecognized_keys" ? `${issue.message} (arguments are snake_case)` : issue.message;
    return path ? `${path}: ${msg}` : msg;
  });
  return `${name}: ${parts.join("; ")}`;
}

/** The zod schemas' answer, in parseToolArgs' shape. */
function byZod(name: ToolArgsName, raw: Record<string, unknown>): { ok: true; data: unknown } | { ok: false; message: string } {
  const parsed = toolArgSchemas[name].safeParse(raw);
  return parsed.success ? { ok: true, data: parsed.data } : { ok: false, message: zodMessage(name, parsed.error) };
}

const PALETTE: unknown[] = [
  undefined, null, true, false, 0, -0, 1, -1, 2, 1.5, -1.5, 0.5, 1000, 1001, 2 ** 53 - 1, 2 ** 53, 2 ** 60, -(2 ** 53), -(2 ** 60), Number.NaN, Infinity, -Infinity,
  "", "k", "note", "global", "global/x", "user:a", "user:a/s", "user:a/", "/user:a", "-x", "x".repeat(64), "x".repeat(65), "a/b/c/d/e/f/g/h", "a/b/c/d/e/f/g/h/i",
  "a\u0000b", "k\ud800", "\udc00", "é".repeat(512), "é".repeat(513), "x".repeat(1024), "x".repeat(1025), "lazy", "eager", "now", "aGk=", "aGk", "not base64!",
  { base64: "aGk=" }, { base64: "" }, { base64: "x" }, { base64: 5 }, {}, { base64: "aGk=", k: 1 }, { base64: "x", k: 1 }, { base64: 5, k: 1 }, { k: "v" },
  [], ["k"], [{ base64: "aGk=" }],
];

/** A valid value of each field (the other fields' values in the per-field pass). */
const VALID: Record<string, unknown> = { key: "k", value: "v", scope: "user:a", inherit: true, expected_version: 1, clear_tombstone: false, ttl_ms: 1000, reclaim: "lazy", prefix: "p", limit: 10 };

const UNKNOWN_KEYS = ["zz", "expectedVersion", "__proto__", "constructor", "ttlMs"];

/** The fields of tool `name`, in its schema's order. */
function fieldsOf(name: ToolArgsName): string[] {
  return Object.keys(toolArgSchemas[name].shape);
}

/** Both answers for `raw`, which must be equal. */
function expectSame(name: ToolArgsName, raw: Record<string, unknown>): boolean {
  const mine = parseToolArgs(name, raw);
  const theirs = byZod(name, raw);
  expect(mine, `${name} ${String(JSON.stringify(raw))}`).toStrictEqual(theirs);
  return mine.ok;
}

/** An object with `fields` set, built through JSON when it has an own "__proto__" key (as an MCP client's arguments arrive). */
function argsOf(fields: Array<[string, unknown]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of fields) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

const NAMES = Object.keys(toolArgSchemas) as ToolArgsName[];

describe("tool arguments checked without zod answer as the zod schemas", () => {
  for (const name of NAMES) {
    it(`${name}: each field set to each palette value`, () => {
      const fields = fieldsOf(name);
      let passed = 0;
      let refused = 0;
      for (const field of fields) {
        for (const v of PALETTE) {
          const raw = argsOf(fields.filter((f) => f !== "scope" || name !== "memory_forget_scope" || field === "scope").map((f) => [f, f === field ? v : VALID[f]]));
          if (expectSame(name, raw)) passed++;
          else refused++;
        }
      }
      expect(passed).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
    });

    it(`${name}: 1,500 random argument objects, with unknown keys`, () => {
      const fields = fieldsOf(name);
      const random = rng(20261206 + NAMES.indexOf(name));
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
      let refused = 0;
      for (let i = 0; i < 1500; i++) {
        const chosen: Array<[string, unknown]> = [];
        for (const f of fields) {
          const r = random();
          if (r < 0.25) continue; // absent
          chosen.push([f, r < 0.55 ? VALID[f] : pick(PALETTE)]);
        }
        const extra = Math.floor(random() * 3) === 0 ? Math.floor(random() * 3) : 0;
        for (let e = 0; e < extra; e++) chosen.push([pick(UNKNOWN_KEYS), pick(PALETTE)]);
        if (!expectSame(name, argsOf(chosen))) refused++;
      }
      expect(refused).toBeGreaterThan(100);
    });

    it(`${name}: fields inherited from a prototype, and an own "__proto__" key from JSON`, () => {
      const valid = Object.fromEntries(fieldsOf(name).map((f) => [f, f === "scope" && name === "memory_forget_scope" ? "user:a" : VALID[f]]));
      expectSame(name, Object.create(valid) as Record<string, unknown>);
      expectSame(name, Object.create({ ...valid, zz: 1 }) as Record<string, unknown>);
      expectSame(name, JSON.parse(`{"__proto__": {"key": "k"}, ${JSON.stringify(valid).slice(1)}`) as Record<string, unknown>);
      expectSame(name, Object.assign(Object.create(null) as Record<string, unknown>, valid));
    });
  }
});
