// `node --import ./loaded-register.mjs …`: installs loaded-hooks.mjs before the program's first import.
import { register } from "node:module";

register("./loaded-hooks.mjs", import.meta.url);
