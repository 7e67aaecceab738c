// A token's scope and trust, written after its token on the line of the tokens file:
//   team-a: <token> namespaces=crawl-a,shared selector=pool=a,region=eu rotation-trusted
// A token with a scope leases, lists and sees only the proxies inside it; without one it
// sees every proxy (the default, as before scopes existed). Pure, so each rule is table-tested.
import type { ProxyRecord } from './catalog.js';
import { selectorMatcher } from './selector.js';

export interface TokenScope {
  /** Only proxies in these namespaces (the id's part before '/'); absent: every namespace. */
  readonly namespaces?: readonly string[];
  /** Only proxies whose attributes hold every pair; absent: every proxy. */
  readonly selector?: Readonly<Record<string, string>>;
}

export interface TokenPolicy {
  readonly scope: TokenScope;
  /**
   * Its banned reports alone may count toward spec.rotation.whenCoolingDownOn; any other
   * token's count only when a second token reported the same cooldown (ban-rotation).
   */
  readonly rotationTrusted: boolean;
}

export const OPEN_POLICY: TokenPolicy = Object.freeze({ scope: Object.freeze({}), rotationTrusted: false });

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * The options after a token on its line. Throws a message naming the option (the caller
 * prefixes the line); never echoes the token, which is not part of `words`.
 */
const KNOWN_KEYS = ['namespaces', 'selector', 'rotation-trusted'];
const EXPECTED = 'namespaces=<a,b>, selector=<k=v,...> or rotation-trusted';

export function parseTokenOptions(words: readonly string[]): TokenPolicy {
  let namespaces: string[] | undefined;
  let selector: Record<string, string> | undefined;
  let rotationTrusted = false;
  for (const [index, word] of words.entries()) {
    const eq = word.indexOf('=');
    const key = eq < 0 ? word : word.slice(0, eq);
    const value = eq < 0 ? undefined : word.slice(eq + 1);
    if (key === 'rotation-trusted' && value === undefined) {
      rotationTrusted = true;
    } else if (key === 'namespaces' && value !== undefined) {
      if (namespaces !== undefined) throw new Error('"namespaces=" is given twice');
      namespaces = value.split(',');
      const bad = namespaces.find((n) => !NAMESPACE.test(n));
      if (bad !== undefined)
        throw new Error(
          `namespaces: "${bad.slice(0, 63)}" is not a namespace name (comma-separated, no spaces)`,
        );
    } else if (key === 'selector' && value !== undefined) {
      if (selector !== undefined) throw new Error('"selector=" is given twice');
      selector = {};
      for (const pair of value.split(',')) {
        const at = pair.indexOf('=');
        if (at <= 0)
          throw new Error(`selector: "${pair.slice(0, 63)}" must be key=value (pairs comma-separated)`);
        const k = pair.slice(0, at);
        if (Object.hasOwn(selector, k)) throw new Error(`selector: key "${k.slice(0, 63)}" is given twice`);
        selector[k] = pair.slice(at + 1);
      }
    } else if (KNOWN_KEYS.includes(key)) {
      throw new Error(
        `option "${key}" ${value === undefined ? 'needs =<value>' : 'takes no value'} (expected ${EXPECTED})`,
      );
    } else {
      // Never shown: a token with a space in it puts its rest here, and the error is logged.
      throw new Error(
        `word ${index + 2} of the line after the name is not an option (not shown: it may be the rest of a token with a space in it; expected ${EXPECTED})`,
      );
    }
  }
  return {
    scope: {
      ...(namespaces === undefined ? {} : { namespaces }),
      ...(selector === undefined ? {} : { selector }),
    },
    rotationTrusted,
  };
}

/** Whether a scope leaves every proxy in (no restriction at all). */
export function isOpen(scope: TokenScope): boolean {
  return scope.namespaces === undefined && scope.selector === undefined;
}

/** The namespace of a proxy id (namespace/name). */
export function namespaceOf(proxyID: string): string {
  const at = proxyID.indexOf('/');
  return at < 0 ? '' : proxyID.slice(0, at);
}

/** The scope as a predicate on proxies; compiled once per request. */
export function scopeMatcher(scope: TokenScope): (proxy: Pick<ProxyRecord, 'id' | 'attributes'>) => boolean {
  if (isOpen(scope)) return () => true;
  const namespaces = scope.namespaces === undefined ? undefined : new Set(scope.namespaces);
  const attributes = scope.selector === undefined ? () => true : selectorMatcher(scope.selector);
  return (proxy) =>
    (namespaces === undefined || namespaces.has(namespaceOf(proxy.id))) && attributes(proxy.attributes);
}
