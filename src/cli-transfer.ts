/**
 * The CLI commands that move a whole store: `backup` (an online copy), `export` (JSON Lines on
 * stdout) and `import` (from a file or stdin into a new store). docs/CLI-MCP.md describes them.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Command, Option } from "commander";
import { Engram } from "./engram.js";
import { exportStore } from "./cli-export.js";
import type { EndLine } from "./cli-export.js";
import { EngramError, ErrorCode, InvalidArgumentError } from "../rules/errors.js";
import { isPostgresUrl } from "../postgres/index.js";
import { checkExport, importExport, spoolStdin } from "./cli-import.js";
import { AtomicFile, errnoOf, interruptible, OutputError } from "./cli-io.js";
import { EXIT, printJson, requireDir, requireStorableDir, UsageError, whyNoNewDirectory, withEnvFaults, withStore } from "./cli-store.js";
import type { GlobalOptions } from "./cli-store.js";

/** Options of `export`. */
export interface ExportOptions extends GlobalOptions {
  scope?: string;
  /** Write into this file (atomically) instead of stdout. */
  output?: string;
  progress?: boolean;
}

/** The refusal of a backup TARGET that cannot be made where it is named. */
function notWritable(target: string, parent: string, why: string): InvalidArgumentError {
  return new InvalidArgumentError(
    `backup target ${target} cannot be made: ${parent} is not a writable directory (${why}); choose another TARGET, a new path in an existing directory you can write to`,
  );
}

/**
 * Refuses (INVALID_ARGUMENT, before the store is opened) a TARGET whose parent is missing, is a
 * file, or takes no new directory (/proc, a read-only mount, no permission): a directory made and
 * removed there tells. Without this the backup failed deep inside with the device's advice ("free
 * space or fix the device") or a bare ENOTDIR.
 */
function checkBackupTarget(target: string): void {
  if (target === "") return; // the library refuses it ("backup needs a target directory path"); resolved, it would name the working directory
  const parent = path.dirname(path.resolve(target));
  const why = whyNoNewDirectory(parent);
  if (why !== null) throw notWritable(target, parent, why);
}

/** `engram backup --dir DIR TARGET`; a TARGET that cannot be made is INVALID_ARGUMENT with nothing opened. */
export async function cmdBackup(target: string, o: GlobalOptions): Promise<number> {
  if (!isPostgresUrl(requireDir(o))) checkBackupTarget(target); // PostgreSQL refuses backup itself (NOT_SUPPORTED)
  return withStore(o, true, async (store) => {
    const r = await store.backup(target);
    if (o.json === true) printJson({ ok: true, ...r, verify: { ok: r.verify.ok, segments: r.verify.segments, records: r.verify.records } });
    else process.stdout.write(`backup of ${store.dir} in ${r.dir}: ${r.segments} segments (${r.linked} linked, ${r.copied} copied), ${r.bytes} bytes, up to sequence ${r.sequence}, verified\n`);
    return EXIT.OK;
  });
}

/** Opens FILE's temporary twin for `export --output`; a directory that is missing or unwritable is a usage error. */
async function openOutput(file: string): Promise<AtomicFile> {
  try {
    return await AtomicFile.open(file);
  } catch (err) {
    throw new UsageError(`cannot write ${file}: ${errnoOf(err)} creating its temporary file in ${path.dirname(file)}; choose a path in an existing, writable directory`);
  }
}

/** Renames the finished export onto FILE; a failure (a full disk at the last sync) is an OutputError and leaves FILE as it was. */
async function commitOutput(file: AtomicFile): Promise<void> {
  try {
    await file.commit();
  } catch (err) {
    throw new OutputError(errnoOf(err), file.target, `${file.target} was not replaced; free space and export again`);
  }
}

/** How many times `export --output` starts again after the store's owner went away mid-export. */
const EXPORT_ATTEMPTS = 5;

/** True for the error of a call cut off because the shared store's owner (another engram process) went away. */
function ownerLost(err: unknown): boolean {
  return err instanceof EngramError && err.code === ErrorCode.OWNER_LOST;
}

/** One pass of an export into stdout or `file`; returns the end line. */
async function exportOnce(store: Engram, o: ExportOptions, file: AtomicFile | null, stop: AbortSignal): Promise<EndLine> {
  const lost = file === null ? "the output is incomplete (it has no end line, so import refuses it)" : `${file.target} was not written (left as it was)`;
  const sink = { out: file?.stream ?? process.stdout, err: process.stderr, where: file?.target ?? "stdout", lost, stop };
  const end = await exportStore(store, o.scope ?? "global", sink, o.quiet === true ? false : o.progress);
  if (file !== null) await commitOutput(file);
  return end;
}

