import { Registry } from 'prom-client';
import { createDiscoveryApp, type DiscoveryAppOptions } from '../../discovery/app.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { TestCatalog, silentLogger } from '../book/fixtures.js';

describe('createDiscoveryApp configuration', () => {
  const base = (catalog = new TestCatalog()): DiscoveryAppOptions => ({
    catalog,
    leases: new MemoryLeaseStore({ catalog, logger: silentLogger }),
    logger: silentLogger,
    registry: new Registry(),
  });

  it.each<[Partial<DiscoveryAppOptions>, RegExp]>([
    [{ maxTTLSeconds: 0 }, /maxTTLSeconds must be a positive integer, got 0/],
    [
      { fairShare: { inFlight: 0, queuedPerToken: 8 } },
      /fairShare.inFlight must be a positive integer, got 0/,
    ],
    [
      { fairShare: { inFlight: 4, queuedPerToken: 0.5 } },
      /fairShare.queuedPerToken must be a positive integer, got 0.5/,
    ],
    [{ maxTTLSeconds: 1.5 }, /maxTTLSeconds must be a positive integer/],
    [
      { defaultTTLSeconds: 0 },
      /defaultTTLSeconds must be an integer from 1 to maxTTLSeconds \(3600\), got 0/,
    ],
    [{ maxTTLSeconds: 60, defaultTTLSeconds: 120 }, /defaultTTLSeconds .* \(60\), got 120/],
  ])('rejects %j with an error naming the option', (options, message) => {
    expect(() => createDiscoveryApp({ ...base(), ...options })).toThrow(message);
  });

  it('registers its metrics on the given registry only', async () => {
    const registry = new Registry();
    createDiscoveryApp({ ...base(), registry });
    expect(
      registry
        .getMetricsAsArray()
        .map((m) => m.name)
        .sort(),
    ).toEqual([
      // The book's own figures (leases_active, …) are not the app's: book-metrics.ts exports
      // them once per book, from the acting leader.
      'proxy_operator_discovery_book_wait_seconds',
      'proxy_operator_discovery_quota_total',
      'proxy_operator_discovery_throttled_total',
      'proxy_operator_lease_reports_total',
      'proxy_operator_lease_requests_total',
      'proxy_operator_lease_store_up',
      'proxy_operator_target_cooldowns_total',
    ]);
  });
});
