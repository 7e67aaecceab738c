// What the integration tells the server about its leases' successes, and their release. ok
// reports are batched: one per lease every okReportIntervalMs, all leases in one call (a crawl's
// calls to the API cost the crawler CPU: docs/benchmarks.md), and a lease's last ok rides on
// its release. Ban, rate-limit and unreachable reports go out at once, from session-leases.ts.
import { MAX_BATCH_REPORTS, type DiscoveryClient } from '../client.js';
import { DiscoveryApiError, isLeaseGone } from '../errors.js';
import type { DetachedTimers } from './detached-timers.js';
import type { LeaseLog, SessionLeasesStats, SharedLease, Track } from './shared-lease.js';

export interface LeaseReportsDeps {
  client: DiscoveryClient;
  log: LeaseLog;
  stats: SessionLeasesStats;
  timers: DetachedTimers;
  track: Track;
  okReportIntervalMs: number;
  /** Every live lease (the pending oks are theirs). */
  allLeases(): SharedLease[];
}

export class LeaseReports {
  /** False once the server refused `release` on a report (an operator older than this client). */
  private okRidesRelease = true;
  /** False once the server had no POST /v1/reports (an operator older than this client). */
  private okBatches = true;
  /** Set while the pending oks wait for their call (scheduleOks). */
  private okTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly deps: LeaseReportsDeps) {}

  /** A success on `shared`: counted, reported with the next batch. */
  succeeded(shared: SharedLease): void {
    shared.unreportedOk++;
    shared.carried = true;
    this.scheduleOks();
  }

  /** No more batches (close() releases every lease, each with its last ok). */
  stop(): void {
    this.closed = true;
    clearTimeout(this.okTimer);
    this.okTimer = undefined;
  }

  /**
   * Sends the pending ok of each lease now; undefined when none has one, so that a report
   * with nothing to wait for goes out at once (new leases must avoid the proxy from then on).
   */
  flushOk(leases: readonly SharedLease[]): Promise<unknown> | undefined {
    const pending = leases.filter((shared) => shared.unreportedOk > 0);
    return pending.length === 0 ? undefined : this.reportOks(pending);
  }

  async release(shared: SharedLease, why: string): Promise<void> {
    const { client, log, stats } = this.deps;
    if (shared.unreportedOk > 0 && this.okRidesRelease) {
      const ended = await this.reportOkAndRelease(shared);
      if (ended) {
        stats.released++;
        log.debug('released', { leaseID: shared.lease.leaseID, why });
        return;
      }
    }
    await this.reportOk(shared);
    try {
      await client.release(shared.lease.leaseID);
      stats.released++;
      log.debug('released', { leaseID: shared.lease.leaseID, why });
    } catch (err) {
      log.warning('could not release a lease (it expires by itself)', {
        leaseID: shared.lease.leaseID,
        error: String(err),
      });
    }
  }

  private async reportOk(shared: SharedLease): Promise<void> {
    if (shared.unreportedOk === 0) return;
    shared.unreportedOk = 0;
    try {
      await this.deps.client.report(shared.lease.leaseID, 'ok', shared.host ? { target: shared.host } : {});
      this.deps.stats.okReports++;
    } catch (err) {
      if (!isLeaseGone(err)) this.deps.log.debug('ok report failed', { error: String(err) });
    }
  }

  /**
   * The pending oks of every lease go out together once per okReportIntervalMs, counted from
   * the first success not yet reported: one call for the whole crawl's oks instead of one per
   * lease (a crawl's calls to the API cost the crawler CPU: docs/benchmarks.md).
   */
  private scheduleOks(): void {
    if (this.okTimer !== undefined || this.closed) return;
    this.okTimer = this.deps.timers.schedule(() => {
      this.okTimer = undefined;
      this.deps.track(this.sendPendingOks());
    }, this.deps.okReportIntervalMs);
  }

  private async sendPendingOks(): Promise<void> {
    const pending = this.deps.allLeases().filter((shared) => shared.unreportedOk > 0);
    for (let i = 0; i < pending.length; i += MAX_BATCH_REPORTS) {
      await this.reportOks(pending.slice(i, i + MAX_BATCH_REPORTS));
    }
  }

  /**
   * One ok per lease, in one call (POST /v1/reports). Against an operator without that route,
   * one call per lease from then on. A failed call drops the oks, as a failed ok report's always was.
   */
  private async reportOks(leases: readonly SharedLease[]): Promise<void> {
    if (leases.length === 1 || !this.okBatches) {
      await Promise.all(leases.map((shared) => this.reportOk(shared)));
      return;
    }
    const counts = leases.map((shared) => shared.unreportedOk);
    for (const shared of leases) shared.unreportedOk = 0;
    try {
      const { items } = await this.deps.client.reportMany(
        leases.map((shared) => ({
          leaseID: shared.lease.leaseID,
          result: 'ok' as const,
          ...(shared.host ? { target: shared.host } : {}),
        })),
      );
      this.deps.stats.okReports += items.filter((item) => !('error' in item)).length;
    } catch (err) {
      if (!isMissingRoute(err)) {
        this.deps.log.debug('ok reports failed', { error: String(err) });
        return;
      }
      this.okBatches = false;
      this.deps.log.warning('the discovery API predates POST /v1/reports: ok reports go one per lease');
      leases.forEach((shared, i) => (shared.unreportedOk += counts[i]!));
      await Promise.all(leases.map((shared) => this.reportOk(shared)));
    }
  }

  /**
   * The pending ok and the release in one call (a crawl's calls to the API cost the crawler
   * CPU: docs/benchmarks.md). True when the lease has ended, or the server no longer knew it;
   * false when the release is still to be sent: a server that predates `release` refused the
   * field (its pending ok is kept, and every later release goes in two calls), or the call
   * failed (the ok is dropped, as a failed ok report's always was).
   */
  private async reportOkAndRelease(shared: SharedLease): Promise<boolean> {
    const pending = shared.unreportedOk;
    shared.unreportedOk = 0;
    try {
      await this.deps.client.report(shared.lease.leaseID, 'ok', {
        ...(shared.host ? { target: shared.host } : {}),
        release: true,
      });
      this.deps.stats.okReports++;
      return true;
    } catch (err) {
      if (isLeaseGone(err)) return true;
      if (refusedField(err, 'release')) {
        this.okRidesRelease = false;
        shared.unreportedOk = pending;
        this.deps.log.warning('the discovery API predates release on report: releasing in two calls');
      } else {
        this.deps.log.debug('ok report with release failed', { error: String(err) });
      }
      return false;
    }
  }
}

/** The server has no such route (it predates it). */
function isMissingRoute(err: unknown): boolean {
  return err instanceof DiscoveryApiError && err.status === 404 && err.code === 'not_found';
}

/** The server refused a request field it does not know (it predates the field). */
/** A 400 of a server older than this client: it does not know `field` of the body. */
export function refusedField(err: unknown, field: string): boolean {
  return (
    err instanceof DiscoveryApiError &&
    err.code === 'invalid_request' &&
    err.serverMessage.startsWith('unknown field(s)') &&
    err.serverMessage.includes(`'${field}'`)
  );
}
