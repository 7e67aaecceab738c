// What every request handler of the gateway shares: its book, pool, tokens, upstream agents,
// metrics and options. Built once by createGateway (gateway-server.ts).
import type { Logger } from 'pino';
import type { Carrier, GatewayMetrics } from './gateway-metrics.js';
import type { LeasePool } from './lease-pool.js';
import type { GatewayBook, GatewayLeaseRequest, TokenVerifier, UpstreamGuard } from './ports.js';
import type { GatewayError } from './replies.js';
import type { HeldLease, TakeResult } from './lease-pool.js';
import type { SitePaces } from './site-paces.js';
import type { UpstreamAgents } from './upstream-agents.js';
import type { StatusCodes } from './upstream-outcome.js';
import type { UsernameOptions } from './username.js';

export interface GatewayOptions {
  /** Upstreams tried per request or tunnel before the client gets 502 upstream_failed (>= 1). */
  maxAttempts: number;
  /** Milliseconds an upstream may take to accept a connection (and to answer a CONNECT). */
  connectTimeoutMs: number;
  /** Milliseconds a connected upstream may take to send a plain-HTTP response's head. */
  responseTimeoutMs: number;
  /**
   * Milliseconds a tunnel may carry no byte either way before it is closed and its lease goes
   * back: a client gone without a FIN (its host down, a partition) would hold both for ever.
   */
  tunnelIdleMs: number;
  /**
   * Milliseconds a client has from its connection (on keep-alive, from its next request's
   * first byte) to send a whole request head: one that sends nothing, or dribbles header bytes, is closed unheard.
   * The body, a download and a tunnel come after the head and are not bounded by it.
   */
  headersTimeoutMs: number;
  /** Lease TTL when the username gives none. */
  ttlSeconds: number;
  maxTTLSeconds: number;
  /** Milliseconds a finished lease waits for the next request with the same options. */
  idleMs: number;
  /** Site statuses reported as bans and rate limits (plain HTTP only: a tunnel's are encrypted). */
  codes: StatusCodes;
  /** Request bodies are held (up to this size) so a failed attempt can be retried elsewhere. */
  maxBodyBytes: number;
  /**
   * Milliseconds a request may wait, from its arrival, when every proxy rests for its site
   * (all_cooling_down with the first rest's end known) or for its turn at the site's pace
   * (site-pace.ts), before the client gets the 503.
   */
  maxRestWaitMs: number;
}

export const DEFAULT_GATEWAY_OPTIONS: GatewayOptions = {
  maxAttempts: 3,
  connectTimeoutMs: 5000,
  responseTimeoutMs: 60_000,
  tunnelIdleMs: 120_000,
  headersTimeoutMs: 30_000,
  ttlSeconds: 60,
  maxTTLSeconds: 3600,
  idleMs: 15_000,
  codes: { banned: new Set([403]), rateLimited: new Set([429]) },
  maxBodyBytes: 10 * 1024 * 1024,
  maxRestWaitMs: 10_000,
};

export interface GatewayContext {
  /**
   * Upstreams that failed an attempt here lately (id → until, ms): the book may not believe an
   * unreachable report at once (its holdoff after a passing probe), so the gateway itself
   * steers its retries away from them for a few seconds.
   */
  failed: Map<string, number>;
  book: GatewayBook;
  tokens: TokenVerifier;
  pool: LeasePool;
  agents: UpstreamAgents;
  /** Where guarded (External) upstreams may be; without it, every guarded upstream is refused. */
  guard?: UpstreamGuard;
  metrics: GatewayMetrics;
  /** Each (upstream, target)'s pace on plain HTTP, learned from the site's 429s (this replica's memory). */
  paces: SitePaces;
  options: GatewayOptions;
  logger: Logger;
}

/**
 * The lease request of a client's options for a target. A session binds per target (the
 * book's key `gw:<session>@<target>`): a session id keeps one exit for each site it visits.
 */
export function leaseRequest(
  owner: string,
  options: UsernameOptions,
  target: string,
  ttlSeconds: number,
): GatewayLeaseRequest {
  return {
    owner,
    selector: options.selector,
    target,
    ...(options.session === undefined ? {} : { session: `gw:${options.session}@${target}` }),
    ttlSeconds: options.ttlSeconds ?? ttlSeconds,
  };
}

/** How long an upstream that failed an attempt is avoided by this gateway's retries. */
export const AVOID_FAILED_MS = 10_000;
/** Leases on an avoided upstream handed back before one is used anyway. */
const MAX_AVOIDING_TAKES = 4;

/** A lease from the pool, on an upstream that has not failed here lately when the book has one. */
export async function takeAvoiding(
  ctx: GatewayContext,
  request: GatewayLeaseRequest,
  room?: (upstreamID: string) => boolean,
): Promise<TakeResult> {
  for (let i = 0; ; i++) {
    const taken = await ctx.pool.take(request, room);
    if (!taken.granted || i >= MAX_AVOIDING_TAKES) return taken;
    const until = ctx.failed.get(taken.lease.upstream.id);
    if (until === undefined || until <= Date.now()) return taken;
    await ctx.pool.drop(taken.lease);
  }
}

