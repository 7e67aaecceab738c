import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The framework's runtime metrics, registered on the Registry the application passes in. */
export class FrameworkMetrics {
  readonly reconciles: Counter<'kind' | 'cause' | 'result'>;
  readonly duration: Histogram<'kind' | 'cause'>;
  readonly queueDepth: Gauge<'kind'>;
  readonly retries: Counter<'kind'>;
  readonly watchRestarts: Counter<'kind' | 'reason'>;
  readonly leader: Gauge;
  readonly leaderElectionErrors: Counter<'reason'>;
  readonly trackedObjects: Gauge<'kind'>;
  readonly statusWrites: Counter<'kind'>;
  private readonly trackedSources = new Map<string, () => number>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.reconciles = new Counter({
      name: 'operator_framework_reconciles_total',
      help: 'Handler runs by kind, cause and result (success, requeue, temporary_error, permanent_error, error).',
      labelNames: ['kind', 'cause', 'result'],
      registers,
    });
    this.duration = new Histogram({
      name: 'operator_framework_reconcile_duration_seconds',
      help: 'Duration of one dispatch of an object to its handlers.',
      labelNames: ['kind', 'cause'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'operator_framework_queue_depth',
      help: 'Objects waiting in the work queue.',
      labelNames: ['kind'],
      registers,
    });
    this.retries = new Counter({
      name: 'operator_framework_retries_total',
      help: 'Objects re-queued after a failed or requeue-requesting handler.',
      labelNames: ['kind'],
      registers,
    });
    this.watchRestarts = new Counter({
      name: 'operator_framework_watch_restarts_total',
      help: 'Watch restarts by kind and reason (gone, error, watchdog).',
      labelNames: ['kind', 'reason'],
      registers,
    });
    this.statusWrites = new Counter({
      name: 'operator_framework_status_writes_total',
      help: 'Status subresource writes sent by handlers, by kind (patches that would change nothing are skipped, not counted).',
      labelNames: ['kind'],
      registers,
    });
    const sources = this.trackedSources;
    this.trackedObjects = new Gauge({
      name: 'operator_framework_tracked_objects',
      help: 'Objects a controller holds state for in memory (per-object memory, queue backoff, timers and daemons); returns to the number of live objects after deletions.',
      labelNames: ['kind'],
      registers,
      collect() {
        for (const [kind, count] of sources) this.set({ kind }, count());
      },
    });
    this.leader = new Gauge({
      name: 'operator_framework_is_leader',
      help: '1 while this replica holds the leader lease.',
      registers,
    });
    this.leaderElectionErrors = new Counter({
      name: 'operator_framework_leader_election_errors_total',
      help: 'Failed leader-lease acquire/renew attempts by reason (NamespaceNotFound, Forbidden, Unauthorized, Timeout, ApiError, Unreachable); another replica leading is no error.',
      labelNames: ['reason'],
      registers,
    });
  }

  /** Reports `count()` as the tracked objects of `kind`, read at each scrape. */
  track(kind: string, count: () => number): void {
    this.trackedSources.set(kind, count);
  }
}
