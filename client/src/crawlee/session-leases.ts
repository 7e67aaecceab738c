// The lease bookkeeping behind the Crawlee integration, knowing nothing about Crawlee. Each
// (session, target host) uses one lease; a lease is renewed while in use and released when
// idle, when the last session on it ends, or when its proxy is banned for that host or
// unreachable. When the fleet has fewer free slots than the crawler has sessions, a new
// session shares a live lease of the same host instead of failing: Crawlee's default pool of
// 1,000 sessions works over any fleet. Ban and unreachable reports go out at once (awaited,
// so the retried request never meets the same proxy), ok reports in batches. The Crawlee glue
// (proxy-configuration.ts) only feeds it events.
import { createHash } from 'node:crypto';
import { sleep, type BackoffOptions, backoffDelayMs } from '../backoff.js';
import { MAX_BATCH_REPORTS, type DiscoveryClient } from '../client.js';
import { DiscoveryApiError, isLeaseGone, isNoLease } from '../errors.js';
import type { Attributes, Lease } from '../types.js';
import {
  adopt,
  admit,
  heardOfProbe,
  provenAfter429,
  provenByProbe,
  raiseTo,
  rateLimited as paceRateLimited,
  succeeded as paceSucceeded,
  unpaced,
  type Pace,
} from './site-pace.js';
import { Bindings, slotOf } from './bindings.js';
import { LeastShared } from './least-shared.js';
import { DetachedTimers } from './detached-timers.js';

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
   * When the server has nothing to lease (`no_match`, `all_cooling_down`, or `all_busy` with
   * no lease to share until `maxWaitMs`): `'throw'` fails the request (Crawlee retries it
   * later) or `'direct'` returns null, which Crawlee takes as "no proxy". Default `'throw'`.
   */
  whenNoneLeasable?: 'throw' | 'direct';
  /** How long to wait for a free slot when every proxy is full and no lease can be shared. Default 60 s. */
  maxWaitMs?: number;
  /**
   * Backoff between waits for a free slot (`retries`: at most this many waits, within
   * `maxWaitMs`); `false` fails at once. Default: 100 ms .. 2 s, as many as `maxWaitMs` allows.
   */
  retryAllBusy?: BackoffOptions | false;
  /** At most this many leases at once (then sessions share). Default: as many as the server grants. */
  maxLeases?: number;
  /**
   * Successes are reported as one `ok` per lease, for every lease at once in one call, this
   * many ms after the first success not yet reported (and each lease's last at its release).
   * Default 30,000.
   */
  okReportIntervalMs?: number;
  /** Forget a session on the server (DELETE /v1/sessions/{key}) when it retires. Default true. */
  endSessionOnRetire?: boolean;
  /**
   * A new session of a host that already has a live lease joins the least-shared one at once,
   * and a lease is asked for in the background for the sessions after it (at most
   * LEASE_AHEAD waiting or in flight per host), instead of each new session waiting for its
   * own lease request. Default true; false: every new session waits for a lease of its own
   * (keyed by its session) until the server is full.
   */
  leaseAhead?: boolean;
  log?: LeaseLog;
  /** Milliseconds since the epoch. */
  now?: () => number;
}

/** One server lease and the sessions using it, for one host (readyLease hands one out). */
export interface SharedLease {
  /** The manager that granted it (a carrier handed to another is not its to count). */
  readonly owner: SessionLeases;
  host: string | undefined;
  /** Its proxy and host, as bans, rests and paces are keyed (banKey). */
  readonly key: string;
  lease: Lease;
  /** The sessions using it (slotOf: no session is ''). */
  bindings: Set<string>;
  /** Until forget(): a live lease is shareable, renewed and counted. */
  live: boolean;
  /** ms since epoch the lease ends, by the server's clock as we read it. */
  expiresAt: number;
  /** The TTL the server granted last; renewal comes when a third of it is left. */
  ttlMs: number;
  usedSinceRenewal: boolean;
  /** Successes not yet reported. */
  unreportedOk: number;
  /** A page came back through it: until then it takes one session (see shareable). */
  carried: boolean;
  /** The pace of its proxy for its host, shared with the other leases of that pair. */
  readonly pace: PaceCell;
  timer?: NodeJS.Timeout;
}

/**
 * One (proxy, host)'s pace, held by each of its leases: every request and every success reads
 * and writes it, and a field is cheaper than a map lookup there (bench:crawl-path).
 */
interface PaceCell {
  pace: Pace | undefined;
}

export interface SessionLeasesStats {
  leased: number;
  renewed: number;
  released: number;
  reportedBanned: number;
  reportedRateLimited: number;
  reportedUnreachable: number;
  /** ok reports sent; each stands for one or more successes. */
  okReports: number;
  /** Successes counted (what the ok reports summarise), also those whose lease ended mid-request. */
  successes: number;
  /** Times a session's next lease landed on another proxy (the server said `moved`). */
  moved: number;
  /** Times a new session shared a live lease because every proxy was full. */
  shared: number;
  /** all_busy answers seen (each one 409). */
  busy: number;
  /**
   * Requests that waited for a rest to end (a 429's rest on the session's own proxy, or every
   * proxy resting for the site), each counted once however long or often it waited.
   */
  paced: number;
  /** Milliseconds requests spent in those waits, summed. */
  pacedMs: number;
}

const SESSION_KEY = /^[A-Za-z0-9._:@-]{1,128}$/;
/** Used when a ban report fails: the proxy stays away from the host locally this long. */
const FALLBACK_BAN_MS = 15 * 60_000;
/** A 429 without Retry-After rests its proxy for the host this long locally (the server's first rest). */
const FALLBACK_REST_SECONDS = 10;
/** Used when an unreachable report fails: the proxy stays away locally this long. */
const FALLBACK_DEAD_MS = 60_000;
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

const silentLog: LeaseLog = { debug: () => undefined, warning: () => undefined };

/** What the client knows about a proxy it reported unreachable. */
interface DeadProxy {
  /** Until when to avoid it when the report did not reach the server. */
  until: number;
  /** The server took the report: a lease on this proxy from now on means a probe passed since. */
  acknowledged: boolean;
}

