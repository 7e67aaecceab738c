// The in-memory LeaseStore. Every mutation is synchronous inside its async method, so the
// event loop serializes them: two requests can never both take a proxy's last slot, and a
// session is never bound to two proxies. Keep it that way — an `await` between selection and
// insertion would break the cap.
//
// Nothing here scans the fleet per request: the FreeProxyIndex follows the catalog's change
// events and every load change; leases expire from a deadline heap as each call begins, so
// loads are exact at every read. A proxy the book holds (suspect or down, proxy-holds.ts)
// leaves the index as the catalog's unhealthy proxies do. Limitation of this store (the Redis
// store has none): a restart drops all leases, sessions, cooldowns, holds and statistics.
//
// The parts: memory-holds.ts keeps the holds and suspicions, memory-outcome-stats.ts the
// outcome windows, memory-egress.ts the egresses, memory-refusal.ts explains a refusal; the
// rules are the shared modules (lease-selection, proxy-holds, target-book, session-book).
import { exitMember } from './exit-ip-match.js';
import { randomUUID } from 'node:crypto';
import { scopedKey } from './lease-owner.js';
import type { Logger } from 'pino';
import { addressOf, type CatalogChange, type ProxyCatalog, type ProxyRecord } from './catalog.js';
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
import { MemoryEgress } from './memory-egress.js';
import { FreeProxyIndex } from './free-proxy-index.js';
import { isLeasable, selectProxy, withinScope, type SelectionState } from './lease-selection.js';
import {
  REQUEST_RETENTION_MILLIS,
  type AcquireResult,
  type BatchReport,
  type HealthObservation,
  type Lease,
  type LeaseRequest,
  type LeaseStore,
  type ProbeRequestListener,
  type ProxyStanding,
  type ProxyUsage,
  type ReportDetails,
  type ReportOutcome,
  type RenewResult,
  type ReportResult,
  type StoreTotals,
} from './lease-store.js';
import type { HoldState } from './proxy-holds.js';
import { MemoryHolds } from './memory-holds.js';
import { OwnerHoldings } from './owner-holdings.js';
import { systemClock, type Clock } from './clock.js';
import { MemoryOutcomeStats } from './memory-outcome-stats.js';
import { countedRefusal, walkedRefusal, type Refusal, type RefusalSources } from './memory-refusal.js';
import { CoolingCounts } from './cooling-counts.js';
import { proxyMatcher } from './selector.js';
import { classKey } from './proxy-classes.js';
import { SessionBook } from './session-book.js';
import { targetBookFor, type TargetBook } from './target-book.js';
import { leaseBookSettings, type LeaseBookOptions } from './lease-book-settings.js';
import { RequestOutcomes, requestKey } from './request-outcomes.js';
import { excludes, withoutExcluded } from './lease-exclude.js';
import { RefusalMemos, refusalAt, refusalKey, rememberRefusal, stillRefused } from './refusal-memo.js';

export interface MemoryLeaseStoreOptions extends LeaseBookOptions {
  catalog: ProxyCatalog;
  logger: Logger;
  clock?: Clock;
}

/** Cooldown and statistics key of the global pool: leases and reports that name no target. */
const GLOBAL_POOL = '';

interface LiveLease extends HeapEntry {
  lease: Lease;
}

export class MemoryLeaseStore implements LeaseStore {
  private readonly catalog: ProxyCatalog;
  private readonly index = new FreeProxyIndex({ classes: true });
  private readonly leases = new Map<string, LiveLease>();
  private readonly deadlines = new DeadlineHeap<LiveLease>();
  private readonly loads = new Map<string, number>();
  /** Per owner: live leases and running cooldowns (the quotas a request may carry). */
  private readonly owners = new OwnerHoldings();
  private readonly sessions: SessionBook;
  private readonly targets: TargetBook;
  /** Each proxy's window of reported outcomes (memory-outcome-stats.ts). */
  private readonly stats: MemoryOutcomeStats;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly sweepIntervalMs: number;
  private readonly newID: () => string;
  private readonly unsubscribe: () => void;
  /** The holds of suspect or down proxies and their suspicions (memory-holds.ts). */
  private readonly holds: MemoryHolds;
  /** Each proxy's egress as the book last saw it (memory-egress.ts). */
  private readonly egress: MemoryEgress;
  private timer: NodeJS.Timeout | undefined;
  /** First outcomes of writes by request id (request-outcomes.ts). */
  private readonly requests = new RequestOutcomes<unknown>(REQUEST_RETENTION_MILLIS);
  /** Refusals answered again without a walk (refusal-memo.ts) while `freed` stays. */
  private readonly refusals = new RefusalMemos();
  /** The free index's members cooling down, per target (cooling-counts.ts): refusals without a walk. */
  private readonly cooling = new CoolingCounts();
  /** What a refusal is counted or explained from (memory-refusal.ts). */
  private readonly refusalSources: RefusalSources;
  /**
   * Counts what could turn a refusal into a grant: a full proxy's slot freed, a proxy
   * (re)entering the index (a hold lifted, a catalog change). Nothing else can.
   */
  private freed = 0;

