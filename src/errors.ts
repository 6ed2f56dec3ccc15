/** The public errors of engram; defined in segments/ so that every layer throws the same classes. */
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
} from "../segments/errors.js";
export type { ErrorCodeName } from "../segments/errors.js";
