// Crawlee 3 glue: a ProxyConfiguration whose newUrlFunction leases per Crawlee session, a
// post-navigation hook that turns responses into reports and session retirements into
// releases, and an error handler that turns proxy connection failures into unreachable
// reports. All the lease logic lives in SessionLeases; this file only translates events.
// @crawlee/core, not the crawlee meta-package: importing crawlee loads @crawlee/browser-pool,
// whose module body starts an open proxy-chain server on every interface ([::], port 0, unref'd).
import { log as crawleeLog, ProxyConfiguration, type ProxyInfo } from '@crawlee/core';
import type { ReportResult } from '../types.js';
import {
  SessionLeases,
  type LeaseLog,
  type SessionLeasesOptions,
  type SessionLeasesStats,
  type SharedLease,
} from './session-leases.js';
import { HostNames } from './host-names.js';
import { carrierOf, ProxyInfos } from './proxy-infos.js';

export interface ProxyOperatorConfigurationOptions extends SessionLeasesOptions {
  /** Responses reported as `banned`. Default [401, 403] (Crawlee's default blocked codes). */
  bannedStatusCodes?: number[];
  /** Responses reported as `rate_limited`. Default [429] (Crawlee's default blocked code). */
  rateLimitedStatusCodes?: number[];
}

/** The parts of a Crawlee crawling context the hooks read (HTTP and browser crawlers alike). */
export interface NavigationContext {
  request: { url: string };
  session?: { id: string };
  proxyInfo?: { url?: string };
  response?: {
    statusCode?: number;
    status?: number | (() => number);
    headers?: Record<string, string | string[] | undefined> | (() => Record<string, string>);
  } | null;
  crawler?: { sessionPool?: SessionEvents };
}

interface SessionEvents {
  on(event: string, listener: (session: { id: string }) => void): unknown;
  off(event: string, listener: (session: { id: string }) => void): unknown;
}

/** Crawlee's SessionPool event, emitted by Session.retire() (blocked, used up, or too many errors). */
const SESSION_RETIRED = 'sessionRetired';

/** What a crawler's options need from the configuration: the one call that wires it (`crawlerOptions`). */
export interface CrawlerWiring<C extends NavigationContext, E extends NavigationContext> {
  proxyConfiguration: ProxyOperatorConfiguration;
  postNavigationHooks: ((ctx: C) => Promise<void> | undefined)[];
  errorHandler: (ctx: E, error: unknown) => Promise<void>;
}

/** The crawler's own hooks, which `crawlerOptions` runs beside the configuration's. */
export interface OwnHooks<C extends NavigationContext, E extends NavigationContext> {
  postNavigationHooks?: ((ctx: C) => Promise<void> | void)[];
  errorHandler?: (ctx: E, error: unknown) => Promise<void> | void;
}

/** The error logged once when a request is retried and the error handler never ran. */
export const MISSING_ERROR_HANDLER =
  'ProxyOperatorConfiguration.errorHandler is not wired: a request was retried and it never ran, so ' +
  'proxies that cannot connect are not reported and their sessions keep failing on them until the ' +
  "server's health checks catch up. Build the crawler with `...proxyConfiguration.crawlerOptions()` " +
  '(pass your own hooks to it), or call `await proxyConfiguration.errorHandler(ctx, error)` from your errorHandler.';

/**
 * A Crawlee `ProxyConfiguration` backed by the proxy-operator discovery API.
 *
 * ```ts
 * const proxyConfiguration = new ProxyOperatorConfiguration({ client, selector: { geo: 'eu' } });
 * const crawler = new HttpCrawler({
 *   ...proxyConfiguration.crawlerOptions(), // proxyConfiguration, postNavigationHooks, errorHandler
 *   requestHandler,
 * });
 * await crawler.run(urls);
 * await proxyConfiguration.close();
 * ```
 */
