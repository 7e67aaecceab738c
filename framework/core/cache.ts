import { parseLabelSelector } from '../utils/label-selector.js';
import type { Informer } from './informer.js';
import {
  keyOf,
  kindId,
  parseKey,
  viewId,
  type CacheListener,
  type CacheReader,
  type KindRef,
  type KubeObject,
} from './types.js';

/** Read access to every informer's store; hands out deep copies so handlers cannot corrupt it. */
export class InformerCache implements CacheReader {
  private readonly informers = new Map<string, Informer>();
  private readonly listeners = new Map<string, Set<CacheListener>>();

  /** `onListenerError` hears what a change listener throws (it never reaches the informer). */
  constructor(private readonly onListenerError: (err: unknown, kind: KindRef) => void = () => {}) {}

  register(informer: Informer): void {
    this.informers.set(viewId(informer.kind, informer.selector), informer);
  }

  /** The view `kind` names; a kind named without a selector gets its only view, whatever its selector. */
  informer(kind: KindRef): Informer {
    const exact = this.informers.get(viewId(kind));
    if (exact) return exact;
    const views = kind.labelSelector
      ? []
      : [...this.informers.values()].filter((i) => kindId(i.kind) === kindId(kind));
    if (views.length === 1) return views[0];
    if (views.length > 1)
      throw new Error(
        `cache: ${kindId(kind)} is watched with several label selectors (${views.map((v) => `"${v.selector}"`).join(', ')}); name one in the KindRef`,
      );
    throw new Error(`cache: kind ${viewId(kind)} is not watched (declare it with @controller or @watches)`);
  }

  all(): Informer[] {
    return [...this.informers.values()];
  }

  get<T extends KubeObject = KubeObject>(
    kind: KindRef,
    namespace: string | undefined,
    name: string,
  ): T | undefined {
    const obj = this.informer(kind).get(keyOf(kind.namespaced ? namespace : undefined, name));
    return obj === undefined ? undefined : (structuredClone(obj) as T);
  }

  list<T extends KubeObject = KubeObject>(
    kind: KindRef,
    opts: { namespace?: string; labelSelector?: string } = {},
  ): T[] {
    const matches = parseLabelSelector(opts.labelSelector);
    const out: T[] = [];
    for (const obj of this.informer(kind).values()) {
      if (opts.namespace !== undefined && obj.metadata.namespace !== opts.namespace) continue;
      if (!matches(obj.metadata.labels)) continue;
      out.push(structuredClone(obj) as T);
    }
    return out;
  }

  onChange<T extends KubeObject = KubeObject>(kind: KindRef, listener: CacheListener<T>): () => void {
    const informer = this.informer(kind);
    const id = viewId(informer.kind, informer.selector);
    let listeners = this.listeners.get(id);
    if (!listeners) {
      listeners = new Set();
      this.listeners.set(id, listeners);
    }
    const entry = listener as CacheListener;
    listeners.add(entry);
    return () => listeners.delete(entry);
  }

  /** Tells the change listeners of `kind` that the object at `key` changed (the operator calls this). */
  notify(kind: KindRef, key: string): void {
    const listeners = this.listeners.get(viewId(kind));
    if (!listeners?.size) return;
    const obj = this.informer(kind).get(key);
    for (const listener of listeners) {
      try {
        listener(parseKey(key), obj === undefined ? undefined : structuredClone(obj));
      } catch (err) {
        this.onListenerError(err, kind);
      }
    }
  }
}
