import type { CacheReader } from '../framework/index.js';
import type { ProxyCatalog, ProxyRecord } from '../discovery/catalog.js';
import { CONDITION_HEALTHY, type Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { proxyEndpoint, proxyKey } from './proxy-address.js';

/**
 * The discovery API's view of the Proxy cache. Health comes from status, so every replica
 * serves the same verdicts the leader wrote.
 */
export class CachedProxyCatalog implements ProxyCatalog {
  constructor(private readonly cache: () => CacheReader) {}

  list(): ProxyRecord[] {
    return this.cache()
      .list<Proxy>(PROXY_KIND)
      .filter((p) => !p.metadata.deletionTimestamp)
      .map(toRecord);
  }
}

export function toRecord(p: Proxy): ProxyRecord {
  const endpoint = proxyEndpoint(p);
  const healthy = p.status?.conditions?.find((c) => c.type === CONDITION_HEALTHY)?.status === 'True';
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
