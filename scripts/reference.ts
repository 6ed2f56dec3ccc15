/**
 * docs/REFERENCE.md from the declarations the package ships (dist/**.d.ts, what an editor shows a
 * user): every name each entry point of package.json's `exports` exports, its kind and the first
 * sentence of its doc comment, and the same for every member of an exported interface or class.
 * Also lists the public names that have no doc comment: test/public-docs.test.ts holds that list
 * empty and the file current.
 *
 *   npm run build && node --import tsx scripts/reference.ts           (writes docs/REFERENCE.md)
 *   node --import tsx scripts/reference.ts --check                     (exit 1 if stale or undocumented)
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** One documented name: an export, or a member of one. */
export interface PublicName {
  name: string;
  kind: string;
  /** The doc comment's first sentence ("" when there is none). */
  summary: string;
}

/** An exported name with its members (an interface's or a class's; empty for the rest). */
export interface PublicExport extends PublicName {
  members: PublicName[];
}

/** One entry point: the specifier users import and the declaration file it resolves to. */
export interface EntryPoint {
  specifier: string;
  declarations: string;
}

/** The most members listed for one export: a bound on the page, far above any real interface. */
const MEMBERS_MAX = 200;

/** The doc comment of `symbol`, whitespace collapsed ("" when none). */
function docOf(checker: ts.TypeChecker, symbol: ts.Symbol): string {
  return ts.displayPartsToString(symbol.getDocumentationComment(checker)).replace(/\s+/g, " ").trim();
}

/** The first sentence of `doc`: up to the first ". " (or all of it). */
export function firstSentence(doc: string): string {
  const end = doc.search(/\.(\s|$)/);
  return end < 0 ? doc : doc.slice(0, end + 1);
}

/** What `symbol` is, as a reader names it. */
function kindOf(symbol: ts.Symbol): string {
  const f = symbol.flags;
  if (f & ts.SymbolFlags.Class) return "class";
  if (f & ts.SymbolFlags.Interface) return "interface";
  if (f & ts.SymbolFlags.TypeAlias) return "type";
  if (f & ts.SymbolFlags.Function) return "function";
  if (f & ts.SymbolFlags.Method) return "method";
  if (f & ts.SymbolFlags.Enum) return "enum";
  if (f & ts.SymbolFlags.Variable) return "const";
  if (f & ts.SymbolFlags.Property) return "property";
  if (f & ts.SymbolFlags.GetAccessor) return "getter";
  return "name";
}

/**
 * The members an interface or class declares itself (inherited ones are listed under the type
 * that declares them; a class's are its public instance and static members).
 */
