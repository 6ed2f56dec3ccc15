/**
 * `engram/memory-tool`: Claude's memory tool (`memory_20250818`) on an engram store.
 *
 * `EngramMemoryTool` implements the Anthropic SDK's `MemoryToolHandlers` and is a drop-in for the
 * SDK's `BetaLocalFilesystemMemoryTool`: for the same command sequence it returns the same result
 * strings and throws the same errors (directory sizes aside, which on a file system depend on it).
 * Underneath, each file is one key of one scope (its path, `/memories/...`), and each directory
 * that was made explicitly (by `create` or `rename`, as `mkdir -p` does on disk) is one marker key
 * (its path with a trailing `/`, empty value). A directory exists when it has a marker or any key
 * below it, so keys written by other means show up as implicit directories.
 *
 * Safer than the reference: a path outside `/memories` or with any traversal form (`.`, `..`,
 * encoded `%2e` / `%2f` / `%5c`, backslashes, NUL) is refused before anything is read or written,
 * and so is an argument of the wrong type (both as InvalidArgumentError, with the reference's
 * message where it has one); `rename` and `delete` of a directory are one atomic `batch`, and
 * `rename` compares the version of everything it moves; and `forgetScope` of the scope
 * erases the whole memory (eagerly, when asked). Where the reference lets a raw file-system error
 * through (ENOTDIR, EINVAL, which name host paths), this class throws its own message instead.
 *
 * This module imports nothing from `@anthropic-ai/sdk` at run time: the SDK is an optional peer,
 * needed only for its types and for `betaMemoryTool(handlers)`.
 */
import type { MemoryToolHandlers } from "@anthropic-ai/sdk/tools/memory/node";
import { InvalidArgumentError } from "../../rules/errors.js";
import type { BatchOp, BatchResult, ForgetResult, ListEntry, ListOptions, ReadOptions, ReadResult, ScopeOption, Value, WriteOptions, WriteResult } from "../types.js";

/** The calls of an engram store this tool uses (an `Engram` has them all). */
export interface MemoryToolStore {
  /** Engram.read: the nearest live value of `key` from `scope` up to "global" (unless `inherit: false`), or NOT_FOUND. */
  read(key: string, options?: ReadOptions): Promise<ReadResult>;
  /** Engram.write: writes `value` under `key`, resolving with its version and generation once committed. */
  write(key: string, value: Value, options?: WriteOptions): Promise<WriteResult>;
  /** Engram.forget: tombstones `key` in exactly `scope`, resolving once the tombstone is committed. */
  forget(key: string, options?: ScopeOption): Promise<ForgetResult>;
  /** Engram.batch: applies writes and forgets atomically (after a crash all or none are visible), one result per op. */
  batch(ops: BatchOp[]): Promise<BatchResult[]>;
  /** Engram.list: live keys in key order, the nearest scope's entry winning when inheriting. */
  list(options?: ListOptions): AsyncIterable<ListEntry>;
}

/** Options of `new EngramMemoryTool(store, options)`. */
export interface EngramMemoryToolOptions {
  /** The scope every memory file lives in (default "global"); `forgetScope(scope)` erases them all. */
  scope?: string;
}

type Handlers = MemoryToolHandlers;
type ViewCommand = Parameters<Handlers["view"]>[0];
type CreateCommand = Parameters<Handlers["create"]>[0];
type StrReplaceCommand = Parameters<Handlers["str_replace"]>[0];
type InsertCommand = Parameters<Handlers["insert"]>[0];
type DeleteCommand = Parameters<Handlers["delete"]>[0];
type RenameCommand = Parameters<Handlers["rename"]>[0];

const ROOT = "/memories";
/** The reference's line limit and number width (BetaLocalFilesystemMemoryTool). */
const LINES_MAX = 999999;
const LINE_NUMBER_WIDTH = String(LINES_MAX).length;
/** Most path components below /memories (a key is at most 1024 bytes anyway). */
const PATH_DEPTH_MAX = 64;
/** The size printed for a directory: what ext4 reports for a small one (the reference prints stat.size). */
const DIRECTORY_SIZE = "4K";
/** Segments that are traversal once percent-decoded, or separators in disguise. */
const ENCODED_TRAVERSAL = /%2e|%2f|%5c|%00/i;
/**
 * Tests only. `renameWithoutCas`: `rename` writes its targets and forgets its sources without
 * comparing versions (the behaviour before the fifty-fourth session), so an edit of the source or a
 * file made at the destination by another writer meanwhile is lost.
 */
