/**
 * Helpers shared by the case files.
 */
import { NotSupportedError } from "../../../rules/errors.js";
import type { ListEntry, ReadOptions, ReadResult } from "../../../rules/types.js";
import { expect } from "../expect.js";
import type { ConformanceStore, Harness } from "../harness.js";

/** Every entry of a list() iterable. */
export async function collect(it: AsyncIterable<ListEntry>): Promise<ListEntry[]> {
  const out: ListEntry[] = [];
  for await (const e of it) out.push(e);
  return out;
}

/**
 * readSync's answer where the backend has one; elsewhere it checks that readSync throws
 * NotSupportedError and answers with read() instead, so the same assertions hold for both.
 */
export async function syncRead(h: Harness, store: ConformanceStore, key: string, options?: ReadOptions): Promise<ReadResult> {
  if (h.supports.readSync) return store.readSync(key, options);
  expect(() => store.readSync(key, options)).toThrow(NotSupportedError);
  return store.read(key, options);
}
