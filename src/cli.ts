#!/usr/bin/env node
/**
 * The `engram` command line: store subcommands over `--dir DIR`, the demo, and the MCP server.
 * Exit codes: 0 ok, 1 usage (the command line, or a `--dir` that names no store) or an unexpected
 * failure, 2 an engram error (its code is printed: INVALID_ARGUMENT, IO_ERROR, CORRUPTION, ...),
 * 3 `get` found nothing.
 */
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command, CommanderError, InvalidArgumentError as CommanderArgumentError, Option } from "commander";
import type { PutOptions } from "./cli-commands.js";
import {
  cmdCompact,
  cmdForget,
  cmdForgetScope,
  cmdGc,
  cmdGet,
  cmdInspect,
  cmdLs,
  cmdProbe,
  cmdPut,
  cmdUndelete,
  cmdVerify,
} from "./cli-commands.js";
import { EXIT, openStore, printJson, reportError, reportFailure, UsageError } from "./cli-store.js";
import { addTransferCommands } from "./cli-transfer.js";
import { guardStdout, Interrupted, readStdinBytes } from "./cli-io.js";
import type { GlobalOptions } from "./cli-store.js";
import { isValidScope } from "./tools.js";
import { VERSION } from "./version.js";
import { VALUE_BYTES_MAX } from "../rules/limits.js";

function parseInteger(name: string, min: number): (raw: string) => number {
  return (raw) => {
    if (!/^\d+$/.test(raw) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
      throw new CommanderArgumentError(`${name} must be an integer >= ${min}`);
    }
    return Number(raw);
  };
}

/** Parses an integer or "none" (commander turns a parser's null into "", so "none" stays a string here). */
function parseIntegerOrNone(name: string, min: number): (raw: string) => number | "none" {
  const int = parseInteger(name, min);
  return (raw) => (raw === "none" || raw === "null" ? "none" : int(raw));
}

/** The options of `put` with `--expected-version none` mapped to null. */
function putOptions(cmd: Command): PutOptions {
  const o = opts<Omit<PutOptions, "expectedVersion"> & { expectedVersion?: number | "none" }>(cmd);
  const { expectedVersion, ...rest } = o;
  return expectedVersion === undefined ? rest : { ...rest, expectedVersion: expectedVersion === "none" ? null : expectedVersion };
}

function parseScope(raw: string): string {
  if (!isValidScope(raw)) throw new CommanderArgumentError('expected "global" or components like "user:alice/session:1"');
  return raw;
}

/**
 * Reads the whole of stdin (the value of `put` when VALUE is omitted): a string when the bytes
 * are valid UTF-8, otherwise the bytes themselves — binary input is stored exactly, never
 * replaced by U+FFFD (issue 9, defect 15).
 */
async function readStdin(): Promise<string | Uint8Array> {
  if (process.stdin.isTTY === true) throw new UsageError("give VALUE or pipe it on stdin");
  const bytes = await readStdinBytes(VALUE_BYTES_MAX); // the store refuses above its valueBytesMax (16 MiB unless configured)
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return new Uint8Array(bytes);
  }
}

/** Runs an action, maps its result or failure to the process exit code; an interrupted action exits at once. */
function run<A extends unknown[]>(action: (...args: A) => Promise<number>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const cmd = args[args.length - 1] as Command;
    const json = cmd.optsWithGlobals<GlobalOptions>().json === true;
    try {
      process.exitCode = await action(...args);
    } catch (err) {
      process.exitCode = reportFailure(err, json);
      // The store is closed by now; output still queued for a reader that stopped reading must not keep an interrupted command alive.
      if (err instanceof Interrupted) process.exit();
    }
  };
}

function opts<T>(cmd: Command): T {
  return cmd.optsWithGlobals<T & Record<string, unknown>>();
}

const scopeOption = (description = 'scope (default "global")'): Option =>
  new Option("--scope <scope>", description).argParser(parseScope);

function addKeyCommands(program: Command): void {
  program
    .command("put")
    .description("write a value (VALUE, or stdin when omitted or -)")
    .argument("<key>")
    .argument("[value]")
    .addOption(scopeOption())
    .option("--expected-version <n>", 'compare-and-set on this version ("none": no live value)', parseIntegerOrNone("--expected-version", 0))
    .option("--clear-tombstone", "explicitly supersede a tombstone on this key")
    .option("--ttl <ms>", "expire after this many milliseconds", parseInteger("--ttl", 1))
    .action(run(async (key: string, value: string | undefined, _o: unknown, cmd: Command) => cmdPut(key, value === undefined || value === "-" ? await readStdin() : value, putOptions(cmd))));
  program
    .command("get")
    .description("print a value (exit 3 when not found)")
    .argument("<key>")
    .addOption(scopeOption())
    .option("--no-inherit", "do not look in parent scopes")
    .action(run((key: string, _o: unknown, cmd: Command) => cmdGet(key, opts(cmd))));
  program
    .command("forget")
    .description("commit a tombstone for a key in exactly one scope (reclamation happens later)")
    .argument("<key>")
    .addOption(scopeOption())
    .action(run((key: string, _o: unknown, cmd: Command) => cmdForget(key, opts(cmd))));
  program
    .command("undelete")
    .description("clear a key's tombstone: the slot becomes empty and writable")
    .argument("<key>")
    .addOption(scopeOption())
    .action(run((key: string, _o: unknown, cmd: Command) => cmdUndelete(key, opts(cmd))));
  program
    .command("probe")
    .description("show a slot's value and retention records separately")
    .argument("<key>")
    .addOption(scopeOption())
    .action(run((key: string, _o: unknown, cmd: Command) => cmdProbe(key, opts(cmd))));
}