function membersOf(checker: ts.TypeChecker, symbol: ts.Symbol): ts.Symbol[] {
  const isClass = (symbol.flags & ts.SymbolFlags.Class) !== 0;
  if (!isClass && (symbol.flags & ts.SymbolFlags.Interface) === 0) return [];
  const own = new Set<ts.Node>(symbol.declarations ?? []);
  const declaredHere = (m: ts.Symbol): boolean => {
    const decl = m.valueDeclaration ?? m.declarations?.[0];
    if (decl === undefined || !own.has(decl.parent)) return false;
    const modifiers = ts.getCombinedModifierFlags(decl);
    return (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0 && !m.getName().startsWith("#");
  };
  const instance = checker.getDeclaredTypeOfSymbol(symbol).getProperties();
  const statics = isClass ? checker.getTypeOfSymbol(symbol).getProperties() : [];
  return [...statics, ...instance].filter(declaredHere);
}

/** Every export of each entry point, with its members, read from the declaration files. */
export function publicNames(entries: readonly EntryPoint[]): Map<string, PublicExport[]> {
  const program = ts.createProgram(entries.map((e) => e.declarations), { noEmit: true, strict: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const out = new Map<string, PublicExport[]>();
  for (const entry of entries) {
    const file = program.getSourceFile(entry.declarations);
    if (file === undefined) throw new Error(`${entry.declarations} not found: build first (npm run build)`);
    const moduleSymbol = checker.getSymbolAtLocation(file);
    if (moduleSymbol === undefined) throw new Error(`${entry.declarations} is not a module`);
    const exports: PublicExport[] = [];
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const members = membersOf(checker, symbol).map((m) => ({ name: m.getName(), kind: kindOf(m), summary: firstSentence(docOf(checker, m)) }));
      if (members.length > MEMBERS_MAX) throw new Error(`${exported.getName()} has ${members.length} members, over ${MEMBERS_MAX}`);
      exports.push({ name: exported.getName(), kind: kindOf(symbol), summary: firstSentence(docOf(checker, symbol)), members });
    }
    exports.sort((a, b) => a.name.localeCompare(b.name, "en"));
    out.set(entry.specifier, exports);
  }
  return out;
}

/** "specifier: Name" and "specifier: Name.member" for every public name without a doc comment. */
export function undocumented(names: Map<string, PublicExport[]>): string[] {
  const missing: string[] = [];
  for (const [specifier, exports] of names) {
    for (const e of exports) {
      if (e.summary === "") missing.push(`${specifier}: ${e.name}`);
      for (const m of e.members) if (m.summary === "") missing.push(`${specifier}: ${e.name}.${m.name}`);
    }
  }
  return missing;
}

/** A table cell: pipes escaped, one line. */
function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

/** The reference page for `names`. */
export function renderReference(names: Map<string, PublicExport[]>): string {
  const lines = [
    "# Reference: every public name",
    "",
    "Generated by `node --import tsx scripts/reference.ts` from the declarations the package ships",
    "(dist/**/*.d.ts); do not edit by hand. Each name's first doc sentence; the full comments are in",
    "the .d.ts files (what an editor shows) and the contract in [API.md](API.md).",
    "test/public-docs.test.ts fails when this page is stale or a public name has no doc comment.",
  ];
  for (const [specifier, exports] of names) {
    lines.push("", `## \`${specifier}\``, "", "| name | kind | summary |", "|---|---|---|");
    for (const e of exports) lines.push(`| \`${e.name}\` | ${e.kind} | ${cell(e.summary)} |`);
    for (const e of exports) {
      if (e.members.length === 0) continue;
      lines.push("", `### \`${e.name}\` (${specifier})`, "");
      for (const m of e.members) lines.push(`- \`${m.name}\` (${m.kind}): ${m.summary}`);
    }
  }
  return lines.join("\n") + "\n";
}

/** The project's root (this file is in scripts/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The package's entry points, from package.json's `exports` (each one's `types`). */
export function entryPoints(root: string = ROOT): EntryPoint[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { name: string; exports: Record<string, { types?: string } | string> };
  const entries: EntryPoint[] = [];
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    if (typeof target === "string" || target.types === undefined) continue;
    entries.push({ specifier: subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`, declarations: path.join(root, target.types) });
  }
  return entries;
}

/** Where the page is written. */
export const REFERENCE_PATH = path.join(ROOT, "docs", "REFERENCE.md");

function main(): void {
  const names = publicNames(entryPoints());
  const text = renderReference(names);
  const missing = undocumented(names);
  if (process.argv.includes("--check")) {
    const current = fs.existsSync(REFERENCE_PATH) ? fs.readFileSync(REFERENCE_PATH, "utf8") : "";
    if (current !== text) console.error("docs/REFERENCE.md is stale: run `node --import tsx scripts/reference.ts`");
    for (const name of missing) console.error(`no doc comment: ${name}`);
    process.exitCode = current === text && missing.length === 0 ? 0 : 1;
    return;
  }
  fs.writeFileSync(REFERENCE_PATH, text);
  const count = [...names.values()].reduce((n, e) => n + e.length + e.reduce((k, x) => k + x.members.length, 0), 0);
  console.log(`wrote docs/REFERENCE.md: ${count} names, ${missing.length} without a doc comment`);
  for (const name of missing) console.log(`  no doc comment: ${name}`);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
