// A lease's renewal: due when a third of its TTL is left, sent only if the lease carried a
// request since the last one (an idle lease is released instead: the session leases again on
// its next request).
import type { DiscoveryClient } from '../client.js';
import { isLeaseGone } from '../errors.js';
import type { Lease } from '../types.js';
import type { DetachedTimers } from './detached-timers.js';
import {
  unfit,
  type LeaseLog,
  type SessionLeasesStats,
  type SharedLease,
  type Track,
} from './shared-lease.js';

export interface LeaseRenewalDeps {
  client: DiscoveryClient;
  ttlSeconds: number;
  timers: DetachedTimers;
  stats: SessionLeasesStats;
  log: LeaseLog;
  track: Track;
  now(): number;
  /** Forgets the lease locally (no server call). */
  forget(shared: SharedLease): void;
  /** Releases it on the server (with its pending ok). */
  release(shared: SharedLease, why: string): Promise<void>;
  /** The server's answer says the lease's proxy is unfit (see unfit): drop every lease on it. */
  dropUnfit(shared: SharedLease): void;
}

export class LeaseRenewal {
  constructor(private readonly deps: LeaseRenewalDeps) {}

  /** When a lease ends, by the server's clock as we read it, and the TTL it was granted. */
  expiry(lease: Lease): { expiresAt: number; ttlMs: number } {
    const expiresAt = Date.parse(lease.expiresAt);
    return { expiresAt, ttlMs: Math.max(1, expiresAt - this.deps.now()) };
  }

  /** Renews when a third of the TTL is left, if the lease was used since; otherwise lets it go. */
  schedule(shared: SharedLease, delayMs?: number): void {
    clearTimeout(shared.timer);
    const due = delayMs ?? renewalDelayMs(shared.expiresAt, shared.ttlMs, this.deps.now());
    shared.timer = this.deps.timers.schedule(() => this.deps.track(this.renewOrLetGo(shared)), due);
  }

  /**
   * Renews now to learn the proxy's standing (a lease silent a while: see SessionLeases's
   * standing check); the usual schedule follows.
   */
  checkNow(shared: SharedLease): Promise<void> {
    clearTimeout(shared.timer);
    return this.renewOrLetGo(shared, true);
  }

  private async renewOrLetGo(shared: SharedLease, check = false): Promise<void> {
    const { client, stats, log } = this.deps;
    if (!shared.live) return;
    if (!shared.usedSinceRenewal && !check) {
      this.deps.forget(shared);
      await this.deps.release(shared, 'idle');
      return;
    }
    try {
      const lease = await client.renew(shared.lease.leaseID, { ttlSeconds: this.deps.ttlSeconds });
      if (!shared.live) return;
      shared.lease = lease;
      Object.assign(shared, this.expiry(lease));
      shared.usedSinceRenewal = false;
      stats.renewed++;
      if (unfit(lease.proxy)) {
        this.deps.dropUnfit(shared);
        return;
      }
      this.schedule(shared);
    } catch (err) {
      if (!shared.live) return;
      if (isLeaseGone(err)) {
        // Expired or dropped by a restarted operator: the next request leases again.
        this.deps.forget(shared);
        log.debug('lease gone on renewal', { leaseID: shared.lease.leaseID });
        return;
      }
      const left = shared.expiresAt - this.deps.now();
      log.warning('lease renewal failed; retrying', { leaseID: shared.lease.leaseID, error: String(err) });
      if (left > 0) this.schedule(shared, Math.min(1_000, left / 2));
      else this.deps.forget(shared);
    }
  }
}

/** How long until a lease granted for `ttlMs` and ending at `expiresAt` is due for renewal. */
export function renewalDelayMs(expiresAt: number, ttlMs: number, now: number): number {
  return Math.max(0, expiresAt - ttlMs / 3 - now);
}
