/** The public shapes of engram (API.md); defined beside the engine that implements them. */
export type * from "../rules/types.js";
