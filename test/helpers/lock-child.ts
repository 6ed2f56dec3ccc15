/**
 * Child process for test/lock.test.ts. Usage:
 *   node --import tsx test/helpers/lock-child.ts DIR hold   opens DIR (durability sync), writes
 *        key "child" = "<pid>", prints "READY <version>" and keeps the store open until killed;
 *   node --import tsx test/helpers/lock-child.ts DIR try    tries to open DIR and prints
 *        "OPENED" (then closes) or "FAILED <code>", and exits.
 */
import { Engram, EngramError } from "../../src/index.js";

const [dir, mode = "hold"] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write("usage: lock-child.ts DIR [hold|try]\n");
  process.exit(2);
}

if (mode === "hold") {
  const store = await Engram.open(dir, { compaction: { workers: 0 } });
  const w = await store.write("child", String(process.pid));
  process.stdout.write(`READY ${w.version}\n`);
  // Stay open until killed.
  setInterval(() => undefined, 1 << 30);
} else {
  try {
    const store = await Engram.open(dir, { compaction: { workers: 0 } });
    process.stdout.write("OPENED\n");
    await store.close();
  } catch (err) {
    process.stdout.write(`FAILED ${err instanceof EngramError ? err.code : String(err)}\n`);
  }
}
