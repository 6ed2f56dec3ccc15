/**
 * CPU time of hint work, for A/B runs of two trees on a loaded machine (process.cpuUsage, not
 * rates): `build` feeds 200k encoded PUT records (256 B values, groups of 1000) through
 * engine/hints.ts noteGroup and then HintBuilder.encode; `slots` opens a hinted 200k-key store
 * (made once in DIR) and builds every deferred slot through keydir.get, in key order.
 *
 *   node --import tsx bench/hint-ab.ts <tree root> build|slots [dir]
 *
 * <tree root> is this repository or a copy of another commit (`git archive <commit> | tar -x -C
 * /tmp/base`, with node_modules linked): its modules are imported from there, so alternate the
 * two trees in one shell loop and compare the figures of neighbouring runs.
 */
import * as fs from "node:fs";
import * as path from "node:path";

type RecordModule = typeof import("../segments/record.js");
type ConstantsModule = typeof import("../segments/constants.js");
type ChecksumModule = typeof import("../segments/checksum.js");
type HintModule = typeof import("../segments/hint.js");
type HintsModule = typeof import("../engine/hints.js");
type StoreModule = typeof import("../engine/store.js");
type IndexModule = typeof import("../src/index.js");

const RECORDS = 200_000;
const GROUP = 1000;

/** Milliseconds of CPU (user + system) this process has used. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** The bench's key of record `i` (10 bytes, ASCII). */
function keyOf(i: number): string {
  return `k${String(i).padStart(9, "0")}`;
}

/** The module at `rel` (a .ts path) of the tree at `root`. */
async function load<T>(root: string, rel: string): Promise<T> {
  return (await import(path.join(root, rel))) as T;
}

/** noteGroup then encode, six times; prints µs per record of each and the hint's size. */
async function build(root: string): Promise<void> {
  const rec = await load<RecordModule>(root, "segments/record.ts");
  const C = await load<ConstantsModule>(root, "segments/constants.ts");
  const hint = await load<HintModule>(root, "segments/hint.ts");
  const hints = await load<HintsModule>(root, "engine/hints.ts");
  const value = Buffer.alloc(256, 7);
  const groups: Buffer[][] = [];
  for (let g = 0; g < RECORDS / GROUP; g++) {
    const bufs: Buffer[] = [Buffer.alloc(70)]; // stands for the group's frame (not an entry)
    for (let j = 0; j < GROUP; j++) {
      const i = g * GROUP + j;
      bufs.push(rec.encodeRecord({ type: C.RecordType.PUT, flags: 0, seq: i + 1, generation: 1, expiresAt: 0, scope: "global", key: keyOf((i * 7919) % RECORDS), value }));
    }
    groups.push(bufs);
  }
  const header = { header: { segmentId: 1, generation: 1, headerSeq: 1, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, copy: 0 as const, version: C.FORMAT_VERSION };
  for (let rep = 0; rep < 6; rep++) {
    // A tree from before format 3 has a constructor without the segment's version (its length is then 0).
    const b = hint.HintBuilder.length >= 1 ? new hint.HintBuilder(C.FORMAT_VERSION) : new (hint.HintBuilder as unknown as new () => InstanceType<typeof hint.HintBuilder>)();
    const t0 = cpuMs();
    let off: number = C.DATA_START;
    for (const g of groups) {
      hints.noteGroup(b, g, off);
      for (const x of g) off += x.length;
    }
    const t1 = cpuMs();
    const out = b.encode(1, header, off, false);
    const t2 = cpuMs();
    console.log(`build ${rep}: noteGroup ${(((t1 - t0) * 1000) / RECORDS).toFixed(3)} µs/record, encode ${(((t2 - t1) * 1000) / RECORDS).toFixed(3)} µs/record, ${out?.length ?? 0} bytes`);
  }
}

/** Opens the hinted store in `dir` (made on first use) four times; prints µs per deferred slot built. */
async function slots(root: string, dir: string): Promise<void> {
  const { Store } = await load<StoreModule>(root, "engine/store.ts");
  if (!fs.existsSync(dir)) {
    const { Engram } = await load<IndexModule>(root, "src/index.ts");
    const e = await Engram.open(dir, { durability: "none" });
    const value = Buffer.alloc(256, 7);
    for (let g = 0; g < RECORDS / GROUP; g++) {
      const ops: Array<{ op: "write"; key: string; value: Buffer }> = [];
      for (let j = 0; j < GROUP; j++) ops.push({ op: "write", key: keyOf(((g * GROUP + j) * 7919) % RECORDS), value });
      await e.batch(ops);
    }
    await e.close();
  }
  for (let rep = 0; rep < 4; rep++) {
    const s = await Store.open(dir, { durability: "none" });
    const deferred = s.keydir.isDeferred;
    const t0 = cpuMs();
    let missing = 0;
    for (let i = 0; i < RECORDS; i++) if (s.keydir.get("global", keyOf(i)) === undefined) missing++;
    const t1 = cpuMs();
    console.log(`slots ${rep}: ${(((t1 - t0) * 1000) / RECORDS).toFixed(3)} µs/slot, ${missing} missing, deferred at open: ${deferred}`);
    await s.close();
  }
}

const [rootArg, what, dir] = process.argv.slice(2);
if (rootArg === undefined || (what !== "build" && what !== "slots")) {
  console.error("usage: node --import tsx bench/hint-ab.ts <tree root> build|slots [dir]");
  process.exit(2);
}
const root = path.resolve(rootArg);
const checksum = await load<ChecksumModule>(root, "segments/checksum.ts");
await checksum.initChecksum();
if (what === "build") await build(root);
else await slots(root, dir ?? "/tmp/engram-hint-ab");
