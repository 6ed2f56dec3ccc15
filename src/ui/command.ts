/**
 * `engram ui --dir DIR [--port N]`: opens the store with `share: true`, serves the inspector on
 * 127.0.0.1 only, prints `engram ui: http://127.0.0.1:PORT/?token=TOKEN` as the first line of
 * stdout, and runs until SIGINT or SIGTERM, then closes the server and the store.
 */
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { openStore, UsageError } from "../cli-store.js";
import type { GlobalOptions } from "../cli-store.js";
import { EXIT } from "../cli-store.js";
import { createInspector } from "./server.js";

/** Options of `engram ui`. */
export interface UiOptions extends GlobalOptions {
  port?: number;
}

/** Highest TCP port. */
const PORT_MAX = 65535;
/** Bytes of randomness in the per-run token (base64url: 32 characters). */
const TOKEN_BYTES = 24;

/** Listens on 127.0.0.1:`port` (0: a free one) and resolves with the bound port. */
function listen(server: import("node:http").Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      process.off("SIGINT", done);
      process.off("SIGTERM", done);
      resolve();
    };
    process.on("SIGINT", done);
    process.on("SIGTERM", done);
  });
}

/** Runs the inspector until a signal; returns the exit code. */
export async function runUi(opts: UiOptions): Promise<number> {
  const port = opts.port ?? 0;
  if (!Number.isSafeInteger(port) || port < 0 || port > PORT_MAX) throw new UsageError(`--port must be an integer in [0, ${PORT_MAX}]`);
  const store = await openStore(opts, true, { share: true });
  try {
    const token = randomBytes(TOKEN_BYTES).toString("base64url");
    const inspector = createInspector(store, { token });
    const bound = await listen(inspector.server, port);
    inspector.setPort(bound);
    process.stdout.write(`engram ui: http://127.0.0.1:${bound}/?token=${token}\n`);
    process.stderr.write(`engram ui: serving ${store.dir} on 127.0.0.1 only; Ctrl-C stops\n`);
    await untilSignal();
    await new Promise<void>((resolve) => {
      inspector.server.close(() => resolve());
      inspector.server.closeAllConnections();
    });
  } finally {
    await store.close();
  }
  return EXIT.OK;
}