export class SessionLeases {
  /** (session, host) → the lease it uses. */
  private readonly bindings = new Bindings<SharedLease>();
  /** Every live lease, by host key, found least shared first. */
  private readonly byHost = new Map<string, LeastShared<SharedLease>>();
  /** In-flight acquisitions per binding key: concurrent requests of a session share one. */
  private readonly acquiring = new Map<string, Promise<SharedLease | null>>();
  /** `proxyID \0 host` → ms until which that proxy must not be used for that host. */
  private readonly bans = new Map<string, number>();
  /** `proxyID \0 host` → ms until which requests through that proxy to that host wait (a 429's rest). */
  private readonly rests = new Map<string, number>();
  /** `proxyID \0 host` → the pace the site allows that proxy, learned from its 429s. */
  private readonly paces = new Map<string, PaceCell>();
  /** Host key → the latest pace a 429 taught any proxy for that host (see adopt). */
  private readonly learned = new Map<string, Pace>();
  /** Host key → the limit the site has shown it allows every source (see provenAfter429). */
  private readonly proven = new Map<string, number>();
  /** Proxies reported unreachable, by id. */
  private readonly dead = new Map<string, DeadProxy>();
  /** Proxy URL → proxy id, to attribute a response to a proxy after its lease is gone. */
  private readonly proxyIDs = new Map<string, string>();
  /** Host key → until when the server is believed full for it. */
  private readonly fullUntil = new Map<string, number>();
  /** Host key → leases being asked for ahead of the sessions that will join them. */
  private readonly ahead = new Map<string, number>();
  /**
   * Host key → until when no lease is asked for ahead: set once an ask ahead brought a proxy
   * already leased for the host (the server has no less used one to add: the host's leases
   * already cover the fleet, and its sessions share them), or, asked for the pace, none.
   */
  private readonly coveredUntil = new Map<string, number>();
  /** Host key → requests waiting for the pace, woken when a new lease of the host arrives. */
  private readonly paceWaiters = new Map<string, Set<() => void>>();
  /** Host key → lease requests in flight, and the acquisitions waiting for one to answer. */
  private readonly asking = new Map<string, { count: number; waiters: (() => void)[] }>();
  /** Server-side session keys this client started (ended on retire and on close). */
  private readonly serverSessions = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly client: DiscoveryClient;
  private readonly ttlSeconds: number;
  private readonly okReportIntervalMs: number;
  private readonly maxWaitMs: number;
  private readonly log: LeaseLog;
  private readonly now: () => number;
  private closed = false;
  private leaseCount = 0;
  /** False once the server refused `release` on a report (an operator older than this client). */
  private okRidesRelease = true;
  /** False once the server had no POST /v1/reports (an operator older than this client). */
  private okBatches = true;
  /** Set while the pending oks wait for their call (scheduleOks). */
  private okTimer?: NodeJS.Timeout;
  /** Renewals and ok batches: timers that must not hold the request that set them. */
  private readonly timers = new DetachedTimers();
  readonly stats: SessionLeasesStats = {
    leased: 0,
    renewed: 0,
    released: 0,
    reportedBanned: 0,
    reportedRateLimited: 0,
    reportedUnreachable: 0,
    okReports: 0,
    successes: 0,
    moved: 0,
    shared: 0,
    busy: 0,
    paced: 0,
    pacedMs: 0,
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
    this.maxWaitMs = options.maxWaitMs ?? 60_000;
    if (!(this.maxWaitMs >= 0)) throw new TypeError(`maxWaitMs must be >= 0, got ${options.maxWaitMs}`);
    if (options.maxLeases !== undefined && !(Number.isInteger(options.maxLeases) && options.maxLeases >= 1)) {
      throw new TypeError(`maxLeases must be a positive integer, got ${options.maxLeases}`);
    }
    this.log = options.log ?? silentLog;
    this.now = options.now ?? Date.now;
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
    const shared = this.bindings.get(session, host);
    if (shared === undefined || !this.usable(shared)) return undefined;
    const turn = this.turnIn(shared, host);
    if (turn.waitMs > 0 || turn.probe) return undefined;
    shared.usedSinceRenewal = true;
    this.take(shared, host, turn);
    return shared;
  }

  /** proxyUrl, for one request: `wait` says whether its wait was counted in stats.paced yet. */
  private async urlFor(
    session: string | undefined,
    host: string | undefined,
    wait: PacedWait,
  ): Promise<string | null> {
    if (this.closed) throw new Error('the proxy-operator lease manager is closed');
    let shared = this.bindings.get(session, host);
    if (shared && !this.usable(shared)) {
      this.detach(session, shared, 'banned, unreachable or expired');
      shared = undefined;
    }
    if (shared === undefined) {
      const key = bindingKey(session, host);
      let acquiring = this.acquiring.get(key);
      if (acquiring === undefined) {
        acquiring = this.acquire(session, host, wait).finally(() => this.acquiring.delete(key));
        this.acquiring.set(key, acquiring);
      }
      const acquired = await acquiring;
      if (acquired === null) return null;
      shared = acquired;
    }
    shared.usedSinceRenewal = true;
    const via = await this.throughPace(shared, host, wait);
    if (via === undefined) return this.urlFor(session, host, wait);
    via.usedSinceRenewal = true;
    return via.lease.proxy.url;
  }