/**
 * An attempt through `upstream` failed: avoid it for a while, and unbind the session so that
 * the book chooses its next proxy afresh (it would keep a proxy whose report it did not believe).
 */
export async function attemptFailed(
  ctx: GatewayContext,
  upstreamID: string,
  request: GatewayLeaseRequest,
): Promise<void> {
  const now = Date.now();
  if (ctx.failed.size > 1000) for (const [id, until] of ctx.failed) if (until <= now) ctx.failed.delete(id);
  ctx.failed.set(upstreamID, now + AVOID_FAILED_MS);
  if (request.session !== undefined)
    await ctx.book.endSession(request.session, request.owner).catch(() => undefined);
}

/**
 * The guard refused a leased upstream's address (its name now resolves inside: DNS rebinding, or
 * a config that changed since its probe). Said apart from a dead upstream, for an operator; the
 * attempt is still reported unreachable, so the book re-probes it through the same guard and the
 * probe's verdict (EndpointRefused, or healthy again) decides, not this report (docs/security.md).
 */
export function endpointRefused(ctx: GatewayContext, upstreamID: string, message: string): void {
  ctx.logger.warn({ proxy: upstreamID, err: message }, 'gateway: upstream endpoint refused, not connected');
}

/**
 * One attempt's lease, or the refusal to answer with (counted as the request's end): the same
 * step for a plain request and a tunnel.
 */
export async function leaseForAttempt(
  ctx: GatewayContext,
  request: GatewayLeaseRequest,
  carrier: Carrier,
  clientGone: () => boolean = () => false,
  /** Whether a request through an upstream may go now (plain HTTP: its site pace); idle leases that may go first. */
  room?: (upstreamID: string) => boolean,
): Promise<{ lease: HeldLease } | { refusal: GatewayError }> {
  const started = Date.now();
  try {
    for (;;) {
      const taken = await takeAvoiding(ctx, request, room);
      if (taken.granted) {
        if (taken.shared === true) ctx.metrics.shared(carrier);
        return { lease: taken.lease };
      }
      const wait = restWait(taken, Date.now() - started, ctx.options.maxRestWaitMs);
      if (wait !== undefined && !clientGone()) {
        // Every proxy rests for this site (its rate limits): the request keeps the site's pace,
        // as the client's sessions do, instead of failing one the site takes in a moment.
        await new Promise((r) => setTimeout(r, wait));
        continue;
      }
      ctx.metrics.ended(carrier, 'no_proxy');
      return { refusal: noProxy(taken, request) };
    }
  } catch (err) {
    ctx.logger.debug({ err }, 'gateway: the lease book cannot be reached');
    ctx.metrics.ended(carrier, 'store_unavailable');
    return { refusal: storeUnavailable() };
  }
}

/**
 * How long to wait before asking again when the book refused: only when every proxy rests for
 * the target and the first rest ends within the request's bound (a little after it, so the
 * waiters do not all ask at the same millisecond). Pure.
 */
export function restWait(
  refusal: Extract<TakeResult, { granted: false }>,
  waitedMs: number,
  maxWaitMs: number,
  jitter: number = Math.random(),
): number | undefined {
  if (refusal.reason !== 'all_cooling_down' || refusal.retryAfterMs === undefined) return undefined;
  const wait = refusal.retryAfterMs + Math.floor(jitter * 100);
  return waitedMs + wait <= maxWaitMs ? wait : undefined;
}

/**
 * The book could not be reached (Redis down): a 503, never a 500 nor a request sent without a
 * proxy. The cause is the log's (the store logs the outage): the Redis client's text names the
 * store's address, which no crawler needs to see.
 */
export function storeUnavailable(): GatewayError {
  return {
    status: 503,
    code: 'store_unavailable',
    message: 'the lease book cannot be reached; retry in a moment',
    retryAfter: 1,
  };
}

export function noProxy(
  refusal: Extract<TakeResult, { granted: false }>,
  request: GatewayLeaseRequest,
): GatewayError {
  const selector =
    Object.keys(request.selector).length === 0 ? '' : ` matching ${JSON.stringify(request.selector)}`;
  const messages = {
    no_match: `no leasable proxy${selector}`,
    all_busy: `every proxy${selector} is at its maxLeases (requests and tunnels in flight, leases held), and this gateway holds no lease for these options to share`,
    all_cooling_down: `every proxy${selector} is cooling down for ${request.target}`,
    lease_quota: `token "${request.owner}" holds its quota of live leases (the API's and the gateway's count alike), and this gateway holds no lease for these options to share`,
  };
  return {
    // The token's own limit, not the fleet's: the API answers it 429 as well.
    status: refusal.reason === 'lease_quota' ? 429 : 503,
    code: refusal.reason,
    message: messages[refusal.reason],
    ...(refusal.retryAfterMs === undefined
      ? refusal.reason === 'all_busy' || refusal.reason === 'lease_quota'
        ? { retryAfter: 1 }
        : {}
      : { retryAfter: Math.max(1, Math.ceil(refusal.retryAfterMs / 1000)) }),
  };
}

export function upstreamFailed(attempts: number, last: string): GatewayError {
  return {
    status: 502,
    code: 'upstream_failed',
    message: `${attempts} upstream proxies failed in a row (last: ${last}); each was reported unreachable`,
  };
}
