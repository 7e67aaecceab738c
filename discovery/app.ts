// The crawler-facing discovery and lease HTTP API. It reads proxies through ProxyCatalog and
// keeps leases, sessions and cooldowns in a LeaseStore; it knows nothing about Kubernetes.
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiError, sendError, sendJSON, type ApiErrorCode } from './api-error.js';
import { StoreUnavailableError } from './store-unavailable.js';
import { bearerAuth } from './bearer-auth.js';
import type { ProxyCatalog, ProxyRecord } from './catalog.js';
import { DiscoveryMetrics } from './discovery-metrics.js';
import { TargetCooldownMetrics } from './target-cooldown-metrics.js';
import { BODY_LIMIT_BYTES, jsonBody } from './json-body.js';
import type { Lease, LeaseStore, NoLeaseReason } from './lease-store.js';
import { openApiDocument } from './openapi.js';
import { ProxyListSerializer, toLeaseView, toProxyView } from './proxy-view.js';
import {
  parseLeaseBody,
  parseListQuery,
  parseRenewBody,
  parseReportBody,
  parseSessionKey,
} from './request-parsing.js';

export const DEFAULT_TTL_SECONDS = 300;
export const DEFAULT_MAX_TTL_SECONDS = 3600;

export interface DiscoveryAppOptions {
  catalog: ProxyCatalog;
  leases: LeaseStore;
  /**
   * Bearer token clients must send; surrounding whitespace (a Secret made from a file ends
   * in a newline) is ignored. Empty or undefined disables auth (with a warning).
   */
  token?: string;
  logger: Logger;
  registry: Registry;
  defaultTTLSeconds?: number;
  maxTTLSeconds?: number;
}

export function createDiscoveryApp(options: DiscoveryAppOptions): Express {
  const { catalog, leases, logger } = options;
  const limits = ttlLimits(options);
  const metrics = new DiscoveryMetrics(options.registry, leases);
  const cooldowns = new TargetCooldownMetrics(options.registry);
  const serializer = new ProxyListSerializer();
  const token = options.token?.trim() ?? '';
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
  const guard: RequestHandler = token === '' ? (_req, _res, next) => next() : bearerAuth(token);
  if (token === '') {
    logger.warn('DISCOVERY_TOKEN is empty: the discovery API accepts requests WITHOUT authentication');
  }

  app
    .route('/v1/proxies')
    .all(guard)
    .get(async (req, res) => {
      const query = parseListQuery(rawQuery(req));
      const proxies = catalog.list(query);
      const usage = await leases.usage(proxies.map((p) => p.id));
      sendJSON(res, 200, serializer.list(proxies, usage));
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/proxies/:namespace/:name')
    .all(guard)
    .get(async (req, res) => {
      const id = `${req.params.namespace}/${req.params.name}`;
      const proxy = catalog.get(id);
      if (proxy === undefined) {
        sendError(res, 404, 'proxy_not_found', `proxy '${id}' does not exist`);
        return;
      }
      const usage = await leases.usage([id]);
      sendJSON(res, 200, toProxyView(proxy, usage.get(id)!));
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/leases')
    .all(guard)
    .post(body, async (req, res) => {
      const request = parseLeaseBody(req.body, limits);
      const result = await leases.acquire(request);
      if (!result.granted) {
        metrics.countLeaseRequest(result.reason);
        // When the first cooldown ends: a client can wait exactly that long instead of polling.
        if (result.retryAfterMs !== undefined) {
          res.setHeader('Retry-After', String(Math.max(1, Math.ceil(result.retryAfterMs / 1000))));
        }
        sendError(res, 409, result.reason, noLeaseMessage(result.reason, request.selector, request.target));
        return;
      }
      metrics.countLeaseRequest('granted');
      const { lease, usage, session } = result;
      if (session?.moved) {
        logger.info({ session: session.key, proxyID: lease.proxyID }, 'session moved to another proxy');
      }
      sendJSON(res, 201, toLeaseView(lease, lease.proxy, usage, session));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/leases/:id')
    .all(guard)
    .delete(async (req, res) => {
      await leases.release(req.params.id);
      res.status(204).end();
    })
    .all(methodNotAllowed('DELETE'));

  app
    .route('/v1/leases/:id/renew')
    .all(guard)
    .post(body, async (req, res) => {
      const { ttlSeconds } = parseRenewBody(req.body, limits);
      const renewed = await leases.renew(req.params.id, ttlSeconds);
      if (renewed === undefined) {
        leaseNotFound(res, req.params.id);
        return;
      }
      const { lease, usage } = renewed;
      const session = lease.session === undefined ? undefined : { key: lease.session, moved: false };
      sendJSON(res, 200, toLeaseView(lease, currentProxy(catalog, lease), usage, session));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/leases/:id/report')
    .all(guard)
    .post(body, async (req, res) => {
      const { result, ...details } = parseReportBody(req.body);
      const outcome = await leases.report(req.params.id, result, details);
      if (outcome === undefined) {
        leaseNotFound(res, req.params.id);
        return;
      }
      metrics.countReport(result);
      if (outcome.probeRequested) {
        logger.info(
          { leaseID: outcome.lease.id, proxyID: outcome.lease.proxyID },
          'proxy reported unreachable: held out of leases until a probe passes',
        );
      }
      if (outcome.cooldownUntil !== undefined) {
        cooldowns.countCooldown(outcome.target);
        logger.info(
          {
            leaseID: outcome.lease.id,
            proxyID: outcome.lease.proxyID,
            result,
            target: outcome.target ?? null,
            cooldownUntil: outcome.cooldownUntil.toISOString(),
          },
          'proxy cooling down',
        );
      }
      sendJSON(res, 200, {
        leaseID: outcome.lease.id,
        proxyID: outcome.lease.proxyID,
        result,
        target: outcome.target ?? null,
        cooldownUntil: outcome.cooldownUntil?.toISOString() ?? null,
        ...(result === 'unreachable' ? { suspect: outcome.suspect ?? false } : {}),
        // The target was not recorded: every cooldown at the book's cap still runs.
        ...(outcome.capped === true ? { capped: true } : {}),
      });
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/sessions/:key')
    .all(guard)
    .delete(async (req, res) => {
      await leases.endSession(parseSessionKey(req.params.key, 'session key'));
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

function leaseNotFound(res: Parameters<RequestHandler>[1], id: string): void {
  sendError(res, 404, 'lease_not_found', `lease '${id}' is unknown, expired or released`);
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

function noLeaseMessage(reason: NoLeaseReason, selector: Record<string, string>, target?: string): string {
  const what = `proxies matching selector ${JSON.stringify(selector)}`;
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
      // Nothing was changed: the client retries the same request (the store logs the outage once).
      logger.debug({ err: err.message, method: req.method, path: req.path }, 'lease store unavailable');
      res.setHeader('Retry-After', String(err.retryAfterSeconds));
      return sendError(
        res,
        503,
        'store_unavailable',
        `the lease store is unavailable (${err.message}); retry after ${err.retryAfterSeconds} s`,
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