  /**
   * The lease this request goes through when the site rate-limits: its own unless that proxy
   * rests for the host or has used its pace (see site-pace.ts); then another live lease of the
   * host with room now (the session stays bound to its own); when none has room, the one whose
   * turn comes first, after waiting for it (short by nature: a 429's Retry-After). Waiting
   * costs a Crawlee concurrency slot, and Crawlee's default pool starts at one, so a request
   * waits only when no leased proxy of the site may take it. Undefined: the own lease became
   * unusable while waiting.
   */
  private async throughPace(
    own: SharedLease,
    host: string | undefined,
    wait: PacedWait,
  ): Promise<SharedLease | undefined> {
    const started = this.now();
    for (;;) {
      let best = own;
      let turn = this.turnIn(own, host);
      // A probe of a higher limit is the last resort: a token on another proxy goes first.
      if (turn.waitMs > 0 || turn.probe) {
        for (const other of this.byHost.get(hostKey(host)) ?? []) {
          if (other === own || !this.usable(other)) continue;
          const otherTurn = this.turnIn(other, host);
          if (isSooner(otherTurn, turn)) [best, turn] = [other, otherTurn];
          if (turn.waitMs === 0 && !turn.probe) break;
        }
      }
      const left = this.maxWaitMs - (this.now() - started);
      if (turn.waitMs === 0 || left <= 0) {
        this.take(best, host, turn.waitMs === 0 ? turn : undefined);
        return best;
      }
      this.countPaced(wait);
      // Every leased proxy of the site has used its pace: a proxy not yet leased has all of
      // its own (a crawl's first second leases its proxies one session at a time).
      if (this.options.leaseAhead !== false) this.leaseAheadFor(host, true);
      const sleptFrom = this.now();
      await this.paceWait(host, Math.min(turn.waitMs, left));
      this.stats.pacedMs += this.now() - sleptFrom;
      if (!this.usable(own)) return undefined;
    }
  }

  /**
   * A request goes through `shared` now: its pace spends a token (or, unpaced, remembers the
   * request, for adopt; see site-pace.ts), from `turn` when it was just taken for this request.
   */
  private take(shared: SharedLease, host: string | undefined, turn: Turn | undefined): void {
    const admitted = turn?.admitted ?? admit(this.paceOf(shared.pace, host) ?? unpaced, this.now());
    shared.pace.pace = admitted.pace;
    if (admitted.probe) {
      this.proven.set(hostKey(host), provenByProbe(this.proven.get(hostKey(host)) ?? 0, admitted.pace));
      this.spreadProbe(host, admitted.pace, shared.lease.proxy.id);
    }
  }

  /**
   * One request's wait counts once in stats.paced, however many sleeps it takes and wherever:
   * a timer may fire a millisecond before Date.now() says the turn has come, a lease arriving
   * wakes it early, and the server may say every proxy rests more than once.
   */
  private countPaced(wait: PacedWait): void {
    if (!wait.counted) this.stats.paced++;
    wait.counted = true;
  }

