import { defineConfig } from "vitest/config";

// Tests run in child processes (forks), not worker threads: fs-ext is a native addon that must be
// loaded on a main thread only (STACK.md trap 2), and the engine loads it to lock the directory.
// ENGRAM_TEST_JSON=path adds vitest's JSON report there (.ci/run prints its closing line from it).
const json = process.env["ENGRAM_TEST_JSON"];

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // A throwaway PostgreSQL cluster for the PostgreSQL backend's tests (ENGRAM_PG_URL).
    globalSetup: ["test/setup/postgres.ts"],
    // Compaction threads from the compiled worker while dist/ is fresh (test/setup/worker.ts).
    setupFiles: ["test/setup/worker.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 2,
    reporters: json ? ["default", ["json", { outputFile: json }]] : ["default"],
  },
});