  constructor(options: MemoryLeaseStoreOptions) {
    const settings = leaseBookSettings(options);
    this.sweepIntervalMs = settings.sweepIntervalMs;

    this.catalog = options.catalog;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.newID = options.newID ?? randomUUID;
    this.holds = new MemoryHolds({
      catalog: this.catalog,
      logger: this.logger,
      clock: this.clock,
      policy: {
        timeoutMillis: settings.suspicionTimeoutMillis,
        holdoffMillis: settings.suspicionHoldoffMillis,
      },
      place: (proxyID, state) => this.setHold(proxyID, state),
    });
    this.stats = new MemoryOutcomeStats(settings.statsWindowSeconds, settings.bucketMillis);
    this.sessions = new SessionBook(settings.sessionIdleMillis, settings.maxSessions);
    this.targets = targetBookFor(settings, options.random ?? Math.random);
    this.egress = new MemoryEgress(this.catalog, this.targets, this.logger);
    this.refusalSources = {
      index: this.index,
      targets: this.targets,
      cooling: this.cooling,
      catalog: this.catalog,
    };
    for (const proxy of this.catalog.records()) this.catalogChanged({ after: proxy });
    this.unsubscribe = this.catalog.subscribe((change) => this.catalogChanged(change));
  }

  async acquire(request: LeaseRequest): Promise<AcquireResult> {
    const now = this.expireDue();
    const requestID = requestKey('lease', request.owner, request.requestID);
    const prior = this.requests.recall(requestID, now) as AcquireResult | undefined;
    if (prior !== undefined) return { ...prior, replayed: true } as AcquireResult;
    if (this.owners.leaseRefused(request.owner, request.leaseQuota))
      return { granted: false, reason: 'lease_quota', held: this.owners.leasesOf(request.owner) };
    // The same request refused since nothing could change it: the answer without a walk.
    const shape = refusalKey(request);
    const memo = this.refusals.get(shape);
    if (memo !== undefined && stillRefused(memo, String(this.freed), now)) return refusalAt(memo, now);
    const target = request.target ?? GLOBAL_POOL;
    const state: SelectionState = {
      coolingDown: (proxyID) => this.targets.coolingDown(proxyID, target, now),
      failingRecord: (proxyID) => this.targets.failingRecord(proxyID, target, now),
    };
    let proxy: ProxyRecord | undefined;
    let moved = false;
    // Sessions and leases are kept under owner-scoped keys (lease-owner.ts).
    const session = request.session === undefined ? undefined : scopedKey(request.owner, request.session);
    if (session !== undefined) {
      const boundID = this.sessions.boundTo(session, now);
      if (boundID !== undefined) {
        const bound = this.catalog.get(boundID);
        if (bound !== undefined && this.canTake(bound, request, state)) proxy = bound;
        else moved = true;
      }
    }
    // Every match cooling down for the target, or (a selector or a scope) every match full:
    // the refusal is known from the counts, without walking them (issue 47 item 4); a
    // session's too, when its bound proxy cannot take it (it selects as a request without one).
    const counted =
      proxy === undefined ? countedRefusal(this.refusalSources, request, target, now) : undefined;
    if (counted !== undefined) return this.refuse(shape, counted, now);
    const index = this.index.free(request.selector, request.exitIP);
    const free = excludes(request.exclude) ? withoutExcluded(index, request.exclude) : index;
    proxy ??= selectProxy(
      request.within === undefined ? free : withinScope(free, request.within),
      state,
    )?.proxy;
    if (proxy === undefined)
      return this.refuse(shape, walkedRefusal(this.refusalSources, request, target, now), now);

    const lease: Lease = {
      id: this.newID(),
      proxyID: proxy.id,
      proxy,
      selector: { ...request.selector },
      ...(request.target === undefined ? {} : { target: request.target }),
      ...(request.session === undefined ? {} : { session: request.session }),
      ...(request.owner === undefined ? {} : { owner: request.owner }),
      ttlSeconds: request.ttlSeconds,
      acquiredAt: new Date(now),
      expiresAt: new Date(now + request.ttlSeconds * 1000),
    };
    const live: LiveLease = { lease, deadline: lease.expiresAt.getTime(), heapIndex: -1 };
    this.leases.set(scopedKey(request.owner, lease.id), live);
    this.owners.leaseChanged(request.owner, +1);
    this.deadlines.push(live);
    this.changeLoad(proxy.id, +1);
    const usage = this.usageOf(proxy.id, now);
    let granted: AcquireResult = { granted: true, lease, usage };
    if (session !== undefined) {
      this.sessions.bind(session, proxy.id, now);
      granted = { granted: true, lease, usage, session: { key: request.session!, moved } };
    }
    this.requests.remember(requestID, granted, now);
    return granted;
  }

