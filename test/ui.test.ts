/**
 * The web inspector (`engram ui`, issue 15) end to end, in a real headless chromium.
 *
 * How it works: the test process populates a store across scopes (global > users > sessions),
 * forgets some keys and reclaims one with gc, and closes it. Then the built CLI's `engram ui`
 * runs as a child process; chromium (Debian's, driven by playwright-core) opens the URL it
 * printed and the test walks the page as a person would: the scope tree with live-key counts,
 * a user's session with an inherited key and its origin scope, a key's value, version,
 * generation and probe state, a tombstoned and a reclaimed key, bytes as hex and base64, a
 * `<script>` value and an HTML-shaped key rendered as text, the segments chart, a refused call
 * with its code and message, the page refreshing by itself after a change made elsewhere, and a
 * key forgotten through the page that `engram get` then no longer finds. The store is opened in
 * the test process only before `engram ui` starts or after it stopped (until sharing lands,
 * two processes cannot hold it at once); the one parallel `engram get` is marked below.
 * Screenshots of the main views go under the test's temp dir (ENGRAM_UI_SCREENSHOTS=DIR copies
 * them there too; docs/ui.png was made that way).
 *
 * A second part needs no browser: raw HTTP requests without the token, with a wrong token, with
 * a foreign Host or Origin, a form-encoded POST and a GET of an action are all refused and change
 * nothing; each refusal has a control (the same request with only that one fault fixed) that
 * does succeed, so the refusals are not passing because the requests were malformed.
 *
 * Property stressed: the inspector shows exactly what the API says (states, origins, versions)
 * and only the holder of the per-run token, through a loopback Host, can read or change anything.
 */
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engram } from "../src/index.js";
import { assertBuilt } from "./helpers/built.js";
import { chromiumPath, launchBrowser } from "./helpers/browser.js";
import { tempDir } from "./helpers/tmp.js";
import { assertStaticBuilt, engram, rawRequest, startUi } from "./helpers/ui-proc.js";
import type { UiProcess } from "./helpers/ui-proc.js";

/** Every playwright wait gets this deadline. */
const WAIT_MS = 15_000;
const SESSION = "user:alice/session:1";
const XSS_VALUE = '<script>window.__xss = 1</script><b id="bold">not bold</b>';
const XSS_KEY = '<img src=x onerror="window.__xss = 2">';

/** Populates a store and returns the versions the page must show. Runs before `engram ui`. */
async function populate(dir: string): Promise<{ noteVersion: number; bioVersion: number }> {
  const store = await Engram.open(dir, { segmentBytes: 4096, compaction: { workers: 0, auto: false } });
  try {
    await store.write("pref.theme", "dark");
    await store.write("pref.theme", "light", { scope: "user:alice" });
    const bio = await store.write("bio", "likes tea", { scope: "user:alice" });
    await store.write("bio", "likes coffee", { scope: "user:bob" });
    await store.write("secret", "an old secret", { scope: SESSION });
    await store.forget("secret", { scope: SESSION });
    await store.write("filler", "f".repeat(5000)); // seals the segment holding secret
    await store.gc(); // secret: value bytes gone, retention record kept
    const note = await store.write("note", "session one note", { scope: SESSION });
    await store.write("draft", "to be forgotten", { scope: SESSION });
    await store.forget("draft", { scope: SESSION }); // tombstoned, bytes still on disk
    await store.write("blob", new Uint8Array([0, 1, 2, 255]), { scope: SESSION });
    await store.write("greeting", XSS_VALUE, { scope: SESSION });
    await store.write(XSS_KEY, "html-shaped key", { scope: SESSION });
    await store.write("note", "session two note", { scope: "user:alice/session:2" });
    // Preconditions: the states the page must show are really the store's.
    expect((await store.probe("secret", { scope: SESSION })).state).toBe("reclaimed");
    expect((await store.probe("draft", { scope: SESSION })).state).toBe("tombstoned");
    return { noteVersion: note.version, bioVersion: bio.version };
  } finally {
    await store.close();
  }
}

/**
 * True when two `share: true` handles can hold one directory at once (issue 10 landed). Until
 * then the second open is STORE_LOCKED, and a CLI call beside a running `engram ui` is too.
 */
