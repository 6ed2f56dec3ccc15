/**
 * Human output for the CLI: aligned tables, byte sizes, a progress bar on stderr, and the hint
 * printed under each error code.
 */

/** A table cell: strings are left-aligned, numbers right-aligned. */
export type Cell = string | number;

/** Renders rows under a header as aligned columns separated by two spaces. */
export function formatTable(header: string[], rows: Cell[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i] ?? "").length)));
  const line = (cells: Cell[], numeric: boolean[]): string =>
    cells
      .map((c, i) => (numeric[i] === true ? String(c).padStart(widths[i] ?? 0) : String(c).padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === "number"));
  return [line(header, numeric), ...rows.map((r) => line(r, numeric))].join("\n");
}

/** Renders key/value pairs as an aligned two-column list. */
export function formatPairs(pairs: Array<[string, Cell | boolean | null]>): string {
  const width = Math.max(0, ...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v === null ? "-" : String(v)}`).join("\n");
}

/** Formats a byte count as B / KiB / MiB / GiB with one decimal. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** Formats a ratio in [0, 1] as a percentage with one decimal. */
export function formatPercent(ratio: number): string {
  return `${(Number.isFinite(ratio) ? ratio * 100 : 0).toFixed(1)}%`;
}

/** A writable text sink with optional TTY width (process.stderr fits). */
export interface TextSink {
  write(chunk: string): boolean;
  isTTY?: boolean;
  columns?: number;
}

/** Draws progress on a sink: a redrawn bar on a TTY, one line per 10% otherwise. */
export class ProgressBar {
  private lastDecile = -1;
  private lastDraw = 0;
  private drawn = false;

  /** Creates a bar labelled `label` writing to `sink`. */
  constructor(
    private readonly sink: TextSink,
    private readonly label: string,
  ) {}

  /** Reports `done` of `total` bytes. */
  update(done: number, total: number): void {
    const ratio = total > 0 ? Math.min(1, done / total) : 1;
    if (this.sink.isTTY === true) this.drawTty(ratio, done, total);
    else this.drawLine(ratio, done, total);
  }

  /** Ends the bar (moves a TTY to a fresh line). */
  finish(): void {
    if (this.drawn && this.sink.isTTY === true) this.sink.write("\n");
  }

  private drawTty(ratio: number, done: number, total: number): void {
    const now = Date.now();
    if (ratio < 1 && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const width = Math.max(10, Math.min(40, (this.sink.columns ?? 80) - 50));
    const full = Math.round(ratio * width);
    const bar = "#".repeat(full) + "-".repeat(width - full);
    this.sink.write(`\r${this.label} [${bar}] ${formatPercent(ratio)} ${formatBytes(done)}/${formatBytes(total)}`);
    this.drawn = true;
  }

  private drawLine(ratio: number, done: number, total: number): void {
    const decile = Math.floor(ratio * 10);
    if (decile === this.lastDecile) return;
    this.lastDecile = decile;
    this.sink.write(`${this.label} ${formatPercent(ratio)} (${formatBytes(done)}/${formatBytes(total)})\n`);
  }
}

const HINTS: Record<string, string> = {
  VERSION_CONFLICT: "someone changed the key: `engram get` it again and retry with its current version",
  TOMBSTONED: "the key was forgotten: pass --clear-tombstone, or run `engram undelete` first",
  HALF_RECLAIMED: "the value is gone but its retention record survives: re-write with --clear-tombstone",
  SCOPE_ERASED_DURING_READ: "the read overlapped a scope erasure and returned nothing: run it again",
  STORE_LOCKED: "another process opened the directory exclusively (without share: true): stop it, or have it open with share: true",
  CLOSED: "the store was closed while the command ran",
  CORRUPTION: "run `engram verify --dir DIR` to list every damaged record, and restore from a copy",
  LIMIT_EXCEEDED: "a configured limit was hit: split the work or raise the limit",
};

/**
 * The hints of INVALID_ARGUMENT, by what the message is about, first match wins. A refused value
 * is named at the message's start: by the tool call (`memory_write: key: ...`), by the parser
 * (`option '--scope <scope>' ...`) or by the library (`key must ...`). An empty hint stands where
 * the message already says what to do (ENGRAM_FAULTS, a backup TARGET, a --dir, a value's size);
 * a message none of these names gets none either, rather than advice about something else.
 */
const INVALID_ARGUMENT_HINTS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^ENGRAM_FAULTS: |^backup target |^the parent directory of backup target |^cannot make the store directory |^the store path /, ""],
  [/^backup needs a target/, "give TARGET: a new path, or an empty directory, outside the store"],
  [/refuses "global"/, "erase the scopes below it one at a time, or delete the store's directory to erase everything"],
  [/^(?:memory_\w+: )?key\b/, "a key is 1 to 1024 bytes of UTF-8 with no NUL, e.g. pref.theme"],
  [/^(?:memory_\w+: )?scope\b|^option '--scope /, 'a scope is "global" or components joined by "/", each a letter or digit then up to 63 of [A-Za-z0-9._:@-], e.g. "user:alice/session:1"'],
  [/^(?:memory_\w+: )?ttl_ms\b|^option '--ttl /, "--ttl is the value's lifetime in milliseconds, a whole number from 1 (e.g. --ttl 86400000 for a day)"],
  [/^(?:memory_\w+: )?expected_version\b|^option '--expected-version /, "--expected-version takes the version `engram get --json` printed, or none for a key with no live value"],
  [/^line \d+: .*nothing was imported/, "import reads a file `engram export` wrote, unchanged: export the store again"],
];

/** The one-line hint printed under an error code and its message (empty when none fits). */
export function hintFor(code: string, message = ""): string {
  if (code !== "INVALID_ARGUMENT") return HINTS[code] ?? "";
  return INVALID_ARGUMENT_HINTS.find(([pattern]) => pattern.test(message))?.[1] ?? "";
}
