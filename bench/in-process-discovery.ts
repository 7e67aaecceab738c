// The real discovery API (the operator's own app and server) over a fixed fleet, in this
// process, its book in memory: for the benches that exercise the client without a control
// plane (the per-request path, the crawl's warm-up).
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../discovery/app.js';
import type { ProxyRecord } from '../book/catalog.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';

export interface InProcessDiscovery {
  /** http://127.0.0.1:PORT */
  url: string;
  stop(): Promise<void>;
}

export async function startInProcessDiscovery(fleet: readonly ProxyRecord[]): Promise<InProcessDiscovery> {
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll([...fleet]);
  const store = new MemoryLeaseStore({ catalog, logger });
  await store.start();
  const app = createDiscoveryApp({ catalog, leases: store, logger, registry: new Registry() });
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
  await server.start();
  return {
    url: `http://127.0.0.1:${server.port}`,
    stop: async () => {
      await server.stop();
      await store.stop();
    },
  };
}

/** A healthy, leasable record for each proxy URL (ids `namespace/proxy-i`). */
export function readyFleet(urls: readonly string[], namespace: string, maxLeases = 5): ProxyRecord[] {
  return urls.map((url, i) => {
    const { hostname, port } = new URL(url);
    return {
      id: `${namespace}/proxy-${i}`,
      ip: hostname,
      port: Number(port),
      attributes: {},
      phase: 'Ready',
      healthy: true,
      latencyMillis: 20,
      maxLeases,
    };
  });
}
