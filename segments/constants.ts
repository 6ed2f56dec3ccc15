/**
 * The segment file format's constants, and nothing else (like LevelDB's log_format.h).
 * docs/FORMAT.md describes the same layout table by table; change both together and bump
 * FORMAT_VERSION when the bytes change.
 */

/** "ENGS" little-endian: the first four bytes of both header copies. */
export const HEADER_MAGIC = 0x53474e45;
/**
 * Version of the byte layout in this file. 2: records of an unsealed segment are written in
 * group frames (a GROUP record with the length and xxh64 of the group's bytes), so recovery can
 * cut an unacknowledged group as a unit whatever order its pages reached the disk in. 3: the
 * lean record frame (varints, a 4-byte checksum: FORMAT_VERSION_LEAN below, record-v3.ts).
 */
export const FORMAT_VERSION = 3;
/** The oldest version this code opens: version 1 segments have no group frames (scanned record by record). */
export const FORMAT_VERSION_MIN = 1;
/** The first version whose unsealed segments are group-framed. */
export const FORMAT_VERSION_FRAMED = 2;

/** Bytes in one header copy. Two copies (A at 0, B at 64) precede the records. */
export const HEADER_COPY_BYTES = 64;
/** Offset of header copy A. */
export const HEADER_A_OFFSET = 0;
/** Offset of header copy B. */
export const HEADER_B_OFFSET = HEADER_COPY_BYTES;
/** Offset of the first record in every segment. */
export const DATA_START = 2 * HEADER_COPY_BYTES;

/** Header copy field offsets (all little-endian). */
export const H_MAGIC = 0; // u32
export const H_VERSION = 4; // u16
export const H_FLAGS = 6; // u16
export const H_SEGMENT_ID = 8; // u32
export const H_HEADER_SEQ = 12; // u32, counts header writes: ties in generation break on it
export const H_GENERATION = 16; // u64
export const H_CREATED_SEQ = 24; // u64
export const H_MIN_SEQ = 32; // u64
export const H_MAX_SEQ = 40; // u64
export const H_REPLACES_ID = 48; // u32, 0 = replaces nothing
export const H_SEALED_BYTES = 52; // u32, the file's length once sealed (records end there); 0 while unsealed
export const H_CHECKSUM = 56; // u64 xxh64 of bytes [0, 56)

/** Header flag: the segment takes no more appends; its file ends at its last record. */
export const FLAG_SEALED = 1 << 0;
/** Header flag, defined and accepted but never set by this version: an in-place rewrite is announced by its journal and the odd shared generation. */
export const FLAG_COMPACTING = 1 << 1;
/** All header flags known to this version; any other bit set is corruption. */
export const HEADER_FLAGS_KNOWN = FLAG_SEALED | FLAG_COMPACTING;

/** Record types. Zero is never a type: a zero byte there means unwritten (preallocated) space. */
export const RecordType = {
  PUT: 1,
  TOMBSTONE: 2,
  CLEAR: 3,
  SCOPE_ERASE: 4,
  BATCH_COMMIT: 5,
  GROUP: 6,
} as const;
export type RecordTypeValue = (typeof RecordType)[keyof typeof RecordType];
export const RECORD_TYPE_MAX = 6;

/** Record flag: the value is UTF-8 text (returned as a string); otherwise bytes. */
export const RF_UTF8 = 1 << 0;
/** Record flag: the record belongs to a batch and counts only once its BATCH_COMMIT follows. */
export const RF_IN_BATCH = 1 << 1;
/** All record flags known to this version. */
export const RECORD_FLAGS_KNOWN = RF_UTF8 | RF_IN_BATCH;

