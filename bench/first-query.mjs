// The first query after a hinted reopen, in a fresh process each: what a CLI command or an MCP
// server's first call pays (thirty-fifth session). Usage:
//   node bench/first-query.mjs [--n 200000] [--scopes 50] [--rounds 3] TREE [TREE ...]
// Loads N keys of 256 B, spread over S scopes `user:uI` in random order (batches of 1000), forgets
// every 20th, closes; then, per round and per tree (alternating), in a child process of its own:
// open, one query, close, printing the open's and the query's ms. Queries: a read of one key,
// list() of one scope (inherit: its lineage), listSlots of it, forgetScope (lazy) of one scope,
// stats(). Each tree loads its own directory once (its own format). With --cli, the built CLI's
// commands instead (`node TREE/dist/src/cli.js --dir DIR …`: --help, get, probe, put, ls of one
// scope, inspect), timed from spawn to exit, module loading included; and `node -e 0` for the
// floor. A tree's CLI is its bundle (dist/bin/engram.js, package.json "bin") when it has one, else
// dist/src/cli.js (trees from before the thirty-sixth session).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cliOf, takeFlag } from "./script-args.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => takeFlag(args, name, fallback);
const n = Number(flag("--n", "200000"));
const scopes = Number(flag("--scopes", "50"));
const rounds = Number(flag("--rounds", "3"));
const child = flag("--child", "");
const cli = args.includes("--cli");
if (cli) args.splice(args.indexOf("--cli"), 1);
const QUERIES = cli ? ["node", "--help", "get", "probe", "put", "ls", "inspect"] : ["read", "list", "listSlots", "forgetScope", "stats"];
/** The CLI's arguments for each --cli query (after `--dir DIR`). */
const CLI_ARGS = { "--help": ["--help"], get: ["get", "k7", "--scope", "user:u7"], probe: ["probe", "k7", "--scope", "user:u7"], put: ["put", "new", "v", "--scope", "user:u7"], ls: ["ls", "--scope", "user:u3"], inspect: ["inspect"] };

/** Wall ms of `node …argv` run to its end (it must succeed). */
function timedRun(argv) {
  const t0 = performance.now();
  execFileSync(process.execPath, argv, { encoding: "utf8", stdio: ["ignore", "ignore", "inherit"] });
  return performance.now() - t0;
}

async function engramOf(tree) {
  return (await import(pathToFileURL(path.join(path.resolve(tree), "dist/src/index.js")).href)).Engram;
}

if (child !== "") {
  const [tree, dir, query] = child.split(",");
  const Engram = await engramOf(tree);
  const t0 = performance.now();
  const store = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
  const t1 = performance.now();
  let got = 0;
  if (query === "read") got = (await store.read("k7", { scope: `user:u${7 % scopes}` })).status === "OK" ? 1 : 0;
  else if (query === "list") for await (const _ of store.list({ scope: "user:u3", limit: 1e6 })) got++;
  else if (query === "listSlots") got = (await store.listSlots({ scope: "user:u3", limit: 1e6 })).length;
  else if (query === "forgetScope") got = (await store.forgetScope("user:u5")).slots;
  else if (query === "stats") got = store.stats().liveSlots;
  const t2 = performance.now();
  await store.close();
  process.stdout.write(JSON.stringify({ open: t1 - t0, query: t2 - t1, got }));
  process.exit(0);
}

/** Loads the store of `tree` into a fresh directory and closes it; returns the directory. */
async function load(tree) {
  const Engram = await engramOf(tree);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "first-query-"));
  const store = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
  const value = new Uint8Array(256).fill(5);
  const order = Array.from({ length: n }, (_, i) => i);
  let s = 17;
  for (let i = n - 1; i > 0; i--) {
    s = (s * 1664525 + 1013904223) >>> 0;
    const j = s % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  for (let b = 0; b < n; b += 1000) await store.batch(order.slice(b, b + 1000).map((i) => ({ op: "write", key: `k${i}`, value, scope: `user:u${i % scopes}` })));
  for (let b = 0; b < n; b += 20_000) {
    const ops = [];
    for (let i = b; i < Math.min(n, b + 20_000); i += 20) ops.push({ op: "forget", key: `k${i}`, scope: `user:u${i % scopes}` });
    await store.batch(ops);
  }
  await store.close();
  return dir;
}

const trees = args.length > 0 ? args : ["."];
const dirs = [];
for (const tree of trees) dirs.push(await load(tree));
const me = fileURLToPath(import.meta.url);
const results = new Map(); // `${tree} ${query}` -> [{open, query, got}]
for (let r = 0; r < rounds; r++) {
  for (const query of QUERIES) {
    for (let t = 0; t < trees.length; t++) {
      // forgetScope changes the store: it runs on a copy.
      let dir = dirs[t];
      if (query === "forgetScope") {
        dir = `${dirs[t]}-copy`;
        fs.rmSync(dir, { recursive: true, force: true });
        fs.cpSync(dirs[t], dir, { recursive: true });
      }
      const out = !cli
        ? JSON.parse(execFileSync(process.execPath, [me, "--n", String(n), "--scopes", String(scopes), "--child", `${trees[t]},${dir},${query}`], { encoding: "utf8" }))
        : { open: 0, got: 0, query: timedRun(query === "node" ? ["-e", "0"] : [cliOf(trees[t]), "--dir", dir, ...CLI_ARGS[query]]) };
      const k = `${trees[t]} ${query}`;
      if (!results.has(k)) results.set(k, []);
      results.get(k).push(out);
    }
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
process.stdout.write(`${n} keys in ${scopes} scopes, ${rounds} rounds: median (min–max) ms\n\n| tree | query | open | query | answer |\n|---|---|---:|---:|---:|\n`);
for (const [k, rs] of results) {
  const [tree, query] = k.split(" ");
  const q = rs.map((x) => x.query);
  process.stdout.write(`| ${tree} | ${query} | ${med(rs.map((x) => x.open)).toFixed(1)} | ${med(q).toFixed(1)} (${Math.min(...q).toFixed(1)}–${Math.max(...q).toFixed(1)}) | ${rs[0].got} |\n`);
}
for (const d of dirs) {
  fs.rmSync(d, { recursive: true, force: true });
  fs.rmSync(`${d}-copy`, { recursive: true, force: true });
}