export class ProxyOperatorConfiguration extends ProxyConfiguration {
  readonly leases: SessionLeases;
  private readonly hosts: HostNames;
  private readonly infos = new ProxyInfos();
  private readonly leaseLog: LeaseLog;
  private readonly errorLog: LeaseLog['warning'];
  private readonly banned: ReadonlySet<number>;
  private readonly rateLimited: ReadonlySet<number>;
  private readonly watchedPools = new Set<SessionEvents>();
  /**
   * Crawlee retires a session whose proxy failed (a SessionError) right after the crawler's
   * errorHandler. Without ours wired, a session retired while its lease waits for an answer is
   * taken for one whose proxy failed: reported `unreachable` (the server rechecks the proxy and
   * holds it out of new leases until a probe passes; a false alarm costs a recheck), so the
   * next sessions are not leased the dead proxy again, one failure each. A response resets the
   * wait: a ban or a 429 is answered and never counts.
   */
  private readonly onRetired = (session: { id: string }) => {
    const silent = this.errorHandled ? undefined : this.leases.silentProxyOf(session.id);
    if (silent !== undefined) void this.leases.unreachable(silent);
    void this.leases.sessionEnded(session.id);
  };
  private hooked = false;
  /** The error handler has run (Crawlee runs it before every retry: a retry without it says it is not wired). */
  private errorHandled = false;
  private missingErrorHandlerLogged = false;

  constructor(options: ProxyOperatorConfigurationOptions) {
    const log = options.log ?? crawleeLog.child({ prefix: 'ProxyOperator' });
    // Crawlee asks newProxyInfo (overridden below); its newUrlFunction is what a caller of
    // Crawlee's other paths gets, the same answer.
    super({
      newUrlFunction: (sessionId, newUrlOptions) => this.urlFor(sessionId, newUrlOptions?.request?.url),
    });
    this.leases = new SessionLeases({ ...options, log });
    this.hosts = new HostNames();
    this.leaseLog = log;
    this.errorLog = log.error?.bind(log) ?? log.warning.bind(log);
    this.banned = new Set(options.bannedStatusCodes ?? [401, 403]);
    this.rateLimited = new Set(options.rateLimitedStatusCodes ?? [429]);
  }

  /**
   * Crawlee's newProxyInfo, minus its per-request work: the URL a lease gives is parsed once
   * per proxy (not on every request), and a request whose session holds a ready lease gets its
   * answer without a call or a wait in between. Every request of a crawl comes through here.
   */
  override newProxyInfo(
    sessionId?: string | number,
    options?: { request?: RequestSeen },
  ): Promise<ProxyInfo | undefined> {
    if (options?.request?.retryCount) this.retried();
    const session = sessionId === undefined ? undefined : String(sessionId);
    const host = this.hosts.of(options?.request?.url);
    const ready = this.leases.readyLease(session, host);
    if (ready === undefined) {
      return this.leases
        .proxyUrl(session, host)
        .then((found) => (found === null ? undefined : this.infos.of(found, session)));
    }
    try {
      // The lease rides on the ProxyInfo to the hook (see proxy-infos.ts).
      return Promise.resolve(this.infos.of(ready.lease.proxy.url, session, ready));
    } catch (err) {
      // A URL the server sent that does not parse: a rejection, as from Crawlee's own.
      return Promise.reject(err as Error);
    }
  }

  override async newUrl(
    sessionId?: string | number,
    options?: { request?: RequestSeen },
  ): Promise<string | undefined> {
    if (options?.request?.retryCount) this.retried();
    return (await this.urlFor(sessionId, options?.request?.url)) ?? undefined;
  }

  /** The proxy URL for a request to `url` in the session: at once when its lease is ready. */
  private urlFor(
    sessionId: string | number | undefined,
    url: string | undefined,
  ): string | Promise<string | null> {
    const session = sessionId === undefined ? undefined : String(sessionId);
    const host = this.hosts.of(url);
    return this.leases.readyUrl(session, host) ?? this.leases.proxyUrl(session, host);
  }

  /**
   * The crawler's options that wire this configuration in one call: `proxyConfiguration`, its
   * `postNavigationHooks` (yours first, then this one's) and its `errorHandler` (this one's,
   * then yours). Spread it into the crawler's options, and give it your own hooks rather than
   * setting them beside it (an `errorHandler` set after the spread replaces this one's).
   *
   * ```ts
   * new CheerioCrawler({ ...proxyConfiguration.crawlerOptions({ errorHandler: myOwn }), requestHandler });
   * ```
   */
  crawlerOptions<C extends NavigationContext = NavigationContext, E extends NavigationContext = C>(
    own: OwnHooks<C, E> = {},
  ): CrawlerWiring<C, E> {
    const mine = own.errorHandler;
    return {
      proxyConfiguration: this,
      postNavigationHooks: [
        ...(own.postNavigationHooks ?? []).map((hook) => async (ctx: C) => void (await hook(ctx))),
        (ctx: C) => this.postNavigationHook(ctx),
      ],
      errorHandler: async (ctx, error) => {
        await this.errorHandler(ctx, error);
        await mine?.(ctx, error);
      },
    };
  }

