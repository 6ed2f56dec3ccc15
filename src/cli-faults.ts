/**
 * ENGRAM_FAULTS: fault injection for tests of the command line (API.md "Fault injection"). A test
 * that runs `engram` as a child process cannot hand it an `OpenOptions.faults` object, so the
 * variable carries one as JSON, and every command that opens a store passes it to the open.
 * It is checked whole before anything is opened or created: a bad one is INVALID_ARGUMENT.
 */
import { resolveOptions } from "../engine/options.js";
import { InvalidArgumentError } from "../rules/errors.js";
import type { FaultOptions } from "./types.js";

/** The environment variable's name. */
export const FAULTS_ENV = "ENGRAM_FAULTS";

/** The fields the CLI takes: pauseAt is left out, since nothing in the process could release it. */
const FIELDS: ReadonlySet<string> = new Set(["crashAt", "crashAfter", "failAt"]);
const FAIL_FIELDS: ReadonlySet<string> = new Set(["point", "errno", "times"]);

/** Throws the INVALID_ARGUMENT of a bad ENGRAM_FAULTS, saying what it takes. */
function refuse(what: string): never {
  throw new InvalidArgumentError(
    `${FAULTS_ENV}: ${what}; nothing was opened. It takes a JSON object such as {"failAt":{"point":"io:sync","errno":"EIO"}} ` +
      `(docs/CLI-MCP.md "Fault injection"), and is for tests only: unset it to use the store`,
  );
}

/** Refuses pauseAt and any field the faults option does not have (the library lets far-off names pass; a test's typo must not arm nothing). */
function checkFields(f: Record<string, unknown>): void {
  if ("pauseAt" in f) {
    refuse(`"pauseAt" does not apply here: a paused operation waits for store.faults.release(), which nothing in an engram process calls, so the command would hang; use crashAt or failAt`);
  }
  const unknown = Object.keys(f).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) refuse(`unknown field ${JSON.stringify(unknown)} (it has crashAt, crashAfter, failAt)`);
  const fail = f["failAt"];
  if (fail === null || typeof fail !== "object" || Array.isArray(fail)) return; // resolveOptions names the bad value
  const unknownFail = Object.keys(fail).find((k) => !FAIL_FIELDS.has(k));
  if (unknownFail !== undefined) refuse(`unknown field "failAt.${unknownFail}" (it has point, errno, times)`);
}

/**
 * The `faults` open option ENGRAM_FAULTS asks for, or undefined when it is unset or blank. Bad
 * JSON, a field the option lacks, an unknown point name or errno are INVALID_ARGUMENT, thrown
 * before anything is opened.
 */
export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env): FaultOptions | undefined {
  const raw = env[FAULTS_ENV];
  if (raw === undefined || raw.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    refuse(`not JSON (${(err as Error).message})`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) refuse("not a JSON object");
  checkFields(parsed as Record<string, unknown>);
  try {
    resolveOptions({ faults: parsed as FaultOptions }); // the library's own checks: point names, errno, counts
  } catch (err) {
    if (err instanceof InvalidArgumentError) refuse(err.message);
    throw err;
  }
  return parsed as FaultOptions;
}
