// The discovery API's Prometheus metrics, registered on the registry the caller owns.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaseStore } from './lease-store.js';

export type LeaseRequestOutcome = 'granted' | 'no_match';

export class DiscoveryMetrics {
  private readonly leaseRequests: Counter<'outcome'>;

  constructor(registry: Registry, leases: LeaseStore) {
    new Gauge({
      name: 'proxy_operator_leases_active',
      help: 'Leases currently held by clients.',
      registers: [registry],
      // Read at scrape time so expiries show up without any bookkeeping on our side.
      async collect() {
        this.set(await leases.activeTotal());
      },
    });
    this.leaseRequests = new Counter({
      name: 'proxy_operator_lease_requests_total',
      help: 'Lease requests by outcome; no_match counts every 409 (no_match, all_busy, all_cooling_down).',
      labelNames: ['outcome'],
      registers: [registry],
    });
    // Zero-initialized so rate() works before the first refusal.
    this.leaseRequests.inc({ outcome: 'granted' }, 0);
    this.leaseRequests.inc({ outcome: 'no_match' }, 0);
  }

  countLeaseRequest(outcome: LeaseRequestOutcome): void {
    this.leaseRequests.inc({ outcome });
  }
}
