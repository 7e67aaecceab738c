// The lease bookkeeping behind the Crawlee integration, knowing nothing about Crawlee: one
// lease per (session, target host), renewed before it expires while in use, released when
// idle, when its session ends or when its proxy is banned for that host; ban reports at
// once, ok reports batched. The Crawlee glue (proxy-configuration.ts) only feeds it events.
import { createHash } from 'node:crypto';
import type { BackoffOptions } from '../backoff.js';
import type { DiscoveryClient } from '../client.js';
import { isLeaseGone, isNoLease } from '../errors.js';
import type { Attributes, Lease, ReportResult } from '../types.js';

/** Where the integration says what it did and what went wrong (Crawlee's `log` fits). */
export interface LeaseLog {
  debug(message: string, data?: Record<string, unknown>): void;
  warning(message: string, data?: Record<string, unknown>): void;
}

export interface SessionLeasesOptions {
  client: DiscoveryClient;
  /** Attribute equality filter for every lease, e.g. `{ geo: 'eu' }`. Default: any proxy. */
  selector?: Attributes;
  /** TTL asked for each lease. Default 300 s. */
  ttlSeconds?: number;
  /**
   * When the server has nothing to lease (`no_match`, `all_busy` after retries,
   * `all_cooling_down`): `'throw'` fails the request (Crawlee retries it later) or `'direct'`
   * returns null, which Crawlee takes as "no proxy". Default `'throw'`.
   */
  whenNoneLeasable?: 'throw' | 'direct';
  /** Retry `all_busy` with backoff before giving up. Default: 5 retries, 100 ms .. 2 s. */
  retryAllBusy?: BackoffOptions | false;
  /** At most one `ok` report per lease per this many ms (plus one at release). Default 30,000. */
  okReportIntervalMs?: number;
  /** Forget a session on the server (DELETE /v1/sessions/{key}) when it retires. Default true. */
  endSessionOnRetire?: boolean;
  log?: LeaseLog;
  /** Milliseconds since the epoch. */
  now?: () => number;
}

/** What one lease is doing for one (session, host). */
interface Binding {
  key: string;
  session: string | undefined;
  host: string | undefined;
  lease: Lease;
  /** ms since epoch the lease ends, by the server's clock as we read it. */
  expiresAt: number;
  /** The TTL the server granted last; renewal comes when a third of it is left. */
  ttlMs: number;
  usedSinceRenewal: boolean;
  /** Successes not yet reported. */
  unreportedOk: number;
  lastOkReportAt: number;
  timer?: NodeJS.Timeout;
}

export interface SessionLeasesStats {
  leased: number;
  renewed: number;
  released: number;
  reportedBanned: number;
  reportedRateLimited: number;
  /** ok reports sent; each stands for one or more successes. */
  okReports: number;
  /** Successes counted (what the ok reports summarise). */
  successes: number;
  /** Times a session's next lease landed on another proxy (the server said `moved`). */
  moved: number;
}

const SESSION_KEY = /^[A-Za-z0-9._:@-]{1,128}$/;
/** Used when a ban report fails: the proxy stays away from the host locally this long. */
const FALLBACK_BAN_MS = 15 * 60_000;
const MAX_LEASE_ATTEMPTS = 4;

const silentLog: LeaseLog = { debug: () => undefined, warning: () => undefined };

export class SessionLeases {
  private readonly bindings = new Map<string, Binding>();
  /** In-flight acquisitions per binding key: concurrent requests of a session share one lease. */
  private readonly acquiring = new Map<string, Promise<Binding | null>>();
  /** `proxyID \0 host` → ms until which that proxy must not be used for that host. */
  private readonly bans = new Map<string, number>();
  /** Proxy URL → proxy id, to attribute a response to a proxy after its lease is gone. */
  private readonly proxyIDs = new Map<string, string>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly client: DiscoveryClient;
  private readonly ttlSeconds: number;
  private readonly okReportIntervalMs: number;
  private readonly log: LeaseLog;
  private readonly now: () => number;
  private closed = false;
  readonly stats: SessionLeasesStats = {
    leased: 0,
    renewed: 0,
    released: 0,
    reportedBanned: 0,
    reportedRateLimited: 0,
    okReports: 0,
    successes: 0,
    moved: 0,
  };