  /** A refusal, remembered; its bound counts from the answer (a walk over a large fleet takes time too). */
  private refuse(shape: string | undefined, { refused, firstEnd }: Refusal, now: number): AcquireResult {
    this.refusals.set(shape, rememberRefusal(refused, String(this.freed), now, firstEnd, this.clock.now()));
    return refused;
  }

  async renew(
    leaseID: string,
    ttlSeconds?: number,
    owner?: string,
    requestID?: string,
  ): Promise<RenewResult | undefined> {
    const now = this.expireDue();
    const key = requestKey('renew', owner, requestID, leaseID);
    const prior = this.requests.recall(key, now) as RenewResult | undefined;
    if (prior !== undefined) return { ...prior, replayed: true };
    const live = this.leases.get(scopedKey(owner, leaseID));
    if (live === undefined) return undefined;
    const ttl = ttlSeconds ?? live.lease.ttlSeconds;
    const deadline = Math.max(live.deadline, now + ttl * 1000);
    live.lease = { ...live.lease, expiresAt: new Date(deadline) };
    live.deadline = deadline;
    this.deadlines.update(live);
    if (live.lease.session !== undefined) this.sessions.touch(scopedKey(owner, live.lease.session), now);
    const renewed = { lease: live.lease, usage: this.usageOf(live.lease.proxyID, now) };
    this.requests.remember(key, renewed, now);
    return renewed;
  }

  async release(leaseID: string, owner?: string, requestID?: string): Promise<boolean> {
    const now = this.expireDue();
    const key = requestKey('release', owner, requestID, leaseID);
    const prior = this.requests.recall(key, now) as boolean | undefined;
    if (prior !== undefined) return prior;
    const ended = this.releaseNow(leaseID, owner);
    this.requests.remember(key, ended, now);
    return ended;
  }

  private releaseNow(leaseID: string, owner: string | undefined): boolean {
    const live = this.leases.get(scopedKey(owner, leaseID));
    if (live === undefined) return false;
    this.end(live);
    return true;
  }

  async report(
    leaseID: string,
    result: ReportResult,
    details: ReportDetails = {},
    owner?: string,
    requestID?: string,
  ): Promise<ReportOutcome | undefined> {
    const now = this.expireDue();
    const key = requestKey('report', owner, requestID, leaseID);
    const prior = this.requests.recall(key, now) as { outcome?: ReportOutcome } | undefined;
    if (prior !== undefined)
      return prior.outcome === undefined ? undefined : { ...prior.outcome, replayed: true };
    this.owners.check([{ leaseID, result, details }], owner, this.leaseOf(owner), now);
    const outcome = this.reportNow(leaseID, result, details, owner, now);
    this.requests.remember(key, { outcome }, now);
    return outcome;
  }

