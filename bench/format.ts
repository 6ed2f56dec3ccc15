/**
 * Segment codec throughput (tinybench): encodeRecord, decodeRecord and SegmentWriter appends of
 * PUT records with 10-byte keys and 256-byte values in scope "global".
 *
 *   node --import tsx bench/format.ts [--quick] [--dir D]
 *
 * Rows: records/s and MB/s (encoded record bytes, header and checksum included) for
 * - encode: encodeRecord of 1000 records per iteration;
 * - decode: decodeRecord (checksum verified) of 1000 concatenated records per iteration;
 * - append: SegmentWriter.reserve + writeAtSync of a group of 64 pre-encoded records (one writev),
 *   no sync (page cache);
 * - append + fdatasync: the same group, then SegmentWriter.syncSync (one group commit).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { initChecksum } from "../segments/checksum.js";
import * as C from "../segments/constants.js";
import { createSegmentFile } from "../segments/create.js";
import { decodeRecord, encodeRecord, type RecordInput } from "../segments/record.js";
import { SegmentWriter } from "../segments/writer.js";
import { fmt, keyOf, valueOf } from "./common.js";

export const FORMAT_ROWS: ReadonlyArray<{ id: string; label: string }> = [
  { id: "format.encode", label: "encodeRecord" },
  { id: "format.decode", label: "decodeRecord (checksum verified)" },
  { id: "format.append", label: "SegmentWriter append, 64 records per writev, no sync" },
  { id: "format.appendSync", label: "SegmentWriter append, 64 records per writev + fdatasync" },
];

/** records/s under `<id>.rps` and MB/s under `<id>.MBps` for every row of FORMAT_ROWS. */
export async function measureFormat(dir: string, quick: boolean): Promise<Record<string, number>> {
  await initChecksum();
  const N = 1000;
  const GROUP = 64;
  const inputs: RecordInput[] = Array.from({ length: N }, (_, i) => ({
    type: C.RecordType.PUT,
    seq: i + 1,
    generation: 1,
    scope: C.ROOT_SCOPE,
    key: keyOf(i),
    value: valueOf(i, 1),
  }));
  const encoded = inputs.map((r) => encodeRecord(r));
  const recordBytes = (encoded[0] as Uint8Array).byteLength;
  const all = Buffer.concat(encoded);
  const work = fs.mkdtempSync(path.join(dir, "format-"));
  const m: Record<string, number> = {};
  try {
    const fd = createSegmentFile(
      work,
      { segmentId: 1, generation: 0, headerSeq: 0, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 },
      C.DATA_START,
    );
    const ROLL = 64 << 20;
    let writer = new SegmentWriter(1, fd, C.DATA_START, C.DATA_START);
    let g = 0;
    const group = (): Uint8Array[] => {
      const out: Uint8Array[] = [];
      for (let k = 0; k < GROUP; k++) out.push(encoded[(g++ * GROUP + k) % N] as Uint8Array);
      return out;
    };
    const append = (): void => {
      if (writer.end > ROLL) writer = new SegmentWriter(1, fd, C.DATA_START, Math.max(ROLL, writer.end));
      const bufs = group();
      const at = writer.reserve(GROUP * recordBytes);
      writer.writeAtSync(bufs, at);
    };
    let sink = 0;
    const bench = new Bench({ time: quick ? 150 : 800, warmupTime: quick ? 30 : 150, iterations: 10, throws: true });
    bench.add("format.encode", () => {
      for (let i = 0; i < N; i++) sink += encodeRecord(inputs[i] as RecordInput).byteLength;
    });
    bench.add("format.decode", () => {
      let at = 0;
      for (let i = 0; i < N; i++) {
        const r = decodeRecord(all, at, all.length);
        if (typeof r === "string") throw new Error(`decode failed at ${at}: ${r}`);
        at += r.length;
      }
      sink += at;
    });
    bench.add("format.append", append);
    bench.add("format.appendSync", () => {
      append();
      writer.syncSync();
    });
    await bench.run();
    const perIter: Record<string, number> = { "format.encode": N, "format.decode": N, "format.append": GROUP, "format.appendSync": GROUP };
    for (const t of bench.tasks) {
      const res = t.result;
      if (res.state !== "completed" && res.state !== "aborted-with-statistics") continue;
      const rps = ((perIter[t.name] ?? 1) * 1000) / res.period;
      m[`${t.name}.rps`] = rps;
      m[`${t.name}.MBps`] = (rps * recordBytes) / 1e6;
    }
    m["format.recordBytes"] = recordBytes;
    if (sink < 0) m["format.sink"] = sink;
    fs.closeSync(fd);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return m;
}

export function formatTable(m: Record<string, number>): string {
  const lines = [
    `Records: PUT, scope "global", 10-byte key, 256-byte value = ${fmt(m["format.recordBytes"] ?? Number.NaN)} bytes encoded.`,
    "",
    "| operation | records/s | MB/s |",
    "|---|---:|---:|",
  ];
  for (const row of FORMAT_ROWS) lines.push(`| ${row.label} | ${fmt(m[`${row.id}.rps`] ?? Number.NaN)} | ${fmt(m[`${row.id}.MBps`] ?? Number.NaN)} |`);
  return lines.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--dir");
  const dir = at >= 0 && args[at + 1] !== undefined ? (args[at + 1] as string) : os.tmpdir();
  process.stdout.write(formatTable(await measureFormat(dir, args.includes("--quick"))) + "\n");
}