  constructor(private readonly options: SessionLeasesOptions) {
    this.client = options.client;
    this.ttlSeconds = options.ttlSeconds ?? 300;
    if (!Number.isInteger(this.ttlSeconds) || this.ttlSeconds < 1) {
      throw new TypeError(`ttlSeconds must be a positive integer, got ${options.ttlSeconds}`);
    }
    this.okReportIntervalMs = options.okReportIntervalMs ?? 30_000;
    if (!(this.okReportIntervalMs >= 0)) {
      throw new TypeError(`okReportIntervalMs must be >= 0, got ${options.okReportIntervalMs}`);
    }
    this.log = options.log ?? silentLog;
    this.now = options.now ?? Date.now;
  }

  /**
   * The proxy URL for a request of `session` to `host`, leasing on first use; null means
   * "go direct" (only with `whenNoneLeasable: 'direct'`).
   */
  async proxyUrl(session: string | undefined, host: string | undefined): Promise<string | null> {
    if (this.closed) throw new Error('the proxy-operator lease manager is closed');
    const key = bindingKey(session, host);
    let binding = this.bindings.get(key);
    if (binding && (this.isBanned(binding.lease.proxy.id, host) || binding.expiresAt <= this.now())) {
      this.drop(binding, 'banned or expired');
      binding = undefined;
    }
    if (binding === undefined) {
      let acquiring = this.acquiring.get(key);
      if (acquiring === undefined) {
        acquiring = this.acquire(key, session, host).finally(() => this.acquiring.delete(key));
        this.acquiring.set(key, acquiring);
      }
      const acquired = await acquiring;
      if (acquired === null) return null;
      binding = acquired;
    }
    binding.usedSinceRenewal = true;
    return binding.lease.proxy.url;
  }

  /** A request through `proxyUrl` to `host` succeeded: counted, reported in batches. */
  succeeded(session: string | undefined, host: string | undefined, proxyUrl: string): void {
    const binding = this.bindingFor(session, host, proxyUrl);
    if (binding === undefined) return;
    this.stats.successes++;
    binding.unreportedOk++;
    if (this.now() - binding.lastOkReportAt >= this.okReportIntervalMs) this.track(this.reportOk(binding));
  }

  /**
   * A request through `proxyUrl` to `host` was refused (`banned`) or throttled
   * (`rate_limited`). From this call on the proxy is never handed out for `host` again
   * while its cooldown runs; the server is told once per cooldown, and every lease on that
   * proxy for that host is released (their sessions lease elsewhere on their next request).
   */
  async blocked(
    session: string | undefined,
    host: string | undefined,
    proxyUrl: string,
    result: Exclude<ReportResult, 'ok'>,
  ): Promise<void> {
    const proxyID = this.proxyIDs.get(proxyUrl);
    if (proxyID === undefined) return;
    const own = this.bindingFor(session, host, proxyUrl);
    if (this.isBanned(proxyID, host)) {
      // Another request already reported this proxy for this host; just move this session.
      if (own) this.drop(own, 'proxy banned for host');
      return;
    }
    // Synchronously, before any await: no request after this line gets this proxy for host.
    this.bans.set(banKey(proxyID, host), this.now() + FALLBACK_BAN_MS);
    const affected = [...this.bindings.values()].filter(
      (b) => b.lease.proxy.id === proxyID && b.host === host,
    );
    for (const b of affected) this.unbind(b);
    const via = own ?? affected[0];
    const work = (async () => {
      if (via !== undefined) {
        try {
          const report = await this.client.report(via.lease.leaseID, result, host ? { target: host } : {});
          if (result === 'banned') this.stats.reportedBanned++;
          else this.stats.reportedRateLimited++;
          if (report.cooldownUntil !== null) {
            this.bans.set(banKey(proxyID, host), Date.parse(report.cooldownUntil));
          }
          this.log.debug('reported proxy', { proxyID, host, result, cooldownUntil: report.cooldownUntil });
        } catch (err) {
          this.log.warning('could not report a blocked proxy; avoiding it locally', {
            proxyID,
            host,
            result,
            error: String(err),
          });
        }
      }
      await Promise.all(affected.map((b) => this.release(b, 'proxy banned for host')));
    })();
    this.track(work);
    await work;
  }

