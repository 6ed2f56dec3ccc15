/**
 * Shared pieces of the I/O-fault tests: a deadline on every wait, descriptor and file counts,
 * and a guard that fails the test file on any unhandled rejection.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import { IoError } from "../../src/index.js";

/** Resolves or rejects like `p`, or rejects after `ms` naming `what`: no wait without a deadline. */
export function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`deadline: ${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

/** How the promise settled, within a deadline: the value or the error (never a hang). */
export async function settle<T>(ms: number, p: Promise<T>, what: string): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await within(ms, p, what) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("deadline:")) throw error;
    return { ok: false, error };
  }
}

/** Open descriptors of this process now. */
export function fdCount(): number {
  return fs.readdirSync("/proc/self/fd").length;
}

/** The file names in a store's segments directory. */
export function segmentFiles(dir: string): string[] {
  const d = path.join(dir, "segments");
  return fs.existsSync(d) ? fs.readdirSync(d).sort() : [];
}

/** Expects `err` to be an IoError with `errno`. */
export function expectIoError(err: unknown, errno: string): void {
  expect(err).toBeInstanceOf(IoError);
  expect((err as IoError).code).toBe("IO_ERROR");
  expect((err as IoError).errno).toBe(errno);
}

/** Installs, for the whole test file, a listener that records every unhandled rejection; checked at the end. */
export function guardUnhandledRejections(): { seen: unknown[] } {
  const state = { seen: [] as unknown[] };
  const onRejection = (reason: unknown): void => {
    state.seen.push(reason);
  };
  beforeAll(() => {
    process.on("unhandledRejection", onRejection);
  });
  afterAll(() => {
    process.off("unhandledRejection", onRejection);
    expect(state.seen, "no unhandled rejection escaped the store").toEqual([]);
  });
  return state;
}
