/**
 * Pieces of LangGraph's InMemoryStore that `EngramStore` must reproduce exactly but that the
 * package does not export (its `store/utils` module): JSON path tokenizing, text extraction for
 * embeddings, and filter comparison. Ported from @langchain/langgraph-checkpoint 1.2.2
 * `dist/store/utils.js`, behaviour for behaviour; the differential test holds them to it.
 */

/** Splits a JSON path into tokens: "a.b" -> [a, b]; "c[*].d" -> [c, [*], d]; "{x,y}" stays one token. */
export function tokenizePath(path: string): string[] {
  if (!path) return [];
  const tokens: string[] = [];
  let current: string[] = [];
  let i = 0;
  const flush = (): void => {
    if (current.length) {
      tokens.push(current.join(""));
      current = [];
    }
  };
  while (i < path.length) {
    const char = path[i] as string;
    if (char === "[" || char === "{") {
      flush();
      const [open, close] = char === "[" ? ["[", "]"] : ["{", "}"];
      let depth = 1;
      const chars = [open];
      i += 1;
      while (i < path.length && depth > 0) {
        if (path[i] === open) depth += 1;
        else if (path[i] === close) depth -= 1;
        chars.push(path[i] as string);
        i += 1;
      }
      tokens.push(chars.join(""));
      continue;
    } else if (char === ".") {
      flush();
    } else {
      current.push(char);
    }
    i += 1;
  }
  flush();
  return tokens;
}

/** The texts at `path` (tokens, or "$" for the whole value) as InMemoryStore embeds them. */
export function getTextAtPath(obj: unknown, path: string | string[]): string[] {
  if (!path || path === "$") return [JSON.stringify(obj, null, 2)];
  const tokens = Array.isArray(path) ? path : tokenizePath(path);
  return extract(obj, tokens, 0);
}

function leafText(obj: unknown): string[] {
  if (typeof obj === "string" || typeof obj === "number" || typeof obj === "boolean") return [String(obj)];
  if (obj === null || obj === undefined) return [];
  if (typeof obj === "object") return [JSON.stringify(obj, null, 2)];
  return [];
}

function extract(obj: unknown, tokens: string[], pos: number): string[] {
  if (pos >= tokens.length) return leafText(obj);
  const token = tokens[pos] as string;
  const results: string[] = [];
  if (pos === 0 && token === "$") results.push(JSON.stringify(obj, null, 2));
  if (token.startsWith("[") && token.endsWith("]")) {
    if (!Array.isArray(obj)) return [];
    const index = token.slice(1, -1);
    if (index === "*") {
      for (const item of obj) results.push(...extract(item, tokens, pos + 1));
    } else {
      let idx = parseInt(index, 10);
      if (idx < 0) idx = obj.length + idx;
      if (idx >= 0 && idx < obj.length) results.push(...extract(obj[idx], tokens, pos + 1));
    }
  } else if (token.startsWith("{") && token.endsWith("}")) {
    if (typeof obj !== "object" || obj === null) return [];
    for (const field of token.slice(1, -1).split(",").map((f) => f.trim())) {
      const nested = tokenizePath(field);
      if (!nested.length) continue;
      let cur: unknown = obj;
      for (const t of nested) {
        if (cur && typeof cur === "object" && t in cur) cur = (cur as Record<string, unknown>)[t];
        else {
          cur = undefined;
          break;
        }
      }
      if (cur === undefined) continue;
      if (typeof cur === "string" || typeof cur === "number" || typeof cur === "boolean") results.push(String(cur));
      else if (typeof cur === "object") results.push(JSON.stringify(cur, null, 2));
    }
  } else if (token === "*") {
    if (Array.isArray(obj)) for (const item of obj) results.push(...extract(item, tokens, pos + 1));
    else if (typeof obj === "object" && obj !== null) for (const v of Object.values(obj)) results.push(...extract(v, tokens, pos + 1));
  } else if (typeof obj === "object" && obj !== null && token in obj) {
    results.push(...extract((obj as Record<string, unknown>)[token], tokens, pos + 1));
  }
  return results;
}

const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

/** True when `filterValue` is an operator object such as `{ $gt: 3 }`. */
function isFilterOperators(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && Object.keys(v).every((k) => OPERATORS.has(k));
}

/** One filter condition on one field, exactly as InMemoryStore compares. */
export function compareValues(itemValue: unknown, filterValue: unknown): boolean {
  if (!isFilterOperators(filterValue)) return itemValue === filterValue;
  return Object.keys(filterValue)
    .filter((k) => k.startsWith("$"))
    .every((op) => {
      const value = filterValue[op];
      switch (op) {
        case "$eq":
          return itemValue === value;
        case "$ne":
          return itemValue !== value;
        case "$gt":
          return Number(itemValue) > Number(value);
        case "$gte":
          return Number(itemValue) >= Number(value);
        case "$lt":
          return Number(itemValue) < Number(value);
        case "$lte":
          return Number(itemValue) <= Number(value);
        case "$in":
          return Array.isArray(value) ? value.includes(itemValue) : false;
        case "$nin":
          return Array.isArray(value) ? !value.includes(itemValue) : true;
        default:
          return false;
      }
    });
}

/** Cosine similarity of `x` with each of `ys` (0 when either has no magnitude), as InMemoryStore computes it. */
export function cosineSimilarity(x: number[], ys: number[][]): number[] {
  if (!ys.length) return [];
  const m1 = Math.sqrt(x.reduce((acc, v) => acc + v * v, 0));
  return ys.map((y) => {
    const dot = y.reduce((acc, v, i) => acc + v * (x[i] as number), 0);
    const m2 = Math.sqrt(y.reduce((acc, v) => acc + v * v, 0));
    return m1 && m2 ? dot / (m1 * m2) : 0;
  });
}
