// Per-token quotas (issue 48): what one token may hold and write in the shared book, so that
// one team cannot take every slot, evict another team's sessions or fill the cooldown cap.
// The lease and cooldown quotas are counts of what the book holds, so the book judges them
// (LeaseRequest.leaseQuota, ReportDetails.cooldownQuota: the Redis store in the scripts that
// grant and report, atomically, for every replica and both doors; the memory store in
// owner-holdings.ts). The session quota and the report rate are kept by each process
// (TenantLedger; behind N Redis replicas a token can reach N times each: docs/security.md).
// The decisions are pure; TenantLedger keeps, per token, the sessions it made through this
// process, and the leases and cooldowns it made here (what attributes its reports and targets).

export interface TenantQuotaLimits {
  /** Live leases one token may hold (`lease_quota` beyond it). */
  leases: number;
  /** Live sticky sessions one token may keep; a new one beyond it ends its own least recently used. */
  sessions: number;
  /** (proxy, target) cooldowns one token's reports may keep running (`cooldown_quota` beyond it). */
  cooldowns: number;
  /** Reports (batch items count one each) one token may send per second (`report_quota` beyond it). */
  reportsPerSecond: number;
}

export const DEFAULT_TENANT_QUOTAS: TenantQuotaLimits = Object.freeze({
  leases: 1_000,
  sessions: 10_000,
  cooldowns: 1_000,
  reportsPerSecond: 500,
});

/** The codes a token at one of its quotas is answered with (all 429, with Retry-After). */
export type QuotaCode = 'lease_quota' | 'cooldown_quota' | 'report_quota';

export function checkQuotaLimits(limits: TenantQuotaLimits): void {
  for (const key of ['leases', 'sessions', 'cooldowns'] as const) {
    if (!(Number.isInteger(limits[key]) && limits[key] >= 1))
      throw new Error(`quotas.${key} must be an integer >= 1, got ${limits[key]}`);
  }
  if (!(Number.isFinite(limits.reportsPerSecond) && limits.reportsPerSecond > 0))
    throw new Error(`quotas.reportsPerSecond must be a positive number, got ${limits.reportsPerSecond}`);
}

/** A new lease for a token holding `held` live leases. */
export function leaseVerdict(held: number, limit: number): 'allow' | 'lease_quota' {
  return held < limit ? 'allow' : 'lease_quota';
}

/**
 * A lease in session `known` (already one of the token's live sessions) or a new one, for a
 * token keeping `live` sessions: a new session at the quota ends the token's own least
 * recently used one first; never another token's, and never refused (a session is a hint).
 */
export function sessionVerdict(known: boolean, live: number, limit: number): 'keep' | 'evict_own_oldest' {
  return known || live < limit ? 'keep' : 'evict_own_oldest';
}

/**
 * A banned/rate_limited report on a (proxy, target) pair: one the token already keeps
 * running extends it; a new pair at the quota is refused. Its own running cooldowns are not
 * evicted: a cooldown protects every team, and lifting one early would hand a banned proxy
 * back to all of them.
 */
export function cooldownVerdict(known: boolean, running: number, limit: number): 'allow' | 'cooldown_quota' {
  return known || running < limit ? 'allow' : 'cooldown_quota';
}

/** What one token made through this process. Maps in insertion (= age or use) order. */
interface Holdings {
  /** session key -> last use (ms), least recently used first. */
  sessions: Map<string, number>;
  /** proxyID \0 target -> cooldown end (ms). */
  cooldowns: Map<string, number>;
}

export class TenantLedger {
  private readonly owners = new Map<string, Holdings>();

  constructor(
    readonly limits: TenantQuotaLimits,
    private readonly sessionIdleMillis: number,
  ) {
    checkQuotaLimits(limits);
  }

  /**
   * Records a lease in session `key` now; returns the token's own session to end first when
   * a new one would pass the quota.
   */
  useSession(owner: string, key: string, now: number): string | undefined {
    const { sessions } = this.of(owner);
    const known = sessions.delete(key);
    let evict: string | undefined;
    if (!known && sessions.size >= this.limits.sessions) {
      for (const [k, used] of sessions) {
        if (used + this.sessionIdleMillis > now) break;
        sessions.delete(k);
      }
      if (sessionVerdict(false, sessions.size, this.limits.sessions) === 'evict_own_oldest') {
        evict = sessions.keys().next().value!;
        sessions.delete(evict);
      }
    }
    sessions.set(key, now);
    return evict;
  }

  sessionEnded(owner: string, key: string): void {
    this.of(owner).sessions.delete(key);
  }

  cooldownRecorded(owner: string, proxyID: string, target: string, until: number): void {
    const { cooldowns } = this.of(owner);
    const pair = pairKey(proxyID, target);
    cooldowns.set(pair, Math.max(until, cooldowns.get(pair) ?? 0));
  }

  /** Whether this token's reports started or extended the pair's cooldown (its own target). */
  reported(owner: string, proxyID: string, target: string): boolean {
    return this.owners.get(owner)?.cooldowns.has(pairKey(proxyID, target)) ?? false;
  }

  /** Forgets tokens with nothing live (a revoked token's leftovers); the sweep's work. */
  sweep(now: number): void {
    for (const [owner, h] of this.owners) {
      for (const [k, used] of h.sessions) if (used + this.sessionIdleMillis <= now) h.sessions.delete(k);
      for (const [k, until] of h.cooldowns) if (until <= now) h.cooldowns.delete(k);
      if (h.sessions.size + h.cooldowns.size === 0) this.owners.delete(owner);
    }
  }

  private of(owner: string): Holdings {
    let h = this.owners.get(owner);
    if (h === undefined) {
      h = { sessions: new Map(), cooldowns: new Map() };
      this.owners.set(owner, h);
    }
    return h;
  }
}

function pairKey(proxyID: string, target: string): string {
  return `${proxyID}\u0000${target}`;
}
