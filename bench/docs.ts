/**
 * Writes docs/PERFORMANCE.md from a full benchmark report (default bench/results/latest.md).
 *
 *   node --import tsx bench/docs.ts [report.md]        (or `npm run bench -- --docs`)
 *
 * Refuses a quick run's report: the docs hold full-run figures only.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const DOCS_FILE = path.join(here, "..", "docs", "PERFORMANCE.md");

export function renderDocs(report: string): string {
  if (/· quick ·/.test(report)) throw new Error("that report is from a quick run; docs/PERFORMANCE.md holds full-run figures (npm run bench)");
  const body = report.replace(/^# .*\n+/, "").replace(/^(#{2,}) /gm, "#$1 ");
  return [
    "# Performance",
    "",
    "engram measured side by side with lmdb 3.x, classic-level 3.x and better-sqlite3 12.11.1 by the",
    "benchmark suite in `bench/` (how it measures and what every row means: `bench/README.md`).",
    "This page is generated from the last full run's report (`bench/results/latest.md`) by",
    "`node --import tsx bench/docs.ts`, or directly with `npm run bench -- --docs`.",
    "",
    "How to read it: each row is the median over repetitions of a child process per store and",
    'workload, with the spread (min – max). "engram / best peer" is engram\'s median over the best',
    "peer's: above 1 is better for engram where higher is better, below 1 where lower is better.",
    "Targets are issue 6's, for this machine kind; issue 11's goals are checked against the same",
    "run in their own table. The machine is shared with other work: the load average at the start",
    "and end of the run is in the machine description, and fsync-bound rows move with it (compare",
    "them with the physical limits measured in the same run).",
    "",
    "To reproduce:",
    "",
    "```sh",
    "npm ci",
    "npm run bench          # full: 3 repetitions, under 10 minutes on 2 cores",
    "npm run bench:quick    # smoke run: small sizes, 1 repetition, under a minute",
    "```",
    "",
    "## The last full run",
    "",
    body.trimEnd(),
    "",
  ].join("\n");
}

/**
 * The hand-kept part of the current page, kept across regenerations: everything from the
 * "Sharing" section (written from `npm run bench:share`) on, which includes "Issue 11: where each
 * goal stands" (written by hand). Empty when the page has no Sharing section.
 */
export function keptSections(page: string): string {
  const at = page.indexOf("\n## Sharing one store between processes");
  return at < 0 ? "" : page.slice(at);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const src = process.argv[2] ?? path.join(here, "results", "latest.md");
  const kept = fs.existsSync(DOCS_FILE) ? keptSections(fs.readFileSync(DOCS_FILE, "utf8")) : "";
  fs.writeFileSync(DOCS_FILE, renderDocs(fs.readFileSync(src, "utf8")) + kept);
  process.stdout.write(`wrote ${path.relative(process.cwd(), DOCS_FILE)} from ${path.relative(process.cwd(), src)}\n`);
}
