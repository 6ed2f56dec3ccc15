import { defineConfig } from "vitest/config";

// Tests run in child processes (forks), not worker threads: fs-ext is a native addon that must be
// loaded on a main thread only (STACK.md trap 2), and the engine loads it to lock the directory.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 2,
  },
});
