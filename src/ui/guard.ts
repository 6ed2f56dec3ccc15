/**
 * The inspector's request guard: which requests may reach the store at all. A request must name
 * this server by a loopback Host with its port (DNS rebinding), carry the per-run token (header
 * or query), and change state only by a JSON POST from this origin (no CSRF through a GET or a
 * form). Every response carries headers that keep the page self-contained (CSP: nothing loads
 * from the network, no inline script) and the token out of referrers and caches.
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

/** The header the page sends its token in. */
export const TOKEN_HEADER = "x-engram-token";

/** Headers on every response, refusals included. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
  "Cross-Origin-Resource-Policy": "same-origin",
  "Cross-Origin-Opener-Policy": "same-origin",
};

/** Why a request was refused: its HTTP status and a message that says what to do. */
export interface Refusal {
  status: 401 | 403 | 405 | 415;
  message: string;
}

/** True when `host` (a Host header) is 127.0.0.1 or localhost with exactly this server's port. */
export function hostAllowed(host: string | undefined, port: number): boolean {
  if (host === undefined) return false;
  const h = host.toLowerCase();
  return h === `127.0.0.1:${port}` || h === `localhost:${port}`;
}

/** True when `origin` (an Origin header) is this server seen through a loopback name. */
function originAllowed(origin: string, port: number): boolean {
  return origin === `http://127.0.0.1:${port}` || origin === `http://localhost:${port}`;
}

/** Compares two tokens in constant time (a wrong token of the right length leaks nothing). */
function tokenMatches(given: string, token: string): boolean {
  const a = Buffer.from(given, "utf8");
  const b = Buffer.from(token, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The token a request carries: the header first, else the `token` query parameter. */
function tokenOf(req: IncomingMessage, url: URL): string | null {
  const header = req.headers[TOKEN_HEADER];
  if (typeof header === "string") return header;
  return url.searchParams.get("token");
}

/**
 * Decides whether a request may proceed; null when it may. Host first (a rebinding page never
 * learns whether its token guess was right), then the token, then POST's own rules.
 */
export function refusalOf(req: IncomingMessage, url: URL, port: number, token: string): Refusal | null {
  if (!hostAllowed(req.headers.host, port)) {
    return { status: 403, message: `foreign Host header: open http://127.0.0.1:${port}/ with the printed token` };
  }
  const given = tokenOf(req, url);
  if (given === null || given === "") return { status: 401, message: "token required: use the URL `engram ui` printed" };
  if (!tokenMatches(given, token)) return { status: 403, message: "wrong token: use the URL this run of `engram ui` printed" };
  if (req.method === "POST") return postRefusal(req, port);
  if (req.method !== "GET" && req.method !== "HEAD") return { status: 405, message: "only GET and POST are served" };
  return null;
}

/** A POST must be JSON (a cross-site form cannot send it without a preflight) from this origin. */
function postRefusal(req: IncomingMessage, port: number): Refusal | null {
  const origin = req.headers.origin;
  if (origin !== undefined && !originAllowed(origin, port)) return { status: 403, message: `foreign Origin ${origin}` };
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") return { status: 415, message: "POST bodies must be application/json" };
  return null;
}

/** Sends a JSON document with the security headers. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
