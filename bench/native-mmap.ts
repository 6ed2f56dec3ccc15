/**
 * bench/native/mmap.c, compiled on first use and loaded: a read-only shared mapping of a file,
 * for W5's floor that reads through mmap as lmdb does (bench/w5-floor.ts --mmap). Bench only:
 * no engine code loads it. It is built with the machine's C compiler against the headers of the
 * Node.js that runs it (`<prefix>/include/node`), into bench/native/build/ under a name that
 * carries a hash of its source and of Node's ABI, so that an edit or another Node rebuilds it;
 * the build writes a temporary file and renames it, so concurrent first uses do not tear it.
 */
import { execFileSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/** The addon's one function: a read-only view of the file's [0, bytes), which must not pass its end (SIGBUS). */
export interface Mmap {
  map(fd: number, bytes: number): ArrayBuffer;
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = path.join(HERE, "native", "mmap.c");
const BUILD_DIR = path.join(HERE, "native", "build");
/** The longest a compile may take before the floor is reported unavailable. */
const COMPILE_TIMEOUT_MS = 60_000;

let loaded: Mmap | string | undefined;

/** The addon, built on first use; or, when it cannot be built or loaded here, a sentence saying why. */
export function loadMmap(): Mmap | string {
  if (loaded === undefined) {
    try {
      loaded = build();
    } catch (e) {
      loaded = `bench/native/mmap.c could not be built or loaded here: ${(e as Error).message.split("\n")[0] ?? "?"}`;
    }
  }
  return loaded;
}

/** Compiles the addon unless this source's build for this Node exists, then loads it. */
function build(): Mmap {
  const source = fs.readFileSync(SOURCE);
  const tag = crypto.createHash("sha256").update(source).update(process.versions.modules).digest("hex").slice(0, 12);
  const target = path.join(BUILD_DIR, `mmap-${tag}.node`);
  if (!fs.existsSync(target)) {
    const include = path.join(path.dirname(path.dirname(process.execPath)), "include", "node");
    if (!fs.existsSync(path.join(include, "node_api.h"))) throw new Error(`no node_api.h under ${include}`);
    fs.mkdirSync(BUILD_DIR, { recursive: true });
    const tmp = `${target}.${process.pid}.tmp`;
    execFileSync("cc", ["-O2", "-shared", "-fPIC", "-Wall", "-Werror", `-I${include}`, "-o", tmp, SOURCE], { stdio: "pipe", timeout: COMPILE_TIMEOUT_MS });
    fs.renameSync(tmp, target);
  }
  const addon = createRequire(import.meta.url)(target) as Partial<Mmap>;
  if (typeof addon.map !== "function") throw new Error(`${target} exports no map()`);
  return addon as Mmap;
}
