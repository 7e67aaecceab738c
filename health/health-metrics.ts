import { Counter, Histogram, type Registry } from 'prom-client';

export const DURATION_METRIC = 'proxy_operator_healthcheck_duration_seconds';
export const FAILURES_METRIC = 'proxy_operator_healthcheck_failures_total';
export const RECHECKS_METRIC = 'proxy_operator_healthcheck_rechecks_total';
export const EXIT_IP_FAILURES_METRIC = 'proxy_operator_exit_ip_read_failures_total';

/**
 * The engine's Prometheus series, registered on the caller's registry. Failures carry both
 * `proxy` and `reason`: "which proxy" and "why" are the two questions an operator asks, and
 * the reason set is small and fixed, so the cardinality stays proxies x a few.
 */
export class HealthMetrics {
  private readonly duration: Histogram<'proxy'>;
  private readonly failures: Counter<'proxy' | 'reason'>;
  private readonly reasonsSeen = new Map<string, Set<string>>();
  private readonly rechecks: Counter;
  /** By reason only: which proxy is in the warning log; an echo service down fails them all alike. */
  private readonly exitIPFailures: Counter<'reason'>;

  constructor(registry: Registry) {
    this.duration = new Histogram({
      name: DURATION_METRIC,
      help: 'Duration of health probes sent through each proxy, successful or not.',
      labelNames: ['proxy'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    this.failures = new Counter({
      name: FAILURES_METRIC,
      help: 'Failed health probes per proxy and failure reason.',
      labelNames: ['proxy', 'reason'],
      registers: [registry],
    });
    this.rechecks = new Counter({
      name: RECHECKS_METRIC,
      help: 'Out-of-schedule rechecks started because a client reported a proxy unreachable.',
      registers: [registry],
    });
    this.exitIPFailures = new Counter({
      name: EXIT_IP_FAILURES_METRIC,
      help: 'Exit IP reads (spec.healthCheck.exitIPURL) that told nothing, by reason (RequestFailed, UnexpectedStatus, NotAnIP, and refused: NotPublic, Forgeable); the last known exit IP stays.',
      labelNames: ['reason'],
      registers: [registry],
    });
  }

  countExitIPFailure(reason: string): void {
    this.exitIPFailures.inc({ reason });
  }

  countRecheck(): void {
    this.rechecks.inc();
  }

  observe(proxy: string, durationMillis: number, failureReason: string | undefined): void {
    this.duration.observe({ proxy }, durationMillis / 1000);
    if (failureReason === undefined) return;
    this.failures.inc({ proxy, reason: failureReason });
    let seen = this.reasonsSeen.get(proxy);
    if (!seen) this.reasonsSeen.set(proxy, (seen = new Set()));
    seen.add(failureReason);
  }

  /** Drops a removed proxy's series so deleted proxies do not linger in scrapes. */
  forget(proxy: string): void {
    this.duration.remove({ proxy });
    for (const reason of this.reasonsSeen.get(proxy) ?? []) this.failures.remove({ proxy, reason });
    this.reasonsSeen.delete(proxy);
  }
}
