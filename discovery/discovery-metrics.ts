// The discovery API's Prometheus metrics, registered on the registry the caller owns.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaseStore, NoLeaseReason, ReportResult, StoreTotals } from './lease-store.js';
import { REPORT_RESULTS } from './lease-store.js';
import { StoreUnavailableError } from './store-unavailable.js';

export type LeaseRequestOutcome = 'granted' | NoLeaseReason;
const OUTCOMES: readonly LeaseRequestOutcome[] = ['granted', 'no_match', 'all_busy', 'all_cooling_down'];

export class DiscoveryMetrics {
  private readonly leaseRequests: Counter<'outcome'>;
  private readonly reports: Counter<'result'>;
  private readonly throttled: Counter<'token'>;
  private readonly quotas: Counter<'token' | 'quota'>;
  // Children bound once: the hot path skips label hashing.
  private readonly byOutcome = new Map<LeaseRequestOutcome, { inc(): void }>();
  private readonly byResult = new Map<ReportResult, { inc(): void }>();

  constructor(registry: Registry, leases: LeaseStore) {
    // One read of the store per scrape, shared by every gauge; a store that cannot be reached
    // (Redis down) leaves the gauges at their last values and says so in lease_store_up,
    // instead of failing the whole scrape.
    let scrape: Promise<StoreTotals | undefined> | undefined;
    const readTotals = (): Promise<StoreTotals | undefined> => {
      scrape ??= leases.totals().then(
        (t) => t,
        (err: unknown) => {
          if (err instanceof StoreUnavailableError) return undefined;
          throw err;
        },
      );
      // Shared by the gauges of one scrape (they collect at once); the next scrape reads again.
      const current = scrape;
      current
        .finally(() => {
          if (scrape === current) scrape = undefined;
        })
        .catch(() => undefined);
      return current;
    };
    new Gauge({
      name: 'proxy_operator_lease_store_up',
      help: 'Whether the lease store answered at the last scrape (1) or could not be reached (0: discovery answers 503 store_unavailable).',
      registers: [registry],
      async collect() {
        this.set((await readTotals()) === undefined ? 0 : 1);
      },
    });
    const gauge = (name: string, help: string, read: (totals: StoreTotals) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        async collect() {
          const t = await readTotals();
          if (t !== undefined) this.set(read(t));
        },
      });
    gauge('proxy_operator_leases_active', 'Leases currently held by clients.', (t) => t.activeLeases);
    gauge(
      'proxy_operator_sessions_active',
      'Sticky sessions currently bound to a proxy.',
      (t) => t.activeSessions,
    );
    gauge(
      'proxy_operator_cooldowns_active',
      'Running cooldowns: (proxy, target) pairs benched after banned/rate_limited reports.',
      (t) => t.activeCooldowns,
    );
    gauge(
      'proxy_operator_suspect_proxies',
      'Proxies held out of every lease because an unreachable report awaits a probe.',
      (t) => t.suspectProxies,
    );
    // The store counts these itself (it may be shared); the counters follow its totals.
    const suspicions = { raised: 0, expired: 0 };
    new Counter({
      name: 'proxy_operator_suspicions_total',
      help:
        'Suspicions raised by unreachable reports (raised), and those no probe answered within --suspicion-timeout ' +
        '(expired: nothing is re-probing).',
      labelNames: ['outcome'],
      registers: [registry],
      async collect() {
        const totals = await readTotals();
        if (totals === undefined) return;
        this.inc({ outcome: 'raised' }, Math.max(0, totals.suspicionsRaised - suspicions.raised));
        this.inc({ outcome: 'expired' }, Math.max(0, totals.suspicionsExpired - suspicions.expired));
        suspicions.raised = Math.max(suspicions.raised, totals.suspicionsRaised);
        suspicions.expired = Math.max(suspicions.expired, totals.suspicionsExpired);
      },
    });
    const counted = { session: 0, cooldown: 0 };
    new Counter({
      name: 'proxy_operator_discovery_evictions_total',
      help: 'Sessions and (proxy, target) cooldown entries forgotten because their cap was reached.',
      labelNames: ['kind'],
      registers: [registry],
      async collect() {
        const totals = await readTotals();
        if (totals === undefined) return;
        this.inc({ kind: 'session' }, Math.max(0, totals.sessionsEvicted - counted.session));
        this.inc({ kind: 'cooldown' }, Math.max(0, totals.cooldownsEvicted - counted.cooldown));
        counted.session = Math.max(counted.session, totals.sessionsEvicted);
        counted.cooldown = Math.max(counted.cooldown, totals.cooldownsEvicted);
      },
    });
    this.leaseRequests = new Counter({
      name: 'proxy_operator_lease_requests_total',
      help: 'Lease requests by outcome: granted, or the 409 reason (no_match, all_busy, all_cooling_down).',
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
      help: 'Per-token quotas reached, by token name and quota: lease, cooldown, report (requests refused with 429 <quota>_quota) and session (a session of its own ended to start another).',
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

  countQuota(tokenName: string, quota: 'lease' | 'cooldown' | 'report' | 'session'): void {
    this.quotas.inc({ token: tokenName, quota });
  }

  countThrottled(tokenName: string): void {
    this.throttled.inc({ token: tokenName });
  }
}
