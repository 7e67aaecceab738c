// How a session gets a lease: join a live one of its host, ask the server (a few requests per
// host at once), ask ahead in the background for the sessions after it, and when the fleet is
// full or cooling down for the host, share or wait. The lease's life after that (renewal,
// release) is session-leases.ts's.
import { sleep, type BackoffOptions, backoffDelayMs } from '../backoff.js';
import type { DiscoveryClient } from '../client.js';
import { isNoLease } from '../errors.js';
import type { Attributes, Lease } from '../types.js';
import { refusedField } from './lease-reports.js';
import {
  hostKey,
  sessionKey,
  type LeaseLog,
  type PacedWait,
  type SessionLeasesStats,
  type SharedLease,
  type Track,
} from './shared-lease.js';

/** After an all_busy, new sessions share without asking the server for this long (no 409 flood). */
const FULL_MEMORY_MS = 1_000;
const MAX_LEASE_ATTEMPTS = 4;
/** Lease requests in flight per host at once: a burst of new sessions waits for their answers. */
const LEASE_REQUESTS_PER_HOST = 4;
const DEFAULT_WAIT = { retries: Infinity, baseDelayMs: 100, maxDelayMs: 2_000 };
/** After an ask ahead brought no new proxy, the next one waits this long (the fleet may grow, leases end). */
const COVERED_FOR_MS = 30_000;
/** Leases asked for ahead per host (in flight or granted and not yet joined by a session). */
const LEASE_AHEAD = 2;
/** The most proxy ids a lease request may exclude (the API's bound): a host holding more has plenty. */
const MAX_EXCLUDED = 100;

/** What acquiring needs of the rest of the bookkeeping. */
export interface AcquisitionHost {
  readonly client: DiscoveryClient;
  readonly selector: Attributes | undefined;
  readonly ttlSeconds: number;
  readonly maxWaitMs: number;
  readonly retryAllBusy: BackoffOptions | false | undefined;
  readonly whenNoneLeasable: 'throw' | 'direct' | undefined;
  readonly leaseAhead: boolean;
  readonly maxLeases: number | undefined;
  readonly stats: SessionLeasesStats;
  readonly log: LeaseLog;
  readonly track: Track;
  now(): number;
  isClosed(): boolean;
  /** Leases held now (for maxLeases). */
  leaseCount(): number;
  /** The live lease of the host a new session should join (LeaseBook.shareable). */
  shareable(host: string | undefined): SharedLease | undefined;
  /** Unjoined live leases of the host (asked ahead and not yet taken). */
  unjoined(host: string | undefined): number;
  /** Whether the host already holds a live lease on the proxy. */
  holds(proxyID: string, host: string | undefined): boolean;
  /** The ids of the proxies the host holds a live lease on (each once). */
  heldProxies(host: string | undefined): string[];
  /** Binds the session to the lease. */
  attach(session: string | undefined, shared: SharedLease, sharing: boolean): SharedLease;
  /** A granted lease becomes live: shareable, renewed, counted. */
  adopt(lease: Lease, host: string | undefined): SharedLease;
  /** A lease was granted: its proxy and session are remembered. */
  granted(lease: Lease, session: string | undefined): void;
  /** Why a granted lease must not be used: our own verdict the server has not heard. */
  localRefusal(proxyID: string, host: string | undefined): 'banned' | 'unreachable' | undefined;
  countPaced(wait: PacedWait): void;
}

export class LeaseAcquisition {
  /** Host key → until when the server is believed full for it. */
  private readonly fullUntil = new Map<string, number>();
  /** Host key → leases being asked for ahead of the sessions that will join them. */
  private readonly ahead = new Map<string, number>();
  /**
   * Host key → until when no lease is asked for ahead: set once an ask ahead excluding the
   * host's proxies was refused (no other proxy to add: the host's leases cover what the fleet
   * gives it, and its sessions share them), or, asked for the pace, none.
   */
  private readonly coveredUntil = new Map<string, number>();
  /** False once the server refused `exclude` (an operator older than this client). */
  private okExclude = true;
  /** Host key → lease requests in flight, and the acquisitions waiting for one to answer. */
  private readonly asking = new Map<string, { count: number; waiters: (() => void)[] }>();

  constructor(private readonly host: AcquisitionHost) {}

  /** A slot of ours came free for the host: the next new session may ask the server again. */
  slotFreed(host: string | undefined): void {
    this.fullUntil.delete(hostKey(host));
  }

  /** The host has no lease left: what was remembered about asking for it goes. */
  forgetHost(host: string | undefined): void {
    this.fullUntil.delete(hostKey(host));
    if ((this.coveredUntil.get(hostKey(host)) ?? 0) <= this.host.now())
      this.coveredUntil.delete(hostKey(host));
  }

