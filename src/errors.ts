/** The public errors of engram; defined in rules/ so that every layer and backend throws the same classes. */
export {
  ErrorCode,
  EngramError,
  InvalidArgumentError,
  VersionConflictError,
  TombstonedSlotError,
  HalfReclaimedSlotError,
  ScopeErasedDuringRead,
  StoreLockedError,
  StoreClosedError,
  CorruptionError,
  LimitExceededError,
  IoError,
  OwnerLostError,
  NotSupportedError,
  InternalError,
} from "../rules/errors.js";
export type { ErrorCodeName } from "../rules/errors.js";