async function sharingLanded(dir: string): Promise<boolean> {
  const first = await Engram.open(dir, { share: true });
  try {
    const second = await Engram.open(dir, { share: true });
    await second.close();
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === "STORE_LOCKED") return false;
    throw err;
  } finally {
    await first.close();
  }
}

const browserPath = chromiumPath();
if (browserPath === null) {
  console.warn("ui.test.ts: SKIPPED the browser tests: chromium not found (apt-get install -y chromium, or set CHROMIUM_PATH)");
}

describe.skipIf(browserPath === null)("the inspector page in headless chromium", () => {
  let dir: string;
  let shots: string;
  let versions: { noteVersion: number; bioVersion: number };
  let ui: UiProcess | null = null;
  let browser: BrowserContext;
  let page: Page;

  /** Saves a screenshot of the page under the temp dir (and ENGRAM_UI_SCREENSHOTS when set). */
  async function shot(name: string): Promise<void> {
    const file = join(shots, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true, timeout: WAIT_MS });
    const extra = process.env["ENGRAM_UI_SCREENSHOTS"];
    if (extra !== undefined && extra !== "") {
      mkdirSync(extra, { recursive: true });
      copyFileSync(file, join(extra, `${name}.png`));
    }
  }

  const scopeButton = (scope: string) => page.getByTestId(`scope:${scope}`);
  const keyRow = (origin: string, key: string) => page.getByTestId(`key:${origin}:${key}`);

  async function openKey(origin: string, key: string): Promise<void> {
    await keyRow(origin, key).click({ timeout: WAIT_MS });
    await expect.poll(() => page.getByTestId("key-name").textContent(), { timeout: WAIT_MS }).toBe(key);
    await expect.poll(() => page.getByTestId("key-origin").textContent(), { timeout: WAIT_MS }).toBe(origin);
  }

  beforeAll(async () => {
    assertBuilt();
    assertStaticBuilt();
    dir = join(tempDir("ui"), "store");
    shots = tempDir("ui-shots");
    versions = await populate(dir);
    ui = await startUi(dir);
    browser = await launchBrowser(browserPath as string, tempDir("ui-browser"));
    browser.setDefaultTimeout(WAIT_MS);
    page = await browser.newPage();
    await page.goto(ui.url, { timeout: WAIT_MS });
  });

  afterAll(async () => {
    await browser?.close();
    if (ui !== null) await ui.stop();
  });

  it("prints its URL first and shows the scope tree global > users > sessions with live-key counts", async () => {
    expect((ui as UiProcess).url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{32}$/);
    await expect.poll(() => scopeButton("global").textContent(), { timeout: WAIT_MS }).toBe("global 2 live"); // pref.theme, filler
    await expect.poll(() => scopeButton("user:alice").textContent(), { timeout: WAIT_MS }).toBe("user:alice 2 live");
    expect(await scopeButton(SESSION).textContent()).toBe("session:1 4 live"); // note, blob, greeting, the HTML-shaped key
    expect(await scopeButton("user:alice/session:2").textContent()).toBe("session:2 1 live");
    expect(await scopeButton("user:bob").textContent()).toBe("user:bob 1 live");
    // Nesting: a session is inside its user, which is inside global.
    const nested = page.locator('[data-testid="scope-tree"] > li > ul > li > ul [data-testid="scope:user:alice/session:1"]');
    expect(await nested.count()).toBe(1);
    expect(await page.getByTestId("store-dir").textContent()).toBe(dir);
    await shot("tree");
  });

  it("a user's session lists its own keys and inherited ones with the scope they come from", async () => {
    await scopeButton(SESSION).click();
    await expect.poll(() => page.getByTestId("selected-scope").textContent(), { timeout: WAIT_MS }).toBe(SESSION);
    await expect.poll(() => keyRow("user:alice", "bio").count(), { timeout: WAIT_MS }).toBe(1);
    expect(await keyRow("user:alice", "bio").locator("td").nth(3).textContent()).toBe("inherited from user:alice");
    // pref.theme is inherited from the nearest scope that has it: user:alice shadows global.
    expect(await keyRow("user:alice", "pref.theme").count()).toBe(1);
    expect(await keyRow("global", "pref.theme").count()).toBe(0);
    expect(await keyRow("global", "filler").count()).toBe(1);
    expect(await keyRow(SESSION, "note").locator("td").nth(3).textContent()).toBe("this scope");
    await shot("session");
  });

  it("opening a key shows its value, version, generation and probe state with its explanation", async () => {
    await openKey(SESSION, "note");
    expect(await page.getByTestId("key-value").textContent()).toBe("session one note");
    expect(await page.getByTestId("key-state").textContent()).toBe("live");
    expect(await page.getByTestId("key-version").textContent()).toBe(String(versions.noteVersion));
    expect(await page.getByTestId("key-generation").textContent()).toBe("1");
    expect(await page.getByTestId("key-explanation").textContent()).toMatch(/^A readable value/);
    await openKey("user:alice", "bio");
    expect(await page.getByTestId("key-value").textContent()).toBe("likes tea");
    expect(await page.getByTestId("key-version").textContent()).toBe(String(versions.bioVersion));
    expect(await page.getByTestId("key-read-from").textContent()).toBe("user:alice");
    await shot("key");
  });

  it("a tombstoned and a reclaimed key show their states: bytes on disk, and only the retention record", async () => {
    await openKey(SESSION, "draft");
    expect(await page.getByTestId("key-state").textContent()).toBe("tombstoned");
    expect(await page.getByTestId("key-explanation").textContent()).toContain("still in a segment file");
    expect(await page.getByTestId("key-physical").textContent()).toBe("1");
    expect(await page.getByTestId("key-value").textContent()).toBe("");
    await openKey(SESSION, "secret");
    expect(await page.getByTestId("key-state").textContent()).toBe("reclaimed");
    expect(await page.getByTestId("key-explanation").textContent()).toContain("half-reclaimed");
    expect(await page.getByTestId("key-value-present").textContent()).toBe("absent");
    expect(await page.getByTestId("key-retention-present").textContent()).toBe("present");
    expect(await page.getByTestId("key-physical").textContent()).toBe("0");
    await shot("reclaimed");
  });

  it("bytes show as hex and as base64", async () => {
    await openKey(SESSION, "blob");
    expect(await page.getByTestId("key-value").textContent()).toBe("000102ff");
    await page.getByTestId("bytes-format").selectOption("base64");
    await expect.poll(() => page.getByTestId("key-value").textContent(), { timeout: WAIT_MS }).toBe("AAEC/w==");
  });

  it("a <script> value and an HTML-shaped key render as text, never as HTML", async () => {
    await openKey(SESSION, "greeting");
    expect(await page.getByTestId("key-value").textContent()).toBe(XSS_VALUE);
    expect(await page.locator("#bold").count()).toBe(0);
    expect(await page.getByTestId("key-value").locator("*").count()).toBe(0);
    expect(await keyRow(SESSION, XSS_KEY).locator("td").first().textContent()).toBe(XSS_KEY);
    await openKey(SESSION, XSS_KEY);
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss)).toBeUndefined();
  });

  it("draws every segment with live and dead bytes, generation and sealed/active, and the stats() totals", async () => {
    const summary = (await (await fetch(`http://127.0.0.1:${(ui as UiProcess).port}/api/summary`, { headers: { "x-engram-token": (ui as UiProcess).token } })).json()) as {
      segments: Array<{ id: number; generation: number; sealed: boolean }>;
      totals: { sequence: number };
    };
    const groups = page.locator('[data-testid="segments-chart"] svg g[data-segment]');
    await expect.poll(() => groups.count(), { timeout: WAIT_MS }).toBe(summary.segments.length);
    expect(summary.segments.length).toBeGreaterThan(1);
    for (const s of summary.segments) {
      const label = await page.getByTestId(`segment-${s.id}`).locator("text").first().textContent();
      expect(label).toBe(`#${s.id}  gen ${s.generation}  ${s.sealed ? "sealed" : "active"}`);
    }
    expect(await page.locator(".dead").count()).toBeGreaterThan(0);
    expect(await page.getByTestId("totals").textContent()).toContain(`sequence${summary.totals.sequence}`);
    await page.getByTestId("segments-chart").scrollIntoViewIfNeeded();
    await shot("segments");
  });

  it("an action waits for confirmation; a refused call shows its code and message and writes nothing", async () => {
    const seqBefore = await page.getByTestId("totals").textContent();
    await openKey(SESSION, "note");
    await page.getByTestId("forget-key-button").click();
    await page.getByTestId("confirm-no").click();
    expect(await page.getByTestId("confirm").isHidden()).toBe(true);
    await scopeButton("global").click();
    await expect.poll(() => page.getByTestId("selected-scope").textContent(), { timeout: WAIT_MS }).toBe("global");
    await page.getByTestId("forget-scope-button").click();
    expect(await page.getByTestId("confirm-text").textContent()).toContain("Forget scope global");
    await page.getByTestId("confirm-yes").click();
    await expect.poll(() => page.getByTestId("error-code").textContent(), { timeout: WAIT_MS }).toBe("INVALID_ARGUMENT");
    expect(await page.getByTestId("error-message").textContent()).toContain('refuses "global"');
    await shot("refused");
    await page.getByTestId("error").locator("button").click();
    await page.getByTestId("goto-scope").fill("not a scope!");
    await page.getByTestId("goto-scope").press("Enter");
    await expect.poll(() => page.getByTestId("error").isVisible(), { timeout: WAIT_MS }).toBe(true);
    expect(await page.getByTestId("error-code").textContent()).toBe("INVALID_ARGUMENT");
    await expect.poll(() => page.getByTestId("selected-scope").textContent(), { timeout: WAIT_MS }).toBe("global"); // back where it was
    expect(await page.getByTestId("totals").textContent()).toBe(seqBefore); // same sequence: nothing written
    await scopeButton(SESSION).click();
    await openKey(SESSION, "note");
    expect(await page.getByTestId("key-state").textContent()).toBe("live"); // Cancel forgot nothing
  });

  it("refreshes by itself when the store changes under it", async () => {
    const u = ui as UiProcess;
    // A change the page did not make: a POST from outside the page, through the same server.
    const r = await rawRequest(u.port, "POST", "/api/forget", { Host: `127.0.0.1:${u.port}`, "X-Engram-Token": u.token, "Content-Type": "application/json" }, JSON.stringify({ key: "bio", scope: "user:bob" }));
    expect(r.status).toBe(200);
    await expect.poll(() => scopeButton("user:bob").textContent(), { timeout: WAIT_MS }).toBe("user:bob 0 live");
  });

  it("forgets a key through the page; `engram get` then finds nothing", async () => {
    await openKey(SESSION, "note");
    await page.getByTestId("forget-key-button").click();
    await page.getByTestId("confirm-yes").click();
    await expect.poll(() => page.getByTestId("notice").textContent(), { timeout: WAIT_MS }).toMatch(/^forgot note in user:alice\/session:1: tombstone seq \d+$/);
    await expect.poll(() => page.getByTestId("key-state").textContent(), { timeout: WAIT_MS }).toBe("tombstoned");
    await expect.poll(() => keyRow(SESSION, "note").locator(".state").textContent(), { timeout: WAIT_MS }).toBe("tombstoned");
    await shot("forgotten");

    // PARALLEL STEP: `engram get` while `engram ui` holds the store. Once sharing (issue 10) has
    // landed both are share:true processes on one directory and the get must see the forget
    // (exit 3, NOT_FOUND). Until then the CLI cannot open a held store: STORE_LOCKED, exit 2.
    const landed = await sharingLanded(join(tempDir("ui-share-probe"), "s"));
    const parallel = engram(["get", "note", "--dir", dir, "--scope", SESSION]);
    if (landed) {
      expect({ status: parallel.status, stderr: parallel.stderr }).toEqual({ status: 3, stderr: "engram: note: NOT_FOUND\n" });
    } else {
      console.warn("ui.test.ts: sharing (issue 10) not landed: the parallel `engram get` was refused with STORE_LOCKED, as expected until then");
      expect(parallel.status).toBe(2);
      expect(parallel.stderr).toContain("STORE_LOCKED");
    }

    expect(await (ui as UiProcess).stop()).toBe(0);
    ui = null;
    // The page notices by itself that nobody answers any more.
    await expect.poll(() => page.getByTestId("error-code").textContent(), { timeout: WAIT_MS }).toBe("NO_ANSWER");
    const after = engram(["get", "note", "--dir", dir, "--scope", SESSION]);
    expect({ status: after.status, stderr: after.stderr }).toEqual({ status: 3, stderr: "engram: note: NOT_FOUND\n" });
    const kept = engram(["get", "bio", "--dir", dir, "--scope", SESSION]);
    expect({ status: kept.status, stdout: kept.stdout }).toEqual({ status: 0, stdout: "likes tea\n" });
  });
});

