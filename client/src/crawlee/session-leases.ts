// The lease bookkeeping behind the Crawlee integration, knowing nothing about Crawlee. Each
// (session, target host) uses one lease; a lease is renewed while in use and released when
// idle, when the last session on it ends, or when its proxy is banned for that host or
// unreachable. When the fleet has fewer free slots than the crawler has sessions, a new
// session shares a live lease of the same host instead of failing: Crawlee's default pool of
// 1,000 sessions works over any fleet. Ban and unreachable reports go out at once (awaited,
// so the retried request never meets the same proxy), ok reports in batches. The Crawlee glue
// (proxy-configuration.ts) only feeds it events.
//
// This file is the lease's life (granted, renewed, released) and the events that end it; its
// parts live beside it: lease-book.ts (live leases and the sessions bound to them),
// lease-acquisition.ts (getting a lease), site-paces.ts (the site's pace), lease-reports.ts
// (ok reports and releases), proxy-reports.ts (bans, rate limits, unreachable proxies and the
// server's verdicts, told and acted on), proxy-verdicts.ts (bans and dead proxies),
// lease-standing.ts (a silent lease checked with the server).
import type { DiscoveryClient } from '../client.js';
import type { Lease } from '../types.js';
import type { SessionLeasesOptions } from './session-leases-options.js';
import { DetachedTimers } from './detached-timers.js';
import { LeaseAcquisition } from './lease-acquisition.js';
import { LeaseBook } from './lease-book.js';
import { LeaseRenewal } from './lease-renewal.js';
import { LeaseReports } from './lease-reports.js';
import { LeaseStanding } from './lease-standing.js';
import { ProxyReports } from './proxy-reports.js';
import { ProxyVerdicts } from './proxy-verdicts.js';
import {
  banKey,
  bindingKey,
  emptyStats,
  silentLog,
  sessionKey,
  type LeaseLog,
  type PacedWait,
  type SessionLeasesStats,
  type SharedLease,
} from './shared-lease.js';
import { SitePaces } from './site-paces.js';

export { isSooner, type Turn } from './site-paces.js';
export { renewalDelayMs } from './lease-renewal.js';
export type { SessionLeasesOptions } from './session-leases-options.js';
export {
  mayJoin,
  sessionKey,
  type LeaseLog,
  type SessionLeasesStats,
  type SharedLease,
} from './shared-lease.js';

export class SessionLeases {
  private readonly book = new LeaseBook();
  private readonly verdicts: ProxyVerdicts;
  private readonly paces: SitePaces;
  private readonly reports: LeaseReports;
  private readonly acquisition: LeaseAcquisition;
  private readonly renewal: LeaseRenewal;
  /** In-flight acquisitions per binding key: concurrent requests of a session share one. */
  private readonly acquiring = new Map<string, Promise<SharedLease | null>>();
  /** Proxy URL → proxy id, to attribute a response to a proxy after its lease is gone. */
  private readonly proxyIDs = new Map<string, string>();
  /** Server-side session keys this client started (ended on retire and on close). */
  private readonly serverSessions = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly client: DiscoveryClient;
  private readonly ttlSeconds: number;
  private readonly maxWaitMs: number;
  private readonly log: LeaseLog;
  private readonly now: () => number;
  private closed = false;
  private readonly standing: LeaseStanding;
  private readonly proxyReports: ProxyReports;
  /** Renewals and ok batches: timers that must not hold the request that set them. */
  private readonly timers = new DetachedTimers();
  readonly stats: SessionLeasesStats = emptyStats();

