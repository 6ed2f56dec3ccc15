/**
 * Little-endian u64 fields that hold safe integers (sequences, generations, times, lengths): the
 * one decoder and encoder every codec of segments/ uses, without BigInt on the hot path.
 */

/** Highest u32 that can be the high word of a safe integer (2^53 - 1 >> 32). */
const HIGH_WORD_MAX = 0x1fffff;

/** Reads the u64 at `at`; -1 when it is beyond 2^53 - 1 (no safe integer: the caller refuses it). */
export function readU64(buf: Buffer, at: number): number {
  const hi = buf.readUInt32LE(at + 4);
  if (hi > HIGH_WORD_MAX) return -1;
  return hi * 0x1_0000_0000 + buf.readUInt32LE(at);
}

/** Writes a safe integer >= 0 as a u64 at `at`. */
export function writeU64(buf: Buffer, value: number, at: number): void {
  buf.writeUInt32LE(value % 0x1_0000_0000, at);
  buf.writeUInt32LE(Math.floor(value / 0x1_0000_0000), at + 4);
}