/** Record field offsets (all little-endian). */
export const R_LENGTH = 0; // u32 total record bytes, checksum included
export const R_TYPE = 4; // u8
export const R_FLAGS = 5; // u8
export const R_SCOPE_LEN = 6; // u16
export const R_KEY_LEN = 8; // u16
export const R_RESERVED = 10; // u16, zero
export const R_VALUE_LEN = 12; // u32
export const R_SEQ = 16; // u64
export const R_GENERATION = 24; // u64
export const R_EXPIRES_AT = 32; // u64 ms since epoch, 0 = never
/** Bytes before the scope/key/value payload. */
export const RECORD_FIXED_BYTES = 40;
/** Bytes of the trailing xxh64 checksum. */
export const RECORD_CHECKSUM_BYTES = 8;
/** Fixed bytes of every record: the header fields plus the checksum. */
export const RECORD_OVERHEAD = RECORD_FIXED_BYTES + RECORD_CHECKSUM_BYTES;

/** Limits of the contract, which the format carries (rules/limits.ts holds them for every backend). */
import { KEY_BYTES_MAX, SCOPE_BYTES_MAX, VALUE_BYTES_MAX } from "../rules/limits.js";
export { KEY_BYTES_MAX, SCOPE_BYTES_MAX, SCOPE_DEPTH_MAX, SCOPE_COMPONENT_BYTES_MAX, VALUE_BYTES_MAX, SEQ_MAX, ROOT_SCOPE } from "../rules/limits.js";
/** Largest record the format can carry. */
export const RECORD_BYTES_MAX = RECORD_OVERHEAD + SCOPE_BYTES_MAX + KEY_BYTES_MAX + VALUE_BYTES_MAX;

/**
 * Group frame (format 2): a GROUP record opens every commit group of an unsealed segment. Its
 * scope is "global", its key empty, its value GROUP_VALUE_BYTES: the group's body length (u64,
 * the bytes of records after the frame) and the xxh64 of that body (u64). Its `seq` is the first
 * record's sequence, its `generation` the offset up to which the segment was durable when the
 * group was written (`syncedEnd`): a valid group whose syncedEnd lies past a damaged group proves
 * that damage hit committed data (corruption), not an unsynced tail.
 */
export const GROUP_VALUE_BYTES = 16;
/** Bytes of one group frame record: overhead + "global" + the value. */
export const GROUP_FRAME_BYTES = RECORD_OVERHEAD + 6 + GROUP_VALUE_BYTES;

/**
 * Record frame of format version 3 (segments/record-v3.ts): a varint length, one byte of type
 * (bits 0–2) and flags (bits 3–4), varints for the scope, key and value lengths, seq, generation
 * and expires at, the payload, then the low 32 bits of the xxh64 of everything before them.
 */
export const FORMAT_VERSION_LEAN = 3;
/** Most bytes an unsigned LEB128 varint of a safe integer takes (53 bits in 7-bit groups). */
export const VARINT_BYTES_MAX = 8;
/** The type byte of a version-3 frame: the type in its low bits, the flags shifted past it. */
export const RV3_TYPE_MASK = 0x07;
export const RV3_FLAGS_SHIFT = 3;
/** Bytes of a version-3 record's checksum: the low half of its xxh64 (FORMAT.md says why 4 are enough). */
export const RECORD_V3_CHECKSUM_BYTES = 4;
/** Smallest version-3 record: one byte per varint and the type, a 1-byte scope, the checksum. */
export const RECORD_V3_BYTES_MIN = 1 + 1 + 6 + 1 + RECORD_V3_CHECKSUM_BYTES;
/** Most frame bytes of a version-3 record: length 5, type 1, scope and key lengths 2 each, value length 5, three u53 varints 8 each, the checksum. */
export const RECORD_V3_OVERHEAD_MAX = 5 + 1 + 2 + 2 + 5 + 3 * VARINT_BYTES_MAX + RECORD_V3_CHECKSUM_BYTES;
/** Largest version-3 record. */
export const RECORD_V3_BYTES_MAX = RECORD_V3_OVERHEAD_MAX + SCOPE_BYTES_MAX + KEY_BYTES_MAX + VALUE_BYTES_MAX;
/** A version-3 GROUP frame: every varint 1 byte but seq and syncedEnd (8 each, always), "global", the value, the checksum. */
export const GROUP_FRAME_BYTES_V3 = 1 + 1 + 3 + 2 * VARINT_BYTES_MAX + 1 + 6 + GROUP_VALUE_BYTES + RECORD_V3_CHECKSUM_BYTES;
