// The crawler-facing discovery and lease HTTP API. It reads proxies through ProxyCatalog and
// keeps leases, sessions and cooldowns in a LeaseStore; it knows nothing about Kubernetes.
// This module builds what the routes share (api-context.ts) and mounts them: the proxies
// (proxy-routes.ts), the leases and sessions (lease-routes.ts), the reports
// (report-routes.ts), behind one guard (api-guard.ts), with one error handler
// (error-handler.ts).
import express, { type Express, type Response } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiTokens } from '../book/api-tokens.js';
import { ANONYMOUS_OWNER } from '../book/lease-owner.js';
import type { ProxyCatalog } from '../book/catalog.js';
import type { LeaseStore } from '../book/lease-store.js';
import { DEFAULT_SESSION_IDLE_SECONDS } from '../book/session-book.js';
import { DEFAULT_TENANT_QUOTAS, TenantLedger, type TenantQuotaLimits } from '../book/tenant-quotas.js';
import { sendError } from './api-error.js';
import type { ApiContext, QuotaCode, TTLLimits } from './api-context.js';
import { apiGuard, requestOwner, tokenScopes } from './api-guard.js';
import { fairLeaseStore } from './fair-lease-store.js';
import { BookTurns } from './book-turns.js';
import { bookWaitObserver } from './book-wait-metrics.js';
import { DiscoveryMetrics } from './discovery-metrics.js';
import { DEFAULT_FAIR_SHARE_LIMITS, fairShareLimits, type FairShareLimits } from './fair-share.js';
import { errorHandler } from './error-handler.js';
import { BODY_LIMIT_BYTES, jsonBody } from './json-body.js';
import { mountLeaseRoutes } from './lease-routes.js';
import { openApiDocument } from './openapi.js';
import type { PageBuffers } from './page-buffers.js';
import { mountProxyRoutes } from './proxy-routes.js';
import { mountReportRoutes } from './report-routes.js';
import { ReportLog } from './report-log.js';
import { methodNotAllowed } from './route-helpers.js';
import { TargetCooldownMetrics } from './target-cooldown-metrics.js';
import type { BucketLimits } from './token-bucket.js';
import type { SourceLimiter } from './source-limiter.js';

export { page } from './proxy-routes.js';

export const DEFAULT_TTL_SECONDS = 300;
export const DEFAULT_MAX_TTL_SECONDS = 3600;

export interface DiscoveryAppOptions {
  catalog: ProxyCatalog;
  leases: LeaseStore;
  /**
   * The named tokens clients must send one of (live: a reload applies to the next request).
   * Takes precedence over `token`.
   */
  tokens?: ApiTokens;
  /**
   * One bearer token, named "default"; surrounding whitespace (a Secret made from a file ends
   * in a newline) is ignored. With neither this nor `tokens` the API is unauthenticated (with
   * a warning): the entry point allows that only with --discovery-unauthenticated.
   */
  token?: string;
  /** Per-token request rate (429 with Retry-After beyond it); undefined = unlimited. */
  rateLimit?: BucketLimits;
  /** Per-token quotas (tenant-quotas.ts); default DEFAULT_TENANT_QUOTAS. Ignored when `ledger` is given. */
  quotas?: TenantQuotaLimits;
  /** The process's ledger of those quotas (handlers/ builds one, which the gateway counts in too). */
  ledger?: TenantLedger;
  /** The book's session idle time: a session idle this long leaves its token's quota. */
  sessionIdleSeconds?: number;
  /** Requests without a valid token, per source address (source-limiter.ts's default). */
  failedAuthLimit?: BucketLimits;
  /** The process's limiter of failed authentications (both doors count in it); else the API's own. */
  failedAuth?: SourceLimiter;
  /** Name targets in /metrics (`--metrics-target-names`); default: pseudonyms. */
  metricsTargetNames?: boolean;
  /**
   * The process's cooldowns-by-target counter, which the gateway counts its own bans in too
   * (handlers/ builds one per process); built here, over `registry`, when unset.
   */
  targetCooldowns?: TargetCooldownMetrics;
  /** The lease store's clock (ms since the epoch): lease expiries are compared against it. */
  clock?: () => number;
  /**
   * The book's fair share among tokens (fair-share.ts): operations running at once and waiting
   * per token; default DEFAULT_FAIR_SHARE_LIMITS. Ignored when `bookTurns` is given.
   */
  fairShare?: FairShareLimits;
  /** The process's share (handlers/ builds one, which the gateway takes turns in too). */
  bookTurns?: BookTurns;
  /** Lists (GET /v1/proxies) one token may have in flight; beyond it 429. Default 4. */
  maxConcurrentLists?: number;
  logger: Logger;
  registry: Registry;
  /** The pool list pages are written into (default: a pool of its own); given to watch it. */
  pageBuffers?: PageBuffers;
  defaultTTLSeconds?: number;
  maxTTLSeconds?: number;
}

