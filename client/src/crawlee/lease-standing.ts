// Whether the server still stands behind a leased proxy, learned without the crawler's error
// path: a lease that sent a request and heard nothing back for `checkMs` (a dead proxy fails
// its connections, and only an errorHandler would say so) is renewed at once, and the renew
// answer carries the proxy's standing (healthy, held, phase): an unhealthy, suspect, draining
// or deleted proxy's leases go (SessionLeases.dropUnfit). Meanwhile no new session joins a
// silent lease. A lease that answers costs nothing: no call, no timer per request.
import type { DetachedTimers } from './detached-timers.js';
import type { SharedLease, Track } from './shared-lease.js';

export interface LeaseStandingDeps {
  /** Silence before a lease is checked, and how often the check runs while a request waits. */
  checkMs: number;
  timers: DetachedTimers;
  track: Track;
  now(): number;
  isClosed(): boolean;
  /** Every live lease. */
  leases(): SharedLease[];
  /** Renews the lease now, dropping it (and every lease on its proxy) when the server says unfit. */
  check(shared: SharedLease): Promise<void>;
}

export class LeaseStanding {
  private timer?: NodeJS.Timeout;
  /** Leases whose standing is being checked now (one check each at a time). */
  private readonly checking = new Set<SharedLease>();
  /**
   * When each silent lease was last checked: again only after twice checkMs (the server may
   * not know yet; a silent lease stays out of new sessions' way until it answers).
   */
  private readonly checkedAt = new WeakMap<SharedLease, number>();

  constructor(private readonly deps: LeaseStandingDeps) {
    if (!(deps.checkMs > 0)) throw new TypeError(`standingCheckMs must be > 0, got ${deps.checkMs}`);
  }

  /** A request goes out through `shared`: it waits for an answer. */
  sent(shared: SharedLease): void {
    if (shared.unansweredSince === 0) shared.unansweredSince = this.deps.now();
    this.arm();
  }

  /** Whether a new session may join `shared`: not while it has been silent for checkMs. */
  joinable(shared: SharedLease, now: number): boolean {
    return shared.unansweredSince === 0 || now - shared.unansweredSince < this.deps.checkMs;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer !== undefined || this.deps.isClosed()) return;
    this.timer = this.deps.timers.schedule(() => {
      this.timer = undefined;
      this.run();
    }, this.deps.checkMs);
  }

  private run(): void {
    if (this.deps.isClosed()) return;
    const now = this.deps.now();
    let waiting = false;
    for (const shared of this.deps.leases()) {
      if (shared.unansweredSince === 0) continue;
      waiting = true;
      if (now - shared.unansweredSince < this.deps.checkMs || this.checking.has(shared)) continue;
      if (now - (this.checkedAt.get(shared) ?? 0) < 2 * this.deps.checkMs) continue;
      this.checking.add(shared);
      this.checkedAt.set(shared, now);
      this.deps.track(this.deps.check(shared).finally(() => this.checking.delete(shared)));
    }
    if (waiting) this.arm();
  }
}
