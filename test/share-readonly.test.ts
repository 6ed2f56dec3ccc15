/**
 * A client needs no write access: `engram mcp --read-only` (or any opener) on a directory it may
 * not write attaches to the owner and works through it, and never tries to write the directory.
 *
 * How it works: as root (needed to mount; skipped with a visible message otherwise), the store
 * directory is bind-mounted read-only at a second path, so every write through that path fails
 * with EROFS whatever the permissions. An owner opens the store at the writable path with
 * `share: true`; a client opens the read-only path with `share: true` and must attach (the socket
 * is named by the note in DIR/LOCK), read, and write through the owner. When the owner closes,
 * the client cannot become the owner (EROFS): a call made then must wait and reject with
 * OWNER_LOST by its deadline, not fail with a file-system error, and once a new owner opens the
 * writable path the client attaches to it and its calls run again. Finally the built CLI's
 * `engram mcp --read-only` started on the read-only path serves a read through the MCP SDK, and an
 * exclusive open of the read-only path rejects with IoError EROFS (a bare Node error before).
 *
 * Property stressed: the client side of sharing writes nothing to the store directory.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, describe, expect, it } from "vitest";
import { Engram, IoError, OwnerLostError } from "../src/index.js";
import { assertBuilt, CLI_BIN } from "./helpers/built.js";
import { tempDir } from "./helpers/tmp.js";

const base = tempDir("share-ro");
const dir = path.join(base, "store");
const ro = path.join(base, "ro");
const OPTS = { durability: "none" as const, compaction: { workers: 0 } };

/** Bind-mounts `dir` read-only at `ro`; a reason string when this machine cannot. */
function mountReadOnly(): string | null {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return "not root";
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(ro, { recursive: true, mode: 0o700 });
  try {
    execFileSync("mount", ["--bind", dir, ro], { stdio: "pipe" });
    execFileSync("mount", ["-o", "remount,ro,bind", ro], { stdio: "pipe" });
    return null;
  } catch (err) {
    return `mount failed: ${String(err).slice(0, 200)}`;
  }
}

const skipReason = mountReadOnly();
if (skipReason !== null) process.stderr.write(`share-readonly.test.ts: SKIPPED (${skipReason})\n`);

afterAll(() => {
  if (skipReason === null) execFileSync("umount", [ro], { stdio: "pipe" });
  fs.rmSync(base, { recursive: true, force: true });
});

describe.skipIf(skipReason !== null)("a client on a read-only mount of the store", () => {
  it("attaches, reads and writes through the owner, waits out a handover it cannot take, re-attaches", async () => {
    expect(() => fs.writeFileSync(path.join(ro, "probe"), "x")).toThrow(/EROFS/);
    const owner = await Engram.open(dir, { ...OPTS, share: true });
    await owner.write("k", "from the owner");
    const client = await Engram.open(ro, { ...OPTS, share: true, shareTimeoutMs: 400 });
    try {
      expect(client.role).toBe("client");
      expect(await client.read("k")).toMatchObject({ value: "from the owner" });
      await client.write("c", "through the owner");
      await owner.close();
      const t0 = Date.now();
      const err = await client.write("during", "x").then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OwnerLostError);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
      expect(client.role).toBe("client");
      const next = await Engram.open(dir, { ...OPTS, share: true });
      try {
        expect(await client.read("c")).toMatchObject({ value: "through the owner" });
        expect(await client.read("during")).toEqual({ status: "NOT_FOUND" });
      } finally {
        await client.close();
        await next.close();
      }
    } finally {
      await client.close();
    }
  });

  it("an exclusive open of the read-only path is an IoError with EROFS, not a bare Node error (twentieth session)", async () => {
    const err = await Engram.open(ro, OPTS).then(
      async (s) => {
        await s.close();
        return null;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IoError);
    expect((err as IoError).errno).toBe("EROFS");
    const again = await Engram.open(dir, OPTS); // the failed opener took no lock
    await again.close();
  });

  it("engram mcp --read-only on the read-only path serves reads through the owner", async () => {
    assertBuilt();
    const owner = await Engram.open(dir, { ...OPTS, share: true });
    await owner.write("pref", "dark");
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI_BIN, "mcp", "--dir", ro, "--read-only"], stderr: "pipe" });
    const mcp = new Client({ name: "engram-ro-test", version: "0.0.0" });
    try {
      await mcp.connect(transport);
      const res = await mcp.callTool({ name: "memory_read", arguments: { key: "pref" } });
      const wire = JSON.parse((res.content as Array<{ text: string }>)[0]?.text ?? "null") as Record<string, unknown>;
      expect(wire).toMatchObject({ status: "OK", value: "dark" });
    } finally {
      await mcp.close();
      await owner.close();
    }
  });
});
