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
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { entryPoints, firstSentence, publicNames, REFERENCE_PATH, renderReference, undocumented } from "../scripts/reference.js";
import { assertBuilt } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

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

  it("a summary is the doc comment's first sentence", () => {
    expect(firstSentence("Opens a store. Then more.")).toBe("Opens a store.");
    expect(firstSentence("Default 0.5 (a ratio).")).toBe("Default 0.5 (a ratio).");
    expect(firstSentence("No full stop")).toBe("No full stop");
  });
});
