// The lease store contract. Promise-returning throughout so that a shared (CRD- or
// Redis-backed) store can replace the in-memory one without touching the HTTP layer. A store
// reads proxies from the ProxyCatalog it was built with.
import type { ProxyRecord } from './catalog.js';

export interface LeaseRequest {
  /** Attribute equality filter; empty matches every proxy. */
  selector: Record<string, string>;
  ttlSeconds: number;
  /** The site the client will crawl; absent means the global pool. Already normalized. */
  target?: string;
  /** Sticky-session key: leases in one session go to the same proxy while it stays leasable. */
  session?: string;
}

export interface Lease {
  id: string;
  proxyID: string;
  /** The proxy as it was when leased: what a lease on a since-deleted proxy still shows. */
  proxy: ProxyRecord;
  selector: Record<string, string>;
  target?: string;
  session?: string;
  ttlSeconds: number;
  acquiredAt: Date;
  expiresAt: Date;
}

export type NoLeaseReason = 'no_match' | 'all_busy' | 'all_cooling_down';

export interface SessionOutcome {
  key: string;
  /** True when the session was bound to another proxy that stopped being leasable. */
  moved: boolean;
}

export type AcquireResult =
  | { granted: true; lease: Lease; usage: ProxyUsage; session?: SessionOutcome }
  | { granted: false; reason: NoLeaseReason };

export interface RenewResult {
  lease: Lease;
  usage: ProxyUsage;
}

export type ReportResult = 'ok' | 'rate_limited' | 'banned';
export const REPORT_RESULTS: readonly ReportResult[] = ['ok', 'rate_limited', 'banned'];

export interface ReportOutcome {
  lease: Lease;
  /** The cooldown key the report applied to: a target, or undefined for the global pool. */
  target?: string;
  /** When the cooldown ends, if the report started or extended one ('ok' never does). */
  cooldownUntil?: Date;
}

/** Report counts by result. */
export interface OutcomeCounts {
  ok: number;
  banned: number;
  rate_limited: number;
}

/** Report counts over the store's sliding window. */
export interface OutcomeStats extends OutcomeCounts {
  windowSeconds: number;
}

/** What the store knows about one proxy's use. */
export interface ProxyUsage {
  activeLeases: number;
  stats: OutcomeStats;
}

/** Gauges and counters for the metrics endpoint. */
export interface StoreTotals {
  activeLeases: number;
  activeSessions: number;
  activeCooldowns: number;
  /** Sessions forgotten because the session cap was reached (monotonic). */
  sessionsEvicted: number;
  /** (proxy, target) cooldown entries forgotten at their caps (monotonic). */
  cooldownsEvicted: number;
}

export interface LeaseStore {
  /**
   * Chooses a proxy from the catalog and leases it, atomically with respect to every other
   * call: no proxy ever exceeds its maxLeases, and a session is bound to one proxy at a time.
   */
  acquire(request: LeaseRequest): Promise<AcquireResult>;
  /**
   * Extends a live lease to now + ttlSeconds (default: its original TTL); never shortens it.
   * Resolves undefined when the lease is unknown, expired or released.
   */
  renew(leaseID: string, ttlSeconds?: number): Promise<RenewResult | undefined>;
  /** Ends a lease early. Idempotent: releasing an unknown or ended lease succeeds. */
  release(leaseID: string): Promise<void>;
  /**
   * Records the outcome of using a lease's proxy. `target` overrides the lease's own target.
   * Resolves undefined when the lease is unknown, expired or released.
   */
  report(leaseID: string, result: ReportResult, target?: string): Promise<ReportOutcome | undefined>;
  /** Forgets a session's binding; its leases stay valid. Idempotent. */
  endSession(key: string): Promise<void>;
  /** Live leases and recent report counts, for many proxies in one call (one round trip). */
  usage(proxyIDs: readonly string[]): Promise<Map<string, ProxyUsage>>;
  /** A live lease, or undefined when unknown, expired or released. */
  get(leaseID: string): Promise<Lease | undefined>;
  totals(): Promise<StoreTotals>;
  /** Starts the background loop that frees memory. */
  start(): Promise<void>;
  /** Stops the background loop. */
  stop(): Promise<void>;
}
