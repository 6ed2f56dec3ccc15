// Sums what V8 compiled inside a marked window of a `node --trace-opt --trace-deopt` log
// (thirty-second session). Usage:
//   AB_MARK=1 AB_RANDOM=1 node --trace-opt --trace-deopt --import tsx bench/compact-ab.ts . 100000 in-place 1 > LOG
//   node bench/trace-opt-sum.mjs LOG [TOP]
// The window is the lines between "=== PASS START" and "=== PASS END" (compact-ab.ts prints them
// with AB_MARK=1). Prints the TurboFan compile jobs finished in the window — their background
// times as V8 reports them ("took A, B, C ms": B), split into first compiles and recompiles of a
// function (same name and SharedFunctionInfo, so the same isolate) compiled before the window —
// the deoptimizations in the window, and the TOP (default 20) functions by compile time there,
// each with its history up to the window's end (C compile, C OSR, D deopt with its reason; P:
// inside the window).
import * as fs from "node:fs";

const [file, topArg] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node bench/trace-opt-sum.mjs LOG [TOP]");
  process.exit(2);
}
const top = Number(topArg ?? 20);
const lines = fs.readFileSync(file, "utf8").split("\n");
const start = lines.findIndex((l) => l.includes("=== PASS START"));
const end = lines.findIndex((l) => l.includes("=== PASS END"));
if (start < 0 || end < start) {
  console.error(`${file}: no "=== PASS START" … "=== PASS END" window (run compact-ab.ts with AB_MARK=1)`);
  process.exit(2);
}
const compiled = /completed compiling \S+ <JSFunction (.+?) \(sfi = (\S+)\)>( \(target TURBOFAN\))?( OSR)?.*took ([0-9.]+), ([0-9.]+), ([0-9.]+) ms/;
const deopt = /bailout \(kind: (\S+), reason: ([^)]*)\).*deoptimizing \S+ <JSFunction (.+?) \(sfi = (\S+)\)>.*bytecode offset (\d+)/;

/** Per function (name and sfi): its events in log order, { at, what, ms }. */
const history = new Map();
const eventsOf = (name, sfi) => {
  const k = `${name} ${sfi}`;
  if (!history.has(k)) history.set(k, { name, events: [] });
  return history.get(k).events;
};
let deoptsInWindow = 0;
for (let at = 0; at < end; at++) {
  const line = lines[at];
  const c = compiled.exec(line);
  if (c !== null) {
    eventsOf(c[1], c[2]).push({ at, what: c[4] ? "C OSR" : "C", ms: Number(c[6]) });
    continue;
  }
  const d = deopt.exec(line);
  if (d !== null) {
    eventsOf(d[3], d[4]).push({ at, what: `D ${d[2]} @${d[5]}`, ms: 0 });
    if (at > start) deoptsInWindow += 1;
  }
}
const totals = { first: 0, again: 0 };
const rows = [];
for (const { name, events } of history.values()) {
  const inWindow = events.filter((e) => e.at > start && e.what.startsWith("C"));
  if (inWindow.length === 0) continue;
  const again = events.some((e) => e.at < start && e.what.startsWith("C"));
  const ms = inWindow.reduce((n, e) => n + e.ms, 0);
  totals[again ? "again" : "first"] += ms;
  rows.push({ ms, name, kind: again ? "recompiled" : "first", story: events.map((e) => (e.at > start ? "P " : "") + e.what).join(" | ") });
}
rows.sort((a, b) => b.ms - a.ms);
const result = lines.find((l) => l.includes('"MBps"'));
console.log(`window: lines ${start + 1}–${end + 1}${result === undefined ? "" : `; ${result.slice(0, 160)}`}`);
console.log(`TurboFan compile jobs in the window: ${(totals.first + totals.again).toFixed(1)} ms (recompiles ${totals.again.toFixed(1)}, first compiles ${totals.first.toFixed(1)}); deoptimizations: ${deoptsInWindow}`);
for (const r of rows.slice(0, top)) console.log(`${r.ms.toFixed(1).padStart(6)} ms  ${r.kind.padEnd(10)} ${r.name}  ::  ${r.story}`);
