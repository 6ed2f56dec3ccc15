/**
 * Per-scope retention rules (`retention.scopes` of OpenOptions, API.md "Retention"), parsed and
 * matched the same way by both backends: a pattern is matched component by component, `*`
 * standing for any run of characters within one component.
 */
import { checkTtl } from "./args.js";
import { TTL_MS_MAX } from "./limits.js";
import { fail, int, object } from "./option-checks.js";

/** At most this many patterns in `retention.scopes`. */
export const SCOPE_RULES_MAX = 1024;

/** A pattern: up to 8 components of the scope grammar, each may hold `*`. */
const PATTERN = /^(\*|[A-Za-z0-9*][A-Za-z0-9._:@*-]{0,63})(\/(\*|[A-Za-z0-9*][A-Za-z0-9._:@*-]{0,63})){0,7}$/;

/** One retention rule for the scopes matching `pattern`. */
export interface ScopeRule {
  pattern: string;
  components: RegExp[];
  ttlMs: number | null | undefined;
  tombstoneRetentionMs: number | undefined;
}

/** One pattern component as an anchored regular expression (`*` = any run within the component). */
function compileComponent(part: string): RegExp {
  const escaped = part.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*");
  return new RegExp(`^${escaped}$`);
}

/** Parses `retention.scopes`; throws InvalidArgumentError naming the first bad pattern or field. */
export function parseScopeRules(v: unknown): ScopeRule[] {
  const rules = object("retention.scopes", v);
  const names = Object.keys(rules);
  if (names.length > SCOPE_RULES_MAX) fail("retention.scopes", `at most ${SCOPE_RULES_MAX} patterns`, names.length);
  return names.map((pattern) => {
    if (!PATTERN.test(pattern)) fail("retention.scopes key", 'a scope pattern such as "user:*/session:*"', pattern);
    const rule = object(`retention.scopes[${pattern}]`, rules[pattern]);
    const window = rule["tombstoneRetentionMs"];
    return {
      pattern,
      components: pattern.split("/").map(compileComponent),
      ttlMs: checkTtl(`retention.scopes[${pattern}].ttlMs`, rule["ttlMs"]),
      tombstoneRetentionMs: window === undefined ? undefined : int(`retention.scopes[${pattern}].tombstoneRetentionMs`, window, 0, TTL_MS_MAX, 0),
    };
  });
}

/** The first rule whose pattern matches `scope` component by component, or null. */
export function matchScopeRule(rules: readonly ScopeRule[], scope: string): ScopeRule | null {
  if (rules.length === 0) return null;
  const parts = scope.split("/");
  for (const rule of rules) {
    if (rule.components.length !== parts.length) continue;
    if (rule.components.every((re, i) => re.test(parts[i] ?? ""))) return rule;
  }
  return null;
}
