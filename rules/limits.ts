/**
 * The limits of the contract (API.md "Scopes", "Operations"), shared by every backend: the
 * embedded engine (engine/ over segments/) and any server-backed one import them from here, so a
 * key, scope or value that one backend accepts the other accepts too.
 */

/** Most bytes of UTF-8 in a key. */
export const KEY_BYTES_MAX = 1024;
/** Most bytes in a scope path: 8 components of 64 bytes and 7 separators. */
export const SCOPE_BYTES_MAX = 8 * 64 + 7;
/** Most components in a scope path. */
export const SCOPE_DEPTH_MAX = 8;
/** Most bytes in one scope component. */
export const SCOPE_COMPONENT_BYTES_MAX = 64;
/** Largest value any backend can carry; the default configured limit is 16 MiB. */
export const VALUE_BYTES_MAX = 256 * 1024 * 1024;
/** Largest sequence or generation: JS numbers are exact up to here. */
export const SEQ_MAX = Number.MAX_SAFE_INTEGER;
/** The root scope's name. */
export const ROOT_SCOPE = "global";
/** Longest TTL or retention window, in ms (100 years). */
export const TTL_MS_MAX = 100 * 365 * 24 * 3600 * 1000;
