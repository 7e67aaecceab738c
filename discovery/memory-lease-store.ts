// The in-memory LeaseStore. Every mutation is synchronous inside its async method, so the
// event loop serializes them: two requests can never both take a proxy's last slot, and a
// session is never bound to two proxies. Keep it that way — an `await` between selection and
// insertion would break the cap.
//
// Nothing here scans the fleet per request: the FreeProxyIndex follows the catalog's change
// events and every load change; leases expire from a deadline heap as each call begins, so
// loads are exact at every read. Prototype limitation (accepted by the specification): a
// restart drops all leases, sessions, cooldowns and statistics.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { CatalogChange, ProxyCatalog, ProxyRecord } from './catalog.js';
import { COOLDOWN_JITTER } from './cooldown-policy.js';
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
import { FreeProxyIndex } from './free-proxy-index.js';
import { isLeasable, refusal, selectProxy, type SelectionState } from './lease-selection.js';
import type {
  AcquireResult,
  Lease,
  LeaseRequest,
  LeaseStore,
  NoLeaseReason,
  ProxyUsage,
  ReportOutcome,
  RenewResult,
  ReportResult,
  StoreTotals,
} from './lease-store.js';
import { OutcomeWindow, WINDOW_BUCKETS } from './outcome-window.js';
import { selectorMatcher } from './selector.js';
import {
  DEFAULT_MAX_SESSIONS,
  DEFAULT_SESSION_IDLE_SECONDS,
  MIN_MAX_SESSIONS,
  SessionBook,
} from './session-book.js';
import { TargetBook } from './target-book.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export const DEFAULT_COOLDOWN_SECONDS = 15 * 60;
export const DEFAULT_MAX_COOLDOWN_SECONDS = 60 * 60;
export const DEFAULT_STATS_WINDOW_SECONDS = 15 * 60;
export const DEFAULT_SWEEP_INTERVAL_MS = 5000;

export interface MemoryLeaseStoreOptions {
  catalog: ProxyCatalog;
  logger: Logger;
  clock?: Clock;
  /** The first cooldown after a banned|rate_limited report (`--cooldown`). */
  cooldownSeconds?: number;
  /** The longest cooldown a streak of bad reports can reach (`--max-cooldown`). */
  maxCooldownSeconds?: number;
  /** Uniform in [0, 1): spreads cooldowns (tests pin it). */
  random?: () => number;
  sessionIdleSeconds?: number;
  maxSessions?: number;
  /** Length of the sliding window of report statistics. */
  statsWindowSeconds?: number;
  /** Caps of the (proxy, target) memory; the defaults are documented in target-book.ts. */
  maxTargetsPerProxy?: number;
  maxTargetEntries?: number;
  /** How often the background loop frees memory of expired state. */
  sweepIntervalMs?: number;
  newID?: () => string;
}

/** Cooldown and statistics key of the global pool: leases and reports that name no target. */
const GLOBAL_POOL = '';

interface LiveLease extends HeapEntry {
  lease: Lease;
}

