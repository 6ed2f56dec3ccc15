/**
 * The version-3 block decoder's byte stores (segments/hint-v3.ts decodeBlock): each decoded
 * entry is written with single-byte stores and, for names and values of at most 64 bytes, a byte
 * loop instead of Buffer.write* and Buffer.copy. The property: the decoded region is, byte for
 * byte, the version-2 entry body the writer packed — every field of every entry, at every width.
 *
 * Method: records whose integers need all of their bytes (sequences, generations and expiry
 * times above 2^32, so the u64 high words are not zero; offsets past 2^16), keys of 1 to 300
 * bytes (both sides of the 64-byte copy threshold), two scopes alternating in runs (the "same
 * scope" bit and the scope index), PUT, TOMBSTONE and CLEAR records, enough of them for many
 * 4 KiB entry blocks, go through HintBuilder and are encoded as a version-3 file; checkHint
 * decodes every block of it in memory, and its body must equal the builder's own version-2 body.
 * A byte store silently drops a write outside the buffer (Buffer.write* threw), so the decoder's
 * structural checks are all that keeps a wrong block out. Twin: the first entry's type changed
 * from PUT to SCOPE_ERASE (same packed fields, one keyed entry fewer) and the blocks resealed is refused with the checks on; with them off (unsafeTrustPackedEntries)
 * the block decodes and the body differs from the writer's, so the comparison sees a wrong decode.
 */
import { afterEach, describe, expect, it } from "vitest";
import * as C from "../segments/constants.js";
import { encodeRecord } from "../segments/record.js";
import { checkHint, HintBuilder } from "../segments/hint.js";
import { unsafeTrustPackedEntries } from "../segments/hint-v3.js";
import { initChecksum } from "../segments/checksum.js";
import { resealHint, V3_HEADER_BYTES } from "./helpers/hint-layout.js";
import { rng } from "./helpers/rng.js";

const SEGMENT = 7;
const HEADER = { header: { segmentId: SEGMENT, generation: 1, headerSeq: 1, flags: 0, createdSeq: 1, minSeq: 0, maxSeq: 0, replacesId: 0, sealedBytes: 0 }, copy: 0 as const, version: C.FORMAT_VERSION };
const HIGH = 2 ** 40; // every u64 below has a high word that is not zero
const RECORDS = 3000;

/** A hint's records: their file bytes and the builder that indexed them. */
function build(seed: number): { file: Buffer; body: Buffer } {
  const rand = rng(seed);
  const b = new HintBuilder(C.FORMAT_VERSION);
  let off: number = C.DATA_START;
  for (let i = 0; i < RECORDS; i++) {
    const keyBytes = 1 + Math.floor(rand() * 300);
    const key = `k${i}-`.padEnd(keyBytes, String.fromCharCode(97 + (i % 26))).slice(0, Math.max(keyBytes, `k${i}-`.length));
    const scope = Math.floor(i / 5) % 2 === 0 ? "global" : "user:alice/notes";
    const kind = i % 7 === 3 ? C.RecordType.TOMBSTONE : i % 11 === 5 ? C.RecordType.CLEAR : C.RecordType.PUT;
    const seq = HIGH + (i % 13 === 0 ? 3 * RECORDS - i : 2 * i + 1); // mostly rising, some falling
    const rec = encodeRecord({
      type: kind,
      seq,
      generation: HIGH + (i % 4),
      expiresAt: kind === C.RecordType.PUT && i % 3 === 0 ? 0 : HIGH * 3 + i,
      scope,
      key,
      value: kind === C.RecordType.PUT ? Buffer.alloc(i === 0 ? 0 : Math.floor(rand() * 200), i & 0xff) : undefined, // record 0: a PUT with no value (the twin's)
    });
    b.addRecord(rec, 0, off);
    off += rec.length;
  }
  const file = b.encode(SEGMENT, HEADER, off, false);
  const body = b.entriesBody();
  expect(file, "the builder encodes").not.toBeNull();
  expect(body, "the builder has its body").not.toBeNull();
  expect(off, "offsets past 2^16").toBeGreaterThan(2 ** 16);
  return { file: file as Buffer, body: Buffer.from(body as Buffer) };
}

describe("hint v3 decoder byte stores", () => {
  afterEach(() => unsafeTrustPackedEntries(false));

  it("every block decodes into exactly the version-2 body the writer packed (u64 high words, long and short names, both scopes)", async () => {
    await initChecksum();
    for (const seed of [1, 2, 3]) {
      const { file, body } = build(seed);
      expect(file[4], "written as version 3").toBe(3);
      const hint = checkHint(file, SEGMENT, HEADER);
      expect(hint, `seed ${seed}: the hint checks`).not.toBeNull();
      const got = (hint as { body: Buffer }).body;
      expect(got.length).toBe(body.length);
      expect(got.equals(body), `seed ${seed}: decoded body equals the writer's`).toBe(true);
      expect((hint as { index: { keyed: number } }).index.keyed).toBe(RECORDS);
    }
  });

  it("twin: a block whose first entry is turned from PUT into SCOPE_ERASE is refused with the decoder's checks on, and with them off decodes into a body that differs", async () => {
    await initChecksum();
    const { file, body } = build(4);
    const bad = Buffer.from(file);
    // Record 0 is a PUT with an empty value: as a SCOPE_ERASE (also valued) it packs the same
    // fields, so only the keyed count tells it wrong — a check the decoder makes at the block's end.
    expect((bad[V3_HEADER_BYTES] as number) & 7).toBe(C.RecordType.PUT);
    bad[V3_HEADER_BYTES] = ((bad[V3_HEADER_BYTES] as number) & ~7) | C.RecordType.SCOPE_ERASE;
    resealHint(bad);
    expect(checkHint(bad, SEGMENT, HEADER), "checked: refused").toBeNull();
    unsafeTrustPackedEntries(true);
    const hint = checkHint(bad, SEGMENT, HEADER);
    expect(hint, "unchecked: taken").not.toBeNull();
    expect((hint as { body: Buffer }).body.equals(body), "and the comparison sees it differ").toBe(false);
  });
});
