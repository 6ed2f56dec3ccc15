/**
 * The CLI commands that move a whole store: `backup` (an online copy), `export` (JSON Lines on
 * stdout) and `import` (from a file or stdin into a new store). docs/CLI-MCP.md describes them.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Command, Option } from "commander";
import { Engram } from "./engram.js";
import { exportStore } from "./cli-export.js";
import { checkExport, importExport, spoolStdin } from "./cli-import.js";
import { EXIT, printJson, requireDir, UsageError, withStore } from "./cli-store.js";
import type { GlobalOptions } from "./cli-store.js";

/** Options of `export`. */
export interface ExportOptions extends GlobalOptions {
  scope?: string;
  progress?: boolean;
}

/** `engram backup --dir DIR TARGET`. */
export async function cmdBackup(target: string, o: GlobalOptions): Promise<number> {
  return withStore(o, true, async (store) => {
    const r = await store.backup(target);
    if (o.json === true) printJson({ ok: true, ...r, verify: { ok: r.verify.ok, segments: r.verify.segments, records: r.verify.records } });
    else process.stdout.write(`backup of ${store.dir} in ${r.dir}: ${r.segments} segments (${r.linked} linked, ${r.copied} copied), ${r.bytes} bytes, up to sequence ${r.sequence}, verified\n`);
    return EXIT.OK;
  });
}

/** `engram export --dir DIR [--scope S]`: JSON Lines on stdout, progress on stderr. */
export async function cmdExport(o: ExportOptions): Promise<number> {
  return withStore(o, true, async (store) => {
    const end = await exportStore(store, o.scope ?? "global", process.stdout, process.stderr, o.progress);
    process.stderr.write(`engram export: ${end.values} values, ${end.retention} retention records, sequence ${end.sequence}\n`);
    return EXIT.OK;
  });
}

/** `engram import --dir NEW [FILE]`: checks the whole file, then imports it (stdin when FILE is omitted or -). */
export async function cmdImport(file: string | undefined, o: GlobalOptions & { progress?: boolean }): Promise<number> {
  const dir = requireDir(o);
  const fromStdin = file === undefined || file === "-";
  if (fromStdin && process.stdin.isTTY === true) throw new UsageError("give FILE or pipe an export on stdin");
  if (!fromStdin && !fs.existsSync(file)) throw new UsageError(`no file ${file}`);
  const source = fromStdin ? await spoolStdin() : file;
  try {
    const checked = await checkExport(source); // a bad file is refused here, before the store is opened
    const store = await Engram.open(dir);
    let report;
    try {
      report = await importExport(store, source, checked, process.stderr, o.progress === true);
    } finally {
      await store.close();
    }
    if (o.json === true) printJson({ ok: true, ...report });
    else process.stdout.write(`imported ${report.values} values into ${dir} (${report.retention} retention records, ${report.expired} expired on the way), versions above ${report.floor}\n`);
    return EXIT.OK;
  } finally {
    if (fromStdin) fs.rmSync(path.dirname(source), { recursive: true, force: true });
  }
}

/** The CLI's action wrapper (cli.ts `run`). */
export type Run = <A extends unknown[]>(action: (...args: A) => Promise<number>) => (...args: A) => Promise<void>;

/** Registers backup, export and import on the program; `run` maps results and failures to exit codes. */
export function addTransferCommands(program: Command, run: Run, scopeOption: () => Option): void {
  const opts = <T>(cmd: Command): T => cmd.optsWithGlobals<T & Record<string, unknown>>();
  program
    .command("backup")
    .description("online, consistent copy of the store into TARGET (new or empty), verified")
    .argument("<target>")
    .action(run((target: string, _o: unknown, cmd: Command) => cmdBackup(target, opts(cmd))));
  program
    .command("export")
    .description("write the store (or --scope's subtree) as JSON Lines on stdout")
    .addOption(scopeOption())
    .option("--progress", "report progress on stderr even for small stores")
    .action(run((_o: unknown, cmd: Command) => cmdExport(opts(cmd))));
  program
    .command("import")
    .description("read an export (FILE, or stdin) into a new store; a bad file writes nothing")
    .argument("[file]")
    .option("--progress", "report every committed batch on stderr")
    .action(run((file: string | undefined, _o: unknown, cmd: Command) => cmdImport(file, opts(cmd))));
}
