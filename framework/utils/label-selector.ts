/**
 * Kubernetes label selectors (equality and set based), for filtering cached objects the
 * same way the API server filters lists.
 */
type Requirement = (labels: Record<string, string>) => boolean;

export type LabelMatcher = (labels: Record<string, string> | undefined) => boolean;

const KEY = /^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$/;

function splitTopLevel(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

function checkKey(key: string, selector: string): string {
  if (!KEY.test(key)) throw new Error(`invalid label selector "${selector}": bad key "${key}"`);
  return key;
}

function parseRequirement(part: string, selector: string): Requirement {
  const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
  if (set) {
    const key = checkKey(set[1], selector);
    const values = new Set(set[3].split(',').map((v) => v.trim()));
    return set[2] === 'in'
      ? (l) => key in l && values.has(l[key])
      : (l) => !(key in l) || !values.has(l[key]);
  }
  const ne = /^([^!=\s]+)\s*!=\s*(\S*)$/.exec(part);
  if (ne) {
    const key = checkKey(ne[1], selector);
    return (l) => l[key] !== ne[2];
  }
  const eq = /^([^!=\s]+)\s*==?\s*(\S*)$/.exec(part);
  if (eq) {
    const key = checkKey(eq[1], selector);
    return (l) => l[key] === eq[2];
  }
  if (part.startsWith('!')) {
    const key = checkKey(part.slice(1).trim(), selector);
    return (l) => !(key in l);
  }
  const key = checkKey(part, selector);
  return (l) => key in l;
}

/** Compiles a selector; throws an error naming the selector when it cannot be parsed. */
export function parseLabelSelector(selector: string | undefined): LabelMatcher {
  const reqs = splitTopLevel(selector ?? '').map((p) => parseRequirement(p, selector ?? ''));
  return (labels) => reqs.every((r) => r(labels ?? {}));
}