  /**
   * A request is being retried: Crawlee ran the crawler's errorHandler for its failure first,
   * so if ours never ran, it is not wired. Said once, at error level (see MISSING_ERROR_HANDLER).
   */
  private retried(): void {
    if (this.errorHandled || this.missingErrorHandlerLogged) return;
    this.missingErrorHandlerLogged = true;
    this.leases.stats.errorHandlerMissing = 1;
    this.errorLog(MISSING_ERROR_HANDLER);
  }

  /**
   * Add to the crawler's `postNavigationHooks`. Reports `banned`/`rate_limited` for the
   * blocked status codes (awaited, so the retry of the request never gets the same proxy for
   * that host) and counts successes for batched `ok` reports; on first use it subscribes to
   * the session pool's retirements to release their leases.
   */
  readonly postNavigationHook = (ctx: NavigationContext): Promise<void> | undefined => {
    this.hooked = true;
    this.watch(ctx.crawler?.sessionPool);
    const proxyUrl = ctx.proxyInfo?.url;
    const status = statusOf(ctx.response);
    if (!proxyUrl || status === undefined) return undefined;
    const outcome = outcomeOf(status, this.banned, this.rateLimited);
    if (outcome === undefined) {
      // A status that says nothing about the proxy still says it answered (see standingCheckMs).
      this.leases.answered(ctx.session?.id, this.hosts.of(ctx.request.url), proxyUrl);
      return undefined;
    }
    // A success returns nothing to await: it is every page's path, and needs no call, and
    // while the lease that carried it lives, no lookup either.
    if (outcome === 'ok') {
      const carrier = carrierOf<SharedLease>(ctx.proxyInfo);
      if (carrier === undefined || !this.leases.succeededOn(carrier, proxyUrl))
        this.leases.succeeded(ctx.session?.id, this.hosts.of(ctx.request.url), proxyUrl);
      return undefined;
    }
    const host = this.hosts.of(ctx.request.url);
    const session = ctx.session?.id;
    const retryAfter = outcome === 'rate_limited' ? retryAfterSeconds(headersOf(ctx.response)) : undefined;
    return this.leases.blocked(session, host, proxyUrl, outcome, retryAfter);
  };

  /**
   * Set as the crawler's `errorHandler` (or call it from yours): a request that failed
   * because its proxy could not carry it (refused, reset, a CONNECT answered with a non-2xx)
   * is reported `unreachable`, awaited, before Crawlee retries the request with a new session,
   * so the retry never lands on that proxy; every lease on the proxy is released.
   */
  readonly errorHandler = async (ctx: NavigationContext, error: unknown): Promise<void> => {
    this.errorHandled = true;
    this.watch(ctx.crawler?.sessionPool);
    const proxyUrl = ctx.proxyInfo?.url;
    if (proxyUrl && isProxyFailure(error)) await this.leases.unreachable(proxyUrl);
  };

  /** Counts of what the integration did (leases, renewals, reports, releases). */
  get stats(): Readonly<SessionLeasesStats> {
    return this.leases.stats;
  }

  /** After `crawler.run()`: sends the batched ok reports and releases every lease. */
  async close(): Promise<void> {
    if (!this.hooked && this.leases.stats.leased > 0) {
      this.leaseLog.warning(
        "ProxyOperatorConfiguration.postNavigationHook was never called: add it to the crawler's " +
          'postNavigationHooks, or no bans are reported and retired sessions keep their leases until close()',
      );
    }
    for (const pool of this.watchedPools) pool.off(SESSION_RETIRED, this.onRetired);
    this.watchedPools.clear();
    await this.leases.close();
  }

  private watch(pool: SessionEvents | undefined): void {
    if (pool === undefined || this.watchedPools.has(pool)) return;
    this.watchedPools.add(pool);
    pool.on(SESSION_RETIRED, this.onRetired);
  }
}

