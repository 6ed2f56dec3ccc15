// Module hooks for test/helpers/no-pg-child.ts: "pg" cannot be resolved (as when the optional
// dependency is not installed); every attempt is counted in shared memory, visible at once to the
// main thread as globalThis.__pgImports().
import { register } from "node:module";

const counter = new Int32Array(new SharedArrayBuffer(4));
globalThis.__pgImports = () => Atomics.load(counter, 0);
register(
  "data:text/javascript," +
    encodeURIComponent(`
      let counter;
      export function initialize(data) { counter = data.counter; }
      export async function resolve(specifier, context, next) {
        if (specifier === "pg") {
          Atomics.add(counter, 0, 1);
          const err = new Error("Cannot find package 'pg'");
          err.code = "ERR_MODULE_NOT_FOUND";
          throw err;
        }
        return next(specifier, context);
      }`),
  { data: { counter } },
);
