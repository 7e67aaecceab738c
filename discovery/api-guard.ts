// Who a /v1 request is and what it may see: no-store, bearer authentication (failed attempts
// limited per source address), then the token's own request rate; the token's name as the
// owner of what it leases, and its scope as a predicate over proxies.
import type { RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { ApiTokens } from '../book/api-tokens.js';
import type { ProxyRecord } from '../book/catalog.js';
import { ANONYMOUS_OWNER } from '../book/lease-owner.js';
import { isOpen, OPEN_POLICY, scopeMatcher, type TokenPolicy } from '../book/token-scope.js';
import { sendTooManyRequests } from './api-error.js';
import { bearerAuth, ownerOf } from './bearer-auth.js';
import type { DiscoveryMetrics } from './discovery-metrics.js';
import { SourceLimiter } from './source-limiter.js';
import { RateLimiter, type BucketLimits } from './token-bucket.js';

export interface GuardOptions {
  /** Per-token request rate; undefined = unlimited. */
  rateLimit?: BucketLimits;
  /** Requests without a valid token, per source address (source-limiter.ts's default). */
  failedAuthLimit?: BucketLimits;
  /** The process's limiter of failed authentications, shared with the gateway; else one of its own. */
  failedAuth?: SourceLimiter;
}

/**
 * Every /v1 route's first handler. Auth on each /v1 route itself (not one app.use('/v1') in
 * front, which re-writes every request's path on the hot path), and once more for /v1 paths
 * no route takes.
 */
export function apiGuard(
  tokens: ApiTokens | undefined,
  options: GuardOptions,
  metrics: DiscoveryMetrics,
  logger: Logger,
): RequestHandler {
  const authenticate: RequestHandler =
    tokens === undefined
      ? (_req, _res, next) => next()
      : bearerAuth(tokens, options.failedAuth ?? new SourceLimiter(options.failedAuthLimit));
  if (tokens === undefined) {
    logger.warn('no discovery API token: the discovery API accepts requests WITHOUT authentication');
  }
  const throttle = options.rateLimit === undefined ? undefined : rateLimited(options.rateLimit, metrics);
  // Authentication, then the caller's rate limit: a request without a valid token costs no
  // one's budget (and is cheap: one cached digest).
  // Every /v1 answer is private to its token, and lease answers carry proxy credentials:
  // no cache between crawler and API may keep one.
  const authenticated: RequestHandler = (req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    authenticate(req, res, next);
  };
  return throttle === undefined
    ? authenticated
    : (req, res, next) =>
        authenticated(req, res, (err?: unknown) => (err ? next(err) : throttle(req, res, next)));
}

/** Who asks: the token's name, or one anonymous owner when the API is unauthenticated. */
export function requestOwner(res: Response): string {
  return ownerOf(res) ?? ANONYMOUS_OWNER;
}

/** The asking token's scope as a predicate (undefined: every proxy), compiled once per policy. */
export function tokenScopes(
  tokens: ApiTokens | undefined,
): (res: Response) => ((proxy: ProxyRecord) => boolean) | undefined {
  const scopes = new WeakMap<TokenPolicy, (proxy: ProxyRecord) => boolean>();
  return (res) => {
    const policy = tokens?.policyOf(requestOwner(res)) ?? OPEN_POLICY;
    if (isOpen(policy.scope)) return undefined;
    let admits = scopes.get(policy);
    if (admits === undefined) {
      admits = scopeMatcher(policy.scope);
      scopes.set(policy, admits);
    }
    return admits;
  };
}

/** 429 with Retry-After once a token has used its bucket; counted per token name. */
function rateLimited(limits: BucketLimits, metrics: DiscoveryMetrics): RequestHandler {
  const limiter = new RateLimiter(limits);
  return (_req, res, next) => {
    const name = ownerOf(res) ?? ANONYMOUS_OWNER;
    const waitMs = limiter.take(name);
    if (waitMs === undefined) return next();
    metrics.countThrottled(name);
    sendTooManyRequests(
      res,
      waitMs,
      (seconds) =>
        `token '${name}' is over its rate limit of ${limits.ratePerSecond} requests/s (burst ${limits.burst}); retry after ${seconds} s`,
    );
  };
}
