// The discovery API's Prometheus metrics, registered on the registry the caller owns.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaseStore, NoLeaseReason, ReportResult } from '../book/lease-store.js';
import { REPORT_RESULTS } from '../book/lease-store.js';
import { StoreUnavailableError } from '../book/store-unavailable.js';

/** granted, a 409's reason, or store_unavailable: a 503 (the store could not be reached). */
export type LeaseRequestOutcome = 'granted' | NoLeaseReason | 'store_unavailable';
const OUTCOMES: readonly LeaseRequestOutcome[] = [
  'granted',
  'no_match',
  'all_busy',
  'all_cooling_down',
  'store_unavailable',
];

export class DiscoveryMetrics {
  private readonly leaseRequests: Counter<'outcome'>;
  private readonly reports: Counter<'result'>;
  private readonly throttled: Counter<'token'>;
  private readonly quotas: Counter<'token' | 'quota'>;
  // Children bound once: the hot path skips label hashing.
  private readonly byOutcome = new Map<LeaseRequestOutcome, { inc(): void }>();
  private readonly byResult = new Map<ReportResult, { inc(): void }>();

  constructor(registry: Registry, leases: LeaseStore) {
    // Each replica says whether it reaches the store (a replica that cannot answers 503). The
    // book's own totals are the book's, not the replica's: book-metrics.ts exports them once.
    new Gauge({
      name: 'proxy_operator_lease_store_up',
      help: 'Whether the lease store answered at the last scrape (1) or could not be reached (0: discovery answers 503 store_unavailable).',
      registers: [registry],
      async collect() {
        this.set(
          await leases.totals().then(
            () => 1,
            (err: unknown) => {
              if (err instanceof StoreUnavailableError) return 0;
              throw err;
            },
          ),
        );
      },
    });
    this.leaseRequests = new Counter({
      name: 'proxy_operator_lease_requests_total',
      help: 'Lease requests by outcome: granted, the 409 reason (no_match, all_busy, all_cooling_down), or store_unavailable (503).',
      labelNames: ['outcome'],
      registers: [registry],
    });
    this.reports = new Counter({
      name: 'proxy_operator_lease_reports_total',
      help: 'Reports on leases by result (ok, banned, rate_limited, unreachable).',
      labelNames: ['result'],
      registers: [registry],
    });
    // Labelled by token name: as many series as configured tokens (names, never tokens).
    this.throttled = new Counter({
      name: 'proxy_operator_discovery_throttled_total',
      help: 'Discovery requests refused with 429 because the token was over its rate limit, by token name.',
      labelNames: ['token'],
      registers: [registry],
    });
    // Token names are the SRE's (the tokens file), never a client's string: bounded, and kept.
    this.quotas = new Counter({
      name: 'proxy_operator_discovery_quota_total',
      help: 'Per-token quotas reached, by token name and quota: lease, cooldown, report (requests refused with 429 <quota>_quota), queue (429 book_queue_full: too many requests waiting for the book) and session (a session of its own ended to start another).',
      labelNames: ['token', 'quota'],
      registers: [registry],
    });
    // Zero-initialized so rate() works before the first of each.
    for (const outcome of OUTCOMES) {
      this.leaseRequests.inc({ outcome }, 0);
      this.byOutcome.set(outcome, this.leaseRequests.labels({ outcome }));
    }
    for (const result of REPORT_RESULTS) {
      this.reports.inc({ result }, 0);
      this.byResult.set(result, this.reports.labels({ result }));
    }
  }

  countLeaseRequest(outcome: LeaseRequestOutcome): void {
    this.byOutcome.get(outcome)!.inc();
  }

  countReport(result: ReportResult): void {
    this.byResult.get(result)!.inc();
  }

  countQuota(tokenName: string, quota: 'lease' | 'cooldown' | 'report' | 'session' | 'queue'): void {
    this.quotas.inc({ token: tokenName, quota });
  }

  countThrottled(tokenName: string): void {
    this.throttled.inc({ token: tokenName });
  }
}