  constructor(private readonly options: SessionLeasesOptions) {
    this.client = options.client;
    this.ttlSeconds = options.ttlSeconds ?? 300;
    if (!Number.isInteger(this.ttlSeconds) || this.ttlSeconds < 1) {
      throw new TypeError(`ttlSeconds must be a positive integer, got ${options.ttlSeconds}`);
    }
    const okReportIntervalMs = options.okReportIntervalMs ?? 30_000;
    if (!(okReportIntervalMs >= 0)) {
      throw new TypeError(`okReportIntervalMs must be >= 0, got ${options.okReportIntervalMs}`);
    }
    this.maxWaitMs = options.maxWaitMs ?? 60_000;
    if (!(this.maxWaitMs >= 0)) throw new TypeError(`maxWaitMs must be >= 0, got ${options.maxWaitMs}`);
    if (options.maxLeases !== undefined && !(Number.isInteger(options.maxLeases) && options.maxLeases >= 1)) {
      throw new TypeError(`maxLeases must be a positive integer, got ${options.maxLeases}`);
    }
    this.log = options.log ?? silentLog;
    this.now = options.now ?? Date.now;
    const now = this.now;
    const track = (work: Promise<unknown>) => this.track(work);
    this.verdicts = new ProxyVerdicts(now);
    this.paces = new SitePaces({
      leasesOf: (host) => this.book.leasesOf(host),
      usable: (shared) => this.usable(shared),
      starved: (host) => this.acquisition.leaseAheadFor(host, true),
      stats: this.stats,
      maxWaitMs: this.maxWaitMs,
      now,
    });
    this.reports = new LeaseReports({
      client: this.client,
      log: this.log,
      stats: this.stats,
      timers: this.timers,
      track,
      okReportIntervalMs,
      allLeases: () => this.book.all(),
    });
    this.renewal = new LeaseRenewal({
      client: this.client,
      ttlSeconds: this.ttlSeconds,
      timers: this.timers,
      stats: this.stats,
      log: this.log,
      track,
      now,
      forget: (shared) => this.forget(shared),
      release: (shared, why) => this.reports.release(shared, why),
      dropUnfit: (shared) => this.proxyReports.dropUnfit(shared),
    });
    this.proxyReports = new ProxyReports({
      book: this.book,
      verdicts: this.verdicts,
      paces: this.paces,
      reports: this.reports,
      client: this.client,
      stats: this.stats,
      log: this.log,
      proxyIDs: this.proxyIDs,
      track,
      now,
      forget: (shared) => this.forget(shared),
      detach: (session, shared, why) => this.detach(session, shared, why),
    });
    this.standing = new LeaseStanding({
      checkMs: options.standingCheckMs ?? 2_000,
      timers: this.timers,
      track,
      now,
      isClosed: () => this.closed,
      leases: () => this.book.all(),
      check: (shared) => this.renewal.checkNow(shared),
    });
    this.acquisition = new LeaseAcquisition({
      client: this.client,
      selector: options.selector,
      ttlSeconds: this.ttlSeconds,
      maxWaitMs: this.maxWaitMs,
      retryAllBusy: options.retryAllBusy,
      whenNoneLeasable: options.whenNoneLeasable,
      leaseAhead: options.leaseAhead !== false,
      maxLeases: options.maxLeases,
      stats: this.stats,
      log: this.log,
      track,
      now,
      isClosed: () => this.closed,
      leaseCount: () => this.book.count,
      shareable: (host) => this.shareable(host),
      unjoined: (host) => this.book.unjoined(host),
      holds: (proxyID, host) => this.book.leasesOn(proxyID).some((s) => s.host === host),
      heldProxies: (host) => [
        ...new Set([...this.book.leasesOf(host)].filter((s) => s.live).map((s) => s.lease.proxy.id)),
      ],
      attach: (session, shared, sharing) => this.attach(session, shared, sharing),
      adopt: (lease, host) => this.adopt(lease, host),
      granted: (lease, session) => {
        if (session !== undefined) this.serverSessions.add(sessionKey(session));
        this.proxyIDs.set(lease.proxy.url, lease.proxy.id);
      },
      localRefusal: (proxyID, host) => this.verdicts.localRefusal(proxyID, host),
      countPaced: (wait) => this.paces.countPaced(wait),
    });
  }

  /**
   * The proxy URL for a request of `session` to `host`, leasing (or sharing a lease) on first
   * use; null means "go direct" (only with `whenNoneLeasable: 'direct'`).
   */
  proxyUrl(session: string | undefined, host: string | undefined): Promise<string | null> {
    return this.urlFor(session, host, { counted: false });
  }

  /**
   * The proxy URL for a request of `session` to `host` when it may go now without a call or a
   * wait: the session's lease is live and its proxy has a token. Otherwise undefined (then
   * proxyUrl). Synchronous: Crawlee takes a string from newUrlFunction as well as a promise,
   * and this is every request's path once its session has a lease.
   */
  readyUrl(session: string | undefined, host: string | undefined): string | undefined {
    return this.readyLease(session, host)?.lease.proxy.url;
  }

  /**
   * readyUrl's lease itself, for a caller that hands it back with the response
   * (succeededOn): a success then needs no lookup of the session's binding.
   */
  readyLease(session: string | undefined, host: string | undefined): SharedLease | undefined {
    if (this.closed) return undefined;
    const shared = this.book.bound(session, host);
    if (shared === undefined || !this.usable(shared)) return undefined;
    const turn = this.paces.turnIn(shared, host);
    if (turn.waitMs > 0 || turn.probe) return undefined;
    shared.usedSinceRenewal = true;
    this.paces.take(shared, host, turn);
    this.sent(shared);
    return shared;
  }

