import type { CacheReader, ObjectKey } from '../framework/index.js';
import type { ProxyRecord } from '../discovery/catalog.js';
import { IndexedCatalog } from '../discovery/indexed-catalog.js';
import { CONDITION_HEALTHY, type Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { proxyEndpoint, proxyKey, servedEndpoint } from './proxy-address.js';

/**
 * The discovery API's view of the Proxy cache, kept up to date change by change from the
 * cache's events (a lease or list never re-reads the fleet). Health comes from status, so
 * every replica serves the verdicts the leader wrote. A Proxy being deleted leaves at once.
 */
export class CachedProxyCatalog {
  readonly catalog = new IndexedCatalog();
  private detach: (() => void) | undefined;

  /** Loads every cached Proxy, then follows the cache (in one synchronous step: nothing is missed). */
  attach(cache: CacheReader): void {
    this.detach?.();
    this.catalog.replaceAll(cache.list<Proxy>(PROXY_KIND).filter(isListed).map(toRecord));
    this.detach = cache.onChange<Proxy>(PROXY_KIND, (key, proxy) => this.changed(key, proxy));
  }

  detachFromCache(): void {
    this.detach?.();
    this.detach = undefined;
  }

  private changed(key: ObjectKey, proxy: Proxy | undefined): void {
    if (proxy !== undefined && isListed(proxy)) this.catalog.upsert(toRecord(proxy));
    else this.catalog.remove(`${key.namespace}/${key.name}`);
  }
}

function isListed(p: Proxy): boolean {
  return !p.metadata.deletionTimestamp;
}

export function toRecord(p: Proxy): ProxyRecord {
  // A host that is not one address is never handed out: listed without one, unhealthy, never leased.
  const endpoint = servedEndpoint(p);
  const misread = endpoint === undefined && proxyEndpoint(p) !== undefined;
  const healthy =
    !misread && p.status?.conditions?.find((c) => c.type === CONDITION_HEALTHY)?.status === 'True';
  return {
    id: proxyKey(p),
    ip: endpoint?.host ?? '',
    port: endpoint?.port ?? p.spec.port,
    attributes: { ...(p.spec.attributes ?? {}) },
    phase: p.status?.phase ?? 'Pending',
    healthy: healthy && p.status?.phase === 'Ready',
    latencyMillis: p.status?.latencyMillis ?? 0,
    maxLeases: p.spec.maxLeases,
  };
}
