/**
 * Runs before every test file (vitest.config.ts `setupFiles`): the stores the tests open start
 * their compaction threads from the compiled worker in dist/ while dist/ is fresh, not through
 * tsx (test/helpers/built-worker.ts says why and what it saves).
 */
import { useBuiltWorker } from "../helpers/built-worker.js";

useBuiltWorker();