export const unsafeMemoryToolForTests = { renameWithoutCas: false };

/** How often `rename` starts over when another writer changed its source or destination meanwhile. */
const RENAME_ATTEMPTS_MAX = 4;

/**
 * Refuses a command argument of the wrong type, before anything is read or written. The reference
 * coerces them instead (a missing `new_str` is written as the text "undefined", an `insert_line`
 * of "2" or 1.5 is used as 2 or 1), so this is one of the places where it is safer than the reference.
 */
function assertText(command: string, field: string, v: unknown): asserts v is string {
  if (typeof v !== "string") throw new InvalidArgumentError(`${command}: ${field} must be a string, got ${v === null ? "null" : typeof v}`);
}

/** As assertText, for a whole number (`insert_line`, the bounds of `view_range`). */
function assertWhole(command: string, field: string, v: unknown): asserts v is number {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new InvalidArgumentError(`${command}: ${field} must be an integer, got ${typeof v === "number" ? String(v) : v === null ? "null" : typeof v}`);
}

/** `view_range`: absent, or an array of integers (only a pair is applied, as in the reference). */
function assertRange(v: unknown): void {
  if (v === undefined || v === null) return;
  if (!Array.isArray(v)) throw new InvalidArgumentError(`view: view_range must be an array of two integers, got ${typeof v}`);
  v.forEach((n, i) => assertWhole("view", `view_range[${i}]`, n));
}

/** The reference's size format: 0B, 512B, 1.5K, 4K, 2.3M. */
function formatFileSize(bytes: number): string {
  if (bytes === 0) return "0B";
  const sizes = ["B", "K", "M", "G"];
  const i = Math.floor(Math.log(bytes) / Math.log(1024));
  const size = bytes / Math.pow(1024, i);
  return (size % 1 === 0 ? size.toString() : size.toFixed(1)) + (sizes[i] as string);
}

/** Numbers lines as the reference does: right-aligned in six columns, a tab, the line. */
function numbered(lines: string[], first: number): string[] {
  return lines.map((line, i) => `${String(i + first).padStart(LINE_NUMBER_WIDTH, " ")}\t${line}`);
}

/**
 * The canonical key of a memory path: "/memories" or "/memories/a/b". Throws (before anything is
 * touched) an InvalidArgumentError unless the path is /memories or below it with no traversal in
 * any spelling.
 */
export function memoryKey(memoryPath: unknown): string {
  if (typeof memoryPath !== "string") throw new InvalidArgumentError(`Path must be a string, got: ${typeof memoryPath}`);
  if (memoryPath !== ROOT && !memoryPath.startsWith(`${ROOT}/`)) throw new InvalidArgumentError(`Path must start with /memories, got: ${memoryPath}`);
  if (memoryPath.includes("\\") || memoryPath.includes("\u0000")) throw new InvalidArgumentError(`Path ${memoryPath} would escape /memories directory`);
  const parts = memoryPath.slice(ROOT.length).split("/").filter((p) => p !== "");
  for (const p of parts) {
    if (p === "." || p === ".." || ENCODED_TRAVERSAL.test(p)) throw new InvalidArgumentError(`Path ${memoryPath} would escape /memories directory`);
  }
  if (parts.length > PATH_DEPTH_MAX) throw new InvalidArgumentError(`Path ${memoryPath} is ${parts.length} levels deep; at most ${PATH_DEPTH_MAX}`);
  return parts.length === 0 ? ROOT : `${ROOT}/${parts.join("/")}`;
}

/** The ancestors of a key below the root, outermost first ("/memories/a/b/c" -> a, a/b). */
function ancestors(key: string): string[] {
  const parts = key.slice(ROOT.length + 1).split("/");
  const out: string[] = [];
  for (let i = 1; i < parts.length; i += 1) out.push(`${ROOT}/${parts.slice(0, i).join("/")}`);
  return out;
}

/** What a path is now. */
type Node = { kind: "file"; content: string; version: number } | { kind: "dir" } | { kind: "none" };