  /** The session ended (Crawlee retired it): release its leases and forget it on the server. */
  async sessionEnded(session: string): Promise<void> {
    if (this.closed) return;
    const mine = [...this.bindings.values()].filter((b) => b.session === session);
    for (const b of mine) this.unbind(b);
    const work = (async () => {
      await Promise.all(mine.map((b) => this.release(b, 'session retired')));
      if (this.options.endSessionOnRetire !== false) {
        try {
          await this.client.endSession(sessionKey(session));
        } catch (err) {
          this.log.warning('could not end the session on the server', { session, error: String(err) });
        }
      }
    })();
    this.track(work);
    await work;
  }

  /** Leases held right now. */
  get activeLeases(): number {
    return this.bindings.size;
  }

  /** Stops renewing, sends the batched ok reports, releases every lease. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.acquiring.values()]);
    const all = [...this.bindings.values()];
    for (const b of all) this.unbind(b);
    await Promise.all(all.map((b) => this.release(b, 'closing')));
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private async acquire(key: string, session: string | undefined, host: string | undefined) {
    for (let attempt = 1; ; attempt++) {
      let lease: Lease;
      try {
        lease = await this.client.lease(
          {
            ...(this.options.selector ? { selector: this.options.selector } : {}),
            ttlSeconds: this.ttlSeconds,
            ...(host ? { target: host } : {}),
            ...(session !== undefined ? { session: sessionKey(session) } : {}),
          },
          { retryAllBusy: this.options.retryAllBusy ?? { retries: 5, baseDelayMs: 100, maxDelayMs: 2_000 } },
        );
      } catch (err) {
        if (isNoLease(err) && this.options.whenNoneLeasable === 'direct') {
          this.log.debug('nothing leasable; going direct', { session, host, code: err.code });
          return null;
        }
        throw err;
      }
      this.stats.leased++;
      if (lease.session?.moved) this.stats.moved++;
      this.proxyIDs.set(lease.proxy.url, lease.proxy.id);
      if (this.closed) {
        await this.client.release(lease.leaseID).catch(() => undefined);
        throw new Error('the proxy-operator lease manager is closed');
      }
      if (this.isBanned(lease.proxy.id, host) && attempt < MAX_LEASE_ATTEMPTS) {
        // Our earlier ban report did not reach the server: tell it through this lease, retry.
        await this.client
          .report(lease.leaseID, 'banned', host ? { target: host } : {})
          .catch(() => undefined);
        await this.client.release(lease.leaseID).catch(() => undefined);
        continue;
      }
      const binding: Binding = {
        key,
        session,
        host,
        lease,
        ...this.expiry(lease),
        usedSinceRenewal: false,
        unreportedOk: 0,
        lastOkReportAt: this.now(),
      };
      this.bindings.set(key, binding);
      this.scheduleRenewal(binding);
      this.log.debug('leased', { session, host, proxyID: lease.proxy.id, leaseID: lease.leaseID });
      return binding;
    }
  }

  private expiry(lease: Lease): { expiresAt: number; ttlMs: number } {
    const expiresAt = Date.parse(lease.expiresAt);
    return { expiresAt, ttlMs: Math.max(1, expiresAt - this.now()) };
  }

  /** Renews when a third of the TTL is left, if the lease was used since; otherwise lets it go. */
  private scheduleRenewal(binding: Binding, delayMs?: number): void {
    clearTimeout(binding.timer);
    const due = delayMs ?? renewalDelayMs(binding.expiresAt, binding.ttlMs, this.now());
    binding.timer = setTimeout(() => this.track(this.renewOrLetGo(binding)), due);
    binding.timer.unref();
  }