  /** A request goes out through `shared`: it waits for an answer (see LeaseStanding). */
  private sent(shared: SharedLease): void {
    this.standing.sent(shared);
  }

  /**
   * A response came back through `proxyUrl` for `host` (any status): its lease is not silent.
   * The hook calls it for a status that is no report; succeeded and blocked do it themselves.
   */
  answered(session: string | undefined, host: string | undefined, proxyUrl: string): void {
    const shared = this.book.sharedFor(session, host, proxyUrl) ?? this.book.anyLeaseOn(proxyUrl, host);
    if (shared !== undefined) shared.unansweredSince = 0;
  }

  /** proxyUrl, for one request: `wait` says whether its wait was counted in stats.paced yet. */
  private async urlFor(
    session: string | undefined,
    host: string | undefined,
    wait: PacedWait,
  ): Promise<string | null> {
    if (this.closed) throw new Error('the proxy-operator lease manager is closed');
    let shared = this.book.bound(session, host);
    if (shared && !this.usable(shared)) {
      this.detach(session, shared, 'banned, unreachable or expired');
      shared = undefined;
    }
    if (shared === undefined) {
      const key = bindingKey(session, host);
      let acquiring = this.acquiring.get(key);
      if (acquiring === undefined) {
        acquiring = this.acquisition.acquire(session, host, wait).finally(() => this.acquiring.delete(key));
        this.acquiring.set(key, acquiring);
      }
      const acquired = await acquiring;
      if (acquired === null) return null;
      shared = acquired;
    }
    shared.usedSinceRenewal = true;
    const via = await this.paces.through(shared, host, wait);
    if (via === undefined) return this.urlFor(session, host, wait);
    via.usedSinceRenewal = true;
    this.sent(via);
    return via.lease.proxy.url;
  }

  /** A request through `proxyUrl` to `host` succeeded: counted, reported in batches. */
  succeeded(session: string | undefined, host: string | undefined, proxyUrl: string): void {
    this.stats.successes++;
    // The lease may have ended mid-request (renewal, ban, session retired): count the success
    // on another live lease of the same proxy and host, if there is one.
    const shared = this.book.sharedFor(session, host, proxyUrl) ?? this.book.anyLeaseOn(proxyUrl, host);
    if (shared !== undefined) shared.unansweredSince = 0;
    if (shared === undefined) {
      // Its proxy's pace still learns from it while that proxy has a pace for the host.
      const proxyID = this.proxyIDs.get(proxyUrl);
      if (proxyID !== undefined) this.paces.succeededAfter(proxyID, host);
      return;
    }
    this.paces.succeeded(shared.pace);
    this.reports.succeeded(shared);
  }

  /**
   * A request that went through `carrier` (readyLease's answer for it) to `proxyUrl`
   * succeeded: counted on that lease, as succeeded would, while it lives. False when it has
   * ended (renewal, ban, session retired): then call succeeded, which finds another.
   */
  succeededOn(carrier: SharedLease, proxyUrl: string): boolean {
    if (carrier.owner !== this || !carrier.live || carrier.lease.proxy.url !== proxyUrl) return false;
    this.stats.successes++;
    carrier.unansweredSince = 0;
    this.paces.succeeded(carrier.pace);
    this.reports.succeeded(carrier);
    return true;
  }

  /**
   * A request through `proxyUrl` to `host` was refused (`banned`) or throttled
   * (`rate_limited`, with the response's Retry-After in seconds when it had one): see ProxyReports.
   */
  blocked(
    session: string | undefined,
    host: string | undefined,
    proxyUrl: string,
    result: 'banned' | 'rate_limited',
    retryAfterSeconds?: number,
  ): Promise<void> {
    return this.proxyReports.blocked(session, host, proxyUrl, result, retryAfterSeconds);
  }

  /** A request through `proxyUrl` failed because the proxy could not carry it: see ProxyReports. */
  unreachable(proxyUrl: string): Promise<void> {
    return this.proxyReports.unreachable(proxyUrl);
  }

  /** The proxy URL of a lease of the session that sent a request and has heard nothing back since. */
  silentProxyOf(session: string): string | undefined {
    return this.book.ofSession(session).find((shared) => shared.unansweredSince !== 0)?.lease.proxy.url;
  }

