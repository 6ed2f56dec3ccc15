/**
 * Every public name has a doc comment in the declarations the package ships, and
 * docs/REFERENCE.md lists them as they are now.
 *
 * How it works: scripts/reference.ts reads each entry point of package.json's `exports` (its
 * `types` file in dist/) with the TypeScript compiler, collects every export and every member an
 * exported interface or class declares (public ones only; inherited members are checked where
 * they are declared), and renders the reference page. The test holds the list of names without
 * a doc comment empty and the page equal to a fresh rendering. Its twin runs the same reader on
 * a small package written to a temp directory, with a documented and an undocumented export, an
 * interface with an undocumented member, an interface extending it, and a class with a private
 * field: the reader must report exactly the two undocumented names, so the check can fail.
 * The CLI and the agent tools are public names too: every command and option of `engram`
 * (buildProgram) and every tool and argument (listTools) must be named in docs/CLI-MCP.md's
 * sections on them; its twin adds a command, an option and a tool argument the page does not
 * name, and each is reported.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Command } from "commander";
import { entryPoints, firstSentence, publicNames, REFERENCE_PATH, renderReference, undocumented } from "../scripts/reference.js";
import { buildProgram } from "../src/cli.js";
import { listTools, type JsonValue, type ToolDefinition } from "../src/index.js";
import { assertBuilt, ROOT } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

/** The text of docs/CLI-MCP.md from `heading` to the next heading of its level. */
function sectionOf(doc: string, heading: string): string {
  const start = doc.indexOf(`\n${heading}\n`);
  expect(start, `docs/CLI-MCP.md has "${heading}"`).toBeGreaterThanOrEqual(0);
  const next = doc.indexOf("\n## ", start + heading.length + 2);
  return doc.slice(start, next < 0 ? doc.length : next);
}

/** Every command, option and agent tool argument of the CLI and tool layer that `doc` does not name (in the sections that document each). */
function unnamedInCliDoc(doc: string, program: Command, tools: readonly ToolDefinition[]): string[] {
  const commands = sectionOf(doc, "## Command line") + sectionOf(doc, "## Backup, export, import") + sectionOf(doc, "## MCP server") + sectionOf(doc, "## Web inspector (`engram ui`)");
  const agent = sectionOf(doc, "## Agent tools");
  const missing: string[] = [];
  for (const o of program.options) if (o.long !== undefined && !commands.includes(o.long)) missing.push(`engram ${o.long}`);
  for (const c of program.commands) {
    if (!commands.includes(`\`${c.name()}`)) missing.push(`engram ${c.name()}`);
    for (const o of c.options) if (o.long !== undefined && !commands.includes(o.long)) missing.push(`engram ${c.name()} ${o.long}`);
  }
  for (const t of tools) {
    if (!agent.includes(`\`${t.name}\``)) missing.push(t.name);
    for (const arg of Object.keys((t.inputSchema["properties"] ?? {}) as object)) if (!agent.includes(`\`${arg}`)) missing.push(`${t.name} ${arg}`);
  }
  return missing;
}

beforeAll(() => assertBuilt());

describe("public names", () => {
  const names = publicNames(entryPoints());

  it("reads every entry point of package.json's exports", () => {
    expect([...names.keys()]).toEqual(["engram", "engram/conformance", "engram/langgraph", "engram/memory-tool"]);
    expect(names.get("engram")?.some((e) => e.name === "Engram" && e.kind === "class" && e.members.some((m) => m.name === "open"))).toBe(true);
  });

  it("every export, and every member of an exported interface or class, has a doc comment", () => {
    expect(undocumented(names)).toEqual([]);
  });

  it("docs/REFERENCE.md is current (node --import tsx scripts/reference.ts)", () => {
    expect(fs.readFileSync(REFERENCE_PATH, "utf8")).toBe(renderReference(names));
  });

  it("twin: a package with undocumented names is caught, and only those names", () => {
    const dir = tempDir("public-docs");
    try {
      fs.writeFileSync(
        path.join(dir, "package.json"),
        JSON.stringify({ name: "fixture", exports: { ".": { types: "./index.d.ts", import: "./index.js" } } }),
      );
      fs.writeFileSync(
        path.join(dir, "index.d.ts"),
        [
          "/** Documented. Second sentence. */",
          "export declare function documented(): void;",
          "export declare function bare(): void;",
          "/** A shape. */",
          "export interface Shape {",
          "  /** Has a doc. */",
          "  named: string;",
          "  unnamed: number;",
          "}",
          "/** Extends it; its inherited members are checked on Shape. */",
          "export interface Wider extends Shape {",
          "  /** Its own. */",
          "  own: boolean;",
          "}",
          "/** A class. */",
          "export declare class Thing {",
          "  private hidden;",
          "  /** Public. */",
          "  shown: number;",
          "}",
          "",
        ].join("\n"),
      );
      const fixture = publicNames(entryPoints(dir));
      expect(undocumented(fixture)).toEqual(["fixture: bare", "fixture: Shape.unnamed"]);
      expect(fixture.get("fixture")?.find((e) => e.name === "documented")?.summary).toBe("Documented.");
      expect(fixture.get("fixture")?.find((e) => e.name === "Wider")?.members.map((m) => m.name)).toEqual(["own"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("every CLI command and option, and every agent tool and argument, is named in docs/CLI-MCP.md", () => {
    const doc = fs.readFileSync(path.join(ROOT, "docs", "CLI-MCP.md"), "utf8");
    expect(unnamedInCliDoc(doc, buildProgram(), listTools())).toEqual([]);
    // Twin: a command, an option and a tool argument the page does not name are each reported.
    const program = buildProgram();
    program.command("frobnicate").option("--wobble", "not documented");
    program.commands.find((c) => c.name() === "get")?.option("--sideways", "not documented");
    const widened = (t: ToolDefinition): ToolDefinition => {
      const properties = t.inputSchema["properties"] as { [name: string]: JsonValue };
      return { ...t, inputSchema: { ...t.inputSchema, properties: { ...properties, depth_hint: { type: "integer" } } } };
    };
    const tools = listTools().map((t) => (t.name === "memory_read" ? widened(t) : t));
    expect(unnamedInCliDoc(doc, program, tools)).toEqual(["engram get --sideways", "engram frobnicate", "engram frobnicate --wobble", "memory_read depth_hint"]);
  });

  it("a summary is the doc comment's first sentence", () => {
    expect(firstSentence("Opens a store. Then more.")).toBe("Opens a store.");
    expect(firstSentence("Default 0.5 (a ratio).")).toBe("Default 0.5 (a ratio).");
    expect(firstSentence("No full stop")).toBe("No full stop");
  });
});
