import { Gauge, type Registry } from 'prom-client';
import type { CacheReader } from '../framework/index.js';
import { PROXY_PHASES, type Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';

/**
 * proxy_operator_proxies{phase}: computed from the cache at scrape time, so never stale, by
 * the acting leader only (`exported`): every replica's cache holds the same fleet, so a sum
 * across replicas would count each proxy once per replica.
 */
export function registerProxyGauge(
  registry: Registry,
  cache: () => CacheReader,
  exported: () => boolean,
): Gauge<'phase'> {
  return new Gauge({
    name: 'proxy_operator_proxies',
    help: 'Proxies by phase (exported by the acting leader only).',
    labelNames: ['phase'],
    registers: [registry],
    collect() {
      if (!exported()) return this.reset();
      const counts = new Map<string, number>(PROXY_PHASES.map((p) => [p, 0]));
      for (const p of cache().list<Proxy>(PROXY_KIND)) {
        const phase = p.status?.phase ?? 'Pending';
        counts.set(phase, (counts.get(phase) ?? 0) + 1);
      }
      for (const [phase, n] of counts) this.set({ phase }, n);
    },
  });
}
