// What a response (or its absence) says about a proxy, told to the server and acted on at
// once: a ban (the proxy never again for that host while it cools down), a rate limit (the
// proxy rests for the host and the site's pace learns; see site-paces.ts), a proxy that could
// not carry a request (unreachable: every lease on it goes), and the server's own verdict from
// a renew answer (unfit: the same). The successes' reports are lease-reports.ts's.
import type { DiscoveryClient } from '../client.js';
import type { LeaseBook } from './lease-book.js';
import type { LeaseReports } from './lease-reports.js';
import { FALLBACK_BAN_MS, type ProxyVerdicts } from './proxy-verdicts.js';
import type { LeaseLog, SessionLeasesStats, SharedLease, Track } from './shared-lease.js';
import type { SitePaces } from './site-paces.js';

export interface ProxyReportsDeps {
  book: LeaseBook;
  verdicts: ProxyVerdicts;
  paces: SitePaces;
  reports: LeaseReports;
  client: DiscoveryClient;
  stats: SessionLeasesStats;
  log: LeaseLog;
  /** Proxy URL → proxy id, to attribute a response to a proxy after its lease is gone. */
  proxyIDs: ReadonlyMap<string, string>;
  track: Track;
  now(): number;
  /** Forgets a lease locally (no server call). */
  forget(shared: SharedLease): void;
  /** One session stops using a lease; the lease goes when no session is left on it. */
  detach(session: string | undefined, shared: SharedLease, why: string): Promise<void>;
}

export class ProxyReports {
  constructor(private readonly d: ProxyReportsDeps) {}

  /**
   * A request through `proxyUrl` to `host` was refused (`banned`) or throttled
   * (`rate_limited`, with the response's Retry-After in seconds when it had one). A ban: from
   * this call on the proxy is never handed out for `host` again while its cooldown runs; the
   * server is told once per cooldown, and every lease on that proxy for that host is released
   * (their sessions lease elsewhere on their next request). A rate limit: see rateLimited.
   */
  async blocked(
    session: string | undefined,
    host: string | undefined,
    proxyUrl: string,
    result: 'banned' | 'rate_limited',
    retryAfterSeconds?: number,
  ): Promise<void> {
    const proxyID = this.d.proxyIDs.get(proxyUrl);
    if (proxyID === undefined) return;
    const own = this.d.book.sharedFor(session, host, proxyUrl);
    if (own !== undefined) own.unansweredSince = 0;
    if (result === 'rate_limited') return this.rateLimited(proxyID, host, own, retryAfterSeconds);
    if (this.d.verdicts.isBanned(proxyID, host)) {
      // Another request already reported this proxy for this host; just move this session.
      if (own) void this.d.detach(session, own, 'proxy banned for host');
      return;
    }
    // Synchronously, before any await: no request after this line gets this proxy for host.
    this.d.verdicts.ban(proxyID, host, this.d.now() + FALLBACK_BAN_MS);
    const affected = this.d.book.leasesOn(proxyID).filter((s) => s.host === host);
    for (const s of affected) this.d.forget(s);
    const via = own ?? affected[0];
    const work = (async () => {
      if (via !== undefined) {
        // The successes before the ban go first: an ok after it would reset its streak.
        const flushed = this.d.reports.flushOk(affected);
        if (flushed) await flushed;
        try {
          const report = await this.d.client.report(via.lease.leaseID, result, host ? { target: host } : {});
          this.d.stats.reportedBanned++;
          if (report.cooldownUntil !== null)
            this.d.verdicts.ban(proxyID, host, Date.parse(report.cooldownUntil));
          this.d.log.debug('reported proxy', { proxyID, host, result, cooldownUntil: report.cooldownUntil });
        } catch (err) {
          this.d.log.warning('could not report a blocked proxy; avoiding it locally', {
            proxyID,
            host,
            result,
            error: String(err),
          });
        }
      }
      await Promise.all(affected.map((s) => this.d.reports.release(s, 'proxy banned for host')));
    })();
    this.d.track(work);
    await work;
  }

