import { parseLabelSelector } from '../utils/label-selector.js';
import type { Informer } from './informer.js';
import {
  keyOf,
  kindId,
  parseKey,
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
    this.informers.set(kindId(informer.kind), informer);
  }

  informer(kind: KindRef): Informer {
    const inf = this.informers.get(kindId(kind));
    if (!inf)
      throw new Error(`cache: kind ${kindId(kind)} is not watched (declare it with @controller or @watches)`);
    return inf;
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
    this.informer(kind);
    const id = kindId(kind);
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
    const listeners = this.listeners.get(kindId(kind));
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
