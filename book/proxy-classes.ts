// Proxy classes (issue 47 item 4): the proxies alike in everything a selector or a token scope
// reads, their namespace and their attributes. A selector or a scope admits a class whole, so
// a refusal of a request with one can be counted per class (full, cooling down for the target)
// at a cost of the classes it matches, whatever the number of proxies in them. Both stores
// keep their counts per class (memory: free-proxy-index.ts, cooling-counts.ts; Redis: the
// fleet registry's classes, redis-fleet-feed.ts); a request matching more than
// MAX_COUNTED_CLASSES classes walks as before.
import type { ProxyRecord } from './catalog.js';
import { attributeTerm, selectorMatcher, selectorTerms } from './selector.js';
import { namespaceOf } from './token-scope.js';

/** Classes a request's refusal is counted over at most; more: the walk (docs/redis.md). */
export const MAX_COUNTED_CLASSES = 32;
/** Selectors whose matched classes are kept per scope (client-supplied: bounded, then begun again). */
const MATCHES_KEPT = 1000;

/** What a class is made of: the part of a record a selector or a scope reads. */
export type ClassMember = Pick<ProxyRecord, 'id' | 'attributes'>;

/** Records are immutable: each one's class key is computed once. */
const keys = new WeakMap<ClassMember, string>();

/**
 * The class of a proxy: its namespace and its attributes sorted by key, JSON-encoded so that
 * no namespace, key or value, whatever characters it holds, can make two classes one.
 */
export function classKey(record: ClassMember): string {
  let key = keys.get(record);
  if (key === undefined) {
    const pairs = Object.entries(record.attributes).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    key = JSON.stringify([namespaceOf(record.id), pairs]);
    keys.set(record, key);
  }
  return key;
}

/**
 * A proxy's place in a by-class exit-ordered set: its class key, NUL, its exit member. A class
 * key is JSON (no raw NUL in it), so a class's members lie together, in exit order.
 */
export function classExit(key: string, exit: string): string {
  return `${key}\u0000${exit}`;
}

/**
 * Whether a request with this selector and scope admits the class whose member `sample` is,
 * compiled once per request: every member answers the same (a scope reads the namespace and
 * attributes only: LeaseRequest.within).
 */
export function classMatcher(
  selector: Readonly<Record<string, string>>,
  within?: (proxy: ProxyRecord) => boolean,
): (sample: ProxyRecord) => boolean {
  const selected = selectorMatcher(selector);
  return (sample) => selected(sample.attributes) && (within === undefined || within(sample));
}

export interface ProxyClass<T> {
  readonly key: string;
  /** A member (the first seen): stands for all of them before a selector or a scope. */
  readonly sample: ProxyRecord;
  /** How many members the class has now. */
  members: number;
  /** What its owner counts per class. */
  readonly data: T;
}

/** The classes of a set of proxies, each with its owner's counts, found by attribute term. */
export class ProxyClasses<T> {
  private readonly byKey = new Map<string, ProxyClass<T>>();
  /** attribute term → the classes holding it: a selector's candidates are its rarest term's. */
  private readonly byTerm = new Map<string, Set<ProxyClass<T>>>();
  /** Moves when a class is made or forgotten: what matching() answers may change then only. */
  private version = 0;
  /** Per scope (this map itself: none), per limit and selector JSON: the classes matched. */
  private readonly found = new WeakMap<
    object,
    Map<string, { version: number; classes: ProxyClass<T>[] | undefined }>
  >();

  constructor(private readonly init: () => T) {}

  /** The class of a record joining the set, made on its first member. */
  join(record: ProxyRecord): ProxyClass<T> {
    const key = classKey(record);
    let entry = this.byKey.get(key);
    if (entry === undefined) {
      entry = { key, sample: record, members: 0, data: this.init() };
      this.byKey.set(key, entry);
      this.version++;
      for (const [k, v] of Object.entries(record.attributes)) {
        const term = attributeTerm(k, v);
        let classes = this.byTerm.get(term);
        if (classes === undefined) {
          classes = new Set();
          this.byTerm.set(term, classes);
        }
        classes.add(entry);
      }
    }
    entry.members++;
    return entry;
  }

  /** The class (by key) of a record leaving the set; forgotten at 0 members. */
  leave(key: string): ProxyClass<T> | undefined {
    const entry = this.byKey.get(key);
    if (entry === undefined) return undefined;
    entry.members--;
    if (entry.members <= 0) {
      this.byKey.delete(entry.key);
      this.version++;
      for (const [k, v] of Object.entries(entry.sample.attributes)) {
        const term = attributeTerm(k, v);
        const classes = this.byTerm.get(term);
        classes?.delete(entry);
        if (classes?.size === 0) this.byTerm.delete(term);
      }
    }
    return entry;
  }

  /** The class a record belongs to, while it has members. */
  get(record: ClassMember): ProxyClass<T> | undefined {
    return this.byKey.get(classKey(record));
  }

  get size(): number {
    return this.byKey.size;
  }

  /**
   * The classes a request with this selector and scope admits, or undefined when more than
   * `limit` do (the caller walks instead). Looks at the classes of the selector's rarest
   * term, or every class without a selector: work on this process, none of it per proxy;
   * kept per scope and selector until a class comes or goes (asked on every request).
   */
  matching(
    selector: Readonly<Record<string, string>>,
    within: ((proxy: ProxyRecord) => boolean) | undefined,
    limit = MAX_COUNTED_CLASSES,
  ): ProxyClass<T>[] | undefined {
    const scope = within ?? this.found;
    let bySelector = this.found.get(scope);
    if (bySelector === undefined || bySelector.size >= MATCHES_KEPT) {
      bySelector = new Map();
      this.found.set(scope, bySelector);
    }
    const shape = `${limit}:${JSON.stringify(selector)}`;
    let found = bySelector.get(shape);
    if (found === undefined || found.version !== this.version) {
      found = { version: this.version, classes: this.look(selector, within, limit) };
      bySelector.set(shape, found);
    }
    return found.classes;
  }

  private look(
    selector: Readonly<Record<string, string>>,
    within: ((proxy: ProxyRecord) => boolean) | undefined,
    limit: number,
  ): ProxyClass<T>[] | undefined {
    let pool: Iterable<ProxyClass<T>> = this.byKey.values();
    let smallest: Set<ProxyClass<T>> | undefined;
    for (const term of selectorTerms(selector)) {
      const classes = this.byTerm.get(term);
      if (classes === undefined) return [];
      if (smallest === undefined || classes.size < smallest.size) smallest = classes;
    }
    if (smallest !== undefined) pool = smallest;
    const admits = classMatcher(selector, within);
    const out: ProxyClass<T>[] = [];
    for (const entry of pool) {
      if (!admits(entry.sample)) continue;
      if (out.length === limit) return undefined;
      out.push(entry);
    }
    return out;
  }
}
