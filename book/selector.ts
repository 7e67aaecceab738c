// Attribute selectors: the one matching rule shared by listing and leasing.
import { exitIPMatches, type ExitIPTerm } from './exit-ip-match.js';

export type AttributeMatcher = (attributes: Readonly<Record<string, string>>) => boolean;

/** True when every selector key is present with exactly the same value; compiled once per request. */
export function selectorMatcher(selector: Readonly<Record<string, string>>): AttributeMatcher {
  const entries = Object.entries(selector);
  if (entries.length === 0) return () => true;
  return (attributes) => {
    for (const [key, value] of entries) {
      // Own-property check: a selector key like "toString" must not match Object.prototype.
      if (!Object.hasOwn(attributes, key) || attributes[key] !== value) return false;
    }
    return true;
  };
}

/** What a lease request's filter looks at on a proxy. */
export interface Matchable {
  readonly attributes: Readonly<Record<string, string>>;
  readonly exitIP?: string;
}

/** The attribute selector and, when given, the exit IP term (a proxy of unknown exit IP never matches one). */
export function proxyMatcher(
  selector: Readonly<Record<string, string>>,
  exitIP?: ExitIPTerm,
): (proxy: Matchable) => boolean {
  const attributes = selectorMatcher(selector);
  if (exitIP === undefined) return (proxy) => attributes(proxy.attributes);
  return (proxy) => attributes(proxy.attributes) && exitIPMatches(exitIP, proxy.exitIP);
}

export function matchesSelector(
  attributes: Readonly<Record<string, string>>,
  selector: Readonly<Record<string, string>>,
): boolean {
  return selectorMatcher(selector)(attributes);
}

/**
 * The attribute index's key for one key=value pair. JSON-encoded so that no key or value,
 * whatever characters it holds, can collide with another pair.
 */
export function attributeTerm(key: string, value: string): string {
  return JSON.stringify([key, value]);
}

export function selectorTerms(selector: Readonly<Record<string, string>>): string[] {
  return Object.entries(selector).map(([key, value]) => attributeTerm(key, value));
}
