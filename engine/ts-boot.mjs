// Loads a TypeScript worker under tsx when engram runs from source (tests, tsx): Node 20 cannot
// strip types and piscina would otherwise load workers as CommonJS (STACK.md trap 5).
import { workerData } from "node:worker_threads";
import { tsImport } from "tsx/esm/api";

const mod = await tsImport(workerData.tsWorker, import.meta.url);
export default mod.default;
