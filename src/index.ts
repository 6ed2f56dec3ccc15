/**
 * engram: a durable, embedded segment store for agent memory. Everything public is exported here.
 */
export { Engram, type Faults } from "./engram.js";
export * from "./errors.js";
export type * from "./types.js";
export { CRASH_ONLY_POINTS, FAULT_POINTS, IO_FAULT_POINTS } from "../engine/faults.js";
export { tools, handleToolCall, listTools, validateToolCall, isValidScope, toWireError, isWireError } from "./tools.js";
export { toolArgSchemas } from "./tool-schemas.js";
export type {
  MemoryStore,
  ToolDefinition,
  ToolContext,
  ToolName,
  JsonSchema,
  JsonValue,
  WireValue,
  WireResult,
  WireError,
  WireReadResult,
  WireWriteResult,
  WireForgetResult,
  WireForgetScopeResult,
  WireUndeleteResult,
  WireProbeResult,
  WireListResult,
} from "./tools.js";
export { safeRewrite, type SafeRewriteMemory, type SafeRewriteOptions } from "./safe-rewrite.js";

export { VERSION } from "./version.js";