  async acquire(
    session: string | undefined,
    site: string | undefined,
    paced: PacedWait,
  ): Promise<SharedLease | null> {
    const h = this.host;
    const started = h.now();
    const wait = h.retryAllBusy ?? DEFAULT_WAIT;
    const mayWait = (waits: number) =>
      wait !== false && waits < wait.retries && h.now() - started < h.maxWaitMs;
    for (let attempt = 0, busy = 0; ; attempt++) {
      if (h.isClosed()) throw new Error('the proxy-operator lease manager is closed');
      // Full (by the server's last word, or by our own cap): share a live lease of this host.
      if (this.believedFull(site)) {
        const shared = h.shareable(site);
        if (shared !== undefined) return h.attach(session, shared, true);
      } else if (h.leaseAhead) {
        // Crawlee's pool runs few tasks on a busy machine: a lease request in the request's
        // path costs the crawl its round trip. Join a live lease now; lease for the next ones.
        const spare = h.shareable(site);
        if (spare !== undefined) {
          this.leaseAheadFor(site);
          return h.attach(session, spare, spare.bindings.size > 0);
        }
      }
      if (!this.mayAsk(site)) {
        // Enough requests for this host are out: their answer decides (share, or ask again).
        await this.nextAnswer(site);
        continue;
      }
      let lease: Lease;
      try {
        lease = await this.asked(
          site,
          h.client.lease({
            ...(h.selector ? { selector: h.selector } : {}),
            ttlSeconds: h.ttlSeconds,
            ...(site ? { target: site } : {}),
            ...(session !== undefined ? { session: sessionKey(session) } : {}),
          }),
        );
      } catch (err) {
        if (isNoLease(err) && err.code === 'all_busy') {
          h.stats.busy++;
          this.fullUntil.set(hostKey(site), h.now() + FULL_MEMORY_MS);
          const shared = h.shareable(site);
          if (shared !== undefined) return h.attach(session, shared, true);
          if (wait !== false && mayWait(busy)) {
            // Nothing to share yet: wait for a slot instead of failing the request.
            await sleep(backoffDelayMs(busy++, wait));
            continue;
          }
        }
        if (isNoLease(err) && err.code === 'all_cooling_down') {
          // Every proxy rests for this site: join a live lease of it and wait with its sessions.
          const shared = h.shareable(site);
          if (shared !== undefined) return h.attach(session, shared, true);
        }
        if (
          isNoLease(err) &&
          err.code === 'all_cooling_down' &&
          err.retryAfterSeconds !== undefined &&
          h.now() - started + err.retryAfterSeconds * 1000 <= h.maxWaitMs
        ) {
          // Every proxy rests for this site (rate limits): the crawl slows down to the site's
          // pace instead of failing the request. A little jitter spreads the waiters.
          h.countPaced(paced);
          const slept = err.retryAfterSeconds * 1000 + Math.floor(Math.random() * 250);
          h.stats.pacedMs += slept;
          await sleep(slept);
          continue;
        }
        if (isNoLease(err) && h.whenNoneLeasable === 'direct') {
          h.log.debug('nothing leasable; going direct', { session, host: site, code: err.code });
          return null;
        }
        throw err;
      }
      h.stats.leased++;
      if (lease.session?.moved) h.stats.moved++;
      h.granted(lease, session);
      if (h.isClosed()) {
        await h.client.release(lease.leaseID).catch(() => undefined);
        throw new Error('the proxy-operator lease manager is closed');
      }
      const refusal = h.localRefusal(lease.proxy.id, site);
      if (refusal !== undefined && attempt < MAX_LEASE_ATTEMPTS) {
        await this.refuse(lease, refusal, site);
        continue;
      }
      h.log.debug('leased', { session, host: site, proxyID: lease.proxy.id, leaseID: lease.leaseID });
      return h.attach(session, h.adopt(lease, site), false);
    }
  }

