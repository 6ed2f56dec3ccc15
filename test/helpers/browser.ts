/**
 * A real headless browser for page tests: Debian's chromium driven by playwright-core (never a
 * downloaded browser). `chromiumPath()` is null when chromium is not installed; callers skip
 * with a visible message then (.ci/run installs it when it can).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import type { BrowserContext } from "playwright-core";

/** The chromium binary: $CHROMIUM_PATH, else the Debian package's. */
export function chromiumPath(): string | null {
  const candidates = [process.env["CHROMIUM_PATH"], "/usr/bin/chromium", "/usr/bin/chromium-browser"];
  for (const c of candidates) if (c !== undefined && c !== "" && existsSync(c)) return c;
  return null;
}

/** Flags: no sandbox (tests may run as root), and nothing that reaches the network by itself. */
const ARGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Launches chromium with a fresh profile in `profileDir` (the persistent-context form takes --user-data-dir). */
export async function launchBrowser(executablePath: string, profileDir: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(join(profileDir, "profile"), {
    executablePath,
    args: ARGS,
    headless: true,
    timeout: 60_000,
    viewport: { width: 1440, height: 900 },
  });
}
