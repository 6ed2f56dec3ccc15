/**
 * The records of every segment file of a store directory, in file order, as short labels
 * ("P s/k 5", "T s/k 6", "C s/k 7", "E s 8"): what a restart would replay, for tests that place
 * records in particular segments and compact some of them (test/older-kill-records.test.ts).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as C from "../../segments/constants.js";
import { chooseHeader, formatOf } from "../../segments/header.js";
import { scanRecords } from "../../segments/scan.js";

const LETTER: Partial<Record<number, string>> = { [C.RecordType.PUT]: "P", [C.RecordType.TOMBSTONE]: "T", [C.RecordType.CLEAR]: "C", [C.RecordType.SCOPE_ERASE]: "E" };

/** Segment id → labels of its records (BATCH_COMMIT and group frames left out). */
export function segmentRecords(dir: string): Map<number, string[]> {
  const d = path.join(dir, "segments");
  const out = new Map<number, string[]>();
  for (const name of fs.readdirSync(d).filter((n) => /^\d{8,10}\.seg$/.test(n)).sort()) {
    const bytes = fs.readFileSync(path.join(d, name));
    const h = chooseHeader(bytes, 0);
    const labels: string[] = [];
    scanRecords(bytes, 0, (h.header.flags & C.FLAG_SEALED) !== 0, (r) => {
      const letter = LETTER[r.type];
      if (letter === undefined) return;
      labels.push(letter === "E" ? `E ${r.scope} ${r.seq}` : `${letter} ${r.scope}/${r.key} ${r.seq}`);
    }, false, formatOf(h));
    out.set(Number(name.slice(0, name.indexOf("."))), labels);
  }
  return out;
}
