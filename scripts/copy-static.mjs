// Copies the inspector's static page files (plain HTML, CSS and JS: nothing to compile) from
// src/ui/static to dist/src/ui/static, so the built package serves them. Portable: Node only.
import { cpSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const from = fileURLToPath(new URL("../src/ui/static/", import.meta.url));
const to = fileURLToPath(new URL("../dist/src/ui/static/", import.meta.url));
mkdirSync(to, { recursive: true });
cpSync(from, to, { recursive: true });
