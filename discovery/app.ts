// The crawler-facing discovery and lease HTTP API. It reads proxies through ProxyCatalog and
// keeps leases in a LeaseStore; it knows nothing about Kubernetes.
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiError, sendError, type ApiErrorCode } from './api-error.js';
import { bearerAuth } from './bearer-auth.js';
import type { ProxyCatalog } from './catalog.js';
import { DiscoveryMetrics } from './discovery-metrics.js';
import type { LeaseStore } from './lease-store.js';
import { openApiDocument } from './openapi.js';
import { toLeaseView, toProxyView } from './proxy-view.js';
import { parseLeaseBody, parseListQuery, parseReportBody } from './request-parsing.js';
import { selectorMatcher } from './selector.js';

export const DEFAULT_TTL_SECONDS = 300;
export const DEFAULT_MAX_TTL_SECONDS = 3600;
export const BODY_LIMIT = '16kb';

export interface DiscoveryAppOptions {
  catalog: ProxyCatalog;
  leases: LeaseStore;
  /** Bearer token clients must send; empty or undefined disables auth (with a warning). */
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
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');

  // Any content type is read as JSON: `curl -d '{...}'` sends form-urlencoded by default.
  const jsonBody = express.json({ limit: BODY_LIMIT, strict: true, type: () => true });

  app
    .route('/openapi.json')
    .get((_req, res) => {
      res.json(openApiDocument);
    })
    .all(methodNotAllowed('GET, HEAD'));

  if (options.token) {
    app.use('/v1', bearerAuth(options.token));
  } else {
    logger.warn('DISCOVERY_TOKEN is empty: the discovery API accepts requests WITHOUT authentication');
  }

  app
    .route('/v1/proxies')
    .get(async (req, res) => {
      const query = parseListQuery(rawQuery(req));
      const matches = selectorMatcher(query.selector);
      const proxies = catalog
        .list()
        .filter((p) => matches(p.attributes) && (query.healthy === undefined || p.healthy === query.healthy))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const counts = await leases.activeCounts(proxies.map((p) => p.id));
      res.json({ items: proxies.map((p) => toProxyView(p, counts.get(p.id) ?? 0)) });
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/leases')
    .post(jsonBody, async (req, res) => {
      const request = parseLeaseBody(req.body, limits);
      // One snapshot for selection and response: the proxy we answer with is the one chosen.
      const candidates = catalog.list();
      const result = await leases.acquire(request, candidates);
      if (!result.granted) {
        metrics.countLeaseRequest('no_match');
        sendError(res, 409, result.reason, noLeaseMessage(result.reason, request.selector, request.target));
        return;
      }
      metrics.countLeaseRequest('granted');
      const { lease } = result;
      const proxy = candidates.find((p) => p.id === lease.proxyID)!;
      logger.debug({ leaseID: lease.id, proxyID: lease.proxyID, target: lease.target }, 'lease granted');
      res.status(201).json(toLeaseView(lease, proxy, await leases.activeCount(proxy.id)));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/leases/:id')
    .delete(async (req, res) => {
      await leases.release(req.params.id);
      res.status(204).end();
    })
    .all(methodNotAllowed('DELETE'));

  app
    .route('/v1/leases/:id/report')
    .post(jsonBody, async (req, res) => {
      const report = parseReportBody(req.body);
      const outcome = await leases.report(req.params.id, report.result, report.target);
      if (outcome === undefined) {
        sendError(res, 404, 'lease_not_found', `lease '${req.params.id}' is unknown, expired or released`);
        return;
      }
      if (outcome.cooldownUntil !== undefined) {
        logger.info(
          {
            leaseID: outcome.lease.id,
            proxyID: outcome.lease.proxyID,
            result: report.result,
            target: outcome.target ?? null,
          },
          'proxy cooling down',
        );
      }
      res.json({
        leaseID: outcome.lease.id,
        proxyID: outcome.lease.proxyID,
        result: report.result,
        target: outcome.target ?? null,
        cooldownUntil: outcome.cooldownUntil?.toISOString() ?? null,
      });
    })
    .all(methodNotAllowed('POST'));

  app.use((req, res) => {
    sendError(res, 404, 'not_found', `no route for ${req.method} ${req.path}`);
  });
  app.use(errorHandler(logger));
  return app;
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
  reason: 'no_match' | 'all_busy' | 'all_cooling_down',
  selector: Record<string, string>,
  target?: string,
): string {
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

/** Codes for the client errors express and body-parser raise themselves. */
const PARSER_ERROR_CODES: Record<string, ApiErrorCode> = {
  'entity.parse.failed': 'invalid_json',
  'entity.too.large': 'payload_too_large',
  'encoding.unsupported': 'unsupported_media_type',
  'charset.unsupported': 'unsupported_media_type',
};

/** Renders errors as JSON; a client's mistake keeps its 4xx status and never becomes a 500. */
function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof ApiError) return sendError(res, err.status, err.code, err.message);
    const status = clientErrorStatus(err);
    if (status !== undefined) {
      const type = (err as { type?: unknown }).type;
      const code = (typeof type === 'string' ? PARSER_ERROR_CODES[type] : undefined) ?? 'invalid_request';
      const detail = err instanceof Error ? err.message : String(err);
      const message =
        code === 'invalid_json'
          ? `request body is not valid JSON: ${detail}`
          : code === 'payload_too_large'
            ? `request body exceeds ${BODY_LIMIT}`
            : detail;
      return sendError(res, status, code, message);
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
