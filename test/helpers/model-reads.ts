/** Reading a store back against a model of what scope "s" should hold (compaction tests). */
import type { Store } from "../../engine/store.js";

/** Keys k0..k{keys-1} of scope "s" that do not read what `model` says (absent from it: NOT_FOUND). */
export function modelMisreads(s: Store, model: ReadonlyMap<string, string>, keys: number): number {
  let wrong = 0;
  for (let i = 0; i < keys; i++) {
    const want = model.get(`k${i}`);
    const got = s.readSync(`k${i}`, { scope: "s" });
    const ok = want === undefined ? got.status === "NOT_FOUND" : got.status === "OK" && Buffer.from(got.value as Uint8Array).toString() === want;
    if (!ok) wrong += 1;
  }
  return wrong;
}
