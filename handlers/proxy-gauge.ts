import { Gauge, type Registry } from 'prom-client';
import type { CacheReader } from '../framework/index.js';
import { PROXY_PHASES, type Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';

/** proxy_operator_proxies{phase}: computed from the cache at scrape time, so never stale. */
export function registerProxyGauge(registry: Registry, cache: () => CacheReader): Gauge<'phase'> {
  return new Gauge({
    name: 'proxy_operator_proxies',
    help: 'Proxies by phase.',
    labelNames: ['phase'],
    registers: [registry],
    collect() {
      const counts = new Map<string, number>(PROXY_PHASES.map((p) => [p, 0]));
      for (const p of cache().list<Proxy>(PROXY_KIND)) {
        const phase = p.status?.phase ?? 'Pending';
        counts.set(phase, (counts.get(phase) ?? 0) + 1);
      }
      for (const [phase, n] of counts) this.set({ phase }, n);
    },
  });
}