  /**
   * Asks for one more lease of `site` in the background, for the next new session, unless
   * LEASE_AHEAD are already waiting or in flight, the server is believed full, enough lease
   * requests are out, or the host's leases cover the fleet (coveredUntil). Not keyed by a
   * session: whichever session joins it first uses it. `forPace`: every leased proxy of the
   * site has used its pace (one ask at a time then).
   */
  leaseAheadFor(site: string | undefined, forPace = false): void {
    const h = this.host;
    if (!h.leaseAhead) return;
    const ahead = this.ahead.get(hostKey(site)) ?? 0;
    // Called for every new session: the unjoined leases are counted by their bucket (LeastShared).
    if (ahead >= LEASE_AHEAD || this.believedFull(site) || !this.mayAsk(site)) return;
    if ((this.coveredUntil.get(hostKey(site)) ?? 0) > h.now()) return;
    if (ahead + h.unjoined(site) >= LEASE_AHEAD) return;
    // Waits ask one at a time: each answer says whether there is another proxy to add.
    if (forPace && ahead > 0) return;
    this.ahead.set(hostKey(site), ahead + 1);
    // The proxies the host holds are excluded (issue 48): the server's "least used" counts
    // every owner's leases, so without it another team's load can make it hand back a proxy
    // the host holds while others sit unused by the host.
    const held = this.okExclude ? h.heldProxies(site) : [];
    const work = (async () => {
      try {
        const lease = await this.asked(site, this.askAhead(site, held.slice(0, MAX_EXCLUDED)));
        h.stats.leased++;
        h.granted(lease, undefined);
        const refusal = h.localRefusal(lease.proxy.id, site);
        if (h.isClosed() || refusal !== undefined) {
          if (refusal !== undefined) await this.refuse(lease, refusal, site);
          else await h.client.release(lease.leaseID).catch(() => undefined);
          return;
        }
        // Every held proxy excluded: a held one granted is another ask ahead's grant of the
        // same moment (both excluded what was held when they left), nothing to conclude from.
        // It goes back at once: a second lease of a proxy spreads nothing, and its first
        // session would be a second request into a proxy no page has come back through yet
        // (a second 403 when the site bans it). Else (an older operator, or more than
        // MAX_EXCLUDED held) the least used proxy being one the host holds is taken for
        // "nothing to add" (each ask costs the crawler a call, see docs/benchmarks.md), and
        // the lease is kept for sessions to share.
        const excludedAll = this.okExclude && held.length <= MAX_EXCLUDED;
        if (h.holds(lease.proxy.id, site)) {
          if (excludedAll) {
            h.stats.grantedTwice++;
            await h.client.release(lease.leaseID).catch(() => undefined);
            return;
          }
          this.coveredUntil.set(hostKey(site), h.now() + COVERED_FOR_MS);
        }
        h.adopt(lease, site);
        h.log.debug('leased ahead', { host: site, proxyID: lease.proxy.id, leaseID: lease.leaseID });
      } catch (err) {
        // Nothing to add (every proxy full, cooling down for the site, or none matching; with
        // the host's proxies excluded, every other one). The refusal of a request excluding
        // some says nothing of those: only one excluding none says the server is full.
        const excluding = this.okExclude && held.length > 0;
        if ((forPace || excluding) && isNoLease(err))
          this.coveredUntil.set(hostKey(site), h.now() + COVERED_FOR_MS);
        if (isNoLease(err) && err.code === 'all_busy' && !excluding) {
          h.stats.busy++;
          this.fullUntil.set(hostKey(site), h.now() + FULL_MEMORY_MS);
        } else if (!isNoLease(err)) h.log.debug('leasing ahead failed', { host: site, error: String(err) });
      } finally {
        const left = (this.ahead.get(hostKey(site)) ?? 1) - 1;
        if (left > 0) this.ahead.set(hostKey(site), left);
        else this.ahead.delete(hostKey(site));
      }
    })();
    h.track(work);
  }

  /**
   * An ask ahead's lease request, excluding `exclude`. An operator older than `exclude`
   * refuses the field (400 "unknown field(s) 'exclude'"): the request goes again without it,
   * and every later one too (as lease-reports.ts does for `release` and POST /v1/reports).
   */
  private async askAhead(site: string | undefined, exclude: string[]): Promise<Lease> {
    const h = this.host;
    const body = {
      ...(h.selector ? { selector: h.selector } : {}),
      ttlSeconds: h.ttlSeconds,
      ...(site ? { target: site } : {}),
    };
    if (exclude.length === 0 || !this.okExclude) return h.client.lease(body);
    try {
      return await h.client.lease({ ...body, exclude });
    } catch (err) {
      if (!refusedField(err, 'exclude')) throw err;
      this.okExclude = false;
      h.log.warning('the discovery API predates exclude on a lease: asking ahead without it');
      return h.client.lease(body);
    }
  }

  /** Our earlier verdict did not reach the server: tell it through this lease, and give it back. */
  private async refuse(
    lease: Lease,
    refusal: 'banned' | 'unreachable',
    site: string | undefined,
  ): Promise<void> {
    const { client } = this.host;
    await client
      .report(lease.leaseID, refusal, refusal === 'banned' && site ? { target: site } : {})
      .catch(() => undefined);
    await client.release(lease.leaseID).catch(() => undefined);
  }

  private believedFull(site: string | undefined): boolean {
    const { maxLeases } = this.host;
    if (maxLeases !== undefined && this.host.leaseCount() >= maxLeases) return true;
    return (this.fullUntil.get(hostKey(site)) ?? 0) > this.host.now();
  }

  private mayAsk(site: string | undefined): boolean {
    return (this.asking.get(hostKey(site))?.count ?? 0) < LEASE_REQUESTS_PER_HOST;
  }

  private nextAnswer(site: string | undefined): Promise<void> {
    return new Promise((resolve) => this.asking.get(hostKey(site))!.waiters.push(resolve));
  }

  /** Counts a lease request for its host while it is out; wakes every waiter when it answers (each looks again). */
  private async asked<T>(site: string | undefined, request: Promise<T>): Promise<T> {
    const key = hostKey(site);
    let entry = this.asking.get(key);
    if (entry === undefined) this.asking.set(key, (entry = { count: 0, waiters: [] }));
    entry.count++;
    try {
      return await request;
    } finally {
      entry.count--;
      for (const wake of entry.waiters.splice(0)) wake();
      if (entry.count === 0) this.asking.delete(key);
    }
  }
}