describe("the inspector's guard (raw HTTP, no browser)", () => {
  let dir: string;
  let ui: UiProcess;
  let sequence: number;

  beforeAll(async () => {
    assertBuilt();
    assertStaticBuilt();
    dir = join(tempDir("ui-guard"), "store");
    const store = await Engram.open(dir);
    await store.write("k", "v", { scope: "user:alice" });
    sequence = store.stats().sequence;
    await store.close();
    ui = await startUi(dir);
  });

  afterAll(async () => {
    await ui?.stop();
  });

  const host = (): string => `127.0.0.1:${ui.port}`;
  const forgetBody = JSON.stringify({ key: "k", scope: "user:alice" });
  const post = (headers: Record<string, string>, path = "/api/forget", body = forgetBody) =>
    rawRequest(ui.port, "POST", path, { "Content-Type": "application/json", ...headers }, body);

  async function stillLive(): Promise<void> {
    const r = await rawRequest(ui.port, "GET", "/api/key?scope=user:alice&key=k", { Host: host(), "X-Engram-Token": ui.token });
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as { probe: { state: string } }).probe.state).toBe("live");
    const s = await rawRequest(ui.port, "GET", "/api/summary", { Host: host(), "X-Engram-Token": ui.token });
    expect((JSON.parse(s.body) as { totals: { sequence: number } }).totals.sequence).toBe(sequence);
  }

  it("refuses reads without the token (401), with a wrong one (403), or through a foreign Host (403)", async () => {
    const missing = await rawRequest(ui.port, "GET", "/api/summary", { Host: host() });
    expect([missing.status, JSON.parse(missing.body).error]).toEqual([401, "UNAUTHORIZED"]);
    const page = await rawRequest(ui.port, "GET", "/", { Host: host() });
    expect(page.status).toBe(401);
    expect(page.body).not.toContain("<html");
    const wrong = await rawRequest(ui.port, "GET", `/api/summary?token=${"x".repeat(ui.token.length)}`, { Host: host() });
    expect(wrong.status).toBe(403);
    for (const foreign of [`evil.example:${ui.port}`, "127.0.0.1", `127.0.0.1:${ui.port + 1}`, `localhost.evil.example:${ui.port}`]) {
      const r = await rawRequest(ui.port, "GET", `/api/summary?token=${ui.token}`, { Host: foreign });
      expect([foreign, r.status]).toEqual([foreign, 403]);
    }
    // Controls: the same requests with the one fault fixed are served.
    expect((await rawRequest(ui.port, "GET", `/api/summary?token=${ui.token}`, { Host: host() })).status).toBe(200);
    expect((await rawRequest(ui.port, "GET", "/api/summary", { Host: `localhost:${ui.port}`, "X-Engram-Token": ui.token })).status).toBe(200);
    const served = await rawRequest(ui.port, "GET", `/?token=${ui.token}`, { Host: host() });
    expect(served.status).toBe(200);
    expect(served.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(served.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(served.headers["referrer-policy"]).toBe("no-referrer");
    expect(served.body).not.toMatch(/https?:\/\/(?!www\.w3\.org)/); // nothing loads from the network
  });

  it("refuses state changes without the token, with a wrong one, through a foreign Host or Origin, as a form, or as a GET; nothing is done", async () => {
    expect((await post({ Host: host() })).status).toBe(401);
    expect((await post({ Host: host(), "X-Engram-Token": `${ui.token}x` })).status).toBe(403);
    expect((await post({ Host: `evil.example:${ui.port}`, "X-Engram-Token": ui.token })).status).toBe(403);
    expect((await post({ Host: host(), "X-Engram-Token": ui.token, Origin: "http://evil.example" })).status).toBe(403);
    expect((await post({ Host: host(), "X-Engram-Token": ui.token, "Content-Type": "text/plain" })).status).toBe(415);
    const get = await rawRequest(ui.port, "GET", `/api/forget?token=${ui.token}&key=k&scope=user:alice`, { Host: host() });
    expect(get.status).toBe(405);
    const bad = await post({ Host: host(), "X-Engram-Token": ui.token }, "/api/forget-scope", "{}");
    expect(JSON.parse(bad.body)).toMatchObject({ ok: false, error: "INVALID_ARGUMENT" }); // no scope given: global refused
    await stillLive();
    // Control: the same POST with the token, a loopback Host and this Origin does forget.
    const ok = await post({ Host: host(), "X-Engram-Token": ui.token, Origin: `http://${host()}` });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ ok: true, result: { ok: true, tombstoneSeq: sequence + 1 } });
  });

  it("bad input is a typed INVALID_ARGUMENT with a message, nothing is written, and the server stays usable", async () => {
    const auth = { Host: host(), "X-Engram-Token": ui.token };
    const cases: Array<[string, string, string | undefined, number]> = [
      ["GET", "/api/keys?scope=bad%20scope", undefined, 400],
      ["GET", "/api/keys?scope=global%2F", undefined, 400],
      ["GET", "/api/key?scope=user:alice", undefined, 400], // no key
      ["GET", "/api/key?scope=user:alice&key=", undefined, 400],
      ["POST", "/api/forget", "not json", 400],
      ["POST", "/api/forget", "[1, 2]", 400],
      ["POST", "/api/forget", JSON.stringify({ key: 7, scope: "user:alice" }), 400],
      ["POST", "/api/forget", JSON.stringify({ key: "k", scope: null }), 400],
      ["POST", "/api/forget-scope", JSON.stringify({ scope: "user:alice", reclaim: "soon" }), 400],
      ["POST", "/api/compact", JSON.stringify({ mode: "sideways" }), 400],
      ["POST", "/api/forget", JSON.stringify({ key: "k".repeat(20_000), scope: "user:alice" }), 413],
    ];
    for (const [method, path, body, status] of cases) {
      const headers = method === "POST" ? { ...auth, "Content-Type": "application/json" } : auth;
      const r = await rawRequest(ui.port, method, path, headers, body);
      const reply = JSON.parse(r.body) as { ok: boolean; error: string; message: string };
      expect([path, body?.slice(0, 40), r.status, reply.ok, reply.error]).toEqual([path, body?.slice(0, 40), status, false, "INVALID_ARGUMENT"]);
      expect(reply.message.length).toBeGreaterThan(10);
    }
    const unknown = await rawRequest(ui.port, "POST", "/api/drop-everything", { ...auth, "Content-Type": "application/json" }, "{}");
    expect(unknown.status).toBe(404);
    const s = await rawRequest(ui.port, "GET", "/api/summary", auth);
    expect((JSON.parse(s.body) as { totals: { sequence: number } }).totals.sequence).toBe(sequence + 1); // only the control's forget
  });

  it("refuses a missing store directory and a bad --port as usage errors (exit 1), creating nothing", () => {
    const missing = join(tempDir("ui-missing"), "nothing-here");
    const r = engram(["ui", "--dir", missing]);
    expect([r.status, r.stdout]).toEqual([1, ""]);
    expect(r.stderr).toContain("no store at");
    const port = engram(["ui", "--dir", dir, "--port", "70000"]);
    expect([port.status, port.stdout]).toEqual([1, ""]);
    expect(port.stderr).toContain("--port must be an integer in [0, 65535]");
    expect(existsSync(missing)).toBe(false);
  });

  it("listens on 127.0.0.1 only, and --port picks the port", async () => {
    const outside = Object.values(networkInterfaces())
      .flat()
      .find((a) => a !== undefined && !a.internal && a.family === "IPv4");
    if (outside === undefined) {
      console.warn("ui.test.ts: no non-loopback IPv4 address here: the 127.0.0.1-only check was skipped");
    } else {
      const refused = await new Promise<string>((resolve) => {
        const s = connect({ host: outside.address, port: ui.port, timeout: 5000 });
        s.once("connect", () => (s.destroy(), resolve("connected")));
        s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
        s.once("timeout", () => (s.destroy(), resolve("timeout")));
      });
      expect(refused).toBe("ECONNREFUSED");
    }
    await ui.stop();
    const port = ui.port; // freed just now
    ui = await startUi(dir, ["--port", String(port)]);
    expect(ui.port).toBe(port);
  });
});