/** Claude's memory tool over one scope of an engram store. */
export class EngramMemoryTool implements MemoryToolHandlers {
  /** The scope every memory file lives in (`options.scope`, default "global"); reads and lists never inherit from its parents. */
  readonly scope: string;
  readonly #store: MemoryToolStore;
  /** Commands of this instance run one at a time, as one agent's tool calls do. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(store: MemoryToolStore, options: EngramMemoryToolOptions = {}) {
    this.#store = store;
    this.scope = options.scope ?? "global";
  }

  /** Runs `job` after every command issued before it. */
  #serial<R>(job: () => Promise<R>): Promise<R> {
    const next = this.#chain.then(job, job);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** The value of `key` in exactly this scope, or null. */
  async #get(key: string): Promise<{ value: string; version: number } | null> {
    const r = await this.#store.read(key, { scope: this.scope, inherit: false });
    if (r.status !== "OK") return null;
    return { value: typeof r.value === "string" ? r.value : new TextDecoder().decode(r.value), version: r.version };
  }

  /** Every key strictly below directory `dir`, in key order. */
  async #below(dir: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const e of this.#store.list({ scope: this.scope, prefix: `${dir}/`, inherit: false })) keys.push(e.key);
    return keys;
  }

  /** Classifies `key`: a file, a directory (marker, implicit, or the root), or nothing. */
  async #node(key: string): Promise<Node> {
    if (key === ROOT) return { kind: "dir" };
    const file = await this.#get(key);
    if (file !== null) return { kind: "file", content: file.value, version: file.version };
    if ((await this.#get(`${key}/`)) !== null) return { kind: "dir" };
    return (await this.#below(key)).length > 0 ? { kind: "dir" } : { kind: "none" };
  }

  /**
   * The key of `memoryPath`, refused when a file stands where a directory of it should be (the
   * reference refuses these paths in its symlink check, before it does anything, with ENOTDIR).
   */
  async #resolve(memoryPath: unknown): Promise<string> {
    const key = memoryKey(memoryPath);
    if (key === ROOT) return key;
    for (const a of ancestors(key)) {
      if ((await this.#get(a)) !== null) throw new Error(`The path ${String(memoryPath)} is below the file ${a}, which is not a directory`);
    }
    return key;
  }

  /** Marker writes for the ancestors of `key` that are not directories yet (`mkdir -p`); `key` passed #resolve. */
  async #mkdirOps(key: string): Promise<BatchOp[]> {
    const ops: BatchOp[] = [];
    for (const a of ancestors(key)) {
      if ((await this.#get(`${a}/`)) === null) ops.push({ op: "write", key: `${a}/`, value: "", scope: this.scope });
    }
    return ops;
  }

  /** `view`: a file with line numbers (optionally a line range), or a listing two levels deep. */
  view(command: ViewCommand): Promise<string> {
    return this.#serial(async () => {
      const key = await this.#resolve(command.path);
      assertRange(command.view_range);
      const node = await this.#node(key);
      if (node.kind === "dir") return this.#listing(key, command.path);
      if (node.kind !== "file") throw new Error(`The path ${command.path} does not exist. Please provide a valid path.`);
      const lines = node.content.split("\n");
      if (lines.length > LINES_MAX) {
        throw new Error(`File ${command.path} has too many lines (${lines.length}). Maximum is ${LINES_MAX.toLocaleString()} lines.`);
      }
      let shown = lines;
      let first = 1;
      const range = command.view_range;
      if (range && range.length === 2) {
        const start = Math.max(1, range[0] as number) - 1;
        const end = range[1] === -1 ? lines.length : (range[1] as number);
        shown = lines.slice(start, end);
        first = start + 1;
      }
      return `Here's the content of ${command.path} with line numbers:\n${numbered(shown, first).join("\n")}`;
    });
  }

  /** The reference's directory listing: sorted, hidden items and node_modules skipped, two levels. */
  async #listing(dir: string, shown: string): Promise<string> {
    // A tree of the names below `dir`: a file maps to its size, a directory to its children.
    type Tree = Map<string, Tree | number>;
    const root: Tree = new Map();
    for (const key of await this.#below(dir)) {
      const parts = key.slice(dir.length + 1).split("/");
      let node = root;
      for (const [i, part] of parts.entries()) {
        if (part === "") break; // the trailing "" of a directory marker
        const isDir = i < parts.length - 1;
        if (!isDir) {
          const file = await this.#get(key);
          if (file !== null) node.set(part, Buffer.byteLength(file.value, "utf8"));
          break;
        }
        let child = node.get(part);
        if (typeof child !== "object") {
          child = new Map();
          node.set(part, child);
        }
        node = child;
      }
    }
    const items: string[] = [];
    const collect = (tree: Tree, rel: string, depth: number): void => {
      for (const name of [...tree.keys()].sort()) {
        if (name.startsWith(".") || name === "node_modules") continue;
        const entry = tree.get(name) as Tree | number;
        const path = rel ? `${rel}/${name}` : name;
        if (typeof entry === "number") {
          items.push(`${formatFileSize(entry)}\t${shown}/${path}`);
        } else {
          items.push(`${DIRECTORY_SIZE}\t${shown}/${path}/`);
          if (depth < 2) collect(entry, path, depth + 1);
        }
      }
    };
    collect(root, "", 1);
    const header = `Here're the files and directories up to 2 levels deep in ${shown}, excluding hidden items and node_modules:`;
    return `${header}\n${[`${DIRECTORY_SIZE}\t${shown}`, ...items].join("\n")}`;
  }

  /** `create`: a new file (its parent directories made as needed); refuses an existing path. */
  create(command: CreateCommand): Promise<string> {
    return this.#serial(async () => {
      const key = await this.#resolve(command.path);
      const text: unknown = command.file_text;
      assertText("create", "file_text", text);
      if (key === ROOT) throw new Error(`File ${command.path} already exists`);
      const ops = await this.#mkdirOps(key);
      const node = await this.#node(key);
      if (node.kind !== "none") throw new Error(`File ${command.path} already exists`);
      ops.push({ op: "write", key, value: text, scope: this.scope, expectedVersion: null });
      await this.#batchOrExists(ops, command.path);
      return `File created successfully at: ${command.path}`;
    });
  }

  /** Commits `ops`; a compare-and-set lost to another writer reads as "already exists". */
  async #batchOrExists(ops: BatchOp[], shown: string): Promise<void> {
    try {
      await this.#store.batch(ops);
    } catch (err) {
      if ((err as { code?: unknown }).code === "VERSION_CONFLICT") throw new Error(`File ${shown} already exists`);
      throw err;
    }
  }

  /** The file at `memoryPath` for an edit, with the reference's refusals. */
  async #fileForEdit(memoryPath: string): Promise<{ key: string; content: string; version: number }> {
    const key = await this.#resolve(memoryPath);
    const node = await this.#node(key);
    if (node.kind === "none") throw new Error(`The path ${memoryPath} does not exist. Please provide a valid path.`);
    if (node.kind !== "file") throw new Error(`The path ${memoryPath} is not a file.`);
    return { key, content: node.content, version: node.version };
  }

  /** Writes an edited file; fails if another writer changed it since it was read. */
  async #rewrite(key: string, content: string, version: number, shown: string): Promise<void> {
    try {
      await this.#store.write(key, content, { scope: this.scope, expectedVersion: version });
    } catch (err) {
      if ((err as { code?: unknown }).code === "VERSION_CONFLICT") throw new Error(`The file ${shown} was changed concurrently; view it and retry`);
      throw err;
    }
  }

  /** `str_replace`: replaces the one line-wise occurrence of old_str; returns a numbered snippet. */
  str_replace(command: StrReplaceCommand): Promise<string> {
    return this.#serial(async () => {
      assertText("str_replace", "old_str", command.old_str);
      assertText("str_replace", "new_str", command.new_str);
      const file = await this.#fileForEdit(command.path);
      const lines = file.content.split("\n");
      const matching: number[] = [];
      lines.forEach((line, i) => {
        if (line.includes(command.old_str)) matching.push(i + 1);
      });
      if (matching.length === 0) {
        throw new Error(`No replacement was performed, old_str \`${command.old_str}\` did not appear verbatim in ${command.path}.`);
      }
      if (matching.length > 1) {
        throw new Error(`No replacement was performed. Multiple occurrences of old_str \`${command.old_str}\` in lines: ${matching.join(", ")}. Please ensure it is unique`);
      }
      const updated = file.content.replace(command.old_str, () => command.new_str);
      await this.#rewrite(file.key, updated, file.version, command.path);
      const newLines = updated.split("\n");
      const changed = (matching[0] as number) - 1;
      const start = Math.max(0, changed - 2);
      const end = Math.min(newLines.length, changed + 3);
      const snippet = numbered(newLines.slice(start, end), start + 1);
      return `The memory file has been edited. Here is the snippet showing the change (with line numbers):\n${snippet.join("\n")}`;
    });
  }

  /** `insert`: inserts insert_text (without one trailing newline) before line insert_line (0 = top). */
  insert(command: InsertCommand): Promise<string> {
    return this.#serial(async () => {
      assertWhole("insert", "insert_line", command.insert_line);
      assertText("insert", "insert_text", command.insert_text);
      const file = await this.#fileForEdit(command.path);
      const lines = file.content.split("\n");
      if (command.insert_line < 0 || command.insert_line > lines.length) {
        throw new Error(`Invalid \`insert_line\` parameter: ${command.insert_line}. It should be within the range of lines of the file: [0, ${lines.length}]`);
      }
      lines.splice(command.insert_line, 0, command.insert_text.replace(/\n$/, ""));
      await this.#rewrite(file.key, lines.join("\n"), file.version, command.path);
      return `The file ${command.path} has been edited.`;
    });
  }

  /** `delete`: forgets a file, or a directory and everything below it in one atomic batch. */
  delete(command: DeleteCommand): Promise<string> {
    return this.#serial(async () => {
      const key = await this.#resolve(command.path);
      if (key === ROOT) throw new Error("Cannot delete the /memories directory itself");
      const node = await this.#node(key);
      if (node.kind === "none") throw new Error(`The path ${command.path} does not exist`);
      const keys = node.kind === "file" ? [key] : [...(await this.#below(key))];
      await this.#store.batch(keys.map((k) => ({ op: "forget", key: k, scope: this.scope })));
      return `Successfully deleted ${command.path}`;
    });
  }

  /**
   * `rename`: moves a file or a directory tree in one atomic batch; refuses an existing destination.
   * The batch is compare-and-set on every key it touches (each source at the version it was read
   * at, each target absent), so an edit of the source or a file made at the destination by another
   * writer meanwhile is never lost: the rename starts over and sees it.
   */
  rename(command: RenameCommand): Promise<string> {
    return this.#serial(async () => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          return await this.#renameOnce(command);
        } catch (err) {
          if ((err as { code?: unknown }).code !== "VERSION_CONFLICT") throw err;
          if (attempt >= RENAME_ATTEMPTS_MAX) throw new Error(`The path ${command.old_path} or ${command.new_path} kept changing concurrently; view them and retry`);
        }
      }
    });
  }

  /** One try of `rename`; a VersionConflictError means another writer got in between its reads and its batch. */
  async #renameOnce(command: RenameCommand): Promise<string> {
    const from = await this.#resolve(command.old_path);
    const to = await this.#resolve(command.new_path);
    if (from === ROOT) throw new Error("Cannot rename the /memories directory itself");
    const dest = await this.#node(to);
    if (dest.kind === "file" || dest.kind === "dir") throw new Error(`The destination ${command.new_path} already exists`);
    // Like the reference, the destination's parent directories are made before the move is tried.
    const mkdirs = await this.#mkdirOps(to);
    const source = await this.#node(from);
    if (source.kind === "none") {
      if (mkdirs.length > 0) await this.#store.batch(mkdirs);
      throw new Error(`The path ${command.old_path} does not exist`);
    }
    if (to.startsWith(`${from}/`)) {
      if (mkdirs.length > 0) await this.#store.batch(mkdirs);
      throw new Error(`Cannot move ${command.old_path} into itself (${command.new_path})`);
    }
    const moves = source.kind === "file" ? [{ key: from, value: source.content, version: source.version }] : await this.#treeOf(from);
    const ops: BatchOp[] = [...mkdirs];
    if (source.kind === "dir") ops.push({ op: "write", key: `${to}/`, value: "", scope: this.scope, expectedVersion: null });
    for (const m of moves) {
      const target = to + m.key.slice(from.length);
      const unsafe = unsafeMemoryToolForTests.renameWithoutCas;
      if (target !== `${to}/`) ops.push({ op: "write", key: target, value: m.value, scope: this.scope, ...(unsafe ? {} : { expectedVersion: null }) });
      if (unsafe) {
        ops.push({ op: "forget", key: m.key, scope: this.scope });
        continue;
      }
      // A forget has no compare-and-set: an empty write of the source at the version read is one
      // (it costs a record header, not the value again), and the forget right after it in the same
      // atomic batch removes it.
      ops.push({ op: "write", key: m.key, value: "", scope: this.scope, expectedVersion: m.version }, { op: "forget", key: m.key, scope: this.scope });
    }
    await this.#store.batch(ops);
    return `Successfully renamed ${command.old_path} to ${command.new_path}`;
  }

  /** Every key below directory `dir` (its marker included) with its value and the version it was read at. */
  async #treeOf(dir: string): Promise<Array<{ key: string; value: string; version: number }>> {
    const out: Array<{ key: string; value: string; version: number }> = [];
    for (const key of await this.#below(dir)) {
      const v = await this.#get(key);
      if (v !== null) out.push({ key, value: v.value, version: v.version });
    }
    const marker = await this.#get(`${dir}/`);
    if (marker !== null && !out.some((m) => m.key === `${dir}/`)) out.push({ key: `${dir}/`, value: marker.value, version: marker.version });
    return out;
  }
}
