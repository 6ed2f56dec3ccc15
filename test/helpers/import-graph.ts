/**
 * The import graph of the source tree, read from the files themselves (no bundler, no madge): every
 * `import … from`, `export … from`, `import type`, side-effect `import "…"`, dynamic `import("…")`,
 * `require("…")` and worker entry named by `new URL("…", import.meta.url)`, resolved from the `.js`
 * a source file names to the `.ts` (or `.mjs`) beside it. Type-only imports count: a cycle of
 * types is still two files that cannot be read, or changed, one without the other.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** Module path (relative to the root, `/`-separated) → the modules and packages it names. */
export interface ImportGraph {
  /** Local edges: file → files it imports. */
  readonly local: Map<string, string[]>;
  /** Package edges: file → bare specifiers it imports (`fs-ext`, `piscina`, …; `node:` left out). */
  readonly packages: Map<string, string[]>;
}

const SPECIFIER = [
  /\b(?:import|export)\s[^"'`;]*?\sfrom\s*["']([^"']+)["']/g,
  /\bimport\s*["']([^"']+)["']/g,
  /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  /\brequire\(\s*["']([^"']+)["']\s*\)/g,
  /\bnew URL\(\s*["']([^"']+\.(?:js|mjs|ts))["']\s*,\s*import\.meta\.url\s*\)/g,
];

/** Every specifier `text` names (comments stripped first, so prose never counts as an import). */
export function specifiersOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  const out: string[] = [];
  for (const re of SPECIFIER) for (const m of code.matchAll(re)) if (m[1] !== undefined) out.push(m[1]);
  return [...new Set(out)];
}

/** The file a relative specifier of `from` names, or null when none exists (a generated file, say). */
function resolveLocal(root: string, from: string, spec: string): string | null {
  const base = path.join(path.dirname(path.join(root, from)), spec);
  const tries = [base, base.replace(/\.js$/, ".ts"), base.replace(/\.mjs$/, ".mts"), `${base}.ts`];
  for (const t of tries) if (fs.existsSync(t) && fs.statSync(t).isFile()) return path.relative(root, t).split(path.sep).join("/");
  return null;
}

/** Source files (`.ts`, `.mjs`) under `dirs` of `root`, recursively, sorted. */
export function sourceFiles(root: string, dirs: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else if (/\.(ts|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(r);
    }
  };
  for (const d of dirs) if (fs.existsSync(path.join(root, d))) walk(d);
  return out.sort();
}

/** Reads the import graph of `files` (paths relative to `root`). */
export function readGraph(root: string, files: readonly string[]): ImportGraph {
  const local = new Map<string, string[]>();
  const packages = new Map<string, string[]>();
  for (const f of files) {
    const specs = specifiersOf(fs.readFileSync(path.join(root, f), "utf8"));
    const targets: string[] = [];
    const pkgs: string[] = [];
    for (const s of specs) {
      if (s.startsWith(".")) {
        const t = resolveLocal(root, f, s);
        if (t !== null && t !== f) targets.push(t);
      } else if (!s.startsWith("node:")) pkgs.push(s);
    }
    local.set(f, targets);
    packages.set(f, pkgs);
  }
  return { local, packages };
}

/** Every cycle of `edges` found by one depth-first search, each as the path that closes it. */
export function findCycles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (n: string): void => {
    state.set(n, "open");
    stack.push(n);
    for (const m of edges.get(n) ?? []) {
      const s = state.get(m);
      if (s === "open") cycles.push([...stack.slice(stack.indexOf(m)), m]);
      else if (s === undefined) visit(m);
    }
    stack.pop();
    state.set(n, "done");
  };
  for (const n of [...edges.keys()].sort()) if (!state.has(n)) visit(n);
  return cycles;
}

/** Files reachable from `start` (itself included). */
export function closure(edges: ReadonlyMap<string, readonly string[]>, start: string): Set<string> {
  const seen = new Set<string>([start]);
  const todo = [start];
  for (let n = todo.pop(); n !== undefined; n = todo.pop()) {
    for (const m of edges.get(n) ?? []) if (!seen.has(m)) (seen.add(m), todo.push(m));
  }
  return seen;
}

/**
 * The layer of each top folder: an import may point at its own layer or a lower one, never up.
 * src/ is the API face; share/ wraps the engine for many processes; engine/ and postgres/ are the
 * two backends; segments/ is the file format; rules/ is what every backend shares.
 */
export const LAYERS: Readonly<Record<string, number>> = { rules: 0, segments: 1, engine: 2, postgres: 2, share: 3, src: 4 };

/** Imports that point up a layer, or across between the two backends, as "from -> to". */
export function upwardImports(edges: ReadonlyMap<string, readonly string[]>, layers: Readonly<Record<string, number>> = LAYERS): string[] {
  const out: string[] = [];
  for (const [from, tos] of edges) {
    const a = from.split("/")[0] ?? "";
    for (const to of tos) {
      const b = to.split("/")[0] ?? "";
      const la = layers[a];
      const lb = layers[b];
      if (la === undefined || lb === undefined) continue;
      if (lb > la || (lb === la && a !== b)) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}