export class MemoryLeaseStore implements LeaseStore {
  private readonly catalog: ProxyCatalog;
  private readonly index = new FreeProxyIndex();
  private readonly leases = new Map<string, LiveLease>();
  private readonly deadlines = new DeadlineHeap<LiveLease>();
  private readonly loads = new Map<string, number>();
  private readonly sessions: SessionBook;
  private readonly targets: TargetBook;
  private readonly stats = new Map<string, OutcomeWindow>();
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly statsWindowSeconds: number;
  private readonly bucketMillis: number;
  private readonly sweepIntervalMs: number;
  private readonly newID: () => string;
  private readonly unsubscribe: () => void;
  private readonly idle: ProxyUsage;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryLeaseStoreOptions) {
    const cooldownSeconds = options.cooldownSeconds ?? DEFAULT_COOLDOWN_SECONDS;
    const maxCooldownSeconds =
      options.maxCooldownSeconds ?? Math.max(DEFAULT_MAX_COOLDOWN_SECONDS, cooldownSeconds);
    requireNumber('cooldownSeconds', cooldownSeconds, 0);
    requireNumber('maxCooldownSeconds', maxCooldownSeconds, cooldownSeconds);
    const sessionIdleSeconds = options.sessionIdleSeconds ?? DEFAULT_SESSION_IDLE_SECONDS;
    requireNumber('sessionIdleSeconds', sessionIdleSeconds, 1);
    const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    requireNumber('maxSessions', maxSessions, MIN_MAX_SESSIONS);
    this.statsWindowSeconds = options.statsWindowSeconds ?? DEFAULT_STATS_WINDOW_SECONDS;
    requireNumber('statsWindowSeconds', this.statsWindowSeconds, WINDOW_BUCKETS);
    this.sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    requireNumber('sweepIntervalMs', this.sweepIntervalMs, 1);

    this.catalog = options.catalog;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.newID = options.newID ?? randomUUID;
    this.bucketMillis = (this.statsWindowSeconds * 1000) / WINDOW_BUCKETS;
    this.idle = Object.freeze({
      activeLeases: 0,
      stats: Object.freeze({ windowSeconds: this.statsWindowSeconds, ok: 0, banned: 0, rate_limited: 0 }),
    });
    this.sessions = new SessionBook(sessionIdleSeconds * 1000, maxSessions);
    this.targets = new TargetBook({
      policy: {
        baseMillis: cooldownSeconds * 1000,
        maxMillis: maxCooldownSeconds * 1000,
        jitter: COOLDOWN_JITTER,
      },
      bucketMillis: this.bucketMillis,
      random: options.random ?? Math.random,
      maxTargetsPerProxy: options.maxTargetsPerProxy,
      maxEntries: options.maxTargetEntries,
    });
    for (const proxy of this.catalog.records()) this.catalogChanged({ after: proxy });
    this.unsubscribe = this.catalog.subscribe((change) => this.catalogChanged(change));
  }

  async acquire(request: LeaseRequest): Promise<AcquireResult> {
    const now = this.expireDue();
    const target = request.target ?? GLOBAL_POOL;
    const state: SelectionState = {
      coolingDown: (proxyID) => this.targets.coolingDown(proxyID, target, now),
      failingRecord: (proxyID) => this.targets.failingRecord(proxyID, target, now),
    };
    let proxy: ProxyRecord | undefined;
    let moved = false;
    if (request.session !== undefined) {
      const boundID = this.sessions.boundTo(request.session, now);
      if (boundID !== undefined) {
        const bound = this.catalog.get(boundID);
        if (bound !== undefined && this.canTake(bound, request, state)) proxy = bound;
        else moved = true;
      }
    }
    proxy ??= selectProxy(this.index.free(request.selector), state)?.proxy;
    if (proxy === undefined) return { granted: false, reason: this.refusal(request, target, now) };

    const lease: Lease = {
      id: this.newID(),
      proxyID: proxy.id,
      proxy,
      selector: { ...request.selector },
      ...(request.target === undefined ? {} : { target: request.target }),
      ...(request.session === undefined ? {} : { session: request.session }),
      ttlSeconds: request.ttlSeconds,
      acquiredAt: new Date(now),
      expiresAt: new Date(now + request.ttlSeconds * 1000),
    };
    const live: LiveLease = { lease, deadline: lease.expiresAt.getTime(), heapIndex: -1 };
    this.leases.set(lease.id, live);
    this.deadlines.push(live);
    this.changeLoad(proxy.id, +1);
    const usage = this.usageOf(proxy.id, now);
    if (request.session === undefined) return { granted: true, lease, usage };
    this.sessions.bind(request.session, proxy.id, now);
    return { granted: true, lease, usage, session: { key: request.session, moved } };
  }

  async renew(leaseID: string, ttlSeconds?: number): Promise<RenewResult | undefined> {
    const now = this.expireDue();
    const live = this.leases.get(leaseID);
    if (live === undefined) return undefined;
    const ttl = ttlSeconds ?? live.lease.ttlSeconds;
    const deadline = Math.max(live.deadline, now + ttl * 1000);
    live.lease = { ...live.lease, expiresAt: new Date(deadline) };
    live.deadline = deadline;
    this.deadlines.update(live);
    if (live.lease.session !== undefined) this.sessions.touch(live.lease.session, now);
    return { lease: live.lease, usage: this.usageOf(live.lease.proxyID, now) };
  }

  async release(leaseID: string): Promise<void> {
    this.expireDue();
    const live = this.leases.get(leaseID);
    if (live !== undefined) this.end(live);
  }

  async report(leaseID: string, result: ReportResult, target?: string): Promise<ReportOutcome | undefined> {
    const now = this.expireDue();
    const live = this.leases.get(leaseID);
    if (live === undefined) return undefined;
    const { lease } = live;
    const key = target ?? lease.target;
    let window = this.stats.get(lease.proxyID);
    if (window === undefined) {
      window = new OutcomeWindow(this.bucketMillis);
      this.stats.set(lease.proxyID, window);
    }
    window.add(result, now);
    const until = this.targets.report(lease.proxyID, key ?? GLOBAL_POOL, result, now);
    return {
      lease,
      ...(key === undefined ? {} : { target: key }),
      ...(until === undefined ? {} : { cooldownUntil: new Date(until) }),
    };
  }

  async endSession(key: string): Promise<void> {
    this.sessions.end(key);
  }

  async usage(proxyIDs: readonly string[]): Promise<Map<string, ProxyUsage>> {
    const now = this.expireDue();
    const usage = new Map<string, ProxyUsage>();
    for (const id of proxyIDs) usage.set(id, this.usageOf(id, now));
    return usage;
  }

  async get(leaseID: string): Promise<Lease | undefined> {
    this.expireDue();
    return this.leases.get(leaseID)?.lease;
  }

  async totals(): Promise<StoreTotals> {
    const now = this.expireDue();
    return {
      activeLeases: this.leases.size,
      activeSessions: this.sessions.sweep(now),
      activeCooldowns: this.targets.activeCooldowns(now),
      sessionsEvicted: this.sessions.evictions,
      cooldownsEvicted: this.targets.evictions,
    };
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

  /** Stops following the catalog (a store that is thrown away). */
  close(): void {
    this.unsubscribe();
  }

  /**
   * Frees the memory of expired leases, idle sessions and cold cooldowns and statistics.
   * Correctness never waits for it: every call expires what is due before it reads.
   */
  sweep(): void {
    const now = this.expireDue();
    this.sessions.sweep(now);
    this.targets.sweep(now);
    for (const [id, window] of this.stats) if (window.isEmpty(now)) this.stats.delete(id);
  }

  private usageOf(proxyID: string, now: number): ProxyUsage {
    const activeLeases = this.loads.get(proxyID) ?? 0;
    const window = this.stats.get(proxyID);
    // Most of a large fleet is idle at any moment: one shared answer, no allocation.
    if (activeLeases === 0 && window === undefined) return this.idle;
    const counts = window?.totals(now) ?? { ok: 0, banned: 0, rate_limited: 0 };
    return { activeLeases, stats: { windowSeconds: this.statsWindowSeconds, ...counts } };
  }

  /** Whether a session's bound proxy can take this request's lease. */
  private canTake(proxy: ProxyRecord, request: LeaseRequest, state: SelectionState): boolean {
    return (
      this.index.has(proxy.id) &&
      (this.loads.get(proxy.id) ?? 0) < proxy.maxLeases &&
      selectorMatcher(request.selector)(proxy.attributes) &&
      !state.coolingDown(proxy.id)
    );
  }

  /** Explains a refusal; runs only when nothing was free, so it may count. */
  private refusal(request: LeaseRequest, target: string, now: number): NoLeaseReason {
    const leasable = this.index.countLeasable(request.selector);
    let cooling = 0;
    if (leasable > 0) {
      const matches = selectorMatcher(request.selector);
      for (const entry of this.targets.forTarget(target)) {
        if (entry.until <= now || !this.index.has(entry.proxyID)) continue;
        if (matches(this.catalog.get(entry.proxyID)!.attributes)) cooling++;
      }
    }
    return refusal(leasable, cooling);
  }

  /** Ends every lease whose deadline has passed; returns the time it used. */
  private expireDue(): number {
    const now = this.clock.now();
    for (let next = this.deadlines.peek(); next !== undefined && next.deadline <= now;) {
      this.logger.debug({ leaseID: next.lease.id, proxyID: next.lease.proxyID }, 'lease expired');
      this.end(next);
      next = this.deadlines.peek();
    }
    return now;
  }

  private end(live: LiveLease): void {
    this.leases.delete(live.lease.id);
    this.deadlines.remove(live);
    this.changeLoad(live.lease.proxyID, -1);
  }

  private changeLoad(proxyID: string, delta: 1 | -1): void {
    const from = this.loads.get(proxyID) ?? 0;
    const to = from + delta;
    if (to === 0) this.loads.delete(proxyID);
    else this.loads.set(proxyID, to);
    if (this.index.has(proxyID)) this.index.move(this.catalog.get(proxyID)!, from, to);
  }

  private catalogChanged({ before, after }: CatalogChange): void {
    const load = this.loads.get((before ?? after)!.id) ?? 0;
    if (before !== undefined && this.index.has(before.id)) this.index.delete(before, load);
    if (after !== undefined && isLeasable(after)) this.index.add(after, load);
  }
}

function requireNumber(name: string, value: number, min: number): void {
  if (!Number.isFinite(value) || value < min) {
    throw new Error(`${name} must be a number >= ${min}, got ${value}`);
  }
}
