/**
 * CPU time of a compaction output's hint (compact-8), in one process: `records` PUT records
 * (10-byte keys, 256 B values, one scope: bench/compact-ab.ts's store) laid out back to back as
 * one output, and its hint encoded the long way (a fresh HintBuilder, addRecord per record,
 * encode) and packed straight from the records (HintBuilder.ofRecords, when the tree has it),
 * alternated `rounds` times after a warm-up; prints per-round milliseconds and their medians.
 *
 *   node --import tsx bench/hint-records-ab.ts <tree root> [records] [rounds]
 *
 * <tree root> is this repository or a copy of another commit (its modules are imported from
 * there): a tree without ofRecords times the long way only.
 */
import * as path from "node:path";

type RecordModule = typeof import("../segments/record.js");
type ConstantsModule = typeof import("../segments/constants.js");
type ChecksumModule = typeof import("../segments/checksum.js");
type HintModule = typeof import("../segments/hint.js");

/** The module at `rel` (a .ts path) of the tree at `root`. */
async function load<T>(root: string, rel: string): Promise<T> {
  return (await import(path.join(root, rel))) as T;
}

/** The median of `xs` (not empty). */
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1] as number;
}

const [root = ".", n = "75000", r = "9"] = process.argv.slice(2);
const tree = path.resolve(root);
const records = Number(n);
const rounds = Number(r);
const C = await load<ConstantsModule>(tree, "segments/constants.ts");
const { encodeRecord } = await load<RecordModule>(tree, "segments/record.ts");
await (await load<ChecksumModule>(tree, "segments/checksum.ts")).initChecksum();
const hints = await load<HintModule>(tree, "segments/hint.ts");
const value = Buffer.alloc(256, 7);
const parts: Buffer[] = [];
const offsets = new Uint32Array(records);
let end: number = C.DATA_START;
for (let i = 0; i < records; i++) {
  const rec = encodeRecord({ type: C.RecordType.PUT, seq: 1000 + i, generation: 1, expiresAt: 0, scope: "s", key: `k${String(i).padStart(9, "0")}`, value });
  offsets[i] = end;
  parts.push(rec);
  end += rec.length;
}
const out = Buffer.concat(parts);
const header = { header: { segmentId: 9, generation: 0, headerSeq: 0, flags: C.FLAG_SEALED, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 3, sealedBytes: end }, copy: 0 as const, version: C.FORMAT_VERSION };

/** Milliseconds of CPU `f` takes. */
function cpuMs(f: () => unknown): number {
  const u0 = process.cpuUsage();
  f();
  const u = process.cpuUsage(u0);
  return (u.user + u.system) / 1000;
}

/** The tree's HintBuilder constructor: (format version, bytes) since format 3, (bytes) before it. */
const Builder = hints.HintBuilder as unknown as new (...args: number[]) => InstanceType<HintModule["HintBuilder"]>;
const builderArgs = hints.HintBuilder.length >= 1 ? [C.FORMAT_VERSION, Math.max(1024, records * 64)] : [Math.max(1024, records * 64)];
const longWay = (): unknown => {
  const b = new Builder(...builderArgs);
  for (const off of offsets) b.addRecord(out, off - C.DATA_START, off);
  return b.encode(9, header, end, true);
};
const ofRecords = "ofRecords" in hints.HintBuilder ? (): unknown => hints.HintBuilder.ofRecords({ rec: out, offsets, base: C.DATA_START }, 9, header, end, true) : null;
longWay();
ofRecords?.();
const times: { long: number[]; direct: number[] } = { long: [], direct: [] };
for (let i = 0; i < rounds; i++) {
  times.long.push(cpuMs(longWay));
  if (ofRecords !== null) times.direct.push(cpuMs(ofRecords));
}
console.log(JSON.stringify({ tree, records, MB: +(out.length / 1e6).toFixed(1), long: times.long.map((x) => +x.toFixed(1)), direct: times.direct.map((x) => +x.toFixed(1)) }));
console.log(JSON.stringify({ medianLongMs: +median(times.long).toFixed(1), medianDirectMs: times.direct.length > 0 ? +median(times.direct).toFixed(1) : null }));