/** What the hooks read of a Crawlee request handed to newProxyInfo: its URL, and whether it is a retry. */
interface RequestSeen {
  url?: string;
  retryCount?: number;
}

/**
 * What a response says about the proxy it came through: the banned and rate-limited codes
 * are reports, any other status below 400 is a success, and other 4xx/5xx say nothing about
 * the proxy (a missing page, a broken site).
 */
export function outcomeOf(
  status: number,
  banned: ReadonlySet<number>,
  rateLimited: ReadonlySet<number>,
): Exclude<ReportResult, 'unreachable'> | undefined {
  if (banned.has(status)) return 'banned';
  if (rateLimited.has(status)) return 'rate_limited';
  return status < 400 ? 'ok' : undefined;
}

function statusOf(response: NavigationContext['response']): number | undefined {
  if (!response) return undefined;
  if (typeof response.statusCode === 'number') return response.statusCode;
  const status = typeof response.status === 'function' ? response.status() : response.status;
  return typeof status === 'number' ? status : undefined;
}

/**
 * Errors that say the proxy itself could not carry the request, as Crawlee's own list of
 * proxy errors names them (ROTATE_PROXY_ERRORS) plus the other ways a TCP connection to the
 * proxy fails. A timeout is not one of them: a slow site times out the same way.
 */
const PROXY_FAILURES = [
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ERR_PROXY_CONNECTION_FAILED',
  'ERR_TUNNEL_CONNECTION_FAILED',
  'socket hang up',
];

/**
 * A CONNECT the proxy answered with a non-2xx (got-scraping's text): the proxy's own refusal
 * (403, 407, ...) is the proxy's failure; 502 and 504 say the proxy could not reach the site,
 * which is the site's (or the path's) failure, not the proxy's, and is no `unreachable`.
 */
const CONNECT_REFUSED = /Proxy responded with (\d{3})/;
const UPSTREAM_FAILURES = new Set([502, 504]);

function isProxyFailureText(text: string): boolean {
  const refused = CONNECT_REFUSED.exec(text);
  if (refused) return !UPSTREAM_FAILURES.has(Number(refused[1]));
  return PROXY_FAILURES.some((failure) => text.includes(failure));
}

/**
 * A timeout whose socket never connected (got's timings: a socket, no connect): the TCP
 * connection to the proxy never completed, so the proxy, not the site, is what failed (a
 * black hole: it accepts nothing and answers nothing). A timeout after the connection (a slow
 * site) has a connect time and stays no proxy failure.
 */
function neverConnected(e: object): boolean {
  const { code, timings } = e as { code?: unknown; timings?: { socket?: unknown; connect?: unknown } };
  return (
    code === 'ETIMEDOUT' &&
    typeof timings === 'object' &&
    timings !== null &&
    timings.socket !== undefined &&
    timings.connect === undefined
  );
}

/** Whether an error (or its cause, or its message: Crawlee re-wraps errors as text) is a proxy failure. */
export function isProxyFailure(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (typeof e === 'object') {
      const { code, message, cause } = e as { code?: unknown; message?: unknown; cause?: unknown };
      if (typeof code === 'string' && PROXY_FAILURES.includes(code)) return true;
      if (neverConnected(e)) return true;
      if (typeof message === 'string' && isProxyFailureText(message)) return true;
      e = cause;
    } else {
      return typeof e === 'string' && isProxyFailureText(e);
    }
  }
  return false;
}

/** A Retry-After header in whole seconds (delta-seconds or an HTTP date), or undefined. */
export function retryAfterSeconds(
  headers: Record<string, string | string[] | undefined> | undefined,
  now: number = Date.now(),
): number | undefined {
  const raw = headers?.['retry-after'];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  if (!value) return undefined;
  const seconds = /^\d+$/.test(value) ? Number(value) : Math.ceil((Date.parse(value) - now) / 1000);
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(Math.max(seconds, 0), 86_400);
}

function headersOf(
  response: NavigationContext['response'],
): Record<string, string | string[] | undefined> | undefined {
  if (!response?.headers) return undefined;
  return typeof response.headers === 'function' ? response.headers() : response.headers;
}
