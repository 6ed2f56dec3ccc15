// What an agent host pays to start engram's MCP server and ask it first, per tree, alternating
// trees round by round (thirty-sixth session). Usage:
//   node bench/mcp-start.mjs [--n 200000] [--rounds 5] TREE [TREE ...]
// Loads N keys of 256 B in 50 scopes `user:uI` into a store per tree (as bench/first-query.mjs),
// then per round and tree: the MCP SDK's own Client spawns `node CLI mcp --dir DIR` over stdio
// (CLI: the tree's bundle dist/bin/engram.js, else dist/src/cli.js) and times connect (spawn to
// the initialize result), the first memory_read, and the first memory_list of one scope (its
// first 1,000 names, the tool's limit, of 4,000 at the default n; the list loads the scope's hint
// entries first), in ms. Every answer is checked. Prints medians and ranges.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { cliOf, takeFlag } from "./script-args.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => takeFlag(args, name, fallback);
const n = Number(flag("--n", "200000"));
const rounds = Number(flag("--rounds", "5"));
const trees = args.length > 0 ? args : ["."];
const SCOPES = 50;

async function load(tree) {
  const { Engram } = await import(pathToFileURL(path.join(path.resolve(tree), "dist/src/index.js")).href);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-start-"));
  const store = await Engram.open(dir, { durability: "none", compaction: { auto: false } });
  const value = new Uint8Array(256).fill(5);
  for (let b = 0; b < n; b += 1000) {
    const ops = [];
    for (let i = b; i < Math.min(n, b + 1000); i++) ops.push({ op: "write", key: `k${i}`, value, scope: `user:u${i % SCOPES}` });
    await store.batch(ops);
  }
  await store.close();
  return dir;
}

async function oneRun(tree, dir) {
  const t0 = performance.now();
  const transport = new StdioClientTransport({ command: process.execPath, args: [cliOf(tree), "mcp", "--dir", dir], stderr: "ignore" });
  const client = new Client({ name: "mcp-start", version: "1" });
  await client.connect(transport);
  const t1 = performance.now();
  const read = await client.callTool({ name: "memory_read", arguments: { key: "k7", scope: "user:u7" } });
  const t2 = performance.now();
  const list = await client.callTool({ name: "memory_list", arguments: { scope: "user:u3", limit: 1000 } });
  const t3 = performance.now();
  if (read.isError === true || list.isError === true) throw new Error(`${tree}: a tool failed: ${JSON.stringify([read, list]).slice(0, 400)}`);
  const listed = JSON.parse(list.content[0].text);
  if (!Array.isArray(listed.entries) || listed.entries.length !== Math.min(1000, n / SCOPES)) throw new Error(`${tree}: memory_list answered ${JSON.stringify(listed).slice(0, 200)}`);
  await client.close();
  return { connect: t1 - t0, read: t2 - t1, list: t3 - t2 };
}

const dirs = [];
for (const tree of trees) dirs.push(await load(tree));
const runs = trees.map(() => []);
for (let r = 0; r < rounds; r++) for (let t = 0; t < trees.length; t++) runs[t].push(await oneRun(trees[t], dirs[t]));
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cell = (xs) => `${med(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`;
process.stdout.write(`${n} keys in ${SCOPES} scopes, ${rounds} rounds: median (min–max) ms\n\n| tree | connect | first memory_read | first memory_list |\n|---|---:|---:|---:|\n`);
trees.forEach((tree, t) => process.stdout.write(`| ${tree} | ${cell(runs[t].map((x) => x.connect))} | ${cell(runs[t].map((x) => x.read))} | ${cell(runs[t].map((x) => x.list))} |\n`));
for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
