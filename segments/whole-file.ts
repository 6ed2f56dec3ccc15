/** Reading a whole segment or journal file into memory (scans, compaction, recovery, verify). */
import * as fs from "node:fs";

/** Reads a whole file into memory (segments are bounded by segmentBytes). */
export function readWholeFile(fd: number): Uint8Array {
  const size = fs.fstatSync(fd).size;
  const buf = Buffer.allocUnsafe(size);
  let done = 0;
  while (done < size) {
    const n = fs.readSync(fd, buf, done, size - done, done);
    if (n === 0) break;
    done += n;
  }
  return done === size ? buf : buf.subarray(0, done);
}

/** Opens `file` read-only, reads all of it and closes it again (whatever the read did). */
export function readWholePath(file: string): Uint8Array {
  const fd = fs.openSync(file, "r");
  try {
    return readWholeFile(fd);
  } finally {
    fs.closeSync(fd);
  }
}
