// The crawler-facing discovery and lease HTTP API. It reads proxies through ProxyCatalog and
// keeps leases, sessions and cooldowns in a LeaseStore; it knows nothing about Kubernetes.
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import {
  ApiError,
  errorBody,
  sendError,
  sendTooManyRequests,
  sendJSON,
  type ApiErrorBody,
  type ApiErrorCode,
} from './api-error.js';
import { StoreUnavailableError } from '../book/store-unavailable.js';
import { ApiTokens } from '../book/api-tokens.js';
import { SourceLimiter } from './source-limiter.js';
import { DEFAULT_TENANT_QUOTAS, TenantLedger, type TenantQuotaLimits } from '../book/tenant-quotas.js';
import { OPEN_POLICY, isOpen, scopeMatcher, type TokenPolicy } from '../book/token-scope.js';
import { visibleCooldowns } from './target-privacy.js';
import { DEFAULT_SESSION_IDLE_SECONDS } from '../book/session-book.js';
import { bearerAuth, ownerOf } from './bearer-auth.js';
import { ANONYMOUS_OWNER } from '../book/lease-owner.js';
import { ReportLog } from './report-log.js';
import { TurnQueue } from './turn-queue.js';
import { DEFAULT_MAX_CONCURRENT_LISTS, ListSlots } from './list-slots.js';
import { RateLimiter, type BucketLimits } from './token-bucket.js';
import type { ProxyCatalog, ProxyRecord } from '../book/catalog.js';
import { DiscoveryMetrics } from './discovery-metrics.js';
import { TargetCooldownMetrics } from './target-cooldown-metrics.js';
import { BODY_LIMIT_BYTES, jsonBody } from './json-body.js';
import type { Lease, LeaseStore, NoLeaseReason, ReportOutcome, ReportResult } from '../book/lease-store.js';
import { leasability } from '../book/leasability.js';
import { openApiDocument } from './openapi.js';
import { ProxyListSerializer, toLeaseView, toProxyView } from './proxy-view.js';
import type { PageBuffers } from './page-buffers.js';
import {
  parseLeaseBody,
  parseListQuery,
  parseProxyQuery,
  parseRenewBody,
  parseReportBody,
  parseReportsBody,
  parseRequestID,
  parseSessionKey,
  REQUEST_ID_HEADER,
  continueToken,
  MAX_BATCH_REPORTS,
  type BatchedReport,
  type ListQuery,
} from './request-parsing.js';

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
  /** Per-token quotas (tenant-quotas.ts); default DEFAULT_TENANT_QUOTAS. */
  quotas?: TenantQuotaLimits;
  /** The book's session idle time: a session idle this long leaves its token's quota. */
  sessionIdleSeconds?: number;
  /** Requests without a valid token, per source address (source-limiter.ts's default). */
  failedAuthLimit?: BucketLimits;
  /** Name targets in /metrics (`--metrics-target-names`); default: pseudonyms. */
  metricsTargetNames?: boolean;
  /**
   * The process's cooldowns-by-target counter, which the gateway counts its own bans in too
   * (handlers/ builds one per process); built here, over `registry`, when unset.
   */
  targetCooldowns?: TargetCooldownMetrics;
  /** The lease store's clock (ms since the epoch): lease expiries are compared against it. */
  clock?: () => number;
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
  const cooldowns =
    options.targetCooldowns ??
    new TargetCooldownMetrics(options.registry, options.metricsTargetNames === true);
  const ledger = new TenantLedger(
    options.quotas ?? DEFAULT_TENANT_QUOTAS,
    (options.sessionIdleSeconds ?? DEFAULT_SESSION_IDLE_SECONDS) * 1000,
  );
  const quotas = ledger.limits;
  // A batch's items count one each; its burst fits the largest batch.
  const reportRate = new RateLimiter({
    ratePerSecond: quotas.reportsPerSecond,
    burst: Math.max(MAX_BATCH_REPORTS, Math.ceil(quotas.reportsPerSecond)),
  });
  const clock = options.clock ?? Date.now;
  const ledgerSweep = setInterval(() => ledger.sweep(clock()), 60_000);
  ledgerSweep.unref();
  const serializer = new ProxyListSerializer(options.pageBuffers);
  const token = options.token?.trim() ?? '';
  const tokens = options.tokens ?? (token === '' ? undefined : ApiTokens.single(token));
  const reportLog = new ReportLog(logger);
  const listTurns = new TurnQueue();
  const listSlots = new ListSlots(options.maxConcurrentLists ?? DEFAULT_MAX_CONCURRENT_LISTS);
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const body = jsonBody(BODY_LIMIT_BYTES);

  app
    .route('/openapi.json')
    .get((_req, res) => {
      res.json(openApiDocument);
    })
    .all(methodNotAllowed('GET, HEAD'));

  // Auth on each /v1 route itself (not one app.use('/v1') in front, which re-writes every
  // request's path on the hot path), and once more for /v1 paths no route takes.
  const authenticate: RequestHandler =
    tokens === undefined
      ? (_req, _res, next) => next()
      : bearerAuth(tokens, new SourceLimiter(options.failedAuthLimit));
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
  const guard: RequestHandler =
    throttle === undefined
      ? authenticated
      : (req, res, next) =>
          authenticated(req, res, (err?: unknown) => (err ? next(err) : throttle(req, res, next)));
  // Who asks: the token's name, or one anonymous owner when the API is unauthenticated.
  const owner = (res: Parameters<RequestHandler>[1]) => ownerOf(res) ?? ANONYMOUS_OWNER;
  // The asking token's scope as a predicate (undefined: every proxy), compiled once per policy.
  const scopes = new WeakMap<TokenPolicy, (proxy: ProxyRecord) => boolean>();
  const scopeOf = (res: Parameters<RequestHandler>[1]) => {
    const policy = tokens?.policyOf(owner(res)) ?? OPEN_POLICY;
    if (isOpen(policy.scope)) return undefined;
    let admits = scopes.get(policy);
    if (admits === undefined) {
      admits = scopeMatcher(policy.scope);
      scopes.set(policy, admits);
    }
    return admits;
  };
  const quotaRefusal = (
    res: Parameters<RequestHandler>[1],
    code: 'lease_quota' | 'cooldown_quota' | 'report_quota',
    message: string,
    retryAfterSeconds: number,
  ) => {
    metrics.countQuota(
      owner(res),
      code === 'lease_quota' ? 'lease' : code === 'cooldown_quota' ? 'cooldown' : 'report',
    );
    res.setHeader('Retry-After', String(retryAfterSeconds));
    sendError(res, 429, code, message);
  };

  app
    .route('/v1/proxies')
    .all(guard)
    .get(async (req, res) => {
      const query = parseListQuery(rawQuery(req));
      const who = owner(res);
      if (!listSlots.take(who)) {
        metrics.countThrottled(who);
        // A page takes milliseconds: the shortest Retry-After HTTP can say.
        sendTooManyRequests(
          res,
          0,
          (seconds) =>
            `token '${who}' already has ${listSlots.max} lists of /v1/proxies in flight (the most one token may have); retry after ${seconds} s`,
        );
        return;
      }
      try {
        // One page per loop iteration: the probes' timers run between any two (turn-queue.ts).
        await listTurns.turn();
        // A client that left while the page waited for its turn costs no page.
        if (res.destroyed) return;
        const admits = scopeOf(res);
        // A scoped token's list is the catalog's filtered again (one pass per page it asks).
        const all = catalog.list(query);
        const { items, next } = page(admits === undefined ? all : all.filter(admits), query);
        const usage = await leases.usage(items.map((p) => p.id));
        const body = serializer.list(items, usage, next === undefined ? undefined : continueToken(next));
        // The page's buffer is reused once the response is done with it: written, or cut off.
        res.once('close', () => serializer.release(body));
        sendJSON(res, 200, body);
      } finally {
        listSlots.release(who);
      }
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/proxies/:namespace/:name')
    .all(guard)
    .get(async (req, res) => {
      const id = `${req.params.namespace}/${req.params.name}`;
      const proxy = catalog.get(id);
      const admits = scopeOf(res);
      // Outside the token's scope a proxy does not exist for it.
      if (proxy === undefined || (admits !== undefined && !admits(proxy))) {
        sendError(res, 404, 'proxy_not_found', `proxy '${id}' does not exist`);
        return;
      }
      const { target } = parseProxyQuery(rawQuery(req));
      // One read of the book for both the object and the explanation, so the two agree.
      const { usage, cooldowns, now } = await leases.standing(id);
      const who = owner(res);
      const visible = visibleCooldowns(cooldowns, (t) => ledger.reported(who, id, t), target);
      sendJSON(res, 200, {
        ...toProxyView(proxy, usage),
        ...leasability(proxy, usage, visible, now, target),
      });
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/leases')
    .all(guard)
    .post(body, async (req, res) => {
      const request = parseLeaseBody(req.body, limits);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      if (ledger.admitLease(who, clock()) === 'lease_quota' && !(await releasedElsewhere(who))) {
        quotaRefusal(
          res,
          'lease_quota',
          `token '${who}' holds ${quotas.leases} live leases (its quota); release or let one expire first`,
          1,
        );
        return;
      }
      // A new session at the token's quota ends the token's own least recently used one.
      const evict =
        request.session === undefined ? undefined : ledger.useSession(who, request.session, clock());
      if (evict !== undefined) {
        await leases.endSession(evict, who);
        metrics.countQuota(who, 'session');
      }
      const admits = scopeOf(res);
      const result = await leases
        .acquire({
          ...request,
          owner: who,
          ...(admits === undefined ? {} : { within: admits }),
          ...(requestID === undefined ? {} : { requestID }),
        })
        .catch((err: unknown) => {
          // A 503 is a lease request's outcome too: the alert on store trouble counts them.
          if (err instanceof StoreUnavailableError) metrics.countLeaseRequest('store_unavailable');
          throw err;
        });
      if (!result.granted) {
        metrics.countLeaseRequest(result.reason);
        // When the first cooldown ends: a client can wait exactly that long instead of polling.
        if (result.retryAfterMs !== undefined) {
          res.setHeader('Retry-After', String(Math.max(1, Math.ceil(result.retryAfterMs / 1000))));
        }
        sendError(
          res,
          409,
          result.reason,
          noLeaseMessage(result.reason, request.selector, request.target, request.exitIP?.text),
        );
        return;
      }
      // A repeat of a request id is the first grant again: counted once.
      if (result.replayed !== true) metrics.countLeaseRequest('granted');
      const { lease, usage, session } = result;
      ledger.leaseHeld(who, lease.id, {
        until: lease.expiresAt.getTime(),
        proxyID: lease.proxyID,
        target: lease.target ?? '',
      });
      if (session?.moved) {
        reportLog.record(
          'session_moved',
          { owner: owner(res), session: session.key, proxyID: lease.proxyID },
          'session moved to another proxy',
        );
      }
      sendJSON(res, 201, toLeaseView(lease, lease.proxy, usage, session));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/leases/:id')
    .all(guard)
    .delete(async (req, res) => {
      const who = owner(res);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      ledger.leaseEnded(who, req.params.id);
      // Another token's lease is unknown to this one: 404, as renew and report answer.
      if (await leases.release(req.params.id, who, requestID)) res.status(204).end();
      else leaseNotFound(res, req.params.id);
    })
    .all(methodNotAllowed('DELETE'));

  app
    .route('/v1/leases/:id/renew')
    .all(guard)
    .post(body, async (req, res) => {
      const { ttlSeconds } = parseRenewBody(req.body, limits);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      const renewed = await leases.renew(req.params.id, ttlSeconds, who, requestID);
      if (renewed === undefined) {
        ledger.leaseEnded(who, req.params.id);
        leaseNotFound(res, req.params.id);
        return;
      }
      const { lease, usage } = renewed;
      ledger.leaseHeld(who, lease.id, {
        until: lease.expiresAt.getTime(),
        proxyID: lease.proxyID,
        target: lease.target ?? '',
      });
      const session = lease.session === undefined ? undefined : { key: lease.session, moved: false };
      sendJSON(res, 200, toLeaseView(lease, currentProxy(catalog, lease), usage, session));
    })
    .all(methodNotAllowed('POST'));

  /**
   * A lease the token's quota is counted on; one this replica did not grant (another Redis
   * replica did) is read from the book once and kept.
   */
  const heldLease = async (who: string, leaseID: string) => {
    const known = ledger.lease(who, leaseID);
    if (known !== undefined) return known;
    const lease = await leases.get(leaseID, who);
    if (lease === undefined) return undefined;
    const held = { until: lease.expiresAt.getTime(), proxyID: lease.proxyID, target: lease.target ?? '' };
    ledger.leaseHeld(who, leaseID, held);
    return held;
  };

  /**
   * At the lease quota, drops the leases this replica counts that the book no longer holds
   * (released or expired through another replica); true when that made room.
   */
  const releasedElsewhere = async (who: string) => {
    for (const id of ledger.leaseIDs(who)) {
      if ((await leases.get(id, who)) === undefined) ledger.leaseEnded(who, id);
    }
    return ledger.admitLease(who, clock()) === 'allow';
  };

  /**
   * Records reports (and the releases they ask for) in one atomic step of the store: all of
   * them, or (a quota refusal, the store failing) none. Each answer is the report's view, or
   * undefined when its lease is gone (nothing to record); a refusal names the first report a
   * banned/rate_limited would push past the token's cooldown quota.
   */
  const recordReports = async (
    reports: readonly BatchedReport[],
    who: string,
    requestID: string | undefined,
  ): Promise<{ views: (ReportView | undefined)[] } | { refused: number; error: ApiErrorBody }> => {
    // Every quota first: a refusal records nothing of the batch.
    for (const [i, { leaseID, result, target }] of reports.entries()) {
      if (result !== 'banned' && result !== 'rate_limited') continue;
      const held = await heldLease(who, leaseID);
      if (held === undefined) continue;
      if (ledger.admitCooldown(who, held.proxyID, target ?? held.target, clock()) === 'cooldown_quota') {
        return {
          refused: i,
          error: errorBody(
            'cooldown_quota',
            `token '${who}' keeps ${quotas.cooldowns} cooldowns running (its quota); nothing was recorded: a new one is accepted once one of its own ends`,
          ),
        };
      }
    }
    // An API without tokens has one tenant: nobody to agree with, so its reports are trusted.
    const rotationTrusted = tokens === undefined || tokens.policyOf(who).rotationTrusted;
    const outcomes = await leases.reportMany(
      reports.map(({ leaseID, result, release, ...details }) => ({
        leaseID,
        result,
        details: { ...details, rotationTrusted },
        ...(release === true ? { release } : {}),
      })),
      who,
      requestID,
    );
    return { views: outcomes.map((outcome, i) => reportView(reports[i], outcome, who)) };
  };

  /** A recorded report's answer, and what this replica counts and logs of it. */
  const reportView = (
    { leaseID, result, release }: BatchedReport,
    outcome: ReportOutcome | undefined,
    who: string,
  ): ReportView | undefined => {
    if (outcome === undefined) return undefined;
    if (outcome.cooldownUntil !== undefined)
      ledger.cooldownRecorded(
        who,
        outcome.lease.proxyID,
        outcome.target ?? '',
        outcome.cooldownUntil.getTime(),
      );
    if (release === true) ledger.leaseEnded(who, leaseID);
    const view: ReportView = {
      leaseID: outcome.lease.id,
      proxyID: outcome.lease.proxyID,
      result,
      target: outcome.target ?? null,
      cooldownUntil: outcome.cooldownUntil?.toISOString() ?? null,
      ...(result === 'unreachable' ? { suspect: outcome.suspect ?? false } : {}),
      // The target was not recorded: every cooldown at the book's cap still runs.
      ...(outcome.capped === true ? { capped: true } : {}),
      ...(release === true ? { released: true } : {}),
    };
    // A repeat of a request id recorded nothing: counted and logged once, at the first.
    if (outcome.replayed === true) return view;
    metrics.countReport(result);
    // Debug lines and a periodic info summary: a client's reports never grow the log unboundedly.
    if (outcome.probeRequested) {
      reportLog.record(
        'suspect',
        { owner: who, proxyID: outcome.lease.proxyID },
        'proxy reported unreachable: held out of leases until a probe passes',
      );
    }
    if (outcome.cooldownUntil !== undefined) {
      cooldowns.countCooldown(outcome.target, 'api');
      reportLog.record(
        'cooldown',
        {
          owner: who,
          proxyID: outcome.lease.proxyID,
          result,
          target: outcome.target ?? null,
          // What /metrics calls it (target-cooldown-metrics.ts): the SRE's way from alert to site.
          metricsLabel: cooldowns.labelOf(outcome.target),
          cooldownUntil: outcome.cooldownUntil.toISOString(),
        },
        'proxy cooling down',
      );
    }
    if (outcome.capped === true) {
      reportLog.record(
        'capped',
        { owner: who, proxyID: outcome.lease.proxyID, result },
        'target not recorded: the book is at its cap',
      );
    }
    return view;
  };

  /** The token's report rate (report_quota): a batch's items count one each. */
  const reportsAllowed = (res: Parameters<RequestHandler>[1], count: number) => {
    const who = owner(res);
    const waitMs = reportRate.take(who, count);
    if (waitMs === undefined) return true;
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    quotaRefusal(
      res,
      'report_quota',
      `token '${who}' is over its quota of ${quotas.reportsPerSecond} reports/s; nothing was recorded; retry after ${seconds} s`,
      seconds,
    );
    return false;
  };

  app
    .route('/v1/leases/:id/report')
    .all(guard)
    .post(body, async (req, res) => {
      const report = parseReportBody(req.body);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      if (!reportsAllowed(res, 1)) return;
      // A batch of one: the report and the release it may ask for are one step of the store.
      const recorded = await recordReports([{ leaseID: req.params.id, ...report }], owner(res), requestID);
      if ('refused' in recorded) quotaRefusal(res, 'cooldown_quota', recorded.error.message, 60);
      else if (recorded.views[0] === undefined) leaseNotFound(res, req.params.id);
      else sendJSON(res, 200, recorded.views[0]);
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/reports')
    .all(guard)
    .post(body, async (req, res) => {
      const reports = parseReportsBody(req.body);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      if (!reportsAllowed(res, reports.length)) return;
      // One atomic step, in order: two reports on one lease apply as if sent one after the other.
      const recorded = await recordReports(reports, who, requestID);
      if ('refused' in recorded) {
        const { refused, error } = recorded;
        quotaRefusal(
          res,
          'cooldown_quota',
          `reports[${refused}] (lease '${reports[refused].leaseID}'): ${error.message}; none of the ${reports.length} reports was recorded`,
          60,
        );
        return;
      }
      const items = recorded.views.map((view, i) =>
        view === undefined ? { leaseID: reports[i].leaseID, ...leaseNotFoundBody(reports[i].leaseID) } : view,
      );
      sendJSON(res, 200, { items });
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/sessions/:key')
    .all(guard)
    .delete(async (req, res) => {
      const key = parseSessionKey(req.params.key, 'session key');
      ledger.sessionEnded(owner(res), key);
      await leases.endSession(key, owner(res));
      res.status(204).end();
    })
    .all(methodNotAllowed('DELETE'));

  app.use('/v1', guard);
  app.use((req, res) => {
    sendError(res, 404, 'not_found', `no route for ${req.method} ${req.path}`);
  });
  app.use(errorHandler(logger));
  return app;
}

/**
 * The proxy as it is now; a lease outlives its proxy's deletion, and then shows the proxy as
 * it was when leased, marked unhealthy and Deleting.
 */
function currentProxy(catalog: ProxyCatalog, lease: Lease): ProxyRecord {
  return catalog.get(lease.proxyID) ?? { ...lease.proxy, healthy: false, phase: 'Deleting' };
}

/** One page of a sorted list: the records after `query.after`, and the id to continue after. */
export function page(
  records: readonly ProxyRecord[],
  query: Pick<ListQuery, 'limit' | 'after'>,
): { items: readonly ProxyRecord[]; next?: string } {
  let start = 0;
  if (query.after !== undefined) {
    // Records are sorted by id: the first one past `after`, whether or not it still exists.
    let hi = records.length;
    while (start < hi) {
      const mid = (start + hi) >>> 1;
      if (records[mid].id <= query.after) start = mid + 1;
      else hi = mid;
    }
  }
  const items = records.slice(start, start + query.limit);
  const more = start + query.limit < records.length;
  return more ? { items, next: items[items.length - 1].id } : { items };
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

function leaseNotFound(res: Parameters<RequestHandler>[1], id: string): void {
  const { error, message } = leaseNotFoundBody(id);
  sendError(res, 404, error, message);
}

function leaseNotFoundBody(id: string): ApiErrorBody {
  return errorBody('lease_not_found', `lease '${id}' is unknown, expired or released`);
}

/** The answer to one report (POST /v1/leases/{id}/report, and each item of POST /v1/reports). */
interface ReportView {
  leaseID: string;
  proxyID: string;
  result: ReportResult;
  target: string | null;
  cooldownUntil: string | null;
  suspect?: boolean;
  capped?: true;
  released?: true;
}

function ttlLimits(options: DiscoveryAppOptions) {
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

function rawQuery(req: Request): string {
  const at = req.originalUrl.indexOf('?');
  return at === -1 ? '' : req.originalUrl.slice(at + 1);
}

function methodNotAllowed(allow: string): RequestHandler {
  return (req, res) => {
    res.setHeader('Allow', allow);
    sendError(
      res,
      405,
      'method_not_allowed',
      `${req.method} is not allowed on ${req.path}; allowed: ${allow}`,
    );
  };
}

function noLeaseMessage(
  reason: NoLeaseReason,
  selector: Record<string, string>,
  target?: string,
  exitIP?: string,
): string {
  const what = `proxies matching selector ${JSON.stringify(selector)}${exitIP === undefined ? '' : ` with an exit IP in ${exitIP}`}`;
  switch (reason) {
    case 'no_match':
      return `no healthy, leasable ${what}`;
    case 'all_busy':
      return `all ${what} are at their maxLeases; retry after a lease is released or expires`;
    case 'all_cooling_down':
      return `all ${what} are cooling down for ${target === undefined ? 'the global pool' : `target '${target}'`} after rate_limited/banned reports`;
  }
}

/** Renders errors as JSON; a client's mistake keeps its 4xx status and never becomes a 500. */
function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof ApiError) return sendError(res, err.status, err.code, err.message);
    if (err instanceof StoreUnavailableError) {
      // The store logs the outage once.
      logger.debug({ err: err.message, method: req.method, path: req.path }, 'lease store unavailable');
      res.setHeader('Retry-After', String(err.retryAfterSeconds));
      // A write that reached the store unanswered may still be applied: the answer says so.
      if (err.mayHaveApplied && req.method !== 'GET' && req.method !== 'HEAD') {
        return sendError(
          res,
          503,
          'outcome_unknown',
          `the lease store did not answer (${err.message}): this call may have been applied or may still be; ` +
            `retry it with the same Idempotency-Key after ${err.retryAfterSeconds} s to get its one outcome`,
        );
      }
      return sendError(
        res,
        503,
        'store_unavailable',
        `the lease store is unavailable (${err.message}); nothing was changed; retry after ${err.retryAfterSeconds} s`,
      );
    }
    const status = clientErrorStatus(err);
    if (status !== undefined) {
      // express raises these itself, e.g. a path parameter that is not valid percent-encoding.
      const code: ApiErrorCode = 'invalid_request';
      return sendError(res, status, code, err instanceof Error ? err.message : String(err));
    }
    logger.error({ err, method: req.method, path: req.path }, 'discovery request failed');
    sendError(res, 500, 'internal', 'internal error');
  };
}

function clientErrorStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const status =
    (err as { status?: unknown; statusCode?: unknown }).status ??
    (err as { statusCode?: unknown }).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}