  /**
   * A 429: the proxy rests for the host where it is. Its leases stay (the sessions on them
   * wait for the rest to end, see proxyUrl), so a rate limit paces the crawl instead of
   * churning leases; the server is told once per rest, so new leases avoid the proxy meanwhile.
   */
  private rateLimited(
    proxyID: string,
    host: string | undefined,
    own: SharedLease | undefined,
    retryAfterSeconds: number | undefined,
  ): void {
    if (!this.d.paces.rateLimited(proxyID, host, retryAfterSeconds)) return;
    const onProxy = this.d.book.leasesOn(proxyID).filter((s) => s.host === host);
    const via = own ?? onProxy[0];
    if (via === undefined) return;
    const work = (async () => {
      // The successes before the 429 go first: an ok after it would reset its streak.
      const flushed = this.d.reports.flushOk(onProxy);
      if (flushed) await flushed;
      try {
        const report = await this.d.client.report(via.lease.leaseID, 'rate_limited', {
          ...(host ? { target: host } : {}),
          ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
        });
        this.d.stats.reportedRateLimited++;
        // The server's cooldown honours a Retry-After; without one the pace rests the proxy
        // a moment only (site-pace.ts), while the server keeps new leases off it a while.
        if (report.cooldownUntil !== null && retryAfterSeconds !== undefined)
          this.d.paces.restUntil(proxyID, host, Date.parse(report.cooldownUntil));
      } catch (err) {
        this.d.log.warning('could not report a rate-limited proxy; resting it locally', {
          proxyID,
          host,
          error: String(err),
        });
      }
    })();
    // Not awaited: the rest above already keeps this proxy's requests back, and the request's
    // task holds one of Crawlee's few concurrency slots while it waits for the hook.
    this.d.track(work);
  }

  /**
   * A request through `proxyUrl` failed because the proxy could not carry it (refused, reset,
   * timed out connecting, a CONNECT it answered with a non-2xx). From this call on no session
   * gets that proxy; the server is told once (it holds the proxy out until a probe passes),
   * and every lease on it is released.
   */
  async unreachable(proxyUrl: string): Promise<void> {
    const proxyID = this.d.proxyIDs.get(proxyUrl);
    if (proxyID === undefined) return;
    const affected = this.d.book.leasesOn(proxyID);
    // Synchronously, before any await: no request after this line gets this proxy.
    for (const s of affected) this.d.forget(s);
    if (this.d.verdicts.isDead(proxyID)) {
      // Already reported (or being reported): the leases above just go.
      await Promise.all(affected.map((s) => this.d.reports.release(s, 'proxy unreachable')));
      return;
    }
    const dead = this.d.verdicts.markDead(proxyID);
    const via = affected[0];
    const work = (async () => {
      if (via !== undefined) {
        try {
          await this.d.client.report(via.lease.leaseID, 'unreachable');
          this.d.stats.reportedUnreachable++;
          dead.acknowledged = true;
          this.d.log.debug('reported proxy unreachable', { proxyID });
        } catch (err) {
          this.d.log.warning('could not report an unreachable proxy; avoiding it locally', {
            proxyID,
            error: String(err),
          });
        }
      }
      await Promise.all(affected.map((s) => this.d.reports.release(s, 'proxy unreachable')));
    })();
    this.d.track(work);
    await work;
  }

  /**
   * The server says the proxy of `shared` is unfit: every lease on it goes now, and no new
   * lease may use it until the server leases it again (it will not while it stays unfit).
   */
  dropUnfit(shared: SharedLease): void {
    const proxyID = shared.lease.proxy.id;
    const affected = this.d.book.leasesOn(proxyID);
    for (const s of affected) this.d.forget(s);
    if (!affected.includes(shared)) this.d.forget(shared);
    this.d.verdicts.markDead(proxyID).acknowledged = true;
    this.d.stats.droppedByVerdict += 1;
    this.d.log.debug('the server holds the proxy out; its leases go', {
      proxyID,
      healthy: shared.lease.proxy.healthy,
      phase: shared.lease.proxy.phase,
      held: shared.lease.proxy.held,
    });
    const all = affected.includes(shared) ? affected : [...affected, shared];
    this.d.track(Promise.all(all.map((s) => this.d.reports.release(s, 'proxy unfit by the server'))));
  }
}
