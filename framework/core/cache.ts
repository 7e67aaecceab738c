import { parseLabelSelector } from '../utils/label-selector.js';
import type { Informer } from './informer.js';
import { keyOf, kindId, type CacheReader, type KindRef, type KubeObject } from './types.js';

/** Read access to every informer's store; hands out deep copies so handlers cannot corrupt it. */
export class InformerCache implements CacheReader {
  private readonly informers = new Map<string, Informer>();

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
}
