/**
 * engram: a durable, embedded segment store for agent memory. Everything public is exported here.
 */
export { Engram, type Faults } from "./engram.js";
export * from "./errors.js";
export type * from "./types.js";
export { FAULT_POINTS } from "../engine/faults.js";
export { tools, handleToolCall } from "./tools.js";
export { safeRewrite } from "./safe-rewrite.js";

/** The package version. */
export const VERSION = "0.1.0";