export function createDiscoveryApp(options: DiscoveryAppOptions): Express {
  const { catalog, leases, logger } = options;
  const limits = ttlLimits(options);
  const metrics = new DiscoveryMetrics(options.registry, leases);
  const ledger =
    options.ledger ??
    new TenantLedger(
      options.quotas ?? DEFAULT_TENANT_QUOTAS,
      (options.sessionIdleSeconds ?? DEFAULT_SESSION_IDLE_SECONDS) * 1000,
    );
  const clock = options.clock ?? Date.now;
  const ledgerSweep = setInterval(() => ledger.sweep(clock()), 60_000);
  ledgerSweep.unref();
  const turns =
    options.bookTurns ??
    new BookTurns(
      fairShareLimits(options.fairShare ?? DEFAULT_FAIR_SHARE_LIMITS),
      bookWaitObserver(options.registry),
    );
  const token = options.token?.trim() ?? '';
  const tokens = options.tokens ?? (token === '' ? undefined : ApiTokens.single(token));
  const ctx: ApiContext = {
    catalog,
    leases: fairLeaseStore(leases, turns, (who) => metrics.countQuota(who, 'queue'), ANONYMOUS_OWNER),
    logger,
    tokens,
    metrics,
    cooldowns:
      options.targetCooldowns ??
      new TargetCooldownMetrics(options.registry, options.metricsTargetNames === true),
    ledger,
    quotas: ledger.limits,
    reportLog: new ReportLog(logger),
    limits,
    clock,
    guard: apiGuard(tokens, options, metrics, logger),
    body: jsonBody(BODY_LIMIT_BYTES),
    owner: requestOwner,
    scopeOf: tokenScopes(tokens),
    quotaRefusal: (res: Response, code: QuotaCode, message: string, retryAfterSeconds: number) => {
      metrics.countQuota(
        requestOwner(res),
        code === 'lease_quota' ? 'lease' : code === 'cooldown_quota' ? 'cooldown' : 'report',
      );
      res.setHeader('Retry-After', String(retryAfterSeconds));
      sendError(res, 429, code, message);
    },
  };
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');

  app
    .route('/openapi.json')
    .get((_req, res) => {
      res.json(openApiDocument);
    })
    .all(methodNotAllowed('GET, HEAD'));

  mountProxyRoutes(app, ctx, options);
  mountLeaseRoutes(app, ctx);
  mountReportRoutes(app, ctx);

  app.use('/v1', ctx.guard);
  app.use((req, res) => {
    sendError(res, 404, 'not_found', `no route for ${req.method} ${req.path}`);
  });
  app.use(errorHandler(logger));
  return app;
}

function ttlLimits(options: DiscoveryAppOptions): TTLLimits {
  const maxTTLSeconds = options.maxTTLSeconds ?? DEFAULT_MAX_TTL_SECONDS;
  // The built-in default bows to a smaller configured maximum; an explicit default must fit.
  const defaultTTLSeconds = options.defaultTTLSeconds ?? Math.min(DEFAULT_TTL_SECONDS, maxTTLSeconds);
  if (!Number.isInteger(maxTTLSeconds) || maxTTLSeconds < 1) {
    throw new Error(`maxTTLSeconds must be a positive integer, got ${maxTTLSeconds}`);
  }
  if (!Number.isInteger(defaultTTLSeconds) || defaultTTLSeconds < 1 || defaultTTLSeconds > maxTTLSeconds) {
    throw new Error(
      `defaultTTLSeconds must be an integer from 1 to maxTTLSeconds (${maxTTLSeconds}), got ${defaultTTLSeconds}`,
    );
  }
  return { maxTTLSeconds, defaultTTLSeconds };
}