  async reportMany(
    reports: readonly BatchReport[],
    owner?: string,
    requestID?: string,
  ): Promise<(ReportOutcome | undefined)[]> {
    const now = this.expireDue();
    const key = requestKey('reports', owner, requestID);
    const prior = this.requests.recall(key, now) as (ReportOutcome | undefined)[] | undefined;
    if (prior !== undefined)
      return prior.map((o) => (o === undefined ? undefined : { ...o, replayed: true }));
    // Synchronous from here: nothing else runs between the first report and the last.
    this.owners.check(reports, owner, this.leaseOf(owner), now);
    const outcomes = reports.map(({ leaseID, result, details, release }) => {
      const outcome = this.reportNow(leaseID, result, details ?? {}, owner, now);
      if (outcome === undefined || release !== true) return outcome;
      return { ...outcome, released: this.releaseNow(leaseID, owner) };
    });
    this.requests.remember(key, outcomes, now);
    return outcomes;
  }

  private leaseOf(owner: string | undefined): (leaseID: string) => Lease | undefined {
    return (leaseID) => this.leases.get(scopedKey(owner, leaseID))?.lease;
  }

  private reportNow(
    leaseID: string,
    result: ReportResult,
    details: ReportDetails,
    owner: string | undefined,
    now: number,
  ): ReportOutcome | undefined {
    const live = this.leases.get(scopedKey(owner, leaseID));
    if (live === undefined) return undefined;
    const { lease } = live;
    const key = details.target ?? lease.target;
    this.stats.add(lease.proxyID, result, now);
    const target = key === undefined ? {} : { target: key };
    if (result === 'unreachable') return { lease, ...target, ...this.holds.suspect(lease, now) };
    const retryAfter = details.retryAfterSeconds === undefined ? undefined : details.retryAfterSeconds * 1000;
    // In-process reports (no owner) are the operator's own: trusted (ban-agreement.ts).
    const reporter = { name: owner ?? '', trusted: owner === undefined || details.rotationTrusted === true };
    const wasCooling = this.targets.coolingDown(lease.proxyID, key ?? GLOBAL_POOL, now);
    const until = this.targets.report(lease.proxyID, key ?? GLOBAL_POOL, result, now, retryAfter, reporter);
    if (typeof until === 'number' && this.index.has(lease.proxyID))
      this.cooling.set(
        lease.proxyID,
        key ?? GLOBAL_POOL,
        this.targets.until(lease.proxyID, key ?? GLOBAL_POOL),
        classKey(this.catalog.get(lease.proxyID)!),
        exitMember(this.catalog.get(lease.proxyID)!),
      );
    if (until === 'capped') return { lease, ...target, capped: true };
    if (until === undefined) return { lease, ...target };
    if (owner !== undefined) this.owners.recorded(owner, lease.proxyID, key ?? '', until);
    return {
      lease,
      ...target,
      cooldownUntil: new Date(until),
      ...(wasCooling ? {} : { cooldownStarted: true }),
    };
  }

  async observeHealth(proxyID: string, observation: HealthObservation): Promise<void> {
    const now = this.expireDue();
    this.holds.observe(proxyID, observation, now);
  }

  onProbeRequest(listener: ProbeRequestListener): () => void {
    return this.holds.onProbeRequest(listener);
  }

  async endSession(key: string, owner?: string): Promise<void> {
    this.sessions.end(scopedKey(owner, key));
  }

  async usage(proxyIDs: readonly string[]): Promise<ProxyUsage[]> {
    const now = this.expireDue();
    const usage = new Array<ProxyUsage>(proxyIDs.length);
    for (let i = 0; i < proxyIDs.length; i++) usage[i] = this.usageOf(proxyIDs[i], now);
    return usage;
  }

  async standing(proxyID: string): Promise<ProxyStanding> {
    const now = this.expireDue();
    const cooldowns = this.targets
      .cooldownsOf(proxyID, now)
      .map(({ target, ...rest }) => (target === GLOBAL_POOL ? rest : { target, ...rest }));
    return { usage: this.usageOf(proxyID, now), cooldowns, now };
  }

  async get(leaseID: string, owner?: string): Promise<Lease | undefined> {
    this.expireDue();
    return this.leases.get(scopedKey(owner, leaseID))?.lease;
  }