function addStoreCommands(program: Command): void {
  program
    .command("forget-scope")
    .description("erase a scope and every scope below it")
    .argument("<scope>", "the scope to erase", parseScope)
    .option("--eager", "return only after the value bytes are gone from disk")
    .action(run((scope: string, _o: unknown, cmd: Command) => cmdForgetScope(scope, opts(cmd))));
  program
    .command("ls")
    .description("list live keys in key order")
    .addOption(scopeOption())
    .option("--prefix <prefix>", "only keys starting with this")
    .option("--no-inherit", "do not include parent scopes")
    .option("--limit <n>", "at most this many keys (default 1000)", parseInteger("--limit", 1))
    .action(run((_o: unknown, cmd: Command) => cmdLs(opts(cmd))));
  program
    .command("inspect")
    .description("table of segments (id, generation, bytes, live ratio, tombstones) and store totals")
    .action(run((_o: unknown, cmd: Command) => cmdInspect(opts(cmd))));
  program
    .command("verify")
    .description("check every segment header and record checksum (exit 2 on corruption)")
    .option("--progress", "always draw progress on stderr")
    .option("--no-progress", "never draw progress")
    .action(run((_o: unknown, cmd: Command) => cmdVerify(opts(cmd))));
  program
    .command("compact")
    .description("compact sealed segments now")
    .addOption(new Option("--mode <mode>", "compaction mode").choices(["copy-on-write", "in-place"]))
    .action(run((_o: unknown, cmd: Command) => cmdCompact(opts(cmd))));
  program
    .command("gc")
    .description("reclaim by retention policy now")
    .action(run((_o: unknown, cmd: Command) => cmdGc(opts(cmd))));
}

async function mcpAction(o: GlobalOptions & { scope?: string; readOnly?: boolean }): Promise<number> {
  const store = await openStore(o, o.readOnly === true);
  const context = { readOnly: o.readOnly === true, ...(o.scope === undefined ? {} : { defaultScope: o.scope }) };
  const { serveStdio } = await import("./mcp.js"); // the MCP SDK loads only for this command
  await serveStdio(store, context, VERSION);
  return EXIT.OK;
}

function addServiceCommands(program: Command): void {
  program
    .command("demo")
    .description("replay the two seed failures (unsafe options, then defaults) on a temp store")
    .option("--keep", "keep the temp directory")
    .action(run(async (o: { keep?: boolean }) => (await import("./cli-demo.js")).runDemo(o)));
  program
    .command("mcp")
    .description("serve the memory_* tools over MCP (stdio); logs go to stderr")
    .addOption(scopeOption('default scope of tool calls that omit one (default "global")'))
    .option("--read-only", "hide and refuse memory_write, memory_forget, memory_forget_scope, memory_undelete")
    .action(run((_o: unknown, cmd: Command) => mcpAction(opts(cmd))));
  program
    .command("ui")
    .description("serve the web inspector on 127.0.0.1; prints its URL with a per-run token")
    .option("--port <n>", "TCP port (default: a free one)", parseInteger("--port", 0))
    .action(run(async (_o: unknown, cmd: Command) => (await import("./ui/command.js")).runUi(opts(cmd))));
}

/** The text commander would have printed for the last parse error (printed by `main`). */
let parseErrorText = "";

/** Builds the `engram` program (exported for tests and embedding). */
export function buildProgram(): Command {
  const program = new Command("engram")
    .description("engram: durable scoped memory for agents")
    .version(VERSION)
    .option("--dir <dir>", "store directory or postgresql:// URL (or ENGRAM_DIR)")
    .option("--json", "machine-readable output on stdout")
    .option("-q, --quiet", "no progress on stderr (results and errors still print)")
    .exitOverride()
    .configureOutput({ outputError: (text) => void (parseErrorText += text) });
  addKeyCommands(program);
  addStoreCommands(program);
  addServiceCommands(program);
  addTransferCommands(program, run, () => scopeOption());
  return program;
}

/**
 * Maps a parse failure to output and an exit code: an argument the parser refused (a bad
 * `--scope`, `--ttl`, `--mode`) is INVALID_ARGUMENT with its hint, exit 2, like the same refusal
 * from the library; anything else the parser refused (unknown command, missing argument) is usage,
 * exit 1; help and version exit 0.
 */
function reportParseError(err: CommanderError, json: boolean): number {
  if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return EXIT.OK;
  const text = parseErrorText.trim();
  parseErrorText = "";
  if (err.code === "commander.invalidArgument") {
    return reportError("INVALID_ARGUMENT", text.replace(/^error: /, ""), json);
  }
  if (json) printJson({ ok: false, error: "USAGE", message: text.replace(/^error: /, "") });
  else process.stderr.write(`${text}\n(run with --help for usage)\n`);
  return EXIT.USAGE;
}

/** Runs the CLI on `argv` (as in process.argv). */
export async function main(argv: string[]): Promise<void> {
  guardStdout();
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    process.exitCode = reportParseError(err, argv.includes("--json"));
  }
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv).catch((err: unknown) => {
    process.exitCode = reportFailure(err, false);
  });
}