  /** The session ended (Crawlee retired it): release its leases and forget it on the server. */
  async sessionEnded(session: string): Promise<void> {
    if (this.closed) return;
    const released = this.book
      .ofSession(session)
      .map((shared) => this.detach(session, shared, 'session retired'));
    const work = (async () => {
      await Promise.all(released);
      const serverKey = sessionKey(session);
      if (this.options.endSessionOnRetire !== false && this.serverSessions.delete(serverKey)) {
        await this.endServerSession(serverKey);
      }
    })();
    this.track(work);
    await work;
  }

  /** Leases held right now. */
  get activeLeases(): number {
    return this.book.count;
  }

  /** Server-side sessions started and not yet ended. */
  get activeServerSessions(): number {
    return this.serverSessions.size;
  }

  /** Stops renewing, sends the batched ok reports, releases every lease, ends every server session. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.standing.stop();
    this.reports.stop();
    await Promise.allSettled([...this.acquiring.values()]);
    const all = this.book.all();
    for (const s of all) this.forget(s);
    await Promise.all(all.map((s) => this.reports.release(s, 'closing')));
    const sessions = [...this.serverSessions];
    this.serverSessions.clear();
    await Promise.all(sessions.map((key) => this.endServerSession(key)));
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    this.timers.close();
  }

  /** A granted lease becomes live: shareable, renewed, counted. */
  private adopt(lease: Lease, host: string | undefined): SharedLease {
    const shared: SharedLease = {
      owner: this,
      host,
      key: banKey(lease.proxy.id, host),
      pace: this.paces.cell(banKey(lease.proxy.id, host)),
      lease,
      bindings: new Set(),
      live: true,
      ...this.renewal.expiry(lease),
      usedSinceRenewal: false,
      unreportedOk: 0,
      carried: false,
      unansweredSince: 0,
    };
    this.book.add(shared);
    this.renewal.schedule(shared);
    this.paces.wake(host);
    return shared;
  }

  private attach(session: string | undefined, shared: SharedLease, sharing: boolean): SharedLease {
    if (sharing) this.stats.shared++;
    this.book.attach(session, shared);
    return shared;
  }

  /** One session stops using a lease; the lease goes when no session is left on it. */
  private detach(session: string | undefined, shared: SharedLease, why: string): Promise<void> {
    const last = this.book.detach(session, shared);
    if (!last || !shared.live) return Promise.resolve();
    this.forget(shared);
    const work = this.reports.release(shared, why);
    this.track(work);
    return work;
  }

  /** Forgets a lease locally (no server call): no request gets it any more, nor any of its sessions. */
  private forget(shared: SharedLease): void {
    clearTimeout(shared.timer);
    const removed = this.book.remove(shared);
    if (removed === undefined) return;
    // The pace is learned per lease's life: memory stays bounded by the live leases.
    if (!removed.proxyStillLeased) this.paces.forgetPair(shared.lease.proxy.id, shared.host);
    // A slot of ours came free: the next new session may ask the server again.
    this.acquisition.slotFreed(shared.host);
    if (removed.hostEmpty) {
      this.paces.forgetHost(shared.host);
      this.acquisition.forgetHost(shared.host);
    }
  }

  /** Whether a binding's lease may still carry requests. */
  private usable(shared: SharedLease): boolean {
    return shared.live && this.carries(shared, this.now());
  }

  /** A live lease may carry requests: not banned for its host, not dead, not expired. */
  private carries(shared: SharedLease, now: number): boolean {
    return (
      shared.expiresAt > now &&
      (this.verdicts.empty ||
        (!this.verdicts.isBannedKey(shared.key) && !this.verdicts.isDead(shared.lease.proxy.id)))
    );
  }

  /** The live lease of `host` a new session should join (LeaseBook.shareable). */
  private shareable(host: string | undefined): SharedLease | undefined {
    const now = this.now();
    const carries = (shared: SharedLease) => this.standing.joinable(shared, now) && this.carries(shared, now);
    if (this.paces.restless) return this.book.shareable(host, carries);
    return this.book.shareable(host, carries, (shared) => this.paces.restLeft(shared.key, now));
  }

  private async endServerSession(key: string): Promise<void> {
    try {
      await this.client.endSession(key);
    } catch (err) {
      this.log.warning('could not end the session on the server', { session: key, error: String(err) });
    }
  }

  private track(work: Promise<unknown>): void {
    const settled = work.catch((err: unknown) =>
      this.log.warning('background work failed', { error: String(err) }),
    );
    this.pending.add(settled);
    void settled.finally(() => this.pending.delete(settled));
  }
}
