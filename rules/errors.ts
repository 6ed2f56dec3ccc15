/**
 * Every error engram throws. They live in rules/, the layer every backend and segments/ import,
 * so that segments/, engine/, a server-backed backend and src/ all throw the same classes;
 * src/errors.ts re-exports them as the public face.
 *
 * The `code` strings are stable: they never change between versions (abstract-level style),
 * because agents and wire clients branch on them.
 */

/** Stable error codes. Never renamed, never reused. */
export const ErrorCode = {
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
  VERSION_CONFLICT: "VERSION_CONFLICT",
  TOMBSTONED: "TOMBSTONED",
  HALF_RECLAIMED: "HALF_RECLAIMED",
  SCOPE_ERASED_DURING_READ: "SCOPE_ERASED_DURING_READ",
  STORE_LOCKED: "STORE_LOCKED",
  CLOSED: "CLOSED",
  CORRUPTION: "CORRUPTION",
  LIMIT_EXCEEDED: "LIMIT_EXCEEDED",
  IO_ERROR: "IO_ERROR",
  OWNER_LOST: "OWNER_LOST",
  NOT_SUPPORTED: "NOT_SUPPORTED",
  INTERNAL: "INTERNAL",
} as const;
/** One of the stable error codes: the type of `EngramError.code` and of a wire error's `error`. */
export type ErrorCodeName = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The base of every engram error: a message that says what to do, and a stable `code`. */
export class EngramError extends Error {
  /** The stable code of this error (see ErrorCode); branch on it rather than on the message. */
  readonly code: ErrorCodeName;
  constructor(code: ErrorCodeName, message: string) {
    super(message);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Bad scope, key, value or option. Thrown before anything is written. */
export class InvalidArgumentError extends EngramError {
  constructor(message: string) {
    super(ErrorCode.INVALID_ARGUMENT, message);
  }
}

/** `expectedVersion` did not match the slot's live version (`null` means no live value). */
export class VersionConflictError extends EngramError {
  /** The `expectedVersion` the call gave (null: no live value expected). */
  readonly expected: number | null;
  /** The slot's live version when the write was decided (null: it had no live value). */
  readonly actual: number | null;
  constructor(expected: number | null, actual: number | null, key: string) {
    super(
      ErrorCode.VERSION_CONFLICT,
      `version conflict on ${JSON.stringify(key)}: expected ${String(expected)}, actual ${String(actual)}; ` +
        `read the key again and retry with its current version`,
    );
    this.expected = expected;
    this.actual = actual;
  }
}

/** A plain write hit a tombstoned slot under `tombstoneWrites: "require-clear"`. */
export class TombstonedSlotError extends EngramError {
  /** The commit sequence number of the tombstone that refused the write. */
  readonly tombstoneSeq: number;
  constructor(key: string, tombstoneSeq: number) {
    super(
      ErrorCode.TOMBSTONED,
      `${JSON.stringify(key)} is tombstoned (tombstone seq ${tombstoneSeq}); ` +
        `pass clearTombstone: true or call undelete() first`,
    );
    this.tombstoneSeq = tombstoneSeq;
  }
}

/** Thrown by safeRewrite: the value is reclaimed while the retention record survives. */
export class HalfReclaimedSlotError extends EngramError {
  /** The version that the surviving retention record holds (probe's `version`). */
  readonly version: number | null;
  /** The tombstone sequence that the surviving retention record holds (probe's `tombstoneSeq`). */
  readonly tombstoneSeq: number | null;
  constructor(key: string, version: number | null, tombstoneSeq: number | null) {
    super(
      ErrorCode.HALF_RECLAIMED,
      `${JSON.stringify(key)} has a surviving retention record (version ${String(version)}, ` +
        `tombstone seq ${String(tombstoneSeq)}) but no value; a plain re-write is unsafe: ` +
        `pass clearTombstone: true (or write under a new key)`,
    );
    this.version = version;
    this.tombstoneSeq = tombstoneSeq;
  }
}

/**
 * A read's authorized segment generation (or the record it found) drifted before the bytes were
 * materialized. Never retried by the library: the caller decides whether to read again.
 */
export class ScopeErasedDuringRead extends EngramError {
  /** The scope the read had found the value in (the scope asked, or one of its ancestors). */
  readonly scope: string;
  /** The segment generation the read was authorized against. */
  readonly authorizedGeneration: number;
  /** The generation found when the bytes were materialized. */
  readonly liveGeneration: number;
  constructor(scope: string, authorizedGeneration: number, liveGeneration: number, detail: string) {
    super(
      ErrorCode.SCOPE_ERASED_DURING_READ,
      `read in scope ${JSON.stringify(scope)} straddled a compaction (${detail}; authorized generation ` +
        `${authorizedGeneration}, live ${liveGeneration}); nothing was returned: read again if you still need it`,
    );
    this.scope = scope;
    this.authorizedGeneration = authorizedGeneration;
    this.liveGeneration = liveGeneration;
  }
}

/** The directory is open in this or another process. */
export class StoreLockedError extends EngramError {
  /** `holder`, when known, says who holds it and what to do (e.g. "shared by pid 42: open with share: true"). */
  constructor(dir: string, holder?: string) {
    super(ErrorCode.STORE_LOCKED, `store ${dir} is open elsewhere (${holder ?? "lock held; close the other handle first"})`);
  }
}

/** A call after close(). */
export class StoreClosedError extends EngramError {
  /** `message`, when given, says what the closing cut short and what to do about it. */
  constructor(message = "the store is closed; open it again with Engram.open()") {
    super(ErrorCode.CLOSED, message);
  }
}

/** A checksum or structure check failed where it cannot be a torn tail. */
export class CorruptionError extends EngramError {
  /** The id of the segment where the check failed. */
  readonly segment: number;
  /** The byte offset in that segment's file where the check failed. */
  readonly offset: number;
  constructor(segment: number, offset: number, detail: string) {
    super(
      ErrorCode.CORRUPTION,
      `corruption in segment ${segment} at offset ${offset}: ${detail}; run \`engram verify\` and restore from a copy`,
    );
    this.segment = segment;
    this.offset = offset;
  }
}

/** A configured limit (open segments, batch size, scope count) would be exceeded. */
export class LimitExceededError extends EngramError {
  constructor(message: string) {
    super(ErrorCode.LIMIT_EXCEEDED, message);
  }
}

/**
 * What an IoError tells the caller to do about `errno`: a device's advice ("free space or fix the
 * device") sends the caller the wrong way when the file system is read-only or the process lacks
 * permission, where neither space nor the device is at fault (fifty-seventh session: a store on a
 * read-only mount answered EROFS with the device's advice).
 */
export function ioAdvice(errno: string): string {
  if (errno === "EROFS") return "the file system is mounted read-only: remount it read-write, or copy the store to a writable place";
  if (errno === "EACCES" || errno === "EPERM") return "this process may not write there: give it write permission on the store's directory, or run it as the user that owns the store";
  if (errno === "EMFILE" || errno === "ENFILE") return "too many open files: close other stores or raise the limit (ulimit -n)";
  return "free space or fix the device";
}

/**
 * The file system refused a write, sync, rename or unlink (ENOSPC, EIO, ...). The affected calls
 * reject with it; the store stays readable and nothing acknowledged before is lost. `errno` is
 * the system's code name ("ENOSPC", "EIO").
 */
export class IoError extends EngramError {
  /** The system's error code name, such as "ENOSPC" or "EIO". */
  readonly errno: string;
  constructor(errno: string, operation: string, detail?: string) {
    super(
      ErrorCode.IO_ERROR,
      `${operation} failed with ${errno}${detail === undefined ? "" : ` (${detail})`}; ` +
        `nothing of this call was acknowledged: ${ioAdvice(errno)}, then retry`,
    );
    this.errno = errno;
  }

  /**
   * An IoError whose message is `message` whole, for a failure that is no device's (a compaction
   * worker thread that stopped): the usual advice — free space or fix the device — would send the
   * caller the wrong way. Same class, code and `errno` field as any other IoError.
   */
  static explained(errno: string, message: string): IoError {
    const err = new IoError(errno, "");
    err.message = message;
    return err;
  }
}

/** A shared store's owner went away while this call was in flight: its outcome is unknown. */
export class OwnerLostError extends EngramError {
  constructor(call: string) {
    super(
      ErrorCode.OWNER_LOST,
      `the owner of the shared store went away while ${call} was in flight; its outcome is unknown: ` +
        `read or probe the key to learn whether it committed`,
    );
  }
}

/** The call does not apply to this kind of handle (readSync on a shared client or on PostgreSQL). */
export class NotSupportedError extends EngramError {
  constructor(message: string) {
    super(ErrorCode.NOT_SUPPORTED, message);
  }
}

/** An unexpected fault inside engram (a bug): the message carries what went wrong. */
export class InternalError extends EngramError {
  constructor(message: string) {
    super(ErrorCode.INTERNAL, `internal error: ${message}; please report it`);
  }
}
