// What this client knows against a proxy: banned for a host until a time, or reported
// unreachable. Bans are kept until they end and dead proxies until a lease says a probe passed,
// and both maps drop their ended entries as they go (sweep), so a long crawl's memory stays
// bounded by the proxies and hosts that are banned or dead now, not by every one ever seen.
import { banKey } from './shared-lease.js';

/** Used when a ban report fails: the proxy stays away from the host locally this long. */
export const FALLBACK_BAN_MS = 15 * 60_000;
/** Used when an unreachable report fails: the proxy stays away locally this long. */
export const FALLBACK_DEAD_MS = 60_000;

/** What the client knows about a proxy it reported unreachable (or the server called unfit). */
export interface DeadProxy {
  /** Until when to avoid it when the report did not reach the server. */
  until: number;
  /** The server took the report: a lease on this proxy from now on means a probe passed since. */
  acknowledged: boolean;
}

export class ProxyVerdicts {
  /** `proxyID \0 host` → ms until which that proxy must not be used for that host. */
  private readonly bans = new Map<string, number>();
  /** Proxies reported unreachable, by id. */
  private readonly dead = new Map<string, DeadProxy>();
  private nextSweep = 0;

  constructor(private readonly now: () => number) {}

  /** Entries held (for the bound's test). */
  get size(): number {
    return this.bans.size + this.dead.size;
  }

  /** Nothing banned or dead: the per-request checks can be skipped. */
  get empty(): boolean {
    return this.bans.size === 0 && this.dead.size === 0;
  }

  ban(proxyID: string, host: string | undefined, until: number): void {
    this.sweep();
    this.bans.set(banKey(proxyID, host), until);
  }

  isBanned(proxyID: string, host: string | undefined): boolean {
    return this.isBannedKey(banKey(proxyID, host));
  }

  isBannedKey(key: string): boolean {
    if (this.bans.size === 0) return false;
    const until = this.bans.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.bans.delete(key);
    return false;
  }

  /** Marks a proxy dead (not yet acknowledged by the server); the record is returned to acknowledge. */
  markDead(proxyID: string): DeadProxy {
    this.sweep();
    const dead: DeadProxy = { until: this.now() + FALLBACK_DEAD_MS, acknowledged: false };
    this.dead.set(proxyID, dead);
    return dead;
  }

  /** Reported unreachable and not yet leased back by the server. */
  isDead(proxyID: string): boolean {
    if (this.dead.size === 0) return false;
    const dead = this.dead.get(proxyID);
    if (dead === undefined) return false;
    if (dead.acknowledged || dead.until > this.now()) return true;
    this.dead.delete(proxyID);
    return false;
  }

  /** Why a lease the server just granted must not be used: our own report it has not heard. */
  localRefusal(proxyID: string, host: string | undefined): 'banned' | 'unreachable' | undefined {
    if (this.isBanned(proxyID, host)) return 'banned';
    const dead = this.dead.get(proxyID);
    if (dead === undefined) return undefined;
    // The server heard us and leases it again: a probe passed since. Believe the server.
    if (dead.acknowledged || dead.until <= this.now()) {
      this.dead.delete(proxyID);
      return undefined;
    }
    return 'unreachable';
  }

  /**
   * Drops ended bans and expired unacknowledged deaths, at most once a second: an acknowledged
   * death stays until the server leases the proxy again (localRefusal) or FALLBACK_BAN_MS pass.
   */
  private sweep(): void {
    const now = this.now();
    if (now < this.nextSweep) return;
    this.nextSweep = now + 1_000;
    for (const [key, until] of this.bans) if (until <= now) this.bans.delete(key);
    for (const [id, dead] of this.dead) {
      if (dead.acknowledged ? dead.until + FALLBACK_BAN_MS <= now : dead.until <= now) this.dead.delete(id);
    }
  }
}