/**
 * Exports with `--output`: an export cut off because the store's owner went away (it attached to
 * another engram process that then closed; docs/SHARING.md: an export does not survive a
 * handover) starts again into a fresh temporary file, by then usually as the owner itself.
 */
async function exportToFile(store: Engram, o: ExportOptions, target: string, stop: AbortSignal): Promise<EndLine> {
  for (let attempt = 1; ; attempt += 1) {
    const file = await openOutput(target);
    try {
      return await exportOnce(store, o, file, stop);
    } catch (err) {
      file.discard();
      if (!ownerLost(err) || attempt >= EXPORT_ATTEMPTS) throw err;
      process.stderr.write(`engram export: the store's owner (another engram process on ${store.dir}) closed mid-export (OWNER_LOST); starting again\n`);
    }
  }
}

/** Exports to stdout, which cannot start again: an owner that went away is said in export's own words. */
async function exportToStdout(store: Engram, o: ExportOptions, stop: AbortSignal): Promise<EndLine> {
  try {
    return await exportOnce(store, o, null, stop);
  } catch (err) {
    if (!ownerLost(err)) throw err;
    throw new EngramError(
      ErrorCode.OWNER_LOST,
      `the store's owner (another engram process on ${store.dir}) closed during the export, which cannot go on across the handover: ` +
        `stdout holds a partial export without its end line; export again, or use --output FILE, which starts again by itself`,
    );
  }
}

/**
 * `engram export --dir DIR [--scope S] [--output FILE]`: JSON Lines on stdout or into FILE (written
 * under a temporary name and renamed when complete, so FILE never holds a partial export), progress
 * on stderr. SIGINT / SIGTERM stop it cleanly: the store is closed, the temporary file removed.
 */
export async function cmdExport(o: ExportOptions): Promise<number> {
  return interruptible((stop) =>
    withStore(o, true, async (store) => {
      const toFile = o.output !== undefined && o.output !== "-";
      const end = toFile ? await exportToFile(store, o, o.output as string, stop) : await exportToStdout(store, o, stop);
      process.stderr.write(`engram export: ${end.values} values, ${end.retention} retention records, sequence ${end.sequence}${toFile ? ` in ${o.output as string}` : ""}\n`);
      return EXIT.OK;
    }),
  );
}

/** The path of an import's FILE, or a usage error when it is missing or not a file. */
function importFile(file: string): string {
  if (!fs.existsSync(file)) throw new UsageError(`no file ${file}`);
  if (fs.statSync(file).isDirectory()) throw new UsageError(`${file} is a directory; give the export file`);
  return file;
}

/**
 * `engram import --dir NEW [FILE]`: checks the whole file, then imports it (stdin when FILE is
 * omitted or -). A failure or an interrupt after the first batch says what was committed.
 */
export async function cmdImport(file: string | undefined, o: GlobalOptions & { progress?: boolean }): Promise<number> {
  const dir = requireDir(o);
  const options = withEnvFaults(); // a bad ENGRAM_FAULTS is refused before anything is read or made
  if (!isPostgresUrl(dir)) requireStorableDir(dir); // as put: a --dir that cannot hold a store is a usage error before the file is read
  const fromStdin = file === undefined || file === "-";
  if (fromStdin && process.stdin.isTTY === true) throw new UsageError("give FILE or pipe an export on stdin");
  if (!fromStdin) importFile(file);
  return interruptible(async (stop) => {
    const source = fromStdin ? await spoolStdin(stop) : file;
    try {
      const checked = await checkExport(source, stop); // a bad file is refused here, before the store is opened
      const store = await Engram.open(dir, options);
      let report;
      try {
        const sink = { err: process.stderr, everyBatch: o.progress === true, quiet: o.quiet === true, stop };
        report = await importExport(store, source, checked, sink);
      } finally {
        await store.close();
      }
      if (o.json === true) printJson({ ok: true, ...report });
      else process.stdout.write(`imported ${report.values} values into ${dir} (${report.retention} retention records, ${report.expired} expired on the way), versions above ${report.floor}\n`);
      return EXIT.OK;
    } finally {
      if (fromStdin) fs.rmSync(path.dirname(source), { recursive: true, force: true });
    }
  });
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
    .option("--output <file>", "write into FILE (complete or not at all: a temporary file renamed when done) instead of stdout")
    .option("--progress", "report progress on stderr even for small stores")
    .action(run((_o: unknown, cmd: Command) => cmdExport(opts(cmd))));
  program
    .command("import")
    .description("read an export (FILE, or stdin) into a new store; a bad file writes nothing")
    .argument("[file]")
    .option("--progress", "report every committed batch on stderr")
    .action(run((file: string | undefined, _o: unknown, cmd: Command) => cmdImport(file, opts(cmd))));
}
