/**
 * The agent tool layer's JSON Schemas (src/tools.ts): what needs no store. The tests over a real
 * store (the bad-call table, the wire shapes, the errors on the wire, read-only mode and a bound
 * default scope) moved into the conformance suite (src/conformance/cases/tools.ts).
 *
 * How it works: the exported tool list, its JSON Schemas, the zod validators they must agree
 * with, and the descriptions an agent reads are checked directly.
 * Property stressed: the JSON Schemas and the zod validators agree.
 */
import { describe, expect, it } from "vitest";
import { listTools, tools } from "../src/tools.js";
import { toolArgSchemas } from "../src/tool-schemas.js";

describe("schemas", () => {
  it("exports the six API tools (plus memory_forget_scope) with object JSON Schemas", () => {
    const names = tools.map((t) => t.name);
    for (const n of ["memory_read", "memory_write", "memory_forget", "memory_probe", "memory_undelete", "memory_list"]) {
      expect(names).toContain(n);
    }
    for (const t of tools) {
      expect(t.inputSchema).toMatchObject({ type: "object", additionalProperties: false });
      expect(t.description.length).toBeGreaterThan(80);
    }
  });

  it("JSON Schema properties and required keys match the zod validators", () => {
    for (const t of tools) {
      const shape = toolArgSchemas[t.name].shape as Record<string, { isOptional(): boolean }>;
      const props = Object.keys(t.inputSchema["properties"] as Record<string, unknown>);
      expect(props.sort()).toEqual(Object.keys(shape).sort());
      const required = Object.entries(shape).filter(([, s]) => !s.isOptional()).map(([k]) => k);
      expect([...(t.inputSchema["required"] as string[])].sort()).toEqual(required.sort());
    }
  });

  it("descriptions say what forget confirms and when to probe or undelete", () => {
    const desc = (n: string): string => tools.find((t) => t.name === n)?.description ?? "";
    expect(desc("memory_forget")).toMatch(/tombstone/);
    expect(desc("memory_forget")).toMatch(/NOT that the bytes are reclaimed/);
    expect(desc("memory_probe")).toMatch(/reclaimed/);
    expect(desc("memory_probe")).toMatch(/clear_tombstone:true|memory_undelete/);
    expect(desc("memory_read")).toMatch(/memory_probe/);
    expect(desc("memory_undelete")).toMatch(/generation/);
  });

  it("read-only mode lists only the non-mutating tools", () => {
    expect(listTools({ readOnly: true }).map((t) => t.name).sort()).toEqual(["memory_list", "memory_probe", "memory_read"]);
    expect(listTools().length).toBe(tools.length);
  });
});

