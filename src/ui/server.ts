/**
 * The inspector's HTTP server (Node's http, no framework): the static page, a read-only JSON API
 * over the store, and the POST actions. Every request passes guard.ts first; nothing of the page
 * comes from anywhere but this server.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { EngramError, InvalidArgumentError } from "../../rules/errors.js";
import * as A from "../../rules/args.js";
import type { Engram } from "../engram.js";
import { toWireError } from "../tools.js";
import { isAction, runAction } from "./actions.js";
import { refusalOf, SECURITY_HEADERS, sendJson } from "./guard.js";
import { keyDetail, keysOf, scopeTree, summary } from "./views.js";

/** Largest POST body accepted. */
export const BODY_BYTES_MAX = 16 * 1024;
/** Most connections served at once. */
export const CONNECTIONS_MAX = 64;

/** The `error` string of each refusal status. */
const REFUSAL_CODES: Readonly<Record<number, string>> = { 401: "UNAUTHORIZED", 403: "FORBIDDEN", 405: "METHOD_NOT_ALLOWED", 415: "UNSUPPORTED_MEDIA_TYPE" };

/** The page's static files, by URL path: served from memory, read once at start. */
const STATIC_FILES: Readonly<Record<string, { file: string; type: string }>> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/static/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/static/chart.js": { file: "chart.js", type: "text/javascript; charset=utf-8" },
  "/static/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
};

/** Reads the static files from ./static beside this module (src/ui/static or dist/src/ui/static). */
function loadStatic(token: string): Map<string, { body: Buffer; type: string }> {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const [route, { file, type }] of Object.entries(STATIC_FILES)) {
    let text = readFileSync(new URL(`./static/${file}`, import.meta.url), "utf8");
    // Subresources carry the token in their URL: the page itself holds it, nothing else does.
    if (file === "index.html") text = text.replaceAll("__TOKEN__", encodeURIComponent(token));
    files.set(route, { body: Buffer.from(text, "utf8"), type });
  }
  return files;
}

/** A required string query parameter. */
function param(url: URL, name: string): string {
  const v = url.searchParams.get(name);
  if (v === null) throw new InvalidArgumentError(`query parameter ${name} is required`);
  return v;
}

/** A query parameter that must be a valid scope (default "global"). */
function scopeParam(url: URL, name: string): string {
  return A.scopeOf({ scope: url.searchParams.get(name) ?? undefined });
}

/** Answers a GET of the JSON API. */
async function getApi(store: Engram, path: string, url: URL): Promise<unknown> {
  switch (path) {
    case "/api/summary":
      return summary(store);
    case "/api/scopes":
      return scopeTree(store);
    case "/api/keys":
      return keysOf(store, scopeParam(url, "scope"));
    case "/api/key": {
      const scope = scopeParam(url, "scope");
      const origin = url.searchParams.has("origin") ? scopeParam(url, "origin") : scope;
      return keyDetail(store, scope, origin, A.keyOf(param(url, "key")));
    }
    default:
      return undefined;
  }
}

/** Reads a JSON body of at most BODY_BYTES_MAX bytes. */
async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > BODY_BYTES_MAX) throw new InvalidArgumentError(`request body over ${BODY_BYTES_MAX} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new InvalidArgumentError("request body is not JSON");
  }
}

/** The HTTP status of a failed call: 400 for bad input, 409 for any other refusal, 500 for a bug. */
function statusOf(err: unknown): number {
  if (!(err instanceof EngramError)) return 500;
  return err.code === "INVALID_ARGUMENT" ? 400 : 409;
}

/** Routes one request that passed the guard. */
async function route(store: Engram, files: Map<string, { body: Buffer; type: string }>, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const path = url.pathname;
  if (req.method === "POST") {
    const name = path.startsWith("/api/") ? path.slice(5) : "";
    if (!isAction(name)) return sendJson(res, 404, { ok: false, error: "NOT_FOUND", message: `no action at ${path}` });
    if (Number(req.headers["content-length"] ?? 0) > BODY_BYTES_MAX) {
      return sendJson(res, 413, { ok: false, error: "INVALID_ARGUMENT", message: `request body over ${BODY_BYTES_MAX} bytes: nothing done` });
    }
    const result = await runAction(store, name, await readBody(req));
    return sendJson(res, 200, { ok: true, result });
  }
  const file = files.get(path);
  if (file !== undefined) {
    res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": file.type, "Content-Length": file.body.length });
    res.end(req.method === "HEAD" ? undefined : file.body);
    return;
  }
  const body = path.startsWith("/api/") && !isAction(path.slice(5)) ? await getApi(store, path, url) : undefined;
  if (body === undefined) {
    const status = isAction(path.slice(5)) ? 405 : 404; // actions are POST only: a GET does nothing
    return sendJson(res, status, { ok: false, error: status === 405 ? "METHOD_NOT_ALLOWED" : "NOT_FOUND", message: status === 405 ? "actions are POST only" : `nothing at ${path}` });
  }
  sendJson(res, 200, body);
}

/** Options of the inspector server. */
export interface InspectorOptions {
  /** The per-run secret every request must carry. */
  token: string;
}

/**
 * Creates the inspector's HTTP server over `store` (not yet listening). The caller listens on
 * 127.0.0.1 and must call `setPort` with the bound port before serving (the Host check needs it).
 */
export function createInspector(store: Engram, options: InspectorOptions): { server: Server; setPort(port: number): void } {
  if (options.token.length < 16) throw new InvalidArgumentError("the inspector token must have at least 16 characters");
  const files = loadStatic(options.token);
  let port = -1;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const refusal = port < 0 ? { status: 403 as const, message: "not ready" } : refusalOf(req, url, port, options.token);
    if (refusal !== null) {
      req.resume();
      return sendJson(res, refusal.status, { ok: false, error: REFUSAL_CODES[refusal.status], message: refusal.message });
    }
    route(store, files, req, res, url).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, statusOf(err), toWireError(err));
      else res.destroy();
    });
  });
  server.maxConnections = CONNECTIONS_MAX;
  server.requestTimeout = 60_000;
  server.headersTimeout = 10_000;
  return { server, setPort: (p) => void (port = p) };
}