  /** Sleeps `ms`, or until a new lease of `host` arrives (it may have room now). */
  private paceWait(host: string | undefined, ms: number): Promise<void> {
    const key = hostKey(host);
    return new Promise((resolve) => {
      let waiters = this.paceWaiters.get(key);
      if (waiters === undefined) this.paceWaiters.set(key, (waiters = new Set()));
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.paceWaiters.get(key) === waiters) this.paceWaiters.delete(key);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      waiters.add(wake);
    });
  }

  /** When a request may go through this lease to `host`: its proxy's rest, then its pace. */
  private turnIn(shared: SharedLease, host: string | undefined): Turn {
    const key = shared.key;
    const now = this.now();
    // Most crawls never see a 429: no lookup then (this runs on every request).
    const rest = (this.rests.size === 0 ? 0 : (this.rests.get(key) ?? 0)) - now;
    if (rest > 0) return { waitMs: rest, probe: false };
    const admitted = admit(this.paceOf(shared.pace, host) ?? unpaced, now);
    return { waitMs: admitted.waitMs, probe: admitted.probe, admitted };
  }

  /** One proxy's probe of `host` (or its refusal) stands for every proxy of that host (see heardOfProbe). */
  private spreadProbe(host: string | undefined, from: Pace, proxyID: string): void {
    for (const shared of this.byHost.get(hostKey(host)) ?? []) {
      const id = shared.lease.proxy.id;
      if (id === proxyID) continue;
      const cell = this.paces.get(banKey(id, host));
      if (cell?.pace !== undefined)
        cell.pace = heardOfProbe(cell.pace, from.probedAt, from.probeAfterPeriods);
    }
  }

  /**
   * The proxy's pace for `host`: its own, or the one another proxy learned for that host; at
   * least the limit the site has shown it allows every source.
   */
  private paceOf(cell: PaceCell, host: string | undefined): Pace | undefined {
    const own = cell.pace;
    // Before any 429 of any host (most crawls), nothing was learned: no lookups per request.
    if (this.learned.size === 0 && this.proven.size === 0) return own;
    let pace = own;
    const learned = this.learned.get(hostKey(host));
    if (own?.limit === undefined && learned !== undefined) pace = adopt(own ?? unpaced, learned, this.now());
    if (pace !== undefined) pace = raiseTo(pace, this.proven.get(hostKey(host)) ?? 0);
    if (pace !== own && pace !== undefined) cell.pace = pace;
    return pace;
  }

  /** The pace cell of `key`, made on first use. */
  private paceCell(key: string): PaceCell {
    let cell = this.paces.get(key);
    if (cell === undefined) this.paces.set(key, (cell = { pace: undefined }));
    return cell;
  }

  /** A request through `proxyUrl` to `host` succeeded: counted, reported in batches. */
  succeeded(session: string | undefined, host: string | undefined, proxyUrl: string): void {
    this.stats.successes++;
    // The lease may have ended mid-request (renewal, ban, session retired): count the success
    // on another live lease of the same proxy and host, if there is one.
    const shared = this.sharedFor(session, host, proxyUrl) ?? this.anyLeaseOn(proxyUrl, host);
    const proxyID = shared?.lease.proxy.id ?? this.proxyIDs.get(proxyUrl);
    if (proxyID !== undefined) {
      const cell = shared?.pace ?? this.paceCell(banKey(proxyID, host));
      cell.pace = paceSucceeded(cell.pace ?? unpaced, this.now());
    }
    if (shared === undefined) return;
    shared.unreportedOk++;
    shared.carried = true;
    this.scheduleOks();
  }

  /**
   * A request that went through `carrier` (readyLease's answer for it) to `proxyUrl`
   * succeeded: counted on that lease, as succeeded would, while it lives. False when it has
   * ended (renewal, ban, session retired): then call succeeded, which finds another.
   */
  succeededOn(carrier: SharedLease, proxyUrl: string): boolean {
    if (carrier.owner !== this || !carrier.live || carrier.lease.proxy.url !== proxyUrl) return false;
    this.stats.successes++;
    carrier.pace.pace = paceSucceeded(carrier.pace.pace ?? unpaced, this.now());
    carrier.unreportedOk++;
    carrier.carried = true;
    this.scheduleOks();
    return true;
  }

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
    const proxyID = this.proxyIDs.get(proxyUrl);
    if (proxyID === undefined) return;
    const own = this.sharedFor(session, host, proxyUrl);
    if (result === 'rate_limited') return this.rateLimited(proxyID, host, own, retryAfterSeconds);
    if (this.isBanned(proxyID, host)) {
      // Another request already reported this proxy for this host; just move this session.
      if (own) this.detach(session, own, 'proxy banned for host');
      return;
    }
    // Synchronously, before any await: no request after this line gets this proxy for host.
    this.bans.set(banKey(proxyID, host), this.now() + FALLBACK_BAN_MS);
    const affected = this.leasesOn(proxyID).filter((s) => s.host === host);
    for (const s of affected) this.forget(s);
    const via = own ?? affected[0];
    const work = (async () => {
      if (via !== undefined) {
        // The successes before the ban go first: an ok after it would reset its streak.
        const flushed = this.flushOk(affected);
        if (flushed) await flushed;
        try {
          const report = await this.client.report(via.lease.leaseID, result, host ? { target: host } : {});
          this.stats.reportedBanned++;
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
      await Promise.all(affected.map((s) => this.release(s, 'proxy banned for host')));
    })();
    this.track(work);
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
    const key = banKey(proxyID, host);
    const retryAfterMs = retryAfterSeconds === undefined ? undefined : retryAfterSeconds * 1000;
    const cell = this.paceCell(key);
    const before = this.paceOf(cell, host) ?? unpaced;
    const pace = paceRateLimited(before, this.now(), retryAfterMs);
    this.proven.set(
      hostKey(host),
      provenAfter429(this.proven.get(hostKey(host)) ?? 0, before, pace, this.now()),
    );
    cell.pace = pace;
    if (pace.limit !== undefined) this.learned.set(hostKey(host), pace);
    this.spreadProbe(host, pace, proxyID);
    if ((this.rests.get(key) ?? 0) > this.now()) return;
    this.rests.set(key, this.now() + (retryAfterSeconds ?? FALLBACK_REST_SECONDS) * 1000);
    const onProxy = this.leasesOn(proxyID).filter((s) => s.host === host);
    const via = own ?? onProxy[0];
    if (via === undefined) return;
    const work = (async () => {
      // The successes before the 429 go first: an ok after it would reset its streak.
      const flushed = this.flushOk(onProxy);
      if (flushed) await flushed;
      try {
        const report = await this.client.report(via.lease.leaseID, 'rate_limited', {
          ...(host ? { target: host } : {}),
          ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
        });
        this.stats.reportedRateLimited++;
        if (report.cooldownUntil !== null) this.rests.set(key, Date.parse(report.cooldownUntil));
      } catch (err) {
        this.log.warning('could not report a rate-limited proxy; resting it locally', {
          proxyID,
          host,
          error: String(err),
        });
      }
    })();
    // Not awaited: the rest above already keeps this proxy's requests back, and the request's
    // task holds one of Crawlee's few concurrency slots while it waits for the hook.
    this.track(work);
  }

  /**
   * A request through `proxyUrl` failed because the proxy could not carry it (refused, reset,
   * timed out connecting, a CONNECT it answered with a non-2xx). From this call on no session
   * gets that proxy; the server is told once (it holds the proxy out until a probe passes),
   * and every lease on it is released.
   */
  async unreachable(proxyUrl: string): Promise<void> {
    const proxyID = this.proxyIDs.get(proxyUrl);
    if (proxyID === undefined) return;
    const affected = this.leasesOn(proxyID);
    // Synchronously, before any await: no request after this line gets this proxy.
    for (const s of affected) this.forget(s);
    if (this.isDead(proxyID)) {
      // Already reported (or being reported): the leases above just go.
      await Promise.all(affected.map((s) => this.release(s, 'proxy unreachable')));
      return;
    }
    const dead: DeadProxy = { until: this.now() + FALLBACK_DEAD_MS, acknowledged: false };
    this.dead.set(proxyID, dead);
    const via = affected[0];
    const work = (async () => {
      if (via !== undefined) {
        try {
          await this.client.report(via.lease.leaseID, 'unreachable');
          this.stats.reportedUnreachable++;
          dead.acknowledged = true;
          this.log.debug('reported proxy unreachable', { proxyID });
        } catch (err) {
          this.log.warning('could not report an unreachable proxy; avoiding it locally', {
            proxyID,
            error: String(err),
          });
        }
      }
      await Promise.all(affected.map((s) => this.release(s, 'proxy unreachable')));
    })();
    this.track(work);
    await work;
  }

  /** The session ended (Crawlee retired it): release its leases and forget it on the server. */
  async sessionEnded(session: string): Promise<void> {
    if (this.closed) return;
    const released = this.bindings
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
    return this.leaseCount;
  }

  /** Server-side sessions started and not yet ended. */
  get activeServerSessions(): number {
    return this.serverSessions.size;
  }

  /** Stops renewing, sends the batched ok reports, releases every lease, ends every server session. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.okTimer);
    this.okTimer = undefined;
    await Promise.allSettled([...this.acquiring.values()]);
    const all = this.allLeases();
    for (const s of all) this.forget(s);
    await Promise.all(all.map((s) => this.release(s, 'closing')));
    const sessions = [...this.serverSessions];
    this.serverSessions.clear();
    await Promise.all(sessions.map((key) => this.endServerSession(key)));
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private async acquire(session: string | undefined, host: string | undefined, paced: PacedWait) {
    const started = this.now();
    const wait = this.options.retryAllBusy ?? DEFAULT_WAIT;
    const mayWait = (waits: number) =>
      wait !== false && waits < wait.retries && this.now() - started < this.maxWaitMs;
    for (let attempt = 0, busy = 0; ; attempt++) {
      if (this.closed) throw new Error('the proxy-operator lease manager is closed');
      // Full (by the server's last word, or by our own cap): share a live lease of this host.
      if (this.believedFull(host)) {
        const shared = this.shareable(host);
        if (shared !== undefined) return this.attach(session, shared, true);
      } else if (this.options.leaseAhead !== false) {
        // Crawlee's pool runs few tasks on a busy machine: a lease request in the request's
        // path costs the crawl its round trip. Join a live lease now; lease for the next ones.
        const spare = this.shareable(host);
        if (spare !== undefined) {
          this.leaseAheadFor(host);
          return this.attach(session, spare, spare.bindings.size > 0);
        }
      }
      if (!this.mayAsk(host)) {
        // Enough requests for this host are out: their answer decides (share, or ask again).
        await this.nextAnswer(host);
        continue;
      }
      let lease: Lease;
      try {
        lease = await this.asked(
          host,
          this.client.lease({
            ...(this.options.selector ? { selector: this.options.selector } : {}),
            ttlSeconds: this.ttlSeconds,
            ...(host ? { target: host } : {}),
            ...(session !== undefined ? { session: sessionKey(session) } : {}),
          }),
        );
      } catch (err) {
        if (isNoLease(err) && err.code === 'all_busy') {
          this.stats.busy++;
          this.fullUntil.set(hostKey(host), this.now() + FULL_MEMORY_MS);
          const shared = this.shareable(host);
          if (shared !== undefined) return this.attach(session, shared, true);
          if (wait !== false && mayWait(busy)) {
            // Nothing to share yet: wait for a slot instead of failing the request.
            await sleep(backoffDelayMs(busy++, wait));
            continue;
          }
        }
        if (isNoLease(err) && err.code === 'all_cooling_down') {
          // Every proxy rests for this site: join a live lease of it and wait with its sessions.
          const shared = this.shareable(host);
          if (shared !== undefined) return this.attach(session, shared, true);
        }
        if (
          isNoLease(err) &&
          err.code === 'all_cooling_down' &&
          err.retryAfterSeconds !== undefined &&
          this.now() - started + err.retryAfterSeconds * 1000 <= this.maxWaitMs
        ) {
          // Every proxy rests for this site (rate limits): the crawl slows down to the site's
          // pace instead of failing the request. A little jitter spreads the waiters.
          this.countPaced(paced);
          const slept = err.retryAfterSeconds * 1000 + Math.floor(Math.random() * 250);
          this.stats.pacedMs += slept;
          await sleep(slept);
          continue;
        }
        if (isNoLease(err) && this.options.whenNoneLeasable === 'direct') {
          this.log.debug('nothing leasable; going direct', { session, host, code: err.code });
          return null;
        }
        throw err;
      }
      this.stats.leased++;
      if (lease.session?.moved) this.stats.moved++;
      if (session !== undefined) this.serverSessions.add(sessionKey(session));
      this.proxyIDs.set(lease.proxy.url, lease.proxy.id);
      if (this.closed) {
        await this.client.release(lease.leaseID).catch(() => undefined);
        throw new Error('the proxy-operator lease manager is closed');
      }
      const refusal = this.localRefusal(lease.proxy.id, host);
      if (refusal !== undefined && attempt < MAX_LEASE_ATTEMPTS) {
        // Our earlier report did not reach the server: tell it through this lease, retry.
        await this.client
          .report(lease.leaseID, refusal, refusal === 'banned' && host ? { target: host } : {})
          .catch(() => undefined);
        await this.client.release(lease.leaseID).catch(() => undefined);
        continue;
      }
      this.log.debug('leased', { session, host, proxyID: lease.proxy.id, leaseID: lease.leaseID });
      return this.attach(session, this.adopt(lease, host), false);
    }
  }

  /** A granted lease becomes live: shareable, renewed, counted. */
  private adopt(lease: Lease, host: string | undefined): SharedLease {
    const shared: SharedLease = {
      owner: this,
      host,
      key: banKey(lease.proxy.id, host),
      pace: this.paceCell(banKey(lease.proxy.id, host)),
      lease,
      bindings: new Set(),
      live: true,
      ...this.expiry(lease),
      usedSinceRenewal: false,
      unreportedOk: 0,
      carried: false,
    };
    let forHost = this.byHost.get(hostKey(host));
    if (forHost === undefined) this.byHost.set(hostKey(host), (forHost = new LeastShared()));
    forHost.add(shared);
    this.leaseCount++;
    this.scheduleRenewal(shared);
    for (const wake of [...(this.paceWaiters.get(hostKey(host)) ?? [])]) wake();
    return shared;
  }

  /**
   * Asks for one more lease of `host` in the background, for the next new session, unless
   * LEASE_AHEAD are already waiting or in flight, the server is believed full, enough lease
   * requests are out, or the host's leases cover the fleet (coveredUntil). Not keyed by a
   * session: whichever session joins it first uses it.
   */
  private leaseAheadFor(host: string | undefined, forPace = false): void {
    const ahead = this.ahead.get(hostKey(host)) ?? 0;
    // Called for every new session: the unjoined leases are counted by their bucket (LeastShared).
    if (ahead >= LEASE_AHEAD || this.believedFull(host) || !this.mayAsk(host)) return;
    if ((this.coveredUntil.get(hostKey(host)) ?? 0) > this.now()) return;
    if (ahead + (this.byHost.get(hostKey(host))?.withUsers(0) ?? 0) >= LEASE_AHEAD) return;
    // Waits ask one at a time: each answer says whether there is another proxy to add.
    if (forPace && ahead > 0) return;
    this.ahead.set(hostKey(host), ahead + 1);
    const work = (async () => {
      try {
        const lease = await this.asked(
          host,
          this.client.lease({
            ...(this.options.selector ? { selector: this.options.selector } : {}),
            ttlSeconds: this.ttlSeconds,
            ...(host ? { target: host } : {}),
          }),
        );
        this.stats.leased++;
        this.proxyIDs.set(lease.proxy.url, lease.proxy.id);
        const refusal = this.localRefusal(lease.proxy.id, host);
        if (this.closed || refusal !== undefined) {
          if (refusal !== undefined) {
            await this.client
              .report(lease.leaseID, refusal, refusal === 'banned' && host ? { target: host } : {})
              .catch(() => undefined);
          }
          await this.client.release(lease.leaseID).catch(() => undefined);
          return;
        }
        // The server gives the least used proxy: one this host holds already means no other
        // is less used, and another lease on it spreads nothing (each ask costs the crawler a
        // call, see docs/benchmarks.md). The lease is kept for sessions to share.
        if (this.leasesOn(lease.proxy.id).some((s) => s.host === host)) {
          this.coveredUntil.set(hostKey(host), this.now() + COVERED_FOR_MS);
        }
        this.adopt(lease, host);
        this.log.debug('leased ahead', { host, proxyID: lease.proxy.id, leaseID: lease.leaseID });
      } catch (err) {
        // Nothing to add (every proxy full, cooling down for the site, or none matching).
        if (forPace && isNoLease(err)) this.coveredUntil.set(hostKey(host), this.now() + COVERED_FOR_MS);
        if (isNoLease(err) && err.code === 'all_busy') {
          this.stats.busy++;
          this.fullUntil.set(hostKey(host), this.now() + FULL_MEMORY_MS);
        } else if (!isNoLease(err)) this.log.debug('leasing ahead failed', { host, error: String(err) });
      } finally {
        const left = (this.ahead.get(hostKey(host)) ?? 1) - 1;
        if (left > 0) this.ahead.set(hostKey(host), left);
        else this.ahead.delete(hostKey(host));
      }
    })();
    this.track(work);
  }

  private mayAsk(host: string | undefined): boolean {
    return (this.asking.get(hostKey(host))?.count ?? 0) < LEASE_REQUESTS_PER_HOST;
  }

  private nextAnswer(host: string | undefined): Promise<void> {
    return new Promise((resolve) => this.asking.get(hostKey(host))!.waiters.push(resolve));
  }

  /** Counts a lease request for its host while it is out; wakes every waiter when it answers (each looks again). */
  private async asked<T>(host: string | undefined, request: Promise<T>): Promise<T> {
    const key = hostKey(host);
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

  private attach(session: string | undefined, shared: SharedLease, sharing: boolean): SharedLease {
    if (sharing) this.stats.shared++;
    shared.bindings.add(slotOf(session));
    this.counted(shared);
    this.bindings.set(session, shared.host, shared);
    return shared;
  }

  /** Whether a binding's lease may still carry requests. */
  private usable(shared: SharedLease): boolean {
    return this.isLive(shared) && this.carries(shared, this.now());
  }

  /** A live lease may carry requests: not banned for its host, not dead, not expired. */
  private carries(shared: SharedLease, now: number): boolean {
    return (
      shared.expiresAt > now &&
      (this.bans.size === 0 || !this.isBannedKey(shared.key)) &&
      (this.dead.size === 0 || !this.isDead(shared.lease.proxy.id))
    );
  }

  /** Keeps the host's buckets in step with a live lease's session count. */
  private counted(shared: SharedLease): void {
    if (shared.live) this.byHost.get(hostKey(shared.host))?.count(shared, shared.bindings.size);
  }

  private isLive(shared: SharedLease): boolean {
    return shared.live;
  }

  private believedFull(host: string | undefined): boolean {
    if (this.options.maxLeases !== undefined && this.leaseCount >= this.options.maxLeases) return true;
    return (this.fullUntil.get(hostKey(host)) ?? 0) > this.now();
  }

  /**
   * The live lease of `host` a new session should join: not resting if one is (then the one
   * whose rest ends first), then the fewest sessions on it. A lease no page has come back
   * through yet takes one session, while another lease can take the rest (mayJoin).
   */
  private shareable(host: string | undefined): SharedLease | undefined {
    return this.leastShared(host, mayJoin) ?? this.leastShared(host, () => true);
  }

  private leastShared(
    host: string | undefined,
    accept: (shared: SharedLease) => boolean,
  ): SharedLease | undefined {
    const now = this.now();
    const forHost = this.byHost.get(hostKey(host));
    // Called for every new session (a thousand with Crawlee's defaults) over hundreds of
    // leases: with no rest anywhere, the least shared lease comes from its bucket.
    if (this.rests.size === 0) return forHost?.least((shared) => accept(shared) && this.carries(shared, now));
    let best: SharedLease | undefined;
    let bestRest = Infinity;
    for (const shared of forHost ?? []) {
      if (!accept(shared) || !this.carries(shared, now)) continue;
      const rest = this.rests.size === 0 ? 0 : Math.max(0, (this.rests.get(shared.key) ?? 0) - now);
      if (
        best === undefined ||
        rest < bestRest ||
        (rest === bestRest && shared.bindings.size < best.bindings.size)
      ) {
        best = shared;
        bestRest = rest;
        // Nothing beats a lease with no rest and no session: the first one found is the one.
        if (rest === 0 && shared.bindings.size === 0) break;
      }
    }
    return best;
  }

  /** Why a lease the server just granted must not be used: our own report it has not heard. */
  private localRefusal(proxyID: string, host: string | undefined): 'banned' | 'unreachable' | undefined {
    if (this.isBanned(proxyID, host)) return 'banned';
    const dead = this.dead.get(proxyID);
    if (dead === undefined) return undefined;
    // The server heard us and leases it again: a probe passed since. Believe the server.
    if (dead.acknowledged || dead.until <= this.now()) {
      this.dead.delete(proxyID);
      return undefined;
    }
    return 'unreachable';
  }

  private expiry(lease: Lease): { expiresAt: number; ttlMs: number } {
    const expiresAt = Date.parse(lease.expiresAt);
    return { expiresAt, ttlMs: Math.max(1, expiresAt - this.now()) };
  }

  /** Renews when a third of the TTL is left, if the lease was used since; otherwise lets it go. */
  private scheduleRenewal(shared: SharedLease, delayMs?: number): void {
    clearTimeout(shared.timer);
    const due = delayMs ?? renewalDelayMs(shared.expiresAt, shared.ttlMs, this.now());
    shared.timer = this.timers.schedule(() => this.track(this.renewOrLetGo(shared)), due);
  }

  private async renewOrLetGo(shared: SharedLease): Promise<void> {
    if (!this.isLive(shared)) return;
    if (!shared.usedSinceRenewal) {
      this.forget(shared);
      await this.release(shared, 'idle');
      return;
    }
    try {
      const lease = await this.client.renew(shared.lease.leaseID, { ttlSeconds: this.ttlSeconds });
      if (!this.isLive(shared)) return;
      shared.lease = lease;
      Object.assign(shared, this.expiry(lease));
      shared.usedSinceRenewal = false;
      this.stats.renewed++;
      this.scheduleRenewal(shared);
    } catch (err) {
      if (!this.isLive(shared)) return;
      if (isLeaseGone(err)) {
        // Expired or dropped by a restarted operator: the next request leases again.
        this.forget(shared);
        this.log.debug('lease gone on renewal', { leaseID: shared.lease.leaseID });
        return;
      }
      const left = shared.expiresAt - this.now();
      this.log.warning('lease renewal failed; retrying', {
        leaseID: shared.lease.leaseID,
        error: String(err),
      });
      if (left > 0) this.scheduleRenewal(shared, Math.min(1_000, left / 2));
      else this.forget(shared);
    }
  }

  private async reportOk(shared: SharedLease): Promise<void> {
    if (shared.unreportedOk === 0) return;
    shared.unreportedOk = 0;
    try {
      await this.client.report(shared.lease.leaseID, 'ok', shared.host ? { target: shared.host } : {});
      this.stats.okReports++;
    } catch (err) {
      if (!isLeaseGone(err)) this.log.debug('ok report failed', { error: String(err) });
    }
  }

  /**
   * The pending oks of every lease go out together once per okReportIntervalMs, counted from
   * the first success not yet reported: one call for the whole crawl's oks instead of one per
   * lease (a crawl's calls to the API cost the crawler CPU: docs/benchmarks.md).
   */
  private scheduleOks(): void {
    if (this.okTimer !== undefined || this.closed) return;
    this.okTimer = this.timers.schedule(() => {
      this.okTimer = undefined;
      this.track(this.sendPendingOks());
    }, this.okReportIntervalMs);
  }

  private async sendPendingOks(): Promise<void> {
    const pending = this.allLeases().filter((shared) => shared.unreportedOk > 0);
    for (let i = 0; i < pending.length; i += MAX_BATCH_REPORTS) {
      await this.reportOks(pending.slice(i, i + MAX_BATCH_REPORTS));
    }
  }

  /**
   * One ok per lease, in one call (POST /v1/reports). Against an operator without that route,
   * one call per lease from then on. A failed call drops the oks, as a failed ok report's always was.
   */
  private async reportOks(leases: readonly SharedLease[]): Promise<void> {
    if (leases.length === 1 || !this.okBatches) {
      await Promise.all(leases.map((shared) => this.reportOk(shared)));
      return;
    }
    const counts = leases.map((shared) => shared.unreportedOk);
    for (const shared of leases) shared.unreportedOk = 0;
    try {
      const { items } = await this.client.reportMany(
        leases.map((shared) => ({
          leaseID: shared.lease.leaseID,
          result: 'ok' as const,
          ...(shared.host ? { target: shared.host } : {}),
        })),
      );
      this.stats.okReports += items.filter((item) => !('error' in item)).length;
    } catch (err) {
      if (!isMissingRoute(err)) {
        this.log.debug('ok reports failed', { error: String(err) });
        return;
      }
      this.okBatches = false;
      this.log.warning('the discovery API predates POST /v1/reports: ok reports go one per lease');
      leases.forEach((shared, i) => (shared.unreportedOk += counts[i]!));
      await Promise.all(leases.map((shared) => this.reportOk(shared)));
    }
  }

  /**
   * The pending ok and the release in one call (a crawl's calls to the API cost the crawler
   * CPU: docs/benchmarks.md). True when the lease has ended, or the server no longer knew it;
   * false when the release is still to be sent: a server that predates `release` refused the
   * field (its pending ok is kept, and every later release goes in two calls), or the call
   * failed (the ok is dropped, as a failed ok report's always was).
   */
  private async reportOkAndRelease(shared: SharedLease): Promise<boolean> {
    const pending = shared.unreportedOk;
    shared.unreportedOk = 0;
    try {
      await this.client.report(shared.lease.leaseID, 'ok', {
        ...(shared.host ? { target: shared.host } : {}),
        release: true,
      });
      this.stats.okReports++;
      return true;
    } catch (err) {
      if (isLeaseGone(err)) return true;
      if (refusedField(err, 'release')) {
        this.okRidesRelease = false;
        shared.unreportedOk = pending;
        this.log.warning('the discovery API predates release on report: releasing in two calls');
      } else {
        this.log.debug('ok report with release failed', { error: String(err) });
      }
      return false;
    }
  }

  /**
   * Sends the pending ok of each lease now; undefined when none has one, so that a report
   * with nothing to wait for goes out at once (new leases must avoid the proxy from then on).
   */
  private flushOk(leases: readonly SharedLease[]): Promise<unknown> | undefined {
    const pending = leases.filter((shared) => shared.unreportedOk > 0);
    return pending.length === 0 ? undefined : this.reportOks(pending);
  }

  private async release(shared: SharedLease, why: string): Promise<void> {
    if (shared.unreportedOk > 0 && this.okRidesRelease) {
      const ended = await this.reportOkAndRelease(shared);
      if (ended) {
        this.stats.released++;
        this.log.debug('released', { leaseID: shared.lease.leaseID, why });
        return;
      }
    }
    await this.reportOk(shared);
    try {
      await this.client.release(shared.lease.leaseID);
      this.stats.released++;
      this.log.debug('released', { leaseID: shared.lease.leaseID, why });
    } catch (err) {
      this.log.warning('could not release a lease (it expires by itself)', {
        leaseID: shared.lease.leaseID,
        error: String(err),
      });
    }
  }

  /** One session stops using a lease; the lease goes when no session is left on it. */
  private detach(session: string | undefined, shared: SharedLease, why: string): Promise<void> {
    this.bindings.deleteIf(session, shared.host, shared);
    shared.bindings.delete(slotOf(session));
    this.counted(shared);
    if (shared.bindings.size > 0 || !this.isLive(shared)) return Promise.resolve();
    this.forget(shared);
    const work = this.release(shared, why);
    this.track(work);
    return work;
  }

  private allLeases(): SharedLease[] {
    return [...this.byHost.values()].flatMap((set) => [...set]);
  }

  /** Forgets a lease locally (no server call): no request gets it any more, nor any of its sessions. */
  private forget(shared: SharedLease): void {
    clearTimeout(shared.timer);
    for (const session of shared.bindings) this.bindings.deleteIf(session, shared.host, shared);
    shared.bindings.clear();
    shared.live = false;
    const forHost = this.byHost.get(hostKey(shared.host));
    if (forHost?.delete(shared)) {
      this.leaseCount--;
      // The pace is learned per lease's life: memory stays bounded by the live leases.
      const proxyID = shared.lease.proxy.id;
      if (![...forHost].some((s) => s.lease.proxy.id === proxyID))
        this.paces.delete(banKey(proxyID, shared.host));
      // A slot of ours came free: the next new session may ask the server again.
      this.fullUntil.delete(hostKey(shared.host));
      if (forHost.size === 0) {
        this.byHost.delete(hostKey(shared.host));
        this.learned.delete(hostKey(shared.host));
        this.proven.delete(hostKey(shared.host));
      }
    }
  }

  private async endServerSession(key: string): Promise<void> {
    try {
      await this.client.endSession(key);
    } catch (err) {
      this.log.warning('could not end the session on the server', { session: key, error: String(err) });
    }
  }

  private leasesOn(proxyID: string): SharedLease[] {
    return [...this.byHost.values()].flatMap((set) => [...set].filter((s) => s.lease.proxy.id === proxyID));
  }

  private sharedFor(session: string | undefined, host: string | undefined, proxyUrl: string) {
    const shared = this.bindings.get(session, host);
    return shared?.lease.proxy.url === proxyUrl ? shared : undefined;
  }

  private anyLeaseOn(proxyUrl: string, host: string | undefined): SharedLease | undefined {
    for (const shared of this.byHost.get(hostKey(host)) ?? [])
      if (shared.lease.proxy.url === proxyUrl) return shared;
    return undefined;
  }

  private isBanned(proxyID: string, host: string | undefined): boolean {
    return this.isBannedKey(banKey(proxyID, host));
  }

  private isBannedKey(key: string): boolean {
    const until = this.bans.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.bans.delete(key);
    return false;
  }

  /** Reported unreachable and not yet leased back by the server. */
  private isDead(proxyID: string): boolean {
    const dead = this.dead.get(proxyID);
    if (dead === undefined) return false;
    if (dead.acknowledged || dead.until > this.now()) return true;
    this.dead.delete(proxyID);
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

/**
 * Whether a new session may join a lease while another lease could take it: not while no page
 * has come back through the lease and a session already waits on it. Crawlee's default pool
 * makes a new session per request, so a lease that arrived last (the least shared) drew the
 * next several requests at once, each a 403 when the site had banned its proxy: four per
 * banned proxy in bench:crawl, against one when the lease takes one request first.
 */
export function mayJoin(lease: {
  readonly carried: boolean;
  readonly bindings: { readonly size: number };
}): boolean {
  return lease.carried || lease.bindings.size === 0;
}

/** How long until a lease granted for `ttlMs` and ending at `expiresAt` is due for renewal. */
export function renewalDelayMs(expiresAt: number, ttlMs: number, now: number): number {
  return Math.max(0, expiresAt - ttlMs / 3 - now);
}

/** The key of a (session, host)'s acquisition in flight (not on the per-request path). */
function bindingKey(session: string | undefined, host: string | undefined): string {
  return `${session ?? ''}\0${host ?? ''}`;
}

function hostKey(host: string | undefined): string {
  return host ?? '';
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

/** One request's waits for the site's pace (see countPaced). */
interface PacedWait {
  counted: boolean;
}

/** When a request may go through a lease: after waitMs; `probe` if only as a probe of its pace. */
export interface Turn {
  waitMs: number;
  probe: boolean;
  /** The pace after the request goes, when it may go now (admit's answer). */
  admitted?: { pace: Pace; probe: boolean };
}

/**
 * A token now beats a probe now, which beats any wait; between waits, the shorter; between
 * probes, the one of the proxy with the higher limit. A probe the site let through raises only
 * its own proxy, and the site's limit is shown for every proxy when a proxy's next probe is
 * refused (provenAfter429). Each probe defers every proxy's next one, so when any proxy could
 * probe, the one whose limit a probe already raised goes again. A crawl whose first limit came
 * out low (two a second where the site allows three) took five probes of five different
 * proxies to get one refused, 25 s at two thirds of the site's rate; now it takes two.
 */
export function isSooner(a: Turn, b: Turn): boolean {
  if (a.waitMs !== b.waitMs) return a.waitMs < b.waitMs;
  if (a.probe !== b.probe) return !a.probe;
  return a.probe && (a.admitted?.pace.limit ?? 0) > (b.admitted?.pace.limit ?? 0);
}

/** The server has no such route (it predates it). */
function isMissingRoute(err: unknown): boolean {
  return err instanceof DiscoveryApiError && err.status === 404 && err.code === 'not_found';
}

/** The server refused a request field it does not know (it predates the field). */
function refusedField(err: unknown, field: string): boolean {
  return (
    err instanceof DiscoveryApiError &&
    err.code === 'invalid_request' &&
    err.serverMessage.startsWith('unknown field(s)') &&
    err.serverMessage.includes(`'${field}'`)
  );
}
