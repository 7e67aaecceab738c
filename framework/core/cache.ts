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

/** What the informer reports: its key and the object as it saw it (the last state, on a delete). */
type RawListener = (key: string, obj: KubeObject) => void;

/**
 * Read access to every informer's store; hands out deep copies so handlers cannot corrupt it.
 * The one place change listeners live: the operator's dispatchers and @watches subscribe here
 * (onRawChange) beside the handlers' onChange.
 */
export class InformerCache implements CacheReader {
  private readonly informers = new Map<string, Informer>();
  private readonly listeners = new Map<string, Set<RawListener>>();

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
    return this.subscribe(viewId(informer.kind, informer.selector), (key) => {
      const obj = informer.get(key);
      listener(parseKey(key), obj === undefined ? undefined : (structuredClone(obj) as T));
    });
  }

  /**
   * For the framework itself: hears every change of the view `kind` names exactly, with the
   * informer's own object (no copy; on a delete, its last state).
   */
  onRawChange(kind: KindRef, listener: RawListener): () => void {
    return this.subscribe(viewId(kind), listener);
  }

  private subscribe(id: string, listener: RawListener): () => void {
    let listeners = this.listeners.get(id);
    if (!listeners) {
      listeners = new Set();
      this.listeners.set(id, listeners);
    }
    const entry: RawListener = (key, obj) => listener(key, obj);
    listeners.add(entry);
    return () => listeners.delete(entry);
  }

  /** Tells the change listeners of `kind` that the object at `key` changed (the informer's hook calls this). */
  notify(kind: KindRef, key: string, obj: KubeObject): void {
    const listeners = this.listeners.get(viewId(kind));
    if (!listeners?.size) return;
    for (const listener of listeners) {
      try {
        listener(key, obj);
      } catch (err) {
        this.onListenerError(err, kind);
      }
    }
  }
}
