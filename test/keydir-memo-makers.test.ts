/**
 * The keydir's remembered scope (engine/keydir.ts keysOf, reads-5) against the two slot makers the
 * write path uses (ensureSlot and createAbsent, writes-5). Found at the merge of the two branches:
 * a lookup of a name in a scope that holds nothing remembers "this scope has no keys"; a maker
 * that then creates the scope's map must forget that, or the slot just made — a bulk load's first
 * key in a new scope — is invisible to every later get in that scope.
 *
 * How it works: for each maker, get() a name in an empty scope (the memo now says "none"), make
 * the slot, and get() it again; then the same through a real store, whose batch's decide does the
 * first get and whose apply makes the slot. The twin is a Keydir built with its checks off
 * (`new Keydir(false)`: the remembered scope is never forgotten), which must lose the slot.
 */
import { describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Keydir } from "../engine/keydir.js";
import { Engram } from "../src/index.js";

/** The value of a read as text, or "NOT_FOUND". */
function textOf(r: { status: "OK"; value: string | Uint8Array } | { status: "NOT_FOUND" }): string {
  if (r.status !== "OK") return r.status;
  return typeof r.value === "string" ? r.value : Buffer.from(r.value).toString();
}

type Maker = "ensureSlot" | "createAbsent";

/** Looks a name up in an empty scope, makes its slot with `maker`, and looks it up again. */
function madeThenFound(kd: Keydir, maker: Maker, scope: string): boolean {
  expect(kd.get(scope, "k1")).toBeUndefined(); // remembers: `scope` holds nothing
  const made = kd[maker](scope, "k1");
  return kd.get(scope, "k1") === made && kd.size === 1;
}

describe("the remembered scope and the write path's slot makers", () => {
  for (const maker of ["ensureSlot", "createAbsent"] as const) {
    it(`${maker}: the slot made in a scope just looked up empty is found`, () => {
      expect(madeThenFound(new Keydir(), maker, "user:a")).toBe(true);
    });
    it(`${maker}: twin with the memo never forgotten loses it`, () => {
      expect(madeThenFound(new Keydir(false), maker, "user:a")).toBe(false);
    });
  }

  it("a batch's first puts into new scopes read back (decide looks up, apply makes)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engram-memo-makers-"));
    try {
      const store = await Engram.open(dir);
      for (let s = 0; s < 4; s++) {
        const scope = `user:u${s}`;
        await store.batch([{ op: "write", key: "a", value: "1", scope }, { op: "write", key: "b", value: "2", scope }]);
        expect(textOf(store.readSync("a", { scope, inherit: false }))).toBe("1");
        expect(textOf(store.readSync("b", { scope, inherit: false }))).toBe("2");
      }
      await store.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