  async totals(): Promise<StoreTotals> {
    const now = this.expireDue();
    const { suspectProxies, suspicionsRaised, suspicionsExpired } = this.holds.totals(now);
    return {
      activeLeases: this.leases.size,
      activeSessions: this.sessions.sweep(now),
      activeCooldowns: this.targets.activeCooldowns(now),
      sessionsEvicted: this.sessions.evictions,
      cooldownsEvicted: this.targets.evictions,
      suspectProxies,
      suspicionsRaised,
      suspicionsExpired,
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
    this.owners.sweep(this.clock.now());
    const now = this.expireDue();
    this.requests.expire(now);
    this.sessions.sweep(now);
    this.targets.sweep(now);
    this.holds.sweep(now);
    this.stats.sweep(now);
    this.egress.sweep();
  }

  private usageOf(proxyID: string, now: number): ProxyUsage {
    return this.stats.usage(proxyID, this.loads.get(proxyID) ?? 0, this.holds.heldNow(proxyID, now), now);
  }

  /** Replaces a proxy's hold state and moves it into or out of the index to match. */
  private setHold(proxyID: string, state: HoldState | undefined): void {
    const record = this.catalog.get(proxyID);
    const wasIndexed = this.index.has(proxyID);
    this.holds.put(proxyID, state);
    if (record === undefined) return;
    const load = this.loads.get(proxyID) ?? 0;
    const indexed = this.indexable(record, this.clock.now());
    if (wasIndexed && !indexed) this.index.delete(record, load);
    else if (!wasIndexed && indexed) {
      this.index.add(record, load);
      this.freed++;
    }
    if (wasIndexed !== indexed) this.placeCooldowns(proxyID);
  }

  /** Counts a proxy's running cooldowns while it is in the free index, and only then. */
  private placeCooldowns(proxyID: string): void {
    this.cooling.dropProxy(proxyID);
    if (!this.index.has(proxyID)) return;
    const record = this.catalog.get(proxyID)!;
    const cls = classKey(record);
    const exit = exitMember(record);
    for (const { target, until } of this.targets.cooldownsOf(proxyID, this.clock.now()))
      this.cooling.set(proxyID, target, until, cls, exit);
  }

  private indexable(record: ProxyRecord, now: number): boolean {
    return isLeasable(record) && this.holds.holdAt(record.id, addressOf(record), now) === undefined;
  }

  /** Whether a session's bound proxy can take this request's lease. */
  private canTake(proxy: ProxyRecord, request: LeaseRequest, state: SelectionState): boolean {
    return (
      this.index.has(proxy.id) &&
      (this.loads.get(proxy.id) ?? 0) < proxy.maxLeases &&
      proxyMatcher(request.selector, request.exitIP)(proxy) &&
      (request.within === undefined || request.within(proxy)) &&
      !state.coolingDown(proxy.id)
    );
  }

  /** Ends every lease whose deadline has passed, and suspicions past theirs; returns the time it used. */
  private expireDue(): number {
    const now = this.clock.now();
    this.holds.expireDue(now);
    for (let next = this.deadlines.peek(); next !== undefined && next.deadline <= now;) {
      this.logger.debug({ leaseID: next.lease.id, proxyID: next.lease.proxyID }, 'lease expired');
      this.end(next);
      next = this.deadlines.peek();
    }
    return now;
  }

  private end(live: LiveLease): void {
    this.leases.delete(scopedKey(live.lease.owner, live.lease.id));
    this.owners.leaseChanged(live.lease.owner, -1);
    this.deadlines.remove(live);
    this.changeLoad(live.lease.proxyID, -1);
  }

  private changeLoad(proxyID: string, delta: 1 | -1): void {
    const from = this.loads.get(proxyID) ?? 0;
    const to = from + delta;
    if (to === 0) this.loads.delete(proxyID);
    else this.loads.set(proxyID, to);
    if (!this.index.has(proxyID)) return;
    const record = this.catalog.get(proxyID)!;
    this.index.move(record, from, to);
    // A full proxy with a free slot again: a refusal may be a grant now.
    if (from >= record.maxLeases && to < record.maxLeases) this.freed++;
  }

  private catalogChanged({ before, after }: CatalogChange): void {
    this.freed++;
    const id = (before ?? after)!.id;
    const load = this.loads.get(id) ?? 0;
    if (before !== undefined && this.index.has(before.id)) this.index.delete(before, load);
    if (after === undefined) {
      this.holds.catalogChanged(id, before, after);
    } else {
      this.egress.follow(after, () => this.clock.now());
      this.holds.catalogChanged(id, before, after);
      if (this.indexable(after, this.clock.now())) this.index.add(after, load);
    }
    // In or out of the index, or a new egress that forgot its cooldowns.
    this.placeCooldowns(id);
  }
}
