// The lease store contract. Promise-returning throughout so that a persistent (CRD- or
// Redis-backed) store can replace the in-memory one without touching the HTTP layer.
import type { ProxyRecord } from './catalog.js';

/** DI token for the LeaseStore implementation. */
export const LEASE_STORE = Symbol('LeaseStore');

export interface LeaseRequest {
  /** Attribute equality filter; empty matches every proxy. */
  selector: Record<string, string>;
  ttlSeconds: number;
  /** The site the client will crawl; absent means the global pool. Already normalized. */
  target?: string;
}

export interface Lease {
  id: string;
  proxyID: string;
  selector: Record<string, string>;
  target?: string;
  acquiredAt: Date;
  expiresAt: Date;
}

export type NoLeaseReason = 'no_match' | 'all_busy' | 'all_cooling_down';

export interface NoLease {
  reason: NoLeaseReason;
}

export type AcquireResult = { granted: true; lease: Lease } | { granted: false; reason: NoLeaseReason };

export type ReportResult = 'ok' | 'rate_limited' | 'banned';
export const REPORT_RESULTS: readonly ReportResult[] = ['ok', 'rate_limited', 'banned'];

export interface ReportOutcome {
  lease: Lease;
  /** The cooldown key the report applied to: a target, or undefined for the global pool. */
  target?: string;
  /** When the started cooldown ends; undefined when the report started none ('ok'). */
  cooldownUntil?: Date;
}

export interface LeaseStore {
  /**
   * Chooses a proxy among `candidates` (the current catalog) and leases it, atomically with
   * respect to every other acquire: no proxy ever exceeds its maxLeases.
   */
  acquire(request: LeaseRequest, candidates: readonly ProxyRecord[]): Promise<AcquireResult>;
  /** Ends a lease early. Idempotent: releasing an unknown or ended lease succeeds. */
  release(leaseID: string): Promise<void>;
  /**
   * Records the outcome of using a lease's proxy. `target` overrides the lease's own target.
   * Resolves undefined when the lease is unknown, expired or released.
   */
  report(leaseID: string, result: ReportResult, target?: string): Promise<ReportOutcome | undefined>;
  /** Live leases on one proxy. */
  activeCount(proxyID: string): Promise<number>;
  /** Live leases per proxy, for many proxies in one call (one round trip for a remote store). */
  activeCounts(proxyIDs: readonly string[]): Promise<Map<string, number>>;
  /** Live leases across all proxies (for the leases_active gauge). */
  activeTotal(): Promise<number>;
  /** A live lease, or undefined when unknown, expired or released. */
  get(leaseID: string): Promise<Lease | undefined>;
  /** Starts the background expiry loop. */
  start(): Promise<void>;
  /** Stops the background expiry loop. */
  stop(): Promise<void>;
}