  private async renewOrLetGo(binding: Binding): Promise<void> {
    if (this.bindings.get(binding.key) !== binding) return;
    if (!binding.usedSinceRenewal) {
      this.unbind(binding);
      await this.release(binding, 'idle');
      return;
    }
    try {
      const lease = await this.client.renew(binding.lease.leaseID, { ttlSeconds: this.ttlSeconds });
      if (this.bindings.get(binding.key) !== binding) return;
      binding.lease = lease;
      Object.assign(binding, this.expiry(lease));
      binding.usedSinceRenewal = false;
      this.stats.renewed++;
      this.scheduleRenewal(binding);
    } catch (err) {
      if (this.bindings.get(binding.key) !== binding) return;
      if (isLeaseGone(err)) {
        // Expired or dropped by a restarted operator: the next request leases again.
        this.unbind(binding);
        this.log.debug('lease gone on renewal', { leaseID: binding.lease.leaseID });
        return;
      }
      const left = binding.expiresAt - this.now();
      this.log.warning('lease renewal failed; retrying', {
        leaseID: binding.lease.leaseID,
        error: String(err),
      });
      if (left > 0) this.scheduleRenewal(binding, Math.min(1_000, left / 2));
      else this.unbind(binding);
    }
  }

  private async reportOk(binding: Binding): Promise<void> {
    if (binding.unreportedOk === 0) return;
    binding.unreportedOk = 0;
    binding.lastOkReportAt = this.now();
    try {
      await this.client.report(binding.lease.leaseID, 'ok', binding.host ? { target: binding.host } : {});
      this.stats.okReports++;
    } catch (err) {
      if (!isLeaseGone(err)) this.log.debug('ok report failed', { error: String(err) });
    }
  }

  private async release(binding: Binding, why: string): Promise<void> {
    await this.reportOk(binding);
    try {
      await this.client.release(binding.lease.leaseID);
      this.stats.released++;
      this.log.debug('released', { leaseID: binding.lease.leaseID, why });
    } catch (err) {
      this.log.warning('could not release a lease (it expires by itself)', {
        leaseID: binding.lease.leaseID,
        error: String(err),
      });
    }
  }

  /** Forgets a binding locally (no server call): no request gets its lease any more. */
  private unbind(binding: Binding): void {
    clearTimeout(binding.timer);
    if (this.bindings.get(binding.key) === binding) this.bindings.delete(binding.key);
  }

  private drop(binding: Binding, why: string): void {
    this.unbind(binding);
    this.track(this.release(binding, why));
  }

  private bindingFor(session: string | undefined, host: string | undefined, proxyUrl: string) {
    const binding = this.bindings.get(bindingKey(session, host));
    return binding?.lease.proxy.url === proxyUrl ? binding : undefined;
  }

  private isBanned(proxyID: string, host: string | undefined): boolean {
    const key = banKey(proxyID, host);
    const until = this.bans.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.bans.delete(key);
    return false;
  }

  private track(work: Promise<unknown>): void {
    const settled = work.catch((err: unknown) =>
      this.log.warning('background work failed', { error: String(err) }),
    );
    this.pending.add(settled);
    void settled.finally(() => this.pending.delete(settled));
  }
}

/** How long until a lease granted for `ttlMs` and ending at `expiresAt` is due for renewal. */
export function renewalDelayMs(expiresAt: number, ttlMs: number, now: number): number {
  return Math.max(0, expiresAt - ttlMs / 3 - now);
}

function bindingKey(session: string | undefined, host: string | undefined): string {
  return `${session ?? ''}\0${host ?? ''}`;
}

function banKey(proxyID: string, host: string | undefined): string {
  return `${proxyID}\0${host ?? ''}`;
}

/** Crawlee's ids (`session_AbC123xyz0`) fit the server's pattern; anything else is hashed to fit. */
export function sessionKey(session: string): string {
  return SESSION_KEY.test(session)
    ? session
    : `h:${createHash('sha256').update(session).digest('hex').slice(0, 40)}`;
}
