// The in-memory LeaseStore. Every mutation is synchronous inside its async method, so the
// event loop serializes acquires: two requests can never both take a proxy's last slot.
// Keep it that way — an `await` between selection and insertion would break the cap.
// Prototype limitation (accepted by the spec): a restart drops all leases and cooldowns.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ProxyRecord } from './catalog.js';
import { selectProxy } from './lease-selection.js';
import type {
  AcquireResult,
  Lease,
  LeaseRequest,
  LeaseStore,
  ReportOutcome,
  ReportResult,
} from './lease-store.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export const DEFAULT_COOLDOWN_SECONDS = 15 * 60;
export const DEFAULT_SWEEP_INTERVAL_MS = 1000;

export interface MemoryLeaseStoreOptions {
  logger: Logger;
  clock?: Clock;
  /** How long a banned|rate_limited report keeps a proxy away from its target. */
  cooldownSeconds?: number;
  /** How often the background loop drops expired leases and cooldowns. */
  sweepIntervalMs?: number;
  newID?: () => string;
}

/** Cooldown key of the global pool: leases and reports that name no target. */
const GLOBAL_POOL = '';

export class MemoryLeaseStore implements LeaseStore {
  private readonly leases = new Map<string, Lease>();
  private readonly leasesByProxy = new Map<string, Set<string>>();
  /** proxyID → (target or GLOBAL_POOL → cooldown end in ms). */
  private readonly cooldowns = new Map<string, Map<string, number>>();
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly cooldownMillis: number;
  private readonly sweepIntervalMs: number;
  private readonly newID: () => string;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryLeaseStoreOptions) {
    const cooldownSeconds = options.cooldownSeconds ?? DEFAULT_COOLDOWN_SECONDS;
    if (!Number.isFinite(cooldownSeconds) || cooldownSeconds < 0) {
      throw new Error(`cooldownSeconds must be a non-negative number, got ${cooldownSeconds}`);
    }
    const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (!Number.isFinite(sweepIntervalMs) || sweepIntervalMs <= 0) {
      throw new Error(`sweepIntervalMs must be a positive number, got ${sweepIntervalMs}`);
    }
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.cooldownMillis = cooldownSeconds * 1000;
    this.sweepIntervalMs = sweepIntervalMs;
    this.newID = options.newID ?? randomUUID;
  }

  async acquire(request: LeaseRequest, candidates: readonly ProxyRecord[]): Promise<AcquireResult> {
    const now = this.clock.now();
    const selection = selectProxy(candidates, request.selector, {
      load: (proxyID) => this.liveCount(proxyID, now),
      coolingDown: (proxyID) => this.isCoolingDown(proxyID, request.target, now),
    });
    if ('reason' in selection) return { granted: false, reason: selection.reason };
    const lease: Lease = {
      id: this.newID(),
      proxyID: selection.proxy.id,
      selector: { ...request.selector },
      ...(request.target === undefined ? {} : { target: request.target }),
      acquiredAt: new Date(now),
      expiresAt: new Date(now + request.ttlSeconds * 1000),
    };
    this.leases.set(lease.id, lease);
    let ids = this.leasesByProxy.get(lease.proxyID);
    if (ids === undefined) {
      ids = new Set();
      this.leasesByProxy.set(lease.proxyID, ids);
    }
    ids.add(lease.id);
    return { granted: true, lease };
  }

  async release(leaseID: string): Promise<void> {
    this.remove(leaseID);
  }

  async report(leaseID: string, result: ReportResult, target?: string): Promise<ReportOutcome | undefined> {
    const now = this.clock.now();
    const lease = this.live(leaseID, now);
    if (lease === undefined) return undefined;
    const key = target ?? lease.target;
    if (result === 'ok') return { lease, ...(key === undefined ? {} : { target: key }) };
    let byTarget = this.cooldowns.get(lease.proxyID);
    if (byTarget === undefined) {
      byTarget = new Map();
      this.cooldowns.set(lease.proxyID, byTarget);
    }
    // Never shorten a running cooldown: reports may arrive out of order.
    const until = Math.max(now + this.cooldownMillis, byTarget.get(key ?? GLOBAL_POOL) ?? 0);
    byTarget.set(key ?? GLOBAL_POOL, until);
    return { lease, ...(key === undefined ? {} : { target: key }), cooldownUntil: new Date(until) };
  }

  async activeCount(proxyID: string): Promise<number> {
    return this.liveCount(proxyID, this.clock.now());
  }

  async activeCounts(proxyIDs: readonly string[]): Promise<Map<string, number>> {
    const now = this.clock.now();
    return new Map(proxyIDs.map((id) => [id, this.liveCount(id, now)]));
  }

  async activeTotal(): Promise<number> {
    const now = this.clock.now();
    let total = 0;
    for (const lease of this.leases.values()) if (lease.expiresAt.getTime() > now) total++;
    return total;
  }

  async get(leaseID: string): Promise<Lease | undefined> {
    return this.live(leaseID, this.clock.now());
  }

  async start(): Promise<void> {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.sweep(), this.sweepIntervalMs);
    // The loop only frees memory; it must not keep the process alive on shutdown.
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Drops expired leases and cooldowns; returns how many leases expired. Correctness never
   * waits for it (every read ignores expired entries), it only bounds memory.
   */
  sweep(): number {
    const now = this.clock.now();
    let expired = 0;
    for (const lease of this.leases.values()) {
      if (lease.expiresAt.getTime() > now) continue;
      this.remove(lease.id);
      expired++;
      this.logger.debug({ leaseID: lease.id, proxyID: lease.proxyID }, 'lease expired');
    }
    for (const [proxyID, byTarget] of this.cooldowns) {
      for (const [key, until] of byTarget) if (until <= now) byTarget.delete(key);
      if (byTarget.size === 0) this.cooldowns.delete(proxyID);
    }
    return expired;
  }

  private live(leaseID: string, now: number): Lease | undefined {
    const lease = this.leases.get(leaseID);
    return lease !== undefined && lease.expiresAt.getTime() > now ? lease : undefined;
  }

  private liveCount(proxyID: string, now: number): number {
    const ids = this.leasesByProxy.get(proxyID);
    if (ids === undefined) return 0;
    let count = 0;
    for (const id of ids) if (this.live(id, now) !== undefined) count++;
    return count;
  }

  /**
   * A target-less cooldown benches the proxy for every lease: a ban reported without a
   * target says nothing about where, so the safe reading is "everywhere". A targeted one
   * benches it only for leases naming that target.
   */
  private isCoolingDown(proxyID: string, target: string | undefined, now: number): boolean {
    const byTarget = this.cooldowns.get(proxyID);
    if (byTarget === undefined) return false;
    if ((byTarget.get(GLOBAL_POOL) ?? 0) > now) return true;
    return target !== undefined && (byTarget.get(target) ?? 0) > now;
  }

  private remove(leaseID: string): void {
    const lease = this.leases.get(leaseID);
    if (lease === undefined) return;
    this.leases.delete(leaseID);
    const ids = this.leasesByProxy.get(lease.proxyID);
    ids?.delete(leaseID);
    if (ids?.size === 0) this.leasesByProxy.delete(lease.proxyID);
  }
}
